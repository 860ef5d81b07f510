"""Histories that open at once (issue 32): the runs folder's index, the incremental fold, excluded points.

- The index is rebuilt when missing, stale or corrupt, and a planted one (a symbolic link, a FIFO, a file others
  may write) is never believed; a run writes its own entry as it starts, progresses and ends.
- ``runs`` and ``latest`` open no results file while the index is fresh (file opens counted).
- A record file is read from a remembered offset: a cut last line is left for later, never fatal; the fold of
  an attaching view is the same events as :func:`~specbench_tui.core.events.event_from_json` makes.
- An all-excluded sweep publishes a bounded number of events, however many points it excludes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import SimulatorSweep, plan_for
from sweep_builder import inline, sim_profile, sim_sweep, write

from specbench_tui.application.session import RunRequest, give_up_ownership, prepare_run
from specbench_tui.core.events import (ConfigFinished, ConfigState, ConfigStateChanged, LoadPointFinished, Notice,
                                       ServerLaunching, SweepFinished, SweepStarted, event_from_json)
from specbench_tui.core.records import Measurement
from specbench_tui.engine.attached import history_of
from specbench_tui.engine.scheduler import EXCLUDED_SAID
from specbench_tui.report.runs import find_run, list_runs
from specbench_tui.rundir import EVENTS, RESULTS, RUN_JSON
from specbench_tui.rundir.history import RunFold
from specbench_tui.paths import PRIVATE_DIR_VAR
from specbench_tui.rundir.index import INDEX_VERSION, index_path, key_of, load_index, read_entry
from specbench_tui.rundir.tail import Tail
from specbench_tui.rundir.store import RunDir

SWEEP = sim_sweep(
    "indexed", configs=[{"name": "c{n}", "algorithm": "autoregressive", "matrix": inline(n=[1, 2, 3]),
                         "args": inline(**{"max-running-requests": "{n}"}),
                         "exclude": [{"n": 3, "reason": "excluded"}]}],
    workloads=[{"name": "code", "kind": "code", "items": ["fibonacci"]}])


def _measurement(config_id: str, repeat: int = 1, status: str = "ok") -> Measurement:
    return Measurement(config_id=config_id, config="c", workload="code", item="fibonacci", repeat=repeat,
                       status=status, completion_tokens=10)


def _run(runs: Path, sweep: Path, started: float, measured: int, ended: bool) -> RunDir:
    plan = plan_for(sweep)
    run = RunDir.create(runs, plan.sweep.name, plan.sweep.text, plan.to_json())
    run.write_meta({"started": started})
    run.append_event(SweepStarted(sweep=plan.sweep.name, run_dir=str(run.path), total_configs=3))
    first = plan.configs[0]
    for repeat in range(1, measured + 1):
        run.append_measurement(_measurement(first.id, repeat))
    run.append_event(ConfigFinished(config_id=first.id, name=first.name, state=ConfigState.DONE))
    if ended:
        run.append_event(SweepFinished(state="completed"))
    run.close()
    os.rename(run.path, runs / f"run-{started:.0f}")  # distinct names, whatever the clock says
    return RunDir(runs / f"run-{started:.0f}")


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(PRIVATE_DIR_VAR, str(tmp_path / "state"))  # this user's private folder, where the index is
    sweep = write(tmp_path, SWEEP, sim_profile())
    folder = tmp_path / "runs"
    folder.mkdir()
    _run(folder, sweep, 1_700_000_000, 2, ended=True)
    _run(folder, sweep, 1_700_000_100, 3, ended=False)
    return folder


def _rows(runs: Path) -> list[tuple[str, str, int, int, int]]:
    return [(r.path.name, r.state, r.ran, r.skipped, r.measurements) for r in list_runs(runs)]


EXPECTED = [("run-1700000000", "completed", 1, 1, 2), ("run-1700000100", "interrupted", 1, 1, 3)]


def test_the_index_is_built_and_rebuilt_when_missing_stale_or_corrupt(runs: Path) -> None:
    assert _rows(runs) == EXPECTED
    index = _index(runs)
    assert sorted(os.listdir(runs)) == ["run-1700000000", "run-1700000100"]  # the runs folder holds runs only
    assert index.parent == Path(os.environ[PRIVATE_DIR_VAR]) / "run-index"
    assert set(load_index(runs) or {}) == {"run-1700000000", "run-1700000100"}
    index.unlink()  # missing: rebuilt
    assert _rows(runs) == EXPECTED and index.is_file()
    newer = RunDir(runs / "run-1700000100")  # stale: the run went on
    newer.append_measurement(_measurement(plan_id(runs), 9))
    newer.close()
    assert _rows(runs)[1][4] == 4
    index.write_bytes(b'{"version": 1, "runs": {"run-17')  # corrupt (a torn write): rebuilt
    assert _rows(runs)[1][4] == 4
    assert json.loads(index.read_bytes())["version"] == INDEX_VERSION


def _stored(runs: Path, name: str) -> dict[str, object]:
    """Run directory ``name``'s entry as the index (and its journal) of ``runs`` hold it."""
    entry = (load_index(runs) or {})[name]
    assert isinstance(entry, dict)
    return entry


def _index(runs: Path) -> Path:
    path = index_path(runs)
    assert path is not None
    return path


def plan_id(runs: Path) -> str:
    return str(json.loads((runs / "run-1700000000" / "plan.json").read_text())["configs"][0]["id"])


def _forged(runs: Path) -> bytes:
    """An index whose keys match the files and whose counts lie (999 measurements each)."""
    _rows(runs)
    doc = json.loads(_index(runs).read_bytes())
    for entry in doc["runs"].values():
        entry["measurements"] = 999
    return json.dumps(doc).encode()


def test_a_planted_index_is_never_believed(runs: Path, tmp_path: Path) -> None:
    forged = _forged(runs)
    index = _index(runs)
    index.unlink()
    elsewhere = tmp_path / "forged.json"
    elsewhere.write_bytes(forged)
    index.symlink_to(elsewhere)  # a link: not followed
    assert _rows(runs) == EXPECTED
    assert elsewhere.read_bytes() == forged  # the link was replaced, its target left alone
    index.unlink()
    os.mkfifo(index)  # a FIFO: never opened for reading, never waited on
    assert _rows(runs) == EXPECTED
    index.unlink()
    index.write_bytes(forged)
    os.chmod(index, 0o666)  # writable by others: anyone could have written it
    assert _rows(runs) == EXPECTED
    index.write_bytes(forged)  # the same file, ours alone: believed (the forged counts show, as a cache's would)
    os.chmod(index, 0o644)
    assert [row[4] for row in _rows(runs)] == [999, 999]


def test_a_replaced_runs_folder_is_read_again_and_stray_entries_are_no_runs(runs: Path, tmp_path: Path) -> None:
    forged = _forged(runs)
    index = _index(runs)
    index.write_bytes(forged)
    assert [row[4] for row in _rows(runs)] == [999, 999]  # the folder's own index, ours alone: believed
    os.rename(runs, tmp_path / "old-runs")  # the folder replaced by a copy at the same path: another inode
    (tmp_path / "runs").mkdir()
    for name in ("run-1700000000", "run-1700000100"):
        os.rename(tmp_path / "old-runs" / name, runs / name)
    index.write_bytes(forged)
    assert _rows(runs) == EXPECTED  # written for the folder that was there before: not believed
    (runs / ".hidden").mkdir()  # a dotfile folder, a file and a link to a file are never run directories
    (runs / ".hidden" / "sweep.toml").write_text("")
    (runs / "notes.txt").write_text("")
    (runs / "link").symlink_to(runs / "notes.txt")
    assert _rows(runs) == EXPECTED
    assert find_run("latest", runs).path.name == "run-1700000100"


def test_someone_elses_runs_folder_is_listed_with_the_index_in_our_own(runs: Path) -> None:
    os.chmod(runs, 0o555)  # a folder this user cannot write (another user's, as far as writing goes)
    try:
        _index(runs).unlink(missing_ok=True)
        assert _rows(runs) == EXPECTED
        assert _index(runs).is_file()  # kept in this user's private folder
        assert sorted(os.listdir(runs)) == ["run-1700000000", "run-1700000100"]
    finally:
        os.chmod(runs, 0o755)


def test_a_fresh_index_is_used_without_opening_a_results_file(runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    real_open = os.open

    def counting_open(path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> int:
        opened.append(os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    _rows(runs)  # builds the index: reads every run
    assert any(path.endswith(RESULTS) for path in opened)
    opened.clear()
    assert _rows(runs) == EXPECTED
    assert find_run("latest", runs).path.name == "run-1700000100"
    assert find_run("latest~1", runs).measurements == 2
    records = [path for path in opened if path.endswith((RESULTS, EVENTS, RUN_JSON))]
    assert records == [], records


def test_a_run_writes_its_own_entry_as_it_starts_progresses_and_ends(tmp_path: Path) -> None:
    sweep = write(tmp_path, SWEEP, sim_profile())
    prepared = prepare_run(RunRequest(sweep=str(sweep), runs_dir=tmp_path / "runs"))
    assert not isinstance(prepared, int)
    plan, run = prepared
    try:
        def entry() -> dict[str, object]:
            return _stored(run.path.parent, run.path.name)

        assert entry()["measurements"] == 0 and entry()["ended"] is None
        run.append_event(SweepStarted(sweep="indexed", run_dir=str(run.path), total_configs=3))
        first = plan.configs[0]
        run.append_measurement(_measurement(first.id))
        assert run.after_event is not None
        run.after_event.index.every_s = 0.0  # type: ignore[attr-defined]
        run.append_event(ConfigFinished(config_id=first.id, name=first.name, state=ConfigState.DONE))
        assert (entry()["ran"], entry()["measurements"]) == (1, 1)
        run.append_event(SweepFinished(state="completed"))
        assert entry()["ended"] == "completed"
        assert entry()["key"] == key_of(run.path)  # fresh: a listing reads nothing of the run
    finally:
        give_up_ownership(run)
        run.close()


def test_a_cut_last_line_waits_and_is_read_once_whole(tmp_path: Path) -> None:
    path = tmp_path / EVENTS
    path.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c": ')
    tail = Tail(path)
    assert list(tail.lines()) == [b'{"a": 1}\n', b'{"b": 2}\n']
    assert list(tail.lines()) == []  # still cut: nothing, and no error
    with path.open("ab") as handle:
        handle.write(b'3}\n{"d": 4}\n')
    assert list(tail.lines()) == [b'{"c": 3}\n', b'{"d": 4}\n']
    path.write_bytes(b'{"e": 5}\n')  # truncated under the reader: read again from the start
    assert list(tail.lines()) == [b'{"e": 5}\n'] and tail.restarted


def test_the_fold_goes_on_from_its_offset_and_matches_a_full_read(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    events = [SweepStarted(sweep="s", run_dir=str(tmp_path), total_configs=2, ts=1.0),
              ConfigStateChanged(config_id="a", name="a", state=ConfigState.RUNNING, ts=2.0),
              ServerLaunching(config_id="a", name="a", argv=("x", "--y"), gpus=(0, 1), port=1, pid=2, log_path="l",
                              ts=3.0),
              LoadPointFinished(config_id="a", workload="w", load="c=1", repeat=1, wall_s=1.5,
                                server_log={"lines": 2}, ts=4.0),
              Notice(level="info", text="n", ts=5.0)]
    for event in events[:3]:
        run.append_event(event)
    run.events.close()
    with (tmp_path / EVENTS).open("ab") as handle:
        handle.write(b'not json\n{"type": "ConfigFinished", "config_id": 3}\n')
    fold = RunFold(tmp_path).advance()
    assert fold.events == events[:3] and fold.report.counts == {EVENTS: 2}
    for event in events[3:]:
        run.append_event(event)
    run.append_measurement(_measurement("a"))
    run.append_measurement(_measurement("a", status="error"))  # the same key: the last wins
    run.close()
    fold.advance()
    assert fold.events == events
    assert [type(e) for e in fold.events] == [type(e) for e in events]
    full = []
    for line in (tmp_path / EVENTS).read_bytes().splitlines():
        try:
            full.append(event_from_json(json.loads(line)))
        except ValueError:
            continue
    assert fold.events == full
    measurements, history = history_of(tmp_path, None, None)
    assert history == events and [m.status for m in measurements] == ["error"]
    assert fold.ledger.progress() == RunFold(tmp_path).advance().ledger.progress()
    assert read_entry(tmp_path, key_of(tmp_path) or []).measurements == 1


def test_an_all_excluded_sweep_publishes_a_bounded_number_of_events(tmp_path: Path,
                                                                     simulator_sweep: SimulatorSweep) -> None:
    points = 300
    sweep = sim_sweep(
        "all-excluded", configs=[{"name": "c{n}", "algorithm": "autoregressive",
                                  "matrix": inline(n=list(range(1, points + 1))),
                                  "args": inline(**{"max-running-requests": "{n}"}),
                                  "exclude": [{"n": n, "reason": "excluded"} for n in range(1, points + 1)]}],
        workloads=[{"name": "code", "kind": "code", "items": ["fibonacci"]}])
    plan = plan_for(write(tmp_path, sweep, sim_profile()))
    ran = simulator_sweep.run_sync(plan, write_env=False)
    outcome, published, run = ran.outcome, ran.events, ran.run_dir
    assert outcome.state == "completed"
    assert set(outcome.states.values()) == {ConfigState.SKIPPED} and len(outcome.states) == points
    assert len(published) <= 2 * EXCLUDED_SAID + 10, len(published)
    assert any(isinstance(e, Notice) and f"{points - EXCLUDED_SAID:,} more configurations" in e.text
               for e in published)
    fold = RunFold(run.path, plan.to_json()).advance()
    progress = fold.ledger.progress()
    assert (progress.total, progress.skipped, progress.ran) == (points, points, 0)  # counted from the plan


def test_a_large_fold_pauses_the_cyclic_collector_and_puts_it_back(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from specbench_tui.rundir import history

    run = RunDir(tmp_path)
    for number in range(8000):  # about 1.5 MB of events
        run.append_event(Notice(level="info", text=f"notice {number} " + "x" * 120))
    run.close()
    paused: list[bool] = []
    real_disable = gc.disable
    def disable() -> None:
        paused.append(True)
        real_disable()

    monkeypatch.setattr(history.gc, "disable", disable)
    assert gc.isenabled()
    assert len(RunFold(tmp_path).advance().events) == 8000
    assert paused and gc.isenabled()  # paused for the fold, and back on after it
    gc.disable()
    try:
        RunFold(tmp_path).advance()
        assert not gc.isenabled()  # a caller that had paused it keeps it paused
    finally:
        gc.enable()


def test_a_large_index_is_rewritten_by_a_running_sweep_only_at_its_start_and_end(
        runs: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specbench_tui.rundir import index

    updater = index.IndexUpdater(runs / "run-1700000100", every_s=0.0)
    updater(SweepStarted(sweep="indexed", run_dir="r", total_configs=3))
    done = ConfigFinished(config_id="a", name="a", state=ConfigState.DONE)
    updater(done)
    assert updater.writes == 2  # a small index: kept as configurations finish
    monkeypatch.setattr(index, "PROGRESS_INDEX_BYTES", 10)
    updater(done)
    assert updater.writes == 2  # a large one: not on the engine's thread while requests are measured
    updater(SweepFinished(state="completed"))
    assert updater.writes == 3


def test_a_line_holding_two_events_is_refused_in_a_batch_as_alone(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.append_event(Notice(level="info", text="first", ts=1.0))
    run.close()
    with (tmp_path / EVENTS).open("ab") as handle:
        handle.write(b'{"type":"Notice","level":"info","text":"a"},{"type":"Notice","level":"info","text":"b"}\n')
    RunDir(tmp_path).append_event(Notice(level="info", text="last", ts=2.0))
    fold = RunFold(tmp_path).advance()
    assert [e.text for e in fold.events if isinstance(e, Notice)] == ["first", "last"]
    assert fold.report.counts == {EVENTS: 1}


def test_a_run_appends_its_entry_to_a_journal_that_the_next_listing_folds_in(runs: Path) -> None:
    from specbench_tui.rundir.index import IndexUpdater, journal_path

    _rows(runs)
    index = _index(runs)
    before = index.stat()
    newer = RunDir(runs / "run-1700000100")
    newer.append_measurement(_measurement(plan_id(runs), 9))
    newer.append_event(SweepFinished(state="completed"))
    newer.close()
    updater = IndexUpdater(newer.path)
    updater(SweepFinished(state="completed"))
    assert updater.writes == 1
    assert index.stat().st_ino == before.st_ino and index.stat().st_mtime_ns == before.st_mtime_ns  # not rewritten
    journal = journal_path(index)
    assert journal.is_file()
    entry = _stored(runs, "run-1700000100")  # the journal's line wins over the index's entry
    assert entry["key"] == key_of(newer.path) and (entry["ended"], entry["measurements"]) == ("completed", 4)
    opened: list[str] = []
    real_open = os.open

    def counting_open(path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> int:
        opened.append(os.fspath(path))
        return real_open(path, *args, **kwargs)

    os.open = counting_open  # type: ignore[assignment]
    try:
        rows = _rows(runs)
    finally:
        os.open = real_open
    assert rows == [EXPECTED[0], ("run-1700000100", "completed", 1, 1, 4)]
    assert not [path for path in opened if path.endswith(RESULTS)]  # fresh from the journal: nothing read again
    assert not journal.exists()  # folded into the index
    assert (json.loads(index.read_bytes())["runs"]["run-1700000100"]["measurements"]) == 4


def test_a_planted_journal_is_never_believed_nor_written_through(runs: Path, tmp_path: Path) -> None:
    from specbench_tui.rundir.index import Entry, append_entry, journal_path

    _rows(runs)
    journal = journal_path(_index(runs))
    stored = _stored(runs, "run-1700000000")
    forged = dict(stored, measurements=999)
    folder = json.loads(_index(runs).read_bytes())["folder"]
    line = json.dumps({"version": INDEX_VERSION, "folder": folder, "name": "run-1700000000", "entry": forged}) + "\n"
    elsewhere = tmp_path / "forged.journal"
    elsewhere.write_text(line)
    journal.symlink_to(elsewhere)  # a link: neither read nor appended through
    assert _rows(runs) == EXPECTED
    entry = Entry.from_json(stored)
    assert entry is not None and not append_entry(runs, "run-1700000000", entry)
    assert elsewhere.read_text() == line
    journal.unlink()
    journal.write_text(line)
    os.chmod(journal, 0o666)  # writable by others
    assert _rows(runs) == EXPECTED
    assert not append_entry(runs, "run-1700000000", entry)
    os.chmod(journal, 0o644)
    journal.write_text(line.replace(str(folder["ino"]), str(folder["ino"] + 1)))  # written for another folder
    assert _rows(runs) == EXPECTED
    journal.write_text(line)  # ours alone, for this folder: believed (the forged count shows, as a cache's would)
    assert [row[4] for row in _rows(runs)] == [999, 3]
