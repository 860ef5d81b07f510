"""The temperature axis (core/sweep/temperature.py): a workload (or [measure]) lists temperatures, each is measured
as its own workload, resumably; bad values are refused at their line; the losslessness check runs at temperature 0
only and the report says it is not applicable to a sampled workload; the simulator accepts less when sampling."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from engine_helpers import SimulatorSweep, write_sweep
from sweep_builder import dumps, sim_profile, sim_sweep

from specbench_tui.core.errors import SweepError
from specbench_tui.core.results import LOSSLESS_NA, LOSSLESS_PASS
from specbench_tui.core.sweep.loader import parse_sweep

HEAD = """
[sweep]
name = "t"
baseline = "ar"

[[configs]]
name = "ar"
algorithm = "autoregressive"
"""


def _sweep(workloads: str, measure: str = "") -> tuple[str, ...]:
    text = HEAD + measure + workloads
    sweep = parse_sweep(text, Path("/tmp/t.toml"), "t.toml")
    return tuple(f"{w.name}@{w.temperature:g}" for w in sweep.workloads)


def _issues(workloads: str, measure: str = "") -> list[str]:
    with pytest.raises(SweepError) as caught:
        _sweep(workloads, measure)
    return [str(i) for i in caught.value.issues]


def test_a_list_of_temperatures_is_one_workload_per_temperature() -> None:
    assert _sweep('[[workloads]]\nkind = "code"\ntemperature = [0.0, 0.7]\n') == ("code-t0@0", "code-t0.7@0.7")
    assert _sweep('[[workloads]]\nkind = "code"\ntemperature = 0.7\n') == ("code@0.7",)
    assert _sweep('[[workloads]]\nkind = "code"\ntemperature = [1]\n') == ("code@1",)
    assert _sweep('[[workloads]]\nkind = "code"\n') == ("code@0",)
    # [measure] gives every workload its temperatures; a workload's own list wins
    measure = "[measure]\ntemperature = [0, 1.0]\n"
    assert _sweep('[[workloads]]\nkind = "code"\n[[workloads]]\nkind = "haiku"\ntemperature = 0.5\n', measure) == (
        "code-t0@0", "code-t1@1", "haiku@0.5")


def test_bad_temperatures_name_the_file_line_and_fix() -> None:
    block = '[[workloads]]\nkind = "code"\ntemperature = {}\n'
    line = HEAD.count("\n") + 3
    assert _issues(block.format("-0.5")) == [f"t.toml:{line}: workloads[0].temperature: expected a temperature >= 0, "
                                             "got -0.5; 0 means greedy; SGLang refuses a negative one"]
    (issue,) = _issues(block.format('"hot"'))
    assert issue.startswith(f"t.toml:{line}: workloads[0].temperature: expected a temperature (a number >= 0), got a "
                            "string ('hot')") and "temperature = [0.0, 0.7]" in issue
    (issue,) = _issues(block.format('[0.0, "x"]'))
    assert issue.startswith(f"t.toml:{line}: workloads[0].temperature[1]: expected a temperature")
    (issue,) = _issues(block.format("[0.7, 0.7]"))
    assert "temperature 0.7 is listed twice" in issue
    (issue,) = _issues(block.format("[]"))
    assert "empty list of temperatures" in issue
    (issue,) = _issues(block.format("true"))
    assert "got a boolean" in issue
    (issue,) = _issues(block.format([t / 10 for t in range(9)]))
    assert "9 temperatures (MAX_TEMPERATURES = 8)" in issue
    (issue,) = _issues('[[workloads]]\nkind = "code"\n', "[measure]\ntemperature = -1\n")
    assert issue.startswith(f"t.toml:{HEAD.count(chr(10)) + 2}: measure.temperature: expected a temperature >= 0")


def test_a_temperature_name_that_clashes_is_refused_at_the_workload() -> None:
    (issue,) = _issues('[[workloads]]\nkind = "code"\ntemperature = [0, 0.7]\n'
                       '[[workloads]]\nname = "code-t0.7"\nkind = "haiku"\n')
    assert "duplicate workload name 'code-t0.7'" in issue


def _run_sweep(folder: Path) -> Path:
    sweep = sim_sweep("temps", configs=[
        {"name": "ar", "algorithm": "autoregressive"},
        {"name": "eagle3", "algorithm": "eagle3",
         "args": {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "X/EAGLE3",
                  "speculative-num-steps": 3, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 4}}],
        sweep={"baseline": "ar", "repeats": 2},
        workloads=[{"name": "code", "kind": "code", "items": ["fibonacci", "quicksort"], "max_new_tokens": 200,
                    "temperature": [0.0, 1.0]}])
    # A sampled draft is accepted half as often as a greedy one (the default penalty, 0.1, moves the accept length
    # by ~0.25, within chance of 320 steps a workload: CI once read 2.48 sampled against 2.46 greedy)
    profile = sim_profile(tok_s=None, time_scale=0.1, seed=3, speed={"jitter": 0.0},
                          acceptance={"temperature_penalty": 0.5})
    return write_sweep(folder, dumps(sweep).replace('"{port}"', "{port}"), dumps(profile))


@pytest.mark.e2e
def test_each_temperature_is_measured_resumably_and_lossless_only_when_greedy(
        tmp_path: Path, simulator_sweep: SimulatorSweep) -> None:
    """Stopped inside the sampled workload and resumed: every (config, workload, item, repeat) measured once; the
    greedy workload's outputs match the baseline's, the sampled one's are not compared (they differ by chance) and
    its acceptance is lower (the simulator's temperature penalty)."""
    from specbench_tui.core.events import Event, MeasurementRecorded
    from specbench_tui.core.plan import build_plan
    from specbench_tui.core.sweep.loader import load_sweep
    from specbench_tui.report.formats import render
    from specbench_tui.report.load import load_run
    from specbench_tui.rundir.store import RunDir

    plan = build_plan(load_sweep(_run_sweep(tmp_path)))
    assert [(w.name, w.temperature) for w in plan.workloads] == [("code-t0", 0.0), ("code-t1", 1.0)]

    def in_the_sampled_workload(e: Event) -> bool:
        return isinstance(e, MeasurementRecorded) and e.record.get("workload") == "code-t1"

    first = simulator_sweep.run_sync(plan, stop_when=in_the_sampled_workload, timeout_s=300)
    assert first.outcome.state != "completed"
    run_dir = first.run_dir
    results = run_dir.path / "results.jsonl"
    before = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    assert any(r["workload"] == "code-t1" for r in before) and len(before) < 16
    resumed = simulator_sweep.run_sync(plan, run_dir=RunDir.open(run_dir.path), resumed=True, timeout_s=300)
    assert resumed.outcome.state == "completed"
    records = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    keys = [(r["config_id"], r["workload"], r["item"], r["repeat"]) for r in records]
    assert len(keys) == len(set(keys)) == 16  # 2 configurations x 2 temperatures x 2 items x 2 repeats, once each
    assert all(r in records for r in before)  # nothing measured before the stop was lost or measured again

    run = load_run(run_dir.path)
    eagle = next(c.id for c in run.analysis.configs if c.name == "eagle3")
    greedy, sampled = run.analysis.row(eagle, "code-t0"), run.analysis.row(eagle, "code-t1")
    assert greedy is not None and sampled is not None
    assert greedy.lossless.status == LOSSLESS_PASS and greedy.lossless.checked == 4
    assert sampled.lossless.status == LOSSLESS_NA and sampled.lossless.note == "not applicable: sampled at temperature 1"
    assert greedy.accept_length is not None and sampled.accept_length is not None
    assert sampled.accept_length < greedy.accept_length
    md = render(run, "md")
    assert "## Results: code-t1 (code, temperature 1, 2 repeats)" in md and "n/a (sampled)" in md
    assert "not applicable to sampled workloads, whose outputs differ by chance: code-t1 (temperature 1)" in md
    assert json.loads(render(run, "json"))["analysis"]["workloads"][1]["temperature"] == 1.0
    rows = list(csv.DictReader(io.StringIO(render(run, "csv"))))
    assert {(r["workload"], r["temperature"]) for r in rows} == {("code-t0", "0"), ("code-t1", "1")}
