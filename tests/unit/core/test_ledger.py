"""core.ledger and the analysis rules it serves: one measurement per key, partial cells, item-paired speedups,
means and "best" without cut configurations, no figure without measurements, notes by attempt, exit 1 on a
silent server, simulated runs labelled."""

from __future__ import annotations

from typing import Any

import pytest

from repo_paths import REPO, TESTS
from specbench_tui.core.results import (
    COVERAGE_COMPLETE,
    COVERAGE_NOT_RUN,
    COVERAGE_PARTIAL,
    FLAG_CRASH_CUT,
    FLAG_PARTIAL,
    aggregate,
)
from specbench_tui.core.analysis import analyse
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    MeasurementRecorded,
    Notice,
    ServerLaunching,
    SweepFinished,
    SweepStarted,
    WorkloadFinished,
    WorkloadNotRun,
    WorkloadStarted,
)
from specbench_tui.core.ledger import Ledger
from specbench_tui.core.records import ERROR_KIND_CRASH, Measurement
from specbench_tui.engine.ending import EXIT_CONFIG_FAILED, EXIT_OK, exit_code, render_summary
from specbench_tui.engine.orchestrator import SweepOutcome
from specbench_tui.report.tables import env_line


def cfg(cid: str, name: str, algorithm: str = "ddtree", baseline: str | None = "ar") -> dict[str, Any]:
    argv = [] if algorithm == "autoregressive" else ["--speculative-algorithm", algorithm.upper()]
    return {"id": cid, "name": name, "algorithm": algorithm, "tp": 1, "argv": argv, "params": {},
            "baseline": baseline, "skip_reason": None}


PLAN = {"sweep": "unit", "configs": [cfg("a", "ar", "autoregressive", None), cfg("s", "spec"), cfg("t", "other")],
        "workloads": [{"name": "long", "kind": "long_context", "temperature": 0.0, "repeats": 1},
                      {"name": "code", "kind": "code", "temperature": 0.0, "repeats": 1}]}
SPEED = {"1024": 100.0, "40000": 40.0, "max": 30.0}
"""Baseline tok/s per item: long contexts decode slower, so an all-item median is not a same-item one."""


def meas(cid: str, workload: str, item: str, tps: float | None, status: str = "ok", **kw: Any) -> Measurement:
    return Measurement(config_id=cid, config={"a": "ar", "s": "spec", "t": "other"}[cid], workload=workload,
                       item=item, repeat=1, status=status, decode_tps=tps, **kw)


def seed_like() -> tuple[list[Measurement], list[Any]]:
    """ar and other measure everything; spec crashes inside the second long-context item."""
    ms = [meas("a", "long", i, v) for i, v in SPEED.items()] + [meas("a", "code", "fib", 50.0)]
    ms += [meas("t", "long", i, v * 2.0) for i, v in SPEED.items()] + [meas("t", "code", "fib", 100.0)]
    ms += [meas("s", "long", "1024", 140.0),
           meas("s", "long", "40000", None, "error", error_kind=ERROR_KIND_CRASH, error="in flight: crash")]
    events: list[Any] = [SweepStarted(sweep="unit", run_dir="r", total_configs=3)]
    for cid in ("a", "t", "s"):
        events.append(ServerLaunching(config_id=cid, name=cid, argv=(), gpus=(0,), port=1, pid=1, log_path="x"))
        for workload, n in (("long", 3), ("code", 1)):
            if cid == "s" and workload == "code":
                break
            events.append(WorkloadStarted(config_id=cid, workload=workload, expected=n))
            if cid != "s":
                events.append(WorkloadFinished(config_id=cid, workload=workload, server_log={"accept_length": 3.0}))
        if cid == "s":
            events += [WorkloadNotRun(config_id="s", workload="long", reason="server crashed"),
                       WorkloadNotRun(config_id="s", workload="code", reason="server crashed"),
                       ConfigFinished(config_id="s", name="spec", state=ConfigState.CRASHED, reason="boom",
                                      server_log_accept_length=3.96)]
        else:
            events.append(ConfigFinished(config_id=cid, name=cid, state=ConfigState.DONE))
    return ms, events


def test_a_cut_workload_is_partial_with_the_crashed_request_as_an_error() -> None:
    analysis = analyse(PLAN, *seed_like())
    row = analysis.row("s", "long")
    assert row is not None and row.coverage == COVERAGE_PARTIAL
    assert row.coverage_text() == "partial (1 of 3 items)"
    assert (row.n_ok, row.n_error, row.n_crash) == (1, 1, 1)
    assert FLAG_PARTIAL in row.flags and FLAG_CRASH_CUT in row.flags
    spec = analysis.config("s")
    assert spec is not None and spec.workloads_not_run == (("code", "server crashed"),)  # never both
    assert analysis.row("s", "code").coverage == COVERAGE_NOT_RUN  # type: ignore[union-attr]
    assert analysis.row("a", "long").coverage == COVERAGE_COMPLETE  # type: ignore[union-attr]


def test_speedup_pairs_the_same_items() -> None:
    analysis = analyse(PLAN, *seed_like())
    row = analysis.row("s", "long")
    assert row is not None and row.speedup is not None and row.paired == 1
    assert row.speedup.median == pytest.approx(140.0 / 100.0)  # not 140 / median(100, 40, 30) = 3.5
    full = analysis.row("t", "long")
    assert full is not None and full.speedup is not None and full.speedup.median == pytest.approx(2.0)
    # A repeat pairs with the same repeat only.
    plan = {**PLAN, "workloads": [{"name": "long", "kind": "long_context", "temperature": 0.0, "repeats": 2}]}
    ms = [Measurement("a", "ar", "long", "i", r, "ok", decode_tps=v) for r, v in ((1, 10.0), (2, 100.0))]
    ms += [Measurement("s", "spec", "long", "i", 2, "ok", decode_tps=150.0)]
    paired = analyse(plan, ms).row("s", "long")
    assert paired is not None and paired.speedup is not None and paired.speedup.median == pytest.approx(1.5)


def test_no_crashed_or_partial_configuration_in_a_mean_or_best() -> None:
    analysis = analyse(PLAN, *seed_like())
    assert aggregate(analysis, "s", "speedup") is None
    assert aggregate(analysis, "s", "speedup", ["long"]) is None  # partial anywhere: no mean at all
    assert analysis.why_not_averaged("s") == "crashed"
    assert aggregate(analysis, "t", "speedup") == pytest.approx(2.0)
    best = analysis.best_for("long")
    assert best is not None and best.config == "other"
    totals = analysis.totals_for("s")
    assert totals is not None and totals.speedup is None and totals.speedup_note == "crashed"
    # Even a partial cell of a configuration that ended done (a kill, then resume without it) is barred.
    ms, events = seed_like()
    events = [e for e in events if not (getattr(e, "config_id", None) == "s" and isinstance(e, ConfigFinished))]
    events.append(ConfigFinished(config_id="s", name="spec", state=ConfigState.DONE))
    ms.append(meas("s", "long", "1024", 900.0))  # the fastest, but on one item of three
    analysis = analyse(PLAN, ms, events)
    assert analysis.row("s", "long").partial  # type: ignore[union-attr]
    assert analysis.best_for("long").config == "other"  # type: ignore[union-attr]
    assert any(b.config == "spec" and "partial" in b.why for b in analysis.best_for("long").barred)  # type: ignore[union-attr]
    assert "partial" in (analysis.why_not_averaged("s") or "")
    table = render_summary(analysis)
    assert "partial 1/3" in table


def test_no_server_figure_on_a_workload_that_did_not_run() -> None:
    analysis = analyse(PLAN, *seed_like())
    never = analysis.row("s", "code")
    assert never is not None and never.server_log_accept_length is None and never.accept_length is None
    ran = analysis.row("s", "long")
    assert ran is not None and ran.server_log_accept_length == 3.96 and ran.server_log_scope == "lifetime"


def test_the_ledger_keeps_one_measurement_per_key_and_counts_it_once() -> None:
    ledger = Ledger(plan_json=PLAN)
    error = meas("s", "long", "1024", None, "error", error="boom")
    assert ledger.apply(MeasurementRecorded(config_id="s", record=error.to_json())) is None
    retried = meas("s", "long", "1024", 120.0)
    replaced = ledger.apply(MeasurementRecorded(config_id="s", record=retried.to_json()))
    assert replaced == error
    assert (ledger.counts.ok, ledger.counts.errors, ledger.counts.total) == (1, 0, 1)
    assert ledger.config_counts("s").ok == 1
    row = ledger.analyse().row("s", "long")
    assert row is not None and (row.n_ok, row.n_error) == (1, 0)
    # Built from a run directory's contents, the same.
    again = Ledger.from_run(PLAN, [error, retried], [])
    assert again.counts.total == 1 and again.analyse().measurement_counts == (1, 0, 0)
    snapshot = ledger.snapshot()
    assert snapshot.version == ledger.version and snapshot.analyse().row("s", "long").n_ok == 1  # type: ignore[union-attr]


def test_notes_of_an_earlier_attempt_are_history() -> None:
    events = [Notice(level="error", text="pre-flight: model path /x does not exist"),
              SweepFinished(state="failed", reason="pre-flight failed"),
              SweepStarted(sweep="unit", run_dir="r", total_configs=3, resumed=True),
              Notice(level="warning", text="launch flaked", config_id="s"),
              ConfigStateChanged(config_id="s", name="spec", state=ConfigState.PENDING, reason="queued again"),
              ServerLaunching(config_id="s", name="spec", argv=(), gpus=(0,), port=1, pid=1, log_path="x", attempt=2),
              Notice(level="warning", text="clamped", config_id="t")]
    analysis = analyse(PLAN, [meas("a", "code", "fib", 50.0)], events)
    assert not any("pre-flight" in n for n in analysis.notes)
    assert any("pre-flight" in n for n in analysis.history)
    assert any("launch flaked" in n for n in analysis.history) and not any("flaked" in n for n in analysis.notes)
    assert "warning: clamped (other)" in analysis.notes
    assert "earlier attempt: error: pre-flight" in render_summary(analysis)
    # What the current attempt says before its SweepStarted (leftover servers found) is current; a killed
    # attempt's run-level warning is history once a resume started.
    killed = [SweepStarted(sweep="unit", run_dir="r", total_configs=3), Notice(level="warning", text="slow disk"),
              Notice(level="warning", text="leftover server on port 1"),
              SweepStarted(sweep="unit", run_dir="r", total_configs=3, resumed=True)]
    resumed = analyse(PLAN, [], [*events[:2], *killed])
    assert any("pre-flight" in n for n in resumed.history) and any("slow disk" in n for n in resumed.history)
    now = analyse(PLAN, [], [*events[:2], Notice(level="warning", text="leftover server on port 1"),
                             SweepStarted(sweep="unit", run_dir="r", total_configs=3, resumed=True)])
    assert "warning: leftover server on port 1" in now.notes and not any("leftover" in n for n in now.history)


def test_a_configuration_that_returned_no_tokens_exits_1() -> None:
    outcome = SweepOutcome("completed", None, {"a": ConfigState.DONE, "s": ConfigState.DONE})
    silent = analyse(PLAN, [meas("a", "code", "fib", 50.0), meas("s", "code", "fib", None, "zero_output")])
    assert [c.name for c in silent.all_zero_output()] == ["spec"]
    assert exit_code(outcome, analysis=silent) == EXIT_CONFIG_FAILED
    fine = analyse(PLAN, [meas("a", "code", "fib", 50.0), meas("s", "code", "fib", 60.0)])
    assert exit_code(outcome, analysis=fine) == EXIT_OK


def test_a_simulated_environment_says_so() -> None:
    env = {"gpus": {"backend": "fake", "names": {"NVIDIA RTX PRO 6000 Blackwell Server Edition": 8},
                    "driver_version": "580.95.05"}, "extra": {"launcher": "simulator"}}
    line = env_line(env)
    assert line is not None and line.startswith("SIMULATED") and "580.95.05" not in line
    real = {"gpus": {"backend": "nvml", "names": {"NVIDIA H200": 8}, "driver_version": "575.51.03"}}
    assert env_line(real) == "8x NVIDIA H200 | driver 575.51.03"


def test_compare_refuses_to_call_a_simulated_and_a_real_run_comparable(tmp_path) -> None:
    import json
    import shutil

    from specbench_tui.report.compare import compare_runs, render_compare
    from specbench_tui.report.load import load_run

    data = TESTS / "data"
    sim = tmp_path / "sim"
    shutil.copytree(data / "report_run_b", sim)
    env = json.loads((sim / "env.json").read_text())
    env["gpus"]["backend"] = "fake"
    (sim / "env.json").write_text(json.dumps(env))
    text = render_compare(compare_runs(load_run(data / "report_run_a"), load_run(sim)))
    assert "warning: NOT COMPARABLE: run B is SIMULATED" in text
    real = render_compare(compare_runs(load_run(data / "report_run_a"), load_run(data / "report_run_b")))
    assert "SIMULATED" not in real
    assert "ddtree-b12-tp1 (A partial)" in real


def test_one_analysis_module() -> None:
    """No view computes a median, mean or speedup of its own: tui/, the headless printer, the end summary and
    report/ take every figure from core.analysis (a second computation is how the three tables disagreed)."""
    import re

    root = REPO / "specbench_tui"
    files = [*root.joinpath("tui").rglob("*.py"), *root.joinpath("report").rglob("*.py"),
             root / "application" / "headless.py", root / "engine" / "ending.py", root / "core" / "state.py"]
    second = re.compile(r"\bstatistics\b|\bgeometric_mean\(|\bfmean\(|\bmedian\(|\bmean\(|sum\([^)]*\)\s*/\s*len\(")
    found = [f"{path.relative_to(root)}:{number}: {line.strip()}" for path in files
             for number, line in enumerate(path.read_text().splitlines(), 1) if second.search(line)]
    state_lines = (root / "core" / "state.py").read_text().splitlines()
    eta = "core/state.py:" + next(str(n) for n, line in enumerate(state_lines, 1)
                                  if "sum(durations) / len(durations)" in line)
    assert [f for f in found if not f.startswith(eta + ":")] == []  # the ETA's mean duration is not a result


def test_a_run_directory_s_measurements_are_its_results_not_the_events_copies() -> None:
    """results.jsonl is the truth (read and checked by the store); a record only an event carries, or a
    malformed one there, never reaches a report."""
    kept = meas("a", "code", "fib", 50.0)
    only_in_events = MeasurementRecorded(config_id="a", record={**meas("a", "code", "x", 1.0).to_json(),
                                                                 "repeat": "one"})
    ledger = Ledger.from_run(PLAN, [kept], [only_in_events])
    assert list(ledger.measurements.values()) == [kept]
    ledger.analyse()


def test_a_run_left_running_by_a_dead_engine_reads_interrupted(tmp_path) -> None:
    """A configuration the events leave running is running only while an engine holds the run directory's lock;
    once that engine is gone (a kill), the report says interrupted."""
    import json
    import shutil

    from specbench_tui.rundir.lock import acquire
    from specbench_tui.report.load import engine_owns, load_run

    run = tmp_path / "run"
    shutil.copytree(TESTS / "data" / "report_run_b", run)
    config = json.loads((run / "plan.json").read_text())["configs"][0]
    with (run / "events.jsonl").open("a") as handle:
        handle.write(json.dumps(ConfigStateChanged(config_id=config["id"], name=config["name"],
                                                   state=ConfigState.RUNNING).to_json()) + "\n")
    assert engine_owns(run) is None  # no lock file: an older run directory, read as recorded
    assert load_run(run).analysis.config(config["id"]).state == "running"  # type: ignore[union-attr]
    lock = acquire(run)
    try:
        assert engine_owns(run) is True
        assert load_run(run).analysis.config(config["id"]).state == "running"  # type: ignore[union-attr]
    finally:
        lock.release()
    assert engine_owns(run) is False
    gone = load_run(run).analysis.config(config["id"])
    assert gone is not None and gone.state == "interrupted" and "resume" in (gone.reason or "")
