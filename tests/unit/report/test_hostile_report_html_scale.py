"""The HTML report is bounded at scale (issue 49, point 7): 10,000 configurations x 3 load points in 60 s of CPU,
its figures drawing the best configurations and an aggregate of them all, with a note of what was left out."""

from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest
from narrowing import present
from report_scale import build_scale_run

from specbench_tui.report.figscope import MAX_FIGURE_CONFIGS, figure_scope
from specbench_tui.report.figures import figure_specs
from specbench_tui.report.load import load_run

LIMIT_S = 60.0


def test_figures_of_many_configurations_draw_the_best_and_say_what_was_left_out(tmp_path: Path) -> None:
    analysis = load_run(build_scale_run(tmp_path, 200)).analysis
    scoped, note = figure_scope(analysis)
    baselines = [c for c in analysis.configs if c.is_baseline]
    assert len(scoped.configs) == MAX_FIGURE_CONFIGS + len(baselines)
    assert note is not None and f"{len(analysis.configs) - len(scoped.configs):,} more are left out" in note
    assert {p.config_id for p in present(scoped.load).points} == {c.id for c in scoped.configs}
    names = [s.name for s in figure_specs(analysis)]
    assert "best-speedup-histogram" in names, names


@pytest.mark.slow
def test_the_html_report_of_10000_configurations_by_3_load_points_takes_under_a_minute(tmp_path: Path) -> None:
    run = build_scale_run(tmp_path, 10_000)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "specbench_tui", "report", str(run), "--format", "html"],
                              capture_output=True, text=True, timeout=4 * LIMIT_S, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no HTML report within {4 * LIMIT_S:g} s of wall clock")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert done.returncode == 0, done.stderr[-2000:]
    assert cpu < LIMIT_S, f"{cpu:.1f} s CPU ({time.monotonic() - started:.1f} s wall)"
    html = done.stdout
    assert html.count("<figure ") <= 6 and "best-speedup-histogram" in html
    assert "more are left out of them" in html
    assert html.count("<tr>") > 30_000, "the tables keep every configuration and point"
