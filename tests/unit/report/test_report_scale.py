"""Reports scale: ``report`` and ``compare`` of a load run at the documented configuration limit (10,000
configurations x 3 load points) complete; every step is n log n (per-configuration orders, groupings and the
Pareto front in one sort and one pass). No timing here: bench/bench_report_scale.py measures the figure (under
30 s on 2 cores); a quadratic step at this size takes many minutes, which this test does not survive."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from specbench_tui.cli import main
from report_scale import build_scale_run

CONFIGS = 10_000


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


@pytest.mark.slow
def test_report_and_compare_of_10000_configurations_by_3_load_points_complete(tmp_path: Path) -> None:
    run = build_scale_run(tmp_path, CONFIGS)
    assert len(json.loads((run / "plan.json").read_text())["configs"]) == CONFIGS
    code, text = _run("report", str(run))
    assert code == 0
    assert text.count(" c64 ") >= CONFIGS, "a row per configuration at c64"
    assert "Pareto front: " in text and "e1-100" in text and "e1-198" in text
    code, text = _run("compare", str(run), str(run))
    assert code == 0 and text.strip()
