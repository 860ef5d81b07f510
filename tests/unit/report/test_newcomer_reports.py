"""Issue 28's smaller list, the report half: the LaTeX report marks every zero-output cell with its dagger,
``compare`` lists a configuration that crashed in both runs, and the crossover schedule does not flip between
configurations at neighbouring loads on differences within the repeat spread."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from narrowing import present

from repo_paths import TESTS
from specbench_tui.core.analysis import analyse
from specbench_tui.core.load import LoadSpec, point_item
from specbench_tui.core.records import Measurement
from specbench_tui.report.compare import compare_runs, render_compare
from specbench_tui.report.formats import render
from specbench_tui.report.load import load_run
from specbench_tui.report.loadview import schedule_table

DATA = TESTS / "data"
RUN_A = DATA / "report_run_a"
RUN_B = DATA / "report_run_b"


# ------------------------------------------------------------------------------------ LaTeX zero-output dagger


def _zero_out(run: Path, config: str, workload: str) -> None:
    """Every measurement of (config, workload) in the run's results becomes zero-output, as the store writes one."""
    path = run / "results.jsonl"
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record: dict[str, Any] = json.loads(line)
        if record["config"] == config and record["workload"] == workload and record["status"] == "ok":
            record.update(status="zero_output", completion_tokens=0, decode_tps=None, itl_mean_s=None,
                          e2e_s=record["ttft_s"], output_sha=None, accept_length=None, verify_ct=None,
                          accept_rate=None, finish_reason="stop")
        lines.append(json.dumps(record, separators=(",", ":")))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _latex_row(tex: str, config: str, table: int) -> str:
    """The row of ``config`` in the ``table``-th booktabs table of the LaTeX report."""
    body = tex.split(r"\begin{table}")[table + 1]
    return next(line for line in body.splitlines() if line.startswith(config + " & "))


def test_latex_marks_a_zero_output_dflash_cell_with_the_dagger_in_every_matrix(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN_A, run)
    _zero_out(run, "dflash-b16-tp2", "haiku")  # no baseline at TP2: its speedup cell reads n/b or --
    loaded = load_run(run)
    row = loaded.analysis.row(next(c.id for c in loaded.analysis.configs if c.name == "dflash-b16-tp2"), "haiku")
    assert row is not None and "zero_output" in row.flags
    tex = render(loaded, "latex")
    speedup, acceptance = _latex_row(tex, "dflash-b16-tp2", 0), _latex_row(tex, "dflash-b16-tp2", 1)
    haiku_speedup, haiku_accept = speedup.split(" & ")[3], acceptance.split(" & ")[3]
    assert r"$^{\dagger}$" in haiku_speedup, speedup
    assert r"$^{\dagger}$" in haiku_accept, acceptance
    assert r"$^{\dagger}$" not in speedup.split(" & ")[2]  # code measured fine: no mark
    caption = tex.split(r"\begin{table}")[2].split(r"\caption{")[1]
    assert r"$^{\dagger}$: zero-output" in caption  # the legend travels with the mark


def test_latex_fixture_zero_output_cell_is_daggered_in_the_acceptance_matrix_too() -> None:
    tex = render(load_run(RUN_A), "latex")
    assert r"$^{\dagger}$" in _latex_row(tex, "ddtree-b32-tp4", 1).split(" & ")[3]


# --------------------------------------------------------------------------------- compare: crashed in both


def test_compare_lists_a_configuration_that_crashed_in_both_runs_with_each_signature() -> None:
    a, b = load_run(RUN_A), load_run(RUN_B)
    crashed_a = {c.id for c in a.analysis.configs if c.state == "crashed"}
    both = [c for c in b.analysis.configs if c.state == "crashed" and c.id in crashed_a]
    assert [c.name for c in both] == ["ddtree-b8-tp1"]  # the fixture: it crashed in A and in B
    comparison = compare_runs(a, b)
    assert [entry[0] for entry in comparison.still_failing] == ["ddtree-b8-tp1"]
    text = render_compare(comparison)
    assert "Crashed or failed in both runs" in text
    line = next(x for x in text.splitlines() if x.strip().startswith("ddtree-b8-tp1:"))
    assert "crashed in A (cuda_illegal_instruction)" in line and "crashed in B (cuda_illegal_instruction)" in line


# --------------------------------------------------------------------------------- crossover schedule: no flip


def _cfg(cid: str, name: str, speculative: bool = True) -> dict[str, Any]:
    argv = ["--speculative-algorithm", "EAGLE3"] if speculative else []
    return {"id": cid, "name": name, "algorithm": "eagle3" if speculative else "autoregressive", "tp": 1,
            "argv": argv, "params": {}, "baseline": "ar" if speculative else None, "skip_reason": None}


def _point(cid: str, name: str, label: str, repeat: int, tps: float) -> list[Measurement]:
    return [Measurement(config_id=cid, config=name, workload="w", item=point_item(["a", "b"], j)[1], repeat=repeat,
                        status="ok", decode_tps=tps, ttft_s=0.01, itl_p99_s=0.01, e2e_s=0.01 + 13 / tps,
                        completion_tokens=13, started_at=1000.0 + j * 0.001, load=label)
            for j in range(2)]


def test_the_schedule_keeps_its_choice_while_the_other_is_better_only_within_the_spread() -> None:
    load = LoadSpec(concurrency=(1, 2, 4, 8, 16, 32), requests=2)
    plan = {"sweep": "load", "configs": [_cfg("a0", "ar", False), _cfg("s1", "eagle3")],
            "workloads": [{"name": "w", "kind": "code", "temperature": 0.0, "repeats": 3, "load": load.to_json()}]}
    # EAGLE3 clearly faster at c1, then a speedup of 1.0 +- 2 % (AR, EAGLE3, AR, EAGLE3 by median), then AR
    # clearly faster at c32
    spec = {"c1": 150.0, "c2": 99.0, "c4": 101.0, "c8": 99.5, "c16": 100.8, "c32": 70.0}
    ms: list[Measurement] = []
    for r, wobble in enumerate((-2.0, 0.0, 2.0), start=1):
        for label, tps in spec.items():
            ms += _point("a0", "ar", label, r, 100.0 + wobble) + _point("s1", "eagle3", label, r, tps - wobble)
    load_analysis = present(analyse(plan, ms, []).load)
    schedule = {e.load: e for e in load_analysis.schedule}
    assert [schedule[f"c{c}"].best for c in (1, 2, 4, 8, 16, 32)] == ["eagle3"] * 5 + ["ar"]
    held = schedule["c2"]
    assert held.runner_up == "ar" and held.significant is False and held.margin is not None and held.margin < 0
    assert "kept eagle3" in held.held and "within the repeat spread" in held.held
    assert schedule["c1"].held == "" and schedule["c32"].held == ""  # a clear win switches
    notes = schedule_table(load_analysis, "w").notes  # the report's schedule says why it kept the choice
    assert any(note.startswith("c2: kept eagle3 from c1") for note in notes), notes
