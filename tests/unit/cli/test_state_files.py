"""Run-directory state files read safely everywhere (issue 29): a FIFO, a link to ``/dev/zero``, absurd times.

Each case runs the commands a user would (``runs``, ``run --resume``, ``stop``, ``logs``, ``report``) in this
process, on a worker thread that must come back (a reader that waits on a FIFO never would): the directory at
fault is said by name, the others are listed as before, and nothing raises.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from repo_paths import TESTS
from specbench_tui.cli import main
from specbench_tui.report.runs import find_run, format_runs, list_runs, read_run
from specbench_tui.rundir.lock import acquire, read_owner
from specbench_tui.rundir.store import StoreError

DATA = TESTS / "data"
HANG_S = 60.0
"""How long a command may take before it is taken as hung (it answers in well under a second when it works)."""


def _copy(runs: Path, name: str, started: float | None = None) -> Path:
    target = runs / name
    shutil.copytree(DATA / "report_run_a", target)
    if started is not None:
        (target / "run.json").write_text(json.dumps({"started": started}))
    return target


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    _copy(folder, "2026-01-01_100000_good", time.time() - 3600)
    return folder


def _returns(call: Callable[[], object]) -> object:
    """``call()`` on a thread; fails (instead of hanging the suite) when it does not come back."""
    result: list[object] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors.append(exc)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(HANG_S)
    assert not thread.is_alive(), "the command hung on a run-directory state file"
    if errors:
        raise errors[0]
    return result[0] if result else None


@contextlib.contextmanager
def _flocked_fifo(path: Path) -> Iterator[None]:
    """``path`` as a FIFO that a process holds an flock on (a live owner, as /proc/locks shows it)."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def test_a_flocked_fifo_as_owner_lock_hangs_nothing(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _copy(runs, "2026-01-01_110000_fifo", time.time() - 1800)
    with _flocked_fifo(bad / ".owner.lock"):
        assert _returns(lambda: read_owner(bad)) == {}
        cpu = time.process_time()
        assert _returns(lambda: main(["runs", str(runs)])) == 0
        assert time.process_time() - cpu < 2.0, "the listing took more than 2 s of CPU"
        out = capsys.readouterr().out
        assert "fifo" in out and "good" in out and "running" not in out
        assert _returns(lambda: main(["run", "--resume", str(bad), "--headless"])) == 2
        err = capsys.readouterr().err
        assert "FIFO" in err and str(bad) in err and "Traceback" not in err
        assert _returns(lambda: main(["stop", str(bad)])) != 0
        assert "Traceback" not in capsys.readouterr().err
        with pytest.raises(StoreError, match="FIFO"):
            acquire(bad)


def test_an_owner_lock_linked_to_dev_zero_is_refused_unread(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _copy(runs, "2026-01-01_110000_zero", time.time() - 1800)
    (bad / ".owner.lock").symlink_to("/dev/zero")
    assert _returns(lambda: read_owner(bad)) == {}
    with pytest.raises(StoreError, match="symbolic link"):
        acquire(bad)
    assert _returns(lambda: main(["runs", str(runs)])) == 0
    assert "zero" in capsys.readouterr().out
    assert _returns(lambda: main(["run", "--resume", str(bad), "--headless"])) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and "Traceback" not in err
    assert _returns(lambda: main(["stop", str(bad)])) != 0


def test_an_absurd_start_time_is_rejected_for_its_directory_only(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _copy(runs, "2026-01-01_110000_far", 1e20)
    assert _returns(lambda: main(["runs", str(runs)])) == 0
    out = capsys.readouterr().out
    assert "good" in out and "far" in out and "is not a time" in out
    info = read_run(bad)
    assert info is not None and info.started < time.time() + 86_400 and info.problem
    assert format_runs(list_runs(runs))  # and the table prints


def test_resume_latest_never_picks_a_run_from_the_far_future(runs: Path) -> None:
    old = _copy(runs, "2020-01-01_000000_old", 1e308)
    past = time.time() - 30 * 86_400
    os.utime(old, (past, past))
    newest = _copy(runs, "2026-01-01_120000_new", time.time() - 60)
    assert find_run("latest", runs).path == newest
    assert find_run("latest~2", runs).path == old  # taken at its directory's time, the oldest


def test_a_fifo_as_plan_json_is_said_for_its_directory(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _copy(runs, "2026-01-01_110000_plan", time.time() - 1800)
    (bad / "plan.json").unlink()
    os.mkfifo(bad / "plan.json")
    assert _returns(lambda: main(["runs", str(runs)])) == 0
    out = capsys.readouterr().out
    assert "good" in out and "plan" in out and "FIFO" in out
    assert _returns(lambda: main(["report", str(bad)])) in (0, 2)
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("name", ["run.json", "sweep.toml", "events.jsonl"])
def test_a_fifo_for_any_state_file_hangs_no_command(runs: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    bad = _copy(runs, f"2026-01-01_110000_{name.replace('.', '_')}", time.time() - 1800)
    (bad / name).unlink(missing_ok=True)
    os.mkfifo(bad / name)
    assert _returns(lambda: main(["runs", str(runs)])) == 0
    assert _returns(lambda: main(["logs", str(bad)])) in (0, 2)
    assert _returns(lambda: main(["run", "--resume", str(bad), "--headless"])) == 2
    assert "Traceback" not in capsys.readouterr().err
