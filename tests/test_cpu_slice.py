"""The screen's CPU slice (specbench_tui/cpu_slice.py), read back from the kernel itself (``sched_getattr``).

The counterpart is the running kernel: each test asks it, from a process of its own (never pytest's), what slice
a thread runs with. Where the kernel keeps no slice of a thread's choosing (before Linux 6.12, or not Linux on
x86-64/arm64) they are skipped, saying so."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specbench_tui.cpu_slice import ENV, SCREEN_SLICE_MS, screen_slice_ms, slice_ms

ROOT = Path(__file__).resolve().parent.parent


def _python(code: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, **(env or {})})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _default_ms() -> float:
    return float(_python("from specbench_tui.cpu_slice import set_slice, slice_ms; set_slice(0); print(slice_ms())"))


@pytest.fixture(scope="module")
def kernel_slices() -> float:
    """The kernel's default slice (ms), once a thread asking for 50 ms is seen to get it; else the tests skip."""
    if slice_ms() is None:
        pytest.skip(f"sched_getattr is not available here ({sys.platform}, {os.uname().machine})")
    given = _python("from specbench_tui.cpu_slice import set_slice, slice_ms; set_slice(50); print(slice_ms())")
    if float(given) != 50.0:
        pytest.skip(f"kernel {os.uname().release} keeps no slice of a thread's choosing (Linux 6.12 and later do)")
    return _default_ms()


def test_every_thread_takes_the_slice_those_started_later_inherit_it_and_a_process_started_takes_the_default_back(
        kernel_slices: float) -> None:
    """give_threads reaches the threads already running (not only the caller); a thread started afterwards has
    it from its parent thread; a process started from such a thread has it too until it takes the default back,
    as the engine's process and each server's keeper do first thing."""
    code = """
import subprocess, sys, threading
from specbench_tui.cpu_slice import give_threads, slice_ms
ready, hold = threading.Event(), threading.Event()
seen = {}
def early():
    ready.set(); hold.wait(); seen['early'] = slice_ms()
first = threading.Thread(target=early); first.start(); ready.wait()
print('given', give_threads(50))
late = threading.Thread(target=lambda: seen.__setitem__('late', slice_ms())); late.start(); late.join()
hold.set(); first.join()
print('main', slice_ms(), 'early', seen['early'], 'late', seen['late'])
inherit = "from specbench_tui.cpu_slice import slice_ms; print(slice_ms())"
back = "from specbench_tui.cpu_slice import take_default, slice_ms; take_default(); print(slice_ms())"
for name, child in (('inherited', inherit), ('default', back)):
    out = subprocess.run([sys.executable, '-c', child], capture_output=True, text=True).stdout.strip()
    print(name, out)
"""
    out = _python(code)
    assert re.search(r"^given [2-9]\d*$", out, re.M), out  # the main thread and the early one at least
    assert "main 50.0 early 50.0 late 50.0" in out, out
    assert "inherited 50.0" in out, out
    assert f"default {kernel_slices}" in out, out


def test_the_policy_and_nice_value_are_kept_and_an_idle_or_realtime_thread_is_left_alone(kernel_slices: float) -> None:
    """A screen started under ``chrt -b`` (SCHED_BATCH) at nice 5 keeps both; under SCHED_IDLE nothing is changed."""
    code = """
import os
from specbench_tui.cpu_slice import set_slice, slice_ms
os.nice(5)
os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
print('batch', set_slice(50), slice_ms(), os.sched_getscheduler(0) == os.SCHED_BATCH, os.nice(0))
os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
before = slice_ms()
print('idle', set_slice(80), slice_ms() == before, os.sched_getscheduler(0) == os.SCHED_IDLE)
"""
    out = _python(code)
    assert "batch True 50.0 True 5" in out, out
    assert "idle False True True" in out, out


def test_the_environment_variable_sets_the_slice_and_a_bad_value_is_refused_with_the_fix(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert screen_slice_ms() == SCREEN_SLICE_MS
    monkeypatch.setenv(ENV, "0")
    assert screen_slice_ms() == 0.0
    monkeypatch.setenv(ENV, "20")
    assert screen_slice_ms() == 20.0
    monkeypatch.setenv(ENV, "fast")
    with pytest.raises(SystemExit, match=f"{ENV}='fast': not a number of milliseconds .*0 for the kernel's default"):
        screen_slice_ms()


def _names(slices: dict[int, float | None]) -> dict[int, str]:
    """Each thread's name and its process's command line (what a failure needs to say which one was wrong)."""
    names = {}
    for tid in slices:
        try:
            comm = Path(f"/proc/{tid}/comm").read_text().strip()
            cmdline = Path(f"/proc/{tid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            comm, cmdline = "?", "(gone)"
        names[tid] = f"{comm}: {cmdline[:120]}"
    return names


def _threads(pid: int) -> list[int]:
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


@pytest.mark.parametrize("mode", ["attached", "foreground"])
def test_the_real_screen_runs_with_its_slice_and_the_engine_and_its_servers_with_the_kernels_default(
        tmp_path: Path, kernel_slices: float, mode: str) -> None:
    """`specbench run` in a pseudo-terminal, the screen drawn and a server up: every thread of the screen's process
    runs with the screen's slice; the processes started from it with the kernel's default: attached, the engine's
    process (and through it each server's keeper, the simulated servers and their children); in the foreground
    (the engine in the screen's process), each server's keeper and what it starts."""
    from reliability_helpers import TerminalRun, make_sweep, marked, new_marker, wait_for, wait_gone

    marker = new_marker()
    run = TerminalRun(make_sweep(tmp_path), tmp_path / "runs", marker,
                      ("--foreground",) if mode == "foreground" else (), {ENV: ""})
    proc = run.proc
    least = 4 if mode == "attached" else 3  # (the engine,) a keeper, a server and a child of it
    try:
        wait_for(lambda: b"Sweep queue" in run.output, 60, what="the screen's first frame")
        wait_for(lambda: len(marked(marker, {proc.pid})) >= least, 60, what="a server with its children")

        def slices() -> dict[tuple[int, int], float | None]:
            return {(pid, tid): slice_ms(tid) for pid in marked(marker, {proc.pid}) for tid in _threads(pid)}

        # A process takes the default back as it starts (a keeper just forked still has the screen's slice for
        # the few milliseconds before its first line runs): the slices read once none is still starting, or the
        # last ones read in 5 s.
        started: dict[tuple[int, int], float | None] = {}
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            started = slices() or started
            if started and SCREEN_SLICE_MS not in started.values():
                break
            time.sleep(0.05)
        screen = {tid: slice_ms(tid) for tid in _threads(proc.pid)}
    finally:
        proc.kill()
        proc.wait(10)
        run.close()
        for pid in marked(marker):  # the engine outlives the screen by design: stopped as `specbench stop` does
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        wait_gone(marker, None, timeout_s=20)
    screen = {tid: ms for tid, ms in screen.items() if ms is not None}
    started = {key: ms for key, ms in started.items() if ms is not None}
    assert len(screen) >= 3 and set(screen.values()) == {SCREEN_SLICE_MS}, (screen, _names(screen))
    assert len({pid for pid, _ in started}) >= least and set(started.values()) == {kernel_slices}, (
        started, _names({tid: ms for (_, tid), ms in started.items()}))
