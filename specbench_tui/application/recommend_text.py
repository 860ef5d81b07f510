"""What the TUI's recommendation window (key ``r`` on the chart) shows: ``specbench recommend``'s own text for the
analysis on screen and the sweep's plan (per workload and band the winner, its margin, its exact command, what was
excluded and why, the SGLang recipe, vLLM's schedule), so that the window, the command and the report say the
same thing (:mod:`specbench_tui.core.recommend` decides, :mod:`specbench_tui.report.recommend` words it)."""

from __future__ import annotations

from collections.abc import Mapping

from specbench_tui.core.recommend import recommend
from specbench_tui.core.results import RunAnalysis
from specbench_tui.report.recommend import render_recommendation

NOTHING_YET = "No recommendation yet: no configuration has a measured point."


def recommendation_text(analysis: RunAnalysis | None, plan_json: Mapping[str, object] | None) -> str:
    """The recommendation as ``specbench recommend`` prints it (without the confirm sweep, which the command
    writes), or why there is none yet."""
    if analysis is None or not plan_json:
        return NOTHING_YET
    rec = recommend(analysis, plan_json)
    if not rec.bands:
        return NOTHING_YET
    return (render_recommendation(rec) + "\nThe confirm sweep that measures each band's winner again: "
            "specbench recommend RUN (it writes RUN/confirm.toml).\n")
