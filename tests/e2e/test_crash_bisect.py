"""The crash boundary (core/bisect.py, application/bisect.py): a budget that crashed below a working one of the
same algorithm is reported as a boundary, and ``--bisect-crashes`` runs only the budgets in between."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from repo_paths import REPO
from specbench_tui import cli
from specbench_tui.core.bisect import Boundary, Tried, boundaries, boundary_lines, next_budget
from specbench_tui.report.formats import render
from specbench_tui.report.load import load_run

SWEEP = REPO / "sweeps" / "crash-boundary.toml"


def summary(name: str, budget: int | None, state: str, algorithm: str = "ddtree", tp: int = 1) -> SimpleNamespace:
    return SimpleNamespace(id=name, name=name, algorithm=algorithm, tp=tp, budget=budget, state=state)


def test_the_boundary_lies_between_the_largest_crash_below_the_first_budget_that_works() -> None:
    configs = [summary("b8", 8, "crashed"), summary("b12", 12, "crashed"), summary("b15", 15, "done"),
               summary("b16", 16, "done"), summary("b12-tp4", 12, "done", tp=4), summary("ar", None, "done"),
               summary("e3", 3, "crashed", algorithm="eagle3")]
    found = boundaries(configs)
    assert [(b.algorithm, b.tp, b.crashed, b.works, b.between) for b in found] == [("ddtree", 1, 12, 15, (13, 14))]
    assert "boundary between 12 and 15" in boundary_lines(configs)[0]


def test_the_bisection_halves_what_is_unknown_until_the_ends_are_neighbours() -> None:
    wide = Boundary("ddtree", 1, 4, 20, "b4", "b20")
    assert next_budget(wide, []) == 12
    assert next_budget(wide, [Tried(12, "crashed")]) == 16
    assert next_budget(wide, [Tried(12, "crashed"), Tried(16, "done")]) == 14
    seed = Boundary("ddtree", 1, 12, 15, "b12", "b15")
    assert next_budget(seed, []) == 13
    assert next_budget(seed, [Tried(13, "done")]) is None      # 13 works: 14 is never run
    assert next_budget(seed, [Tried(13, "crashed"), Tried(14, "crashed")]) is None


@pytest.fixture(scope="module")
def bisected(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The seed-like sweep run (b8, b12 crash; b15 works), its report, then the bisection's output."""
    runs = tmp_path_factory.mktemp("runs")
    cli.main(["run", str(SWEEP), "--headless", "--runs-dir", str(runs)])
    run = next(p for p in runs.iterdir() if p.is_dir())
    before = render(load_run(run), "txt")
    assert cli.main(["run", "--resume", str(run), "--bisect-crashes"]) == 0
    return run, before, render(load_run(run), "txt")


@pytest.mark.e2e
@pytest.mark.xdist_group("default-port-30000")  # servers on the default port base: one xdist worker runs them
def test_the_seed_like_sweep_reports_the_boundary_between_12_and_15(bisected: tuple[Path, str, str]) -> None:
    _, before, _ = bisected
    assert "ddtree at TP 1: boundary between 12 and 15 (ddtree-b12 crashed, ddtree-b15 works)" in before
    assert "not bisected: 2 budget(s) in between" in before


@pytest.mark.e2e
@pytest.mark.xdist_group("default-port-30000")
def test_the_bisection_runs_b13_and_b14_only_and_names_the_first_that_works(bisected: tuple[Path, str, str]) -> None:
    run, _, after = bisected
    facts = json.loads((run / "bisect.json").read_text(encoding="utf-8"))["facts"]
    assert [(t["budget"], t["state"]) for t in facts[0]["tried"]] == [(13, "crashed"), (14, "crashed")]
    assert (facts[0]["crashes_at_most"], facts[0]["works_from"]) == (14, 15)
    assert sorted(p.name for p in (run / "bisect").iterdir()) == ["ddtree-tp1-b13", "ddtree-tp1-b14"]
    assert "crashes at ≤ 14, works from 15 (bisected: b13 crashed, b14 crashed)" in after
    assert facts[0]["box"]["where"]   # the box and build the fact holds for


def test_bisect_crashes_needs_a_run_to_resume(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", "--bisect-crashes"]) == 2
    assert "--resume" in capsys.readouterr().err
