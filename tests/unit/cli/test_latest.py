"""``latest`` means one thing for every command that takes a run (issue 28): the newest run directory under
``--runs-dir`` (default ``runs/``), live or not; ``latest~N`` the one N before it; ``--live`` the newest live one.
With nothing there, the message says what there is and what to do, without blaming the user."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from repo_paths import TESTS
from specbench_tui.cli import main

DATA = TESTS / "data"


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "runs"
    folder.mkdir()
    now = time.time()
    for source, name, started in (("report_run_a", "2026-01-01_100000_a", now - 7200),
                                  ("report_run_b", "2026-01-01_120000_b", now - 3600)):
        shutil.copytree(DATA / source, folder / name)
        (folder / name / "run.json").write_text(json.dumps({"started": started, "exit_code": 0}))
    monkeypatch.chdir(tmp_path)  # runs/ is the default runs folder
    monkeypatch.setenv("SPECBENCH_ENGINES_DIR", str(tmp_path / "engines"))  # no engine of this user is known
    return folder


def test_report_and_compare_take_latest(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "latest", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["run"] == "2026-01-01_120000_b"
    assert main(["report", "latest~1", "--format", "json", "--runs-dir", str(runs)]) == 0
    assert json.loads(capsys.readouterr().out)["run"] == "2026-01-01_100000_a"
    assert main(["compare", "latest~1", "latest"]) == 0
    out = capsys.readouterr().out
    assert "2026-01-01_100000_a" in out and "2026-01-01_120000_b" in out
    assert main(["report", "2026-01-01_100000_a", "--format", "json"]) == 0  # a run's name under runs/
    assert json.loads(capsys.readouterr().out)["run"] == "2026-01-01_100000_a"


def test_logs_latest_is_the_newest_run_directory_live_or_not(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["logs", "latest"]) == 0
    latest = capsys.readouterr().out
    assert main(["logs", str(runs / "2026-01-01_120000_b")]) == 0
    assert capsys.readouterr().out == latest and "end of the run directory's record" in latest
    assert main(["logs", "latest~1"]) == 0
    assert capsys.readouterr().out != latest


def test_live_only_where_it_makes_sense_and_no_blame(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["attach", "--live"]) == 2
    err = capsys.readouterr().err
    assert "no sweep is running under runs" in err and "specbench report" in err and "2026-01-01_120000_b" in err
    assert "by you" not in err
    assert main(["stop", "latest"]) == 0  # the newest run has ended: said, with its ending
    assert "has already ended" in capsys.readouterr().out


def test_nothing_there_is_said_with_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPECBENCH_ENGINES_DIR", str(tmp_path / "engines"))
    for argv in (["report", "latest"], ["logs", "latest"], ["run", "--resume", "latest", "--headless"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "there is no run directory yet: runs does not exist" in err and "--runs-dir" in err, err
    assert main(["compare", "latest~1", "latest", "--runs-dir", str(tmp_path)]) == 2
    assert "there is no run directory under" in capsys.readouterr().err


def test_latest_n_past_the_oldest_says_how_many_there_are(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "latest~5"]) == 2
    assert "there are only 2 run directories" in capsys.readouterr().err
