"""The suite's CPU lock (tests/cpu_share.py): real-server modules share the cores, a timing test has them alone,
and a timing test that waits is not starved by the next real-server module."""

from __future__ import annotations

import fcntl
import threading
import time
from pathlib import Path

from cpu_share import CpuShare


def _in_thread(share: CpuShare, mode: int, module: str | None, order: list[str], name: str) -> threading.Thread:
    def take() -> None:
        share.hold(mode, module)
        order.append(name)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return thread


def test_real_servers_share_and_a_timing_test_waits_for_them(tmp_path: Path) -> None:
    vllm, sglang, timing = CpuShare(tmp_path / "cpu.lock"), CpuShare(tmp_path / "cpu.lock"), CpuShare(tmp_path / "cpu.lock")
    vllm.hold(fcntl.LOCK_SH, "test_engine_vllm.py")
    sglang.hold(fcntl.LOCK_SH, "test_sglang_real.py")  # granted at once: two real servers may run side by side
    order: list[str] = []
    waiting = _in_thread(timing, fcntl.LOCK_EX, None, order, "timing")
    time.sleep(0.3)
    assert order == []  # the timing test waits while any real server runs
    vllm.release()
    time.sleep(0.3)
    assert order == []
    sglang.release()
    waiting.join(5)
    assert order == ["timing"]
    timing.release()


def test_a_waiting_timing_test_goes_before_the_next_real_server_module(tmp_path: Path) -> None:
    engines, timing = CpuShare(tmp_path / "cpu.lock"), CpuShare(tmp_path / "cpu.lock")
    engines.hold(fcntl.LOCK_SH, "test_engine_llamacpp.py")
    order: list[str] = []
    waiting = _in_thread(timing, fcntl.LOCK_EX, None, order, "timing")
    time.sleep(0.3)
    # the worker moves on to its next real-server module: it lets go, and must queue behind the waiting test
    moving_on = _in_thread(engines, fcntl.LOCK_SH, "test_engine_vllm.py", order, "vllm module")
    waiting.join(5)
    time.sleep(0.3)
    assert order == ["timing"], order
    timing.release()
    moving_on.join(5)
    assert order == ["timing", "vllm module"]
    engines.release()


def test_the_same_module_keeps_its_hold_and_a_release_frees_the_lock(tmp_path: Path) -> None:
    share, other = CpuShare(tmp_path / "cpu.lock"), CpuShare(tmp_path / "cpu.lock")
    share.hold(fcntl.LOCK_SH, "test_engine_vllm.py")
    share.hold(fcntl.LOCK_SH, "test_engine_vllm.py")  # the next test of the same module: no release in between
    assert share.mode == fcntl.LOCK_SH
    share.hold(None)
    assert share.mode is None
    order: list[str] = []
    _in_thread(other, fcntl.LOCK_EX, None, order, "timing").join(5)  # blocked if the release kept the lock
    assert order == ["timing"]
    other.release()
