"""How long the kernel lets a thread run before another task on its CPU gets a turn (Linux's EEVDF scheduler).

On a box whose cores are busy (servers' tokenizer and scheduler threads, a build, another user's job), a key's
answer is a burst of 10-45 ms of the screen's CPU. Linux (6.6 and later) cuts every task's run into slices
of a few milliseconds (1.4 ms on the two-core machines here) and hands the CPU round between the tasks that want
it, so beside one busy task the burst took twice its CPU in wall time, and more where the pieces waited longer
(``bench/bench_ui.py --busy 2``: ``t`` 30 ms of CPU, 60-100 ms to the screen). Since Linux 6.12 a thread may ask for a longer slice of its own
(``sched_setattr``'s ``sched_runtime`` under ``SCHED_OTHER``: no privilege needed, 0.1-100 ms): the screen's
threads ask for :data:`SCREEN_SLICE_MS`, so that a key's answer runs in one piece once it has the CPU. What each
task gets over time is unchanged (the scheduler keeps every task's share: the screen's thread sleeps between
keys and pays its burst back then); what changes is that a server thread sharing a core with the screen may
wait up to one slice while a frame is drawn, instead of several short waits adding up to the same.

Only the screen's process asks for it (:func:`give_threads`, from :meth:`SpecbenchApp.run
<specbench_tui.tui.app.SpecbenchApp.run>`). A thread passes its slice on to the threads and processes it starts,
so the processes started from the screen's take the kernel's default back first thing (:func:`take_default`:
the engine's process and each server's keeper, hence every server). ``SPECBENCH_SCREEN_SLICE_MS=0`` leaves
the screen at the kernel's default too. Elsewhere than Linux on x86-64 or arm64, and for threads under a
policy other than ``SCHED_OTHER``/``SCHED_BATCH`` (``chrt``), nothing is changed. Kernels before 6.12 accept the
request and ignore it (their slice is not the thread's to choose).
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from functools import cache

SCREEN_SLICE_MS = 50.0
"""The slice the screen's threads ask for: its longest key (``t``, the whole screen in new colours) is ~45 ms of
CPU beside two busy loops on a slow core."""
ENV = "SPECBENCH_SCREEN_SLICE_MS"
"""Overrides :data:`SCREEN_SLICE_MS` (0: the kernel's default slice)."""
_SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}
"""``sched_setattr`` and ``sched_getattr`` by machine. (The keeper imports this module: the standard library only,
and not ``platform``, 3 ms of its start.)"""
_ATTR = struct.Struct("IIQiIQQQII")
"""``struct sched_attr`` as of ``SCHED_ATTR_SIZE_VER1`` (56 bytes): size, policy, flags, nice, priority, runtime
(the slice, in ns, for the fair policies), deadline, period, util_min, util_max."""
_FAIR = (0, 3)
"""``SCHED_OTHER`` and ``SCHED_BATCH``: the policies whose slice a thread may choose."""
_RESET_ON_FORK = 0x01


@cache
def _syscall() -> tuple[ctypes.CDLL, int, int] | None:
    """libc's ``syscall`` with the numbers of ``sched_setattr`` and ``sched_getattr`` here (None: not Linux on a
    machine this knows)."""
    numbers = _SYSCALLS.get(os.uname().machine) if sys.platform.startswith("linux") else None
    if numbers is None:
        return None
    try:
        return ctypes.CDLL(None, use_errno=True), *numbers
    except OSError:
        return None


def _get(tid: int) -> tuple[int, ...] | None:
    found = _syscall()
    if found is None:
        return None
    libc, _, getattr_nr = found
    buffer = ctypes.create_string_buffer(_ATTR.size)
    if libc.syscall(getattr_nr, tid, buffer, _ATTR.size, 0) != 0:
        return None
    return _ATTR.unpack(buffer.raw)


def slice_ms(tid: int = 0) -> float | None:
    """The slice thread ``tid`` (0: the calling thread) runs with now, in ms; None where it cannot be read."""
    attr = _get(tid)
    return attr[5] / 1e6 if attr is not None else None


def set_slice(ms: float, tid: int = 0) -> bool:
    """Ask for a slice of ``ms`` (0: the kernel's default) for thread ``tid`` (0: the calling thread), keeping its
    policy, nice value and reset-on-fork flag; False where nothing was changed (see the module's docstring)."""
    found, attr = _syscall(), _get(tid)
    if found is None or attr is None or attr[1] not in _FAIR:
        return False
    libc, setattr_nr, _ = found
    _, policy, flags, nice = attr[:4]
    wanted = _ATTR.pack(_ATTR.size, policy, flags & _RESET_ON_FORK, nice, 0, int(ms * 1_000_000), 0, 0, 0, 0)
    status: int = libc.syscall(setattr_nr, tid, ctypes.create_string_buffer(wanted, _ATTR.size), 0)
    return status == 0


def screen_slice_ms() -> float:
    """:data:`SCREEN_SLICE_MS`, or what :data:`ENV` says (a clear error for a value that is not a number)."""
    value = os.environ.get(ENV, "").strip()
    if not value:
        return SCREEN_SLICE_MS
    try:
        ms = float(value)
    except ValueError:
        raise SystemExit(f"{ENV}={value!r}: not a number of milliseconds (0 for the kernel's default, "
                         f"unset for {SCREEN_SLICE_MS:g})") from None
    return max(0.0, ms)


def give_threads(ms: float) -> int:
    """Ask for a slice of ``ms`` for every thread of this process (those started later take it from the thread
    that starts them); returns how many were given it. All of them, not the screen's thread alone: where a
    session's threads are scheduled as one group (Linux's autogroups, a cgroup), the group runs with the shortest
    slice among its threads that want the CPU (the screen's thread alone given 50 ms changed nothing measured).
    """
    try:
        tids = [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        tids = [0]
    return sum(set_slice(ms, tid) for tid in tids)


def take_default() -> bool:
    """The kernel's default slice for the calling thread (a process started by the screen's, at its start: what it
    starts, servers included, takes the default from it)."""
    return set_slice(0)
