"""``specbench recommend`` in the report: per workload and band the winner with its margin and speedup interval,
its exact server command (the plan's argv, our measuring flags removed), what was excluded and why, the SGLang
recipe per band and on vLLM the per-batch-size draft-token schedule, in every format the report writes.

The section is written for a run with a load axis, where a workload has bands (the winner changes with the
load); a run without one has one band per workload, which the best-configuration table says already
(``specbench recommend RUN`` prints its commands all the same)."""

from __future__ import annotations

import shlex
from html import escape

from specbench_tui.core.recommend import Band, Recommendation, recipe, recommend, vllm_schedule
from specbench_tui.report.load import LoadedRun
from specbench_tui.report.recommend import band_text, launch_command, render_recommendation
from specbench_tui.rundir.files import read_object
from specbench_tui.rundir.store import PLAN_JSON, StoreError

HEADING = "Recommendation (specbench recommend)"


def recommendation_of(run: LoadedRun) -> Recommendation | None:
    """The run's recommendation, or None when it has no load axis (or no plan to take commands from)."""
    load = run.analysis.load
    if load is None or load.empty:
        return None
    try:
        plan = read_object(run.path, PLAN_JSON)
    except (StoreError, OSError):
        return None
    if not plan:
        return None
    rec = recommend(run.analysis, plan)
    return rec if rec.bands else None


def recommend_txt(run: LoadedRun) -> list[str]:
    rec = recommendation_of(run)
    if rec is None:
        return []
    lines = render_recommendation(rec).splitlines()[1:]  # its first line names the sweep, as the report does
    return ["", HEADING, "-" * len(HEADING), *lines]


def _band_md(rec: Recommendation, band: Band) -> list[str]:
    span, line, notes = band_text(rec, band, code=lambda text: f"`{text}`")
    return [f"- **{span}**: {line}", *(f"  - {note}" for note in notes)]


def recommend_md(run: LoadedRun) -> list[str]:
    rec = recommendation_of(run)
    if rec is None:
        return []
    out = [f"## {HEADING}", ""]
    for workload in rec.workloads():
        bands = [b for b in rec.bands if b.workload == workload]
        out += [f"### {workload}: the winner per band", ""]
        for band in bands:
            out += _band_md(rec, band)
        out += ["", "SGLang recipe per band:", ""]
        out += [f"- {b.span}: `{recipe(rec.configs.get(b.winner_id or ''))}`" for b in bands if b.winner_id]
        if rec.engine == "vllm" and any(b.axis == "concurrency" for b in bands):
            out += ["", f"vLLM draft-token schedule (num_speculative_tokens_per_batch_size): "
                        f"`{vllm_schedule(bands, rec.configs)}`"]
        out.append("")
    return out


def recommend_html(run: LoadedRun) -> list[str]:
    """The section as HTML: the text report's own lines in a preformatted block (commands stay copyable)."""
    lines = recommend_txt(run)
    if not lines:
        return []
    return [f'<h2 id="recommendation">{escape(HEADING)}</h2>', "<pre>" + escape("\n".join(lines[3:])) + "</pre>"]


def _band_json(rec: Recommendation, band: Band) -> dict[str, object]:
    command = launch_command(rec, band.winner_id) if band.winner_id else None
    return {"workload": band.workload, "axis": band.axis, "span": band.span, "loads": list(band.loads),
            "winner": band.winner, "speculative": band.speculative, "runner_up": band.runner_up,
            "margin": round(band.margin, 4) if band.margin is not None else None,
            "speedup": [round(v, 4) for v in band.speedup] if band.speedup is not None else None,
            "command": command, "command_line": shlex.join(command) if command else None,
            "recipe": recipe(rec.configs.get(band.winner_id or "")) if band.winner_id else None,
            "eager": list(band.eager), "partial": band.partial,
            "excluded": [{"config": e.config, "why": e.why} for e in band.excluded]}


def recommend_json(run: LoadedRun) -> dict[str, object] | None:
    rec = recommendation_of(run)
    if rec is None:
        return None
    out: dict[str, object] = {"engine": rec.engine, "bands": [_band_json(rec, b) for b in rec.bands]}
    if rec.engine == "vllm":
        out["vllm_schedule"] = {w: vllm_schedule([b for b in rec.bands if b.workload == w], rec.configs)
                                for w in rec.workloads()}
    return out
