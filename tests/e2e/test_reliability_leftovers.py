"""Servers left behind by an earlier run are found from the run directories, named with the command that
ends them, never killed, and a pid reused by an unrelated process is never blamed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from reliability_helpers import (
    headless,
    make_sweep,
    marker_env,
    new_marker,
    the_run_dir,
    wait_for,
    wait_gone,
)

from specbench_tui.engine.leftovers import Leftover, find_leftovers, format_leftovers

SLEEPER = "import time\nwhile True: time.sleep(1)"
PARENT_OF_SLEEPER = (
    "import subprocess, sys, time\n"
    f"subprocess.Popen([sys.executable, '-c', {SLEEPER!r}, 'child'])\n"
    "print('up', flush=True)\n"
    "while True: time.sleep(1)\n"
)


def _spawn(argv: list[str]) -> subprocess.Popen[bytes]:
    """A process in a session of its own, as the engine starts a server."""
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)


def _run_dir(root: Path, name: str, launches: list[dict], extra_lines: Sequence[str] = ()) -> Path:
    run = root / name
    (run / "logs").mkdir(parents=True)
    (run / "sweep.toml").write_text("")
    lines = [json.dumps({"type": "SweepStarted", "sweep": "x", "run_dir": str(run), "total_configs": 1,
                         "ts": time.time()})]
    for launch in launches:
        lines.append(json.dumps({"type": "ServerLaunching", "config_id": "c1", "name": launch.get("name", "cfg"),
                                 "argv": launch["argv"], "gpus": [0], "port": 30000, "pid": launch["pid"],
                                 "log_path": str(run / "logs/cfg.log"), "attempt": 1, "ts": launch["ts"]}))
    lines.extend(extra_lines)
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    return run


def _group_gone(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def test_a_live_server_of_an_earlier_run_is_reported_not_killed(tmp_path):
    argv = [sys.executable, "-c", SLEEPER, "--api-key", "sk-secret", "--port", "30000"]
    proc = _spawn(argv)
    try:
        recorded = [*argv[:4], "***", *argv[5:]]
        _run_dir(tmp_path / "runs", "20250101-000000_old", [{"argv": recorded, "pid": proc.pid, "ts": time.time()}],
                 extra_lines=['{"type": "ConfigStateChanged", "torn li'])
        found = find_leftovers([tmp_path / "runs"])
        assert [f.pid for f in found] == [proc.pid]
        item = found[0]
        assert item.main_alive and item.pgid == proc.pid and proc.pid in item.pids
        assert item.orphaned is False  # its parent (this test) is alive
        messages = format_leftovers(found)
        assert len(messages) == 1
        assert f"kill -TERM -- -{proc.pid}" in messages[0] and "20250101-000000_old" in messages[0]
        assert "sk-secret" not in messages[0]
        time.sleep(0.2)
        assert proc.poll() is None, "find_leftovers must never kill anything"
        # The same, given the run directory itself.
        assert [f.pid for f in find_leftovers([tmp_path / "runs" / "20250101-000000_old"])] == [proc.pid]
    finally:
        _group_gone(proc.pid)
        proc.wait(5)


def test_a_reused_pid_is_never_blamed(tmp_path):
    proc = _spawn([sys.executable, "-c", SLEEPER, "unrelated"])
    try:
        other_argv = [sys.executable, "-m", "specbench_tui.sim", "--port", "30000"]
        _run_dir(tmp_path / "runs", "a", [{"argv": other_argv, "pid": proc.pid, "ts": time.time()}])
        assert find_leftovers([tmp_path / "runs"]) == [], "a different command line under the recorded pid"
        same_argv = [sys.executable, "-c", SLEEPER, "unrelated"]
        _run_dir(tmp_path / "runs2", "b", [{"argv": same_argv, "pid": proc.pid, "ts": time.time() - 3600}])
        assert find_leftovers([tmp_path / "runs2"]) == [], "started an hour after the recorded launch"
        _run_dir(tmp_path / "runs3", "c", [{"argv": same_argv, "pid": proc.pid, "ts": time.time() + 3600}])
        assert find_leftovers([tmp_path / "runs3"]) == []
    finally:
        _group_gone(proc.pid)
        proc.wait(5)


def test_children_of_a_dead_main_process_are_found_by_group(tmp_path):
    argv = [sys.executable, "-c", PARENT_OF_SLEEPER]
    proc = _spawn(argv)
    try:
        assert proc.stdout.readline() == b"up\n"
        _run_dir(tmp_path / "runs", "r", [{"argv": argv, "pid": proc.pid, "ts": time.time()}])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
        found = find_leftovers([tmp_path / "runs"])
        assert len(found) == 1 and not found[0].main_alive and found[0].pgid == proc.pid
        assert proc.pid not in found[0].pids and len(found[0].pids) == 1
        assert "child processes" in format_leftovers(found)[0]
    finally:
        _group_gone(proc.pid)


def test_nothing_to_report_and_hostile_run_directories(tmp_path):
    assert find_leftovers([tmp_path / "missing"]) == []
    assert format_leftovers([]) == []
    runs = tmp_path / "runs"
    bad = runs / "bad"
    bad.mkdir(parents=True)
    (bad / "events.jsonl").write_bytes(b"\x00\xff{not json\n[1,2]\n" + json.dumps(
        {"type": "ServerLaunching", "pid": "1", "argv": "x", "ts": "y"}).encode() + b"\n" + json.dumps(
        {"type": "ServerLaunching", "pid": 1, "argv": ["/sbin/init"], "ts": time.time()}).encode() + b"\n")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    _run_dir(runs, "dead", [{"argv": [sys.executable, "-c", "x"], "pid": int(dead.stdout), "ts": time.time()}])
    (runs / "a-file").write_text("x")
    assert find_leftovers([runs, runs / "a-file"]) == []
    own = _run_dir(tmp_path / "own", "me", [{"argv": [sys.executable], "pid": os.getpid(), "ts": time.time()}])
    assert find_leftovers([own]) == []


def test_leftover_formatting_is_one_line_with_the_command():
    item = Leftover(run_dir=Path("/r/x"), config="dflash-b8", pid=4242, pgid=4242, pids=(4242, 4243),
                    launched_at=0.0, main_alive=True)
    (message,) = format_leftovers([item])
    assert "\n" not in message and "kill -TERM -- -4242" in message and "kill -KILL -- -4242" in message
    assert "4242, 4243" in message and "dflash-b8" in message


@pytest.mark.e2e
def test_a_server_escaping_the_engine_is_found_from_the_real_run_directory(tmp_path):
    """A launcher wrapper (here ``engine.python``) that forks the server outside PR_SET_PDEATHSIG's reach. Its
    keeper ends it when the engine dies; only when the keeper itself is SIGKILLed first (nothing can end the
    tree then) does the server survive, and the next start finds it from the run directory, by the tree
    identity the keeper recorded (the escaped server is in no recorded process group)."""
    marker = new_marker()
    wrapper = tmp_path / "wrapper.py"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import os, sys\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
        "os.waitpid(pid, 0)\n"
    )
    wrapper.chmod(0o755)
    sweep = make_sweep(tmp_path, engine_extra=f'python = "{wrapper}"')
    runs = tmp_path / "runs"
    env = marker_env(marker)
    engine = headless([str(sweep), "--runs-dir", str(runs)], tmp_path, env)
    try:
        # Ready: the wrapped server and its children are up (not only the env.json probe, which runs the
        # wrapper too, under a keeper of its own).
        wait_for(lambda: the_run_dir(runs) and '"ServerReady"' in (the_run_dir(runs) / "events.jsonl").read_text(),
                 45, what="the wrapped server")
        run_dir = the_run_dir(runs)
        launch = next(json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()
                      if '"ServerLaunching"' in line)
        os.kill(launch["keeper_pid"], signal.SIGKILL)
        time.sleep(0.3)
        engine.kill()
        engine.wait(5)
        # What the parent-death signals end (the wrapper) is gone before looking: it may take seconds under load,
        # and one still dying when the survivors are counted would read as killed by the look.
        _steady(lambda: set(_marked(marker)) - {engine.pid})
        found = find_leftovers([runs])
        assert len(found) == 1, found
        survivors = set(_marked(marker)) - {engine.pid}
        assert survivors and survivors <= set(found[0].pids)
        assert f"kill -TERM -- -{found[0].pgid}" in format_leftovers(found)[0]
        assert str(run_dir) in format_leftovers(found)[0]
        assert set(_marked(marker)) - {engine.pid} == survivors, "nothing was killed by looking"
    finally:
        if engine.poll() is None:
            engine.kill()
        wait_gone(marker, engine.pid, timeout_s=0.1)


def _steady(look, quiet_s: float = 1.0, timeout_s: float = 30.0):
    """What ``look()`` returns once it has not changed for ``quiet_s``."""
    deadline = time.monotonic() + timeout_s
    seen, since = look(), time.monotonic()
    while time.monotonic() - since < quiet_s:
        assert time.monotonic() < deadline, f"still changing after {timeout_s:g} s: {seen}"
        time.sleep(0.05)
        now = look()
        if now != seen:
            seen, since = now, time.monotonic()
    return seen


def _marked(marker: str) -> list[int]:
    from reliability_helpers import marked

    return marked(marker)


async def test_a_leftover_of_an_earlier_run_is_a_warning_notice_at_the_start_of_a_sweep(tmp_path):
    """The orchestrator looks before its pre-flight: a live server recorded in an earlier run directory next
    to the new one becomes a warning Notice with the command that ends it, and is left alive."""
    from engine_helpers import plan_for

    from specbench_tui.core.events import Notice, SweepStarted
    from specbench_tui.engine.orchestrator import Orchestrator
    from specbench_tui.rundir.store import RunDir

    argv = [sys.executable, "-c", SLEEPER, "--api-key", "sk-secret", "--port", "30000"]
    proc = _spawn(argv)
    try:
        runs = tmp_path / "runs"
        _run_dir(runs, "20250101-000000_old", [{"argv": [*argv[:4], "***", *argv[5:]], "pid": proc.pid,
                                                "ts": time.time()}])
        plan = plan_for(make_sweep(tmp_path))
        run_dir = RunDir.create(runs, plan.sweep.name, plan.sweep.text, plan.to_json())
        orchestrator = Orchestrator(plan, run_dir, write_env=False)
        seen: list = []
        orchestrator.subscribe(seen.append)
        orchestrator.abort(now=True)  # nothing is launched: only the start of the sweep is looked at
        try:
            outcome = await orchestrator.run()
        finally:
            run_dir.close()
        assert outcome.state == "aborted", outcome
        notices = [e for e in seen if isinstance(e, Notice) and "still alive" in e.text]
        assert len(notices) == 1, [getattr(e, "text", e) for e in seen]
        assert notices[0].level == "warning"
        assert f"kill -TERM -- -{proc.pid}" in notices[0].text and "20250101-000000_old" in notices[0].text
        assert "sk-secret" not in notices[0].text
        assert seen.index(notices[0]) < next(i for i, e in enumerate(seen) if isinstance(e, SweepStarted))
        recorded = [json.loads(x) for x in (run_dir.path / "events.jsonl").read_text().splitlines() if x.strip()]
        assert any(e.get("type") == "Notice" and "still alive" in e.get("text", "") for e in recorded)
        assert proc.poll() is None, "a leftover is reported, never killed"
    finally:
        _group_gone(proc.pid)
        proc.wait(5)
