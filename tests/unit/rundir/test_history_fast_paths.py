"""Histories that open at once (issue 32), the fast paths of ``run --resume latest`` and of attaching:

- ``latest`` (:class:`~specbench_tui.rundir.index.Ordering`) reads two files' identities per run; a run whose
  ``run.json`` or events changed, or that is new, is read again, and the one picked is made fresh: it answers as
  the whole listing does. What it read again goes to the index's journal, not a rewrite of the index.
- The index counts each run's server launches; the scan for servers left behind passes over a run whose events,
  as they are now, its index says launched none, and reads any other (one with a launch, one written since).
- A run keeps its own fold checkpoint as its events grow (:class:`~specbench_tui.rundir.checkpoint.RunCheckpoints`):
  an attach starts from it and ends with what a fold of the files from nothing makes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specbench_tui.core.events import (ConfigFinished, ConfigState, ConfigStateChanged, LoadPointFinished, Notice,
                                       ServerLaunching, SweepFinished, SweepStarted)
from specbench_tui.core.records import Measurement
from specbench_tui.paths import PRIVATE_DIR_VAR
from specbench_tui.report.runs import find_run, list_runs
from specbench_tui.rundir import EVENTS, RESULTS
from specbench_tui.rundir import checkpoint
from specbench_tui.rundir.checkpoint import RunCheckpoints, attach_fold, checkpoint_path, restore
from specbench_tui.rundir.history import RunFold
from specbench_tui.rundir.index import LaunchFree, index_path, journal_path, load_index
from specbench_tui.rundir.store import RunDir


@pytest.fixture(autouse=True)
def private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(PRIVATE_DIR_VAR, str(tmp_path / "state"))
    return tmp_path / "state"


def _measurement(config_id: str, repeat: int) -> Measurement:
    return Measurement(config_id=config_id, config=config_id, workload="code", item="fibonacci", repeat=repeat,
                       status="ok", completion_tokens=10, decode_tps=100.0)


def _run(runs: Path, name: str, started: float, launches: int = 0) -> RunDir:
    run = RunDir(runs / name)
    run.path.mkdir(parents=True)
    run.write_meta({"started": started})
    run.append_event(SweepStarted(sweep="s", run_dir=str(run.path), total_configs=2))
    for number in range(launches):
        run.append_event(ServerLaunching(config_id="a", name="a", argv=("--x",), gpus=(0,), port=1, pid=4242 + number,
                                         log_path="l"))
    run.append_measurement(_measurement("a", 1))
    run.append_event(ConfigFinished(config_id="a", name="a", state=ConfigState.DONE))
    run.close()
    return run


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    for number in range(5):
        _run(folder, f"run-{number}", 1_700_000_000 + number * 100)
    list_runs(folder)  # the index, built
    return folder


def _listed_latest(runs: Path, back: int = 0) -> tuple[str, int]:
    newest = list_runs(runs)[-1 - back]
    return newest.path.name, newest.measurements


def test_latest_answers_as_the_whole_listing_when_runs_change_start_or_appear(runs: Path) -> None:
    assert find_run("latest", runs).path.name == "run-4"
    assert find_run("latest~2", runs).path.name == "run-2"
    RunDir(runs / "run-1").write_meta({"started": 1_800_000_000})  # its start rewritten: now the newest
    assert find_run("latest", runs).path.name == "run-1" == _listed_latest(runs)[0]
    _run(runs, "run-new", 1_900_000_000)  # new to the folder
    assert find_run("latest", runs).path.name == "run-new"
    assert find_run("latest~1", runs).path.name == "run-1"


def test_the_run_picked_is_made_fresh_and_what_was_read_again_is_journaled(runs: Path) -> None:
    index = index_path(runs)
    assert index is not None
    before = index.read_bytes()
    newest = RunDir(runs / "run-4")
    newest.append_measurement(_measurement("a", 2))  # its results grew since the index was written
    newest.close()
    picked = find_run("latest", runs)
    assert picked.measurements == 2 == _listed_latest(runs)[1]
    newest.append_measurement(_measurement("a", 3))
    newest.close()
    assert find_run("latest", runs).measurements == 3
    assert index.read_bytes() != before  # the listing above folded the journal in
    newest.append_measurement(_measurement("a", 4))
    newest.close()
    written = index.read_bytes()
    assert find_run("latest", runs).measurements == 4
    assert index.read_bytes() == written, "latest rewrote the index of every run for one that changed"
    journal = journal_path(index)
    assert journal.is_file() and b'"run-4"' in journal.read_bytes()
    entry = (load_index(runs) or {})["run-4"]
    assert isinstance(entry, dict) and entry["measurements"] == 4


def test_latest_with_no_index_builds_it(runs: Path) -> None:
    index = index_path(runs)
    assert index is not None
    index.unlink()
    assert find_run("latest", runs).path.name == "run-4"
    assert set(json.loads(index.read_bytes())["runs"]) == {f"run-{n}" for n in range(5)}


def test_the_index_counts_launches_and_the_leftover_scan_reads_only_runs_that_may_have_one(runs: Path) -> None:
    _run(runs, "launched", 1_700_001_000, launches=2)
    list_runs(runs)
    entries = load_index(runs) or {}
    launched, first = entries["launched"], entries["run-0"]
    assert isinstance(launched, dict) and isinstance(first, dict)
    assert launched["launches"] == 2 and first["launches"] == 0
    quiet = LaunchFree()
    assert quiet(runs / "run-0") and not quiet(runs / "launched")
    later = RunDir(runs / "run-0")
    later.append_event(ServerLaunching(config_id="b", name="b", argv=("--y",), gpus=(0,), port=2, pid=99,
                                       log_path="l"))  # written since its entry: read again
    later.close()
    assert not LaunchFree()(runs / "run-0")
    assert not LaunchFree()(runs / "not-there")


def test_a_line_that_may_be_a_launch_is_counted(tmp_path: Path) -> None:
    run = _run(tmp_path, "r", 1_700_000_000)
    with (run.path / EVENTS).open("ab") as handle:
        handle.write(b'{"ts": 5.0, "type": "ServerLaunching", "pid": 7}\n')  # another writer's layout
        handle.write(b'{"type":"\\u0053erverLaunching","ts":6.0,"pid":8}\n')  # an escaped type
    assert RunFold(run.path, every_event=False).advance().launches == 2
    assert RunFold(_run(tmp_path, "q", 1_700_000_000).path, every_event=False).advance().launches == 0


def test_the_leftover_scan_finds_a_live_server_in_a_run_indexed_before_it_launched(runs: Path) -> None:
    from specbench_tui.engine.leftovers import find_leftovers

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        time.sleep(0.2)
        argv = (sys.executable, "-c", "import time; time.sleep(60)")
        run = RunDir(runs / "run-2")
        run.append_event(ServerLaunching(config_id="a", name="a", argv=argv, gpus=(0,), port=1, pid=proc.pid,
                                         log_path="l"))
        run.close()
        assert [found.pid for found in find_leftovers([runs])] == [proc.pid]
        list_runs(runs)  # indexed with its launch: still read
        assert [found.pid for found in find_leftovers([runs])] == [proc.pid]
    finally:
        proc.kill()
        proc.wait()


def _write(run: RunDir, first: int, count: int) -> None:
    for number in range(first, first + count):
        config = f"c{number}"
        run.append_event(ConfigStateChanged(config_id=config, name=config, state=ConfigState.RUNNING))
        run.append_event(LoadPointFinished(config_id=config, workload="code", load="c=1", repeat=1, wall_s=1.5,
                                           server_log={"lines": 2}))
        run.append_event(Notice(level="info", text=f"{config} " + "x" * 200, config_id=config))
        run.append_measurement(_measurement(config, 1))
        run.append_event(ConfigFinished(config_id=config, name=config, state=ConfigState.DONE))


def _same_as_cold(run_dir: Path) -> RunFold:
    cold = RunFold(run_dir, ledger_events=False).advance()
    restored = restore(run_dir)
    assert restored is not None, "no checkpoint the attach can use"
    assert [e.to_json() for e in restored.events] == [e.to_json() for e in cold.events]
    assert restored.measurements() == cold.measurements()
    assert (restored.ended is None) == (cold.ended is None)
    assert restored.events_tail.offset <= cold.events_tail.offset
    return restored


def test_a_run_keeps_its_checkpoint_as_its_events_grow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint, "CHECK_EVERY_S", 0.0)
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    keeper = RunCheckpoints(run.path, every_bytes=20_000)
    run.after_event = keeper
    run.on_close.append(keeper.close)
    run.append_event(SweepStarted(sweep="s", run_dir=str(run.path), total_configs=300))
    _write(run, 0, 100)
    deadline = time.monotonic() + 20
    while keeper.writes < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert keeper.writes >= 2, "the run wrote no checkpoint as its events grew"
    keeper.write()
    kept = restore(run.path)
    assert kept is not None and kept.events_tail.offset == (run.path / EVENTS).stat().st_size
    _same_as_cold(run.path)
    _write(run, 100, 50)  # more since: the attach reads them after the checkpoint
    run.append_event(SweepFinished(state="completed"))
    run.close()
    fold = attach_fold(run.path)
    cold = RunFold(run.path, ledger_events=False).advance()
    assert [e.to_json() for e in fold.events] == [e.to_json() for e in cold.events]
    assert fold.ended is not None and fold.ended.to_json() == cold.ended.to_json()  # type: ignore[union-attr]
    keeper = RunCheckpoints(run.path, every_bytes=1)
    assert keeper.write()
    restored = _same_as_cold(run.path)
    assert restored.ended is not None and restored.ended is restored.events[-1]
    checkpoint.wait_for_writes()


def test_a_run_checkpoint_of_a_replaced_events_file_is_not_believed(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    _write(run, 0, 20)
    run.close()
    keeper = RunCheckpoints(run.path, every_bytes=1)
    assert keeper.write()
    data = (run.path / EVENTS).read_bytes()
    (run.path / EVENTS).unlink()
    (run.path / EVENTS).write_bytes(data.replace(b"c1 ", b"d1 "))  # another file, another text
    assert restore(run.path) is None
    assert keeper.write()  # the keeper folds the new file from nothing
    _same_as_cold(run.path)
    path = checkpoint_path(run.path)
    assert path is not None and os.stat(path).st_mode & 0o022 == 0
    assert (run.path / RESULTS).is_file()


def test_the_end_of_an_all_excluded_sweep_is_not_a_table_of_every_point(tmp_path: Path) -> None:
    import io

    from sweep_builder import inline, sim_profile, sim_sweep, write

    from specbench_tui.application.headless import run_headless
    from specbench_tui.application.host import SUMMARY_EXCLUDED
    from specbench_tui.application.session import RunRequest

    points = SUMMARY_EXCLUDED + 30
    sweep = sim_sweep(
        "all-excluded", configs=[{"name": "c{n}", "algorithm": "autoregressive",
                                  "matrix": inline(n=list(range(1, points + 1))),
                                  "args": inline(**{"max-running-requests": "{n}"}),
                                  "exclude": [{"n": n, "reason": "not this one"} for n in range(1, points + 1)]}],
        workloads=[{"name": "code", "kind": "code", "items": ["fibonacci"]}])
    out = io.StringIO()
    code = run_headless(RunRequest(sweep=str(write(tmp_path, sweep, sim_profile())), runs_dir=tmp_path / "runs"),
                        out=out)
    text = out.getvalue()
    assert code == 0
    table = text[text.index("configuration "):]
    rows = [line for line in table.splitlines() if line.startswith("c") and "skipped" in line]
    assert len(rows) == SUMMARY_EXCLUDED, table
    assert f"{points - SUMMARY_EXCLUDED:,} more configurations excluded by the sweep are not in the table" in table


def test_a_measurement_of_a_known_layout_is_the_one_from_json_makes_and_is_still_checked() -> None:
    from specbench_tui.rundir.history import decode_measurement

    good = _measurement("a", 1).to_json()
    for repeat in (1, 2):  # the layout is learnt from the first
        assert decode_measurement(dict(good, repeat=repeat)) == Measurement.from_json(dict(good, repeat=repeat))
    assert decode_measurement(dict(good, newer_field=1)) == Measurement.from_json(good)  # a newer writer's key
    with pytest.raises(ValueError):
        decode_measurement(dict(good, decode_tps=float("nan")))
    with pytest.raises(ValueError):
        decode_measurement(dict(good, status="exploded"))
    with pytest.raises(ValueError):
        decode_measurement(dict(good, repeat="x"))


def test_a_results_file_with_bad_lines_folds_the_good_ones_and_counts_the_rest(tmp_path: Path) -> None:
    run = _run(tmp_path, "r", 1_700_000_000)
    with (run.path / RESULTS).open("ab") as handle:
        handle.write(json.dumps(_measurement("b", 1).to_json()).encode() + b"\n")
        handle.write(b"null\n")
        handle.write(b'{"config_id": "c", "torn\n')
        handle.write(json.dumps(dict(_measurement("d", 1).to_json(), status="exploded")).encode() + b"\n")
        handle.write(json.dumps(_measurement("e", 1).to_json()).encode() + b"\n")
    fold = RunFold(run.path).advance()
    assert [m.config_id for m in fold.measurements()] == ["a", "b", "e"]
    assert fold.report.counts == {RESULTS: 3}
