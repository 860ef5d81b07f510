"""The leftover scan reads a run's events as the store wrote them without parsing every line (issue 32): the
launches and the time of the last whole event are what a full parse finds; a torn last line counts for nothing,
and a line of another layout is parsed whole."""

from __future__ import annotations

from pathlib import Path

from specbench_tui.core.events import ConfigState, ConfigStateChanged, Notice, ServerLaunching
from specbench_tui.engine.leftovers import _launches, _run_dirs
from specbench_tui.rundir import EVENTS
from specbench_tui.rundir.store import RunDir


def _run(path: Path) -> RunDir:
    path.mkdir()
    run = RunDir(path)
    run.append_event(ServerLaunching(config_id="a", name="a", argv=("--x",), gpus=(0,), port=1, pid=4242,
                                     log_path="l", ts=100.0))
    run.append_event(Notice(level="info", text="n", ts=250.5))
    run.append_event(ConfigStateChanged(config_id="a", name="a", state=ConfigState.RUNNING, ts=200.0))
    run.close()
    return run


def test_the_launches_and_the_last_time_are_a_full_parses(tmp_path: Path) -> None:
    run = _run(tmp_path / "r")
    launches, last = _launches(run.path)
    assert [(launch.pid, launch.argv, launch.ts) for launch in launches] == [(4242, ("--x",), 100.0)]
    assert last == 250.5
    with (run.path / EVENTS).open("ab") as handle:
        handle.write(b'{"ts": 300.25, "type": "Notice", "level": "info", "text": "another writer"}\n')
        handle.write(b'{"type":"Notice","ts":999.0,"lev')  # torn by a crash
    assert _launches(run.path)[1] == 300.25


def test_a_run_without_launches_has_none_and_a_folder_lists_each_run_once(tmp_path: Path) -> None:
    folder = tmp_path / "runs"
    folder.mkdir()
    quiet = RunDir(folder / "quiet")
    quiet.path.mkdir()
    quiet.append_event(Notice(level="info", text="n", ts=5.0))
    quiet.close()
    _run(folder / "busy")
    (folder / "link").symlink_to(folder / "busy")  # the same run under two names: listed once
    assert _launches(quiet.path) == ([], 0.0)
    assert [p.name for p in _run_dirs([folder, folder / "busy"])] == ["busy", "quiet"]
