"""No false crash alarm (issue 46, point 3): a foreground ``--headless`` run writes how it ended to run.json
(``ended``, ``exit_code``, ``state``), so ``attach`` on it says it ended (not "gone without finishing"); with no
run named, ``attach`` and ``serve`` take the newest LIVE sweep and say so when there is none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from engine_helpers import write_sweep
from reliability_helpers import PROFILE, marker_env, new_marker, sweep_text

pytestmark = pytest.mark.e2e


def _cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench_tui", *args], env=env, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL, cwd=cwd)


def test_a_foreground_headless_run_records_its_end_and_attach_reads_it(tmp_path: Path) -> None:
    env = marker_env(new_marker(), {"SPECBENCH_ENGINES_DIR": str(tmp_path / "engines")})
    sweep = write_sweep(tmp_path, sweep_text(max_new_tokens=16), PROFILE)
    runs = tmp_path / "runs"
    done = _cli(env, tmp_path, "run", str(sweep), "--headless", "--runs-dir", str(runs))
    assert done.returncode in (0, 1), done.stderr
    run_dir = next(p for p in runs.iterdir() if p.is_dir())
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["exit_code"] == done.returncode and meta["state"] == "completed" and meta["ended"] > 0, meta
    attached = _cli(env, tmp_path, "attach", str(run_dir))
    assert "its sweep has ended" in attached.stderr, attached.stderr
    assert "gone without finishing" not in attached.stderr and "--resume" not in attached.stderr
    # nothing is live: attach and serve with no run named say so (the newest run is named, not attached to)
    for command in ("attach", "serve"):
        plain = _cli(env, tmp_path, command, "--runs-dir", str(runs))
        assert plain.returncode != 0
        assert "no sweep is running under" in plain.stderr, plain.stderr
        assert f"the newest run is {run_dir.resolve()}" in plain.stderr or f"the newest run is {run_dir}" in \
            plain.stderr, plain.stderr
        assert "gone without finishing" not in plain.stderr


def test_a_refused_second_owner_is_told_the_campaign_commands(tmp_path: Path) -> None:
    from specbench_tui.rundir.lock import describe_owner

    owner = {"pid": 4242, "host": "here", "user": "me", "started": 0, "argv": ["specbench", "run"]}
    foreground = describe_owner(tmp_path, owner)
    assert f"specbench logs {tmp_path} --follow" in foreground and "kill -INT 4242" in foreground
    assert "tail -f" not in foreground
    (tmp_path / "engine.sock").touch()  # a detached engine: attach and stop reach it
    detached = describe_owner(tmp_path, owner)
    assert f"specbench attach {tmp_path}" in detached and f"specbench stop {tmp_path}" in detached
    assert "tail -f" not in detached and "kill -INT" not in detached


def test_a_load_only_runs_text_report_has_no_empty_per_workload_sections(tmp_path: Path) -> None:
    from test_report_html import load_run_fixture

    from specbench_tui.report.formats import render_txt

    run = load_run_fixture(tmp_path)
    assert not run.analysis.workloads  # only a load workload: none of the per-workload sections has a row
    text = render_txt(run)
    for empty in ("Best configuration per workload", "Losslessness", "\nCharts\n", "tok/s: median decode tok/s"):
        assert empty not in text, empty
    assert "where speculation stops paying" in text  # the load sections stay
