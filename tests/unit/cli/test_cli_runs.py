"""``specbench runs`` lists run directories (state, progress, live owner, path); ``--resume latest`` finds one."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import pytest
from narrowing import present

from repo_paths import TESTS
from specbench_tui.cli import _resolve_latest, main
from specbench_tui.report.runs import latest_run, list_runs, progress_text
from specbench_tui.rundir.lock import acquire

DATA = TESTS / "data"


def _copy(source: str, runs: Path, name: str, started: float) -> Path:
    target = runs / name
    shutil.copytree(DATA / source, target)
    (target / "run.json").write_text(json.dumps({"started": started}))
    return target


def _interrupted(run: Path) -> None:
    """Drop the sweep's end from the events, as when the engine was killed."""
    events = run / "events.jsonl"
    lines = [line for line in events.read_text().splitlines() if '"SweepFinished"' not in line]
    events.write_text("\n".join(lines) + "\n")


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    now = time.time()
    _copy("report_run_a", folder, "2026-01-01_100000_demo", now - 7200)
    _interrupted(_copy("report_run_b", folder, "2026-01-01_120000_demo", now - 3600))
    (folder / "notes").mkdir()  # not a run directory: left out
    return folder


def test_lists_state_progress_owner_and_path(runs: Path, capsys: pytest.CaptureFixture) -> None:
    found = list_runs(runs)
    assert [r.path.name for r in found] == ["2026-01-01_100000_demo", "2026-01-01_120000_demo"]
    first, second = found
    assert first.state in ("completed", "aborted", "failed") and first.total > 0 and first.owner_pid is None
    assert second.state == "interrupted"
    lock = acquire(second.path)  # a live specbench holds it now
    try:
        assert main(["runs", str(runs)]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].split() == ["STATE", "PROGRESS", "OWNER", "STARTED", "SWEEP", "PATH"]
        live = next(line for line in out if "120000" in line)
        assert live.startswith("running") and f"pid {os.getpid()}" in live and str(second.path) in live
        assert f"{first.ran}/{first.total - first.skipped} ran" in next(line for line in out if "100000" in line)
        assert not any("notes" in line for line in out)
    finally:
        lock.release()


def test_missing_or_empty_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["runs", str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert main(["runs", "--runs-dir", str(tmp_path)]) == 0
    assert "no run directories" in capsys.readouterr().out


def test_resume_latest_takes_the_newest(runs: Path, capsys: pytest.CaptureFixture) -> None:
    args = argparse.Namespace(resume="latest", runs_dir=str(runs))
    assert _resolve_latest(args)
    assert args.resume == str(runs / "2026-01-01_120000_demo")
    assert "resuming the latest run" in capsys.readouterr().err
    assert present(latest_run(runs)).path.name == "2026-01-01_120000_demo"


def test_resume_latest_without_runs_says_so(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["run", "--resume", "latest", "--runs-dir", str(tmp_path), "--headless"]) == 2
    assert "there is no run directory under" in capsys.readouterr().err


def test_progress_counts_skipped_configurations_apart_as_the_header_does() -> None:
    """A skipped configuration never ran: it is out of the count to run and said apart ("0/11 ran, 3 skipped"
    before anything ran, never "3/14")."""
    assert progress_text(0, 14, 3) == "0/11 ran, 3 skipped"
    assert progress_text(9, 9, 0) == "9/9 ran"
    assert progress_text(1, 0, 0) == "1/? ran"
