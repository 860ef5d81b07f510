"""Whatever ends the program, no server process (the simulator's main process, its schedulers and its
detokenizer) survives it by more than a few seconds.

Each ending is tried at a seeded random moment of a real sweep against the simulator (set
SPECBENCH_TEST_SEED to explore other moments): quit from the TUI (the real engine thread), Ctrl-C twice,
SIGTERM, SIGHUP (``specbench run --headless``, and the TUI losing its terminal), SIGKILL, and an unhandled
exception in the app. Servers are recognised by a marker in their environment, which the engine passes on
to them and the simulator to its children.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import os
import pty
import signal
import subprocess
import sys
import termios
import threading
import time

import pytest
from reliability_helpers import (
    MARKER_VAR,
    headless,
    make_sweep,
    marker_env,
    new_marker,
    seeded,
    server_pids,
    wait_for,
    wait_gone,
)

pytestmark = pytest.mark.e2e

GONE_WITHIN_S = 5.0
"""'A few seconds': how long a server may outlive the ending of the program."""


def _wait_servers(marker: str, engine: subprocess.Popen[bytes] | None, minimum: int = 3,
                  timeout_s: float = 45.0) -> list[int]:
    """Wait until a server is up with its children (main + scheduler + detokenizer)."""
    def seen():
        if engine is not None and engine.poll() is not None:
            out = engine.stdout.read().decode(errors="replace") if engine.stdout else ""
            raise AssertionError(f"the engine ended before a server was seen (rc {engine.returncode}):\n{out}")
        pids = server_pids(marker, engine.pid if engine else None)
        return pids if len(pids) >= minimum else None

    pids: list[int] = wait_for(seen, timeout_s, what="a server with its child processes")
    return pids


def _random_moment(name: str) -> float:
    return seeded(name).uniform(0.0, 2.0)


@pytest.mark.parametrize("ending", ["sigint-twice", "sigterm", "sighup", "sigkill"])
def test_headless_ending_leaves_no_server(tmp_path, ending):
    marker = new_marker()
    sweep = make_sweep(tmp_path)
    engine = headless([str(sweep), "--runs-dir", str(tmp_path / "runs")], tmp_path, marker_env(marker))
    try:
        tree = _wait_servers(marker, engine)
        assert len(tree) >= 3, f"expected the simulator's main process and children, saw {tree}"
        time.sleep(_random_moment(f"headless-{ending}"))
        if ending == "sigint-twice":
            engine.send_signal(signal.SIGINT)
            time.sleep(0.05)
            engine.send_signal(signal.SIGINT)
        else:
            engine.send_signal({"sigterm": signal.SIGTERM, "sighup": signal.SIGHUP,
                                "sigkill": signal.SIGKILL}[ending])
        code = engine.wait(timeout=30)
        ended = time.monotonic()
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(5)
    survivors = wait_gone(marker, engine.pid, timeout_s=GONE_WITHIN_S)
    assert survivors == [], f"{ending}: server processes outlived the engine: {survivors}"
    assert time.monotonic() - ended <= GONE_WITHIN_S + 1
    output = engine.stdout.read().decode(errors="replace") if engine.stdout else ""
    if ending == "sigint-twice":
        assert code in (130, 0), output  # 0 when the sweep had already completed
    if ending == "sigterm":
        assert code in (130, 0), output


def test_ctrl_c_while_a_finished_run_exits_keeps_its_exit_code(tmp_path):
    """Ctrl-C pressed while the program exits after its last line (its servers already stopped) neither kills
    it by the signal (status -2: the interpreter's shutdown puts SIGINT back to its default for the tenths of
    a second it takes) nor leaves a server: the exit code stays the run's (0), or 130 when the Ctrl-C still
    reached the sweep. SIGINT is sent every 15 ms from the last line until the process is gone."""
    marker = new_marker()
    engine = headless([str(make_sweep(tmp_path)), "--runs-dir", str(tmp_path / "runs")], tmp_path,
                      marker_env(marker))
    sent = 0
    try:
        assert engine.stdout is not None
        output = b""
        while b"run directory:" not in output:
            line = engine.stdout.readline()
            assert line, f"the run ended without its last line (rc {engine.wait(30)}):\n{output.decode()}"
            output += line
        deadline = time.monotonic() + 30
        while engine.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(ProcessLookupError):
                engine.send_signal(signal.SIGINT)
                sent += 1
            time.sleep(0.015)
        code = engine.wait(timeout=5)
        output += engine.stdout.read()
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(5)
    assert wait_gone(marker, engine.pid, timeout_s=GONE_WITHIN_S) == []
    assert code in (0, 130), f"exit {code} after {sent} Ctrl-C:\n{output.decode(errors='replace')[-2000:]}"


def test_sigterm_during_a_long_request_stops_within_seconds(tmp_path):
    """SIGTERM is how systemd, Docker and ``kill`` stop a program: it must not wait minutes for the
    request in flight (here one of ~90 s) while the server holds its GPUs: after the headless runner's grace
    (SIGNAL_GRACE_S) the request is abandoned and the servers are torn down."""
    from specbench_tui.application.host import SIGNAL_GRACE_S as grace

    bound = grace + 5.0
    marker = new_marker()
    sweep = make_sweep(tmp_path, max_new_tokens=90000)
    (tmp_path / "sim_profile.toml").write_text((tmp_path / "sim_profile.toml").read_text()
                                               .replace("tok_s = 1500.0", "tok_s = 1500.0\nstep_ms = 1.0"))
    engine = headless([str(sweep), "--runs-dir", str(tmp_path / "runs")], tmp_path, marker_env(marker))
    try:
        _wait_servers(marker, engine)
        runs = tmp_path / "runs"
        wait_for(lambda: any('"WorkloadStarted"' in p.read_text() for p in runs.glob("*/events.jsonl")), 45,
                 what="the first request")
        time.sleep(0.5)
        engine.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        try:
            engine.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            pass
        alive = wait_gone(marker, engine.pid, timeout_s=max(0.1, sent + bound - time.monotonic()))
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(5)
        wait_gone(marker, engine.pid, timeout_s=5)
    assert alive == [], f"servers still up {bound:g} s after SIGTERM: {alive}"


# ------------------------------------------------------------------------------------------------- the TUI


def _args(sweep, runs) -> argparse.Namespace:
    return argparse.Namespace(sweep=str(sweep), resume=None, retry_crashed=False, headless=False,
                              runs_dir=str(runs), no_mouse=True, theme=None)


async def _until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_tui_quit_with_the_real_engine_leaves_no_server(tmp_path, monkeypatch):
    from specbench_tui.application.runner import EngineThread, make_engine
    from specbench_tui.tui.app import SpecbenchApp
    from specbench_tui.tui.confirm_quit import ConfirmQuitScreen

    marker = new_marker()
    monkeypatch.setenv(MARKER_VAR, marker)
    monkeypatch.delenv("SPECBENCH_SIM_PROFILE", raising=False)
    sweep = make_sweep(tmp_path)
    engine = make_engine(_args(sweep, tmp_path / "runs"))
    assert isinstance(engine, EngineThread)
    app = SpecbenchApp(engine)
    try:
        async with app.run_test(size=(120, 36)) as pilot:
            await _until(lambda: len(server_pids(marker)) >= 3, 45, "a server with its children")
            await asyncio.sleep(_random_moment("tui-quit"))
            await pilot.press("ctrl+q")
            await pilot.pause()
            if isinstance(app.screen, ConfirmQuitScreen):
                await pilot.press("y")
            await _until(lambda: app.engine_stopped or app.stop_error is not None, 60, "the engine to stop")
            stopped = time.monotonic()
    finally:
        engine.stop(timeout=30)
    survivors = wait_gone(marker, timeout_s=GONE_WITHIN_S)
    assert survivors == [], f"servers outlived quitting the TUI: {survivors}"
    assert time.monotonic() - stopped <= GONE_WITHIN_S + 1
    assert app.stop_error is None
    assert not engine.running


def test_unhandled_exception_in_the_app_leaves_no_server(tmp_path, monkeypatch):
    """An exception escaping the app ends ``specbench run`` (``tui.main.run_tui``); the servers go with it."""
    from specbench_tui.tui import main as tui_main
    from specbench_tui.tui.app import SpecbenchApp

    marker = new_marker()
    monkeypatch.setenv(MARKER_VAR, marker)
    monkeypatch.delenv("SPECBENCH_SIM_PROFILE", raising=False)
    sweep = make_sweep(tmp_path)
    delay = _random_moment("tui-exception")
    armed: dict[str, float] = {}
    original_drain = SpecbenchApp.drain_events
    original_run = SpecbenchApp.run

    def drain(self, *args, **kwargs):
        if len(server_pids(marker)) >= 3 and "at" not in armed:
            armed["at"] = time.monotonic() + delay
        if "at" in armed and time.monotonic() >= armed["at"]:
            armed["raised"] = time.monotonic()
            raise RuntimeError("injected: a bug in the app")
        return original_drain(self, *args, **kwargs)

    def run_headless(self, *args, **kwargs):
        kwargs.pop("mouse", None)
        return original_run(self, headless=True, size=(120, 36))

    monkeypatch.setattr(SpecbenchApp, "drain_events", drain)
    monkeypatch.setattr(SpecbenchApp, "run", run_headless)
    result: dict[str, object] = {}

    def target():
        try:
            result["code"] = tui_main.run_tui(_args(sweep, tmp_path / "runs"))
        except BaseException as exc:  # noqa: BLE001 - the process would die of it; we look at the servers
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(90)
    assert not thread.is_alive(), "specbench run did not end after the app crashed"
    assert "raised" in armed, "the injected exception never fired"
    survivors = wait_gone(marker, timeout_s=GONE_WITHIN_S)
    assert survivors == [], f"servers outlived the app's crash: {survivors}"


def _tui_in_a_pty(sweep, runs, env, extra: tuple[str, ...] = ("--foreground",),
                  sighup: signal.Handlers = signal.SIG_DFL) -> tuple[subprocess.Popen[bytes], int]:
    """``specbench run`` on a pseudo-terminal that is its controlling terminal (as over SSH); in the foreground
    by default (the sweep lives in the TUI's process, so losing the terminal must take the servers down).
    SIGHUP's disposition is set as a login shell's (default), whatever the test runner's is (``nohup`` makes it
    ignored); ``sighup=signal.SIG_IGN`` starts it as ``nohup`` would."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, b"\x24\x00\x78\x00\x00\x00\x00\x00")  # 36 rows, 120 cols

    def become_terminal_owner() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        signal.signal(signal.SIGHUP, sighup)

    env = {**env, "TERM": "xterm-256color"}
    proc = subprocess.Popen([sys.executable, "-m", "specbench_tui", "run", str(sweep), "--runs-dir", str(runs),
                             "--no-mouse", *extra], stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True, preexec_fn=become_terminal_owner, close_fds=True)  # noqa: PLW1509
    os.close(slave)

    def drain() -> None:  # a terminal that is not read blocks the app
        while True:
            try:
                if not os.read(master, 65536):
                    return
            except OSError:
                return

    threading.Thread(target=drain, daemon=True).start()
    return proc, master


@pytest.mark.parametrize("ending", ["hangup", "hangup-under-nohup", "sigterm"])
def test_tui_losing_its_terminal_or_sigterm_leaves_no_server(tmp_path, ending):
    """The SSH session drops (the terminal hangs up: SIGHUP; under ``nohup`` the signal is ignored and the app
    leaves on seeing its terminal hung up), or the TUI is sent SIGTERM."""
    marker = new_marker()
    sweep = make_sweep(tmp_path)
    nohup = ending == "hangup-under-nohup"
    proc, master = _tui_in_a_pty(sweep, tmp_path / "runs", marker_env(marker),
                                 sighup=signal.SIG_IGN if nohup else signal.SIG_DFL)
    try:
        _wait_servers(marker, proc, minimum=3, timeout_s=60)
        time.sleep(_random_moment(f"tui-{ending}"))
        if ending.startswith("hangup"):
            os.close(master)
            master = -1
        else:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        if nohup:
            assert proc.returncode == -signal.SIGHUP, "the app did not leave its hung-up terminal"
        survivors = wait_gone(marker, proc.pid, timeout_s=GONE_WITHIN_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        if master >= 0:
            os.close(master)
        wait_gone(marker, proc.pid, timeout_s=5)
    assert survivors == [], f"{ending}: servers outlived the TUI: {survivors}"


def test_a_ctrl_c_after_the_sweep_let_its_handlers_go_ends_as_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second of two Ctrl-C racing the sweep's end arrives after its handlers were let go: the program ends
    with 130 (stopped on request), never killed by SIGINT itself (exit status -2, seen under load)."""
    from specbench_tui.application import headless
    from specbench_tui.application.session import RunRequest

    async def interrupted_at_the_end(*args: object, **kwargs: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(headless.OwnedRun, "prepare", staticmethod(lambda request: object()))
    monkeypatch.setattr(headless, "_run", interrupted_at_the_end)
    assert headless.run_headless(RunRequest(sweep="demo")) == 130
