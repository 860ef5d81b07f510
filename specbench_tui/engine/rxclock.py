"""Kernel receive timestamps for the streams we measure: when a token's bytes reached our socket, not when our
thread got round to reading them.

A measured time-to-first-token is ``t(first token's bytes read) - t(request sent)``. The read side is where
a benchmark client lies: between the packet's arrival and the moment the measuring code calls the clock, the
engine thread may wait for the GIL (the TUI renders in the same process), for a CPU (other processes on a
2-core box), or for its event loop to finish other callbacks. Linux stamps every received packet in the
kernel when ``SO_TIMESTAMPNS`` is set, and hands the stamp of the last packet of each read to ``recvmsg`` as
ancillary data (TCP included; ``ioctl(SIOCGSTAMPNS)`` does not work on TCP sockets). The stamp is taken at
arrival, so none of those waits reach the figure. One limit: a read that returns several packets carries the
last one's stamp, so when the reader lagged by more than the gap between two tokens, the earlier tokens of that
read are stamped late by up to that gap (never early; read-time stamps would be late by the whole lag).

The measured stream (:mod:`specbench_tui.engine.stream`) reads its sockets with ``recvmsg`` and maps each read's
stamp (:func:`stamp_realtime`) onto ``time.monotonic()``'s clock with one :func:`monotonic_minus_realtime` per
request. Elsewhere (TLS, a proxy, another OS) the client keeps httpx and read-time stamps.
"""

from __future__ import annotations

import math
import socket
import struct
import sys
import time

SO_TIMESTAMPNS: int | None = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
"""``SO_TIMESTAMPNS`` (35 on Linux); the ancillary message type ``SCM_TIMESTAMPNS`` has the same value."""
_TIMESPEC = struct.Struct("@qq")
ANCILLARY_SPACE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0


def monotonic_minus_realtime(tries: int = 3) -> float:
    """``time.monotonic() - time.time()`` at one instant: what maps a kernel (realtime) stamp onto the monotonic
    clock. The realtime clock is read between two monotonic reads and the middle taken; a thread preempted inside
    that sandwich (a busy box) would shift the stamp by the whole preemption, so a wide sandwich is read again
    and the narrowest of ``tries`` kept (two reads back to back, as before, put one stamp 0.35 ms late under
    load: an answer whose end came before its first token)."""
    best_gap, best = math.inf, 0.0
    for _ in range(tries):
        before = time.monotonic()
        real = time.time()
        after = time.monotonic()
        if after - before < best_gap:
            best_gap, best = after - before, (before + after) / 2 - real
        if best_gap < 20e-6:
            break
    return best


def supported() -> bool:
    """Whether this platform stamps received TCP packets for us (Linux)."""
    return sys.platform.startswith("linux") and SO_TIMESTAMPNS is not None and ANCILLARY_SPACE > 0


def stamp_realtime(ancdata: list[tuple[int, int, bytes]]) -> float | None:
    """The kernel's receive stamp (CLOCK_REALTIME seconds) in a ``recvmsg`` call's ancillary data, or None."""
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= _TIMESPEC.size:
            seconds, nanos = _TIMESPEC.unpack_from(payload)
            return float(seconds) + float(nanos) / 1e9
    return None
