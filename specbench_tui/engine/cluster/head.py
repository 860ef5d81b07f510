"""Watching a Ray cluster's head: a lost head stops the sweep cleanly instead of hanging it.

Ray's head (its GCS) is a single point of failure: when it goes, every call the engine makes that needs it
(listing nodes, creating a placement group or an actor, killing one) blocks while Ray retries, and Ray ends the
engine's process after ``gcs_rpc_server_reconnect_timeout_s`` (60 s) with a line on standard error: no
``SweepFinished``, no summary. The actors' streams may fail at once too (when the engine's own Ray node was
the head, its actors die with their owner), which must not read as a lost *node*.

:class:`HeadWatch` probes the head's GCS port (a TCP connect, no Ray call: it never blocks on Ray and never
makes Ray give up on the process) every :data:`HEAD_PROBE_S`; when nothing has answered for
:data:`HEAD_LOST_AFTER_S` the head is lost, and the watch calls ``on_lost`` once with the reason (the engine then
stops the sweep: ``failure == "cluster"``). :meth:`HeadWatch.confirm` tells a Ray error caused by the head's
loss (wait for the verdict) from a lost node (the head still answers). No Ray import here.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

HEAD_PROBE_S = 1.0
"""How often the head's GCS port is probed."""
PROBE_TIMEOUT_S = 3.0
"""How long one probe may take (a host that went away answers nothing: the connect times out)."""
HEAD_LOST_AFTER_S = 10.0
"""How long the head may answer nothing before it is lost (Ray's own limit is 60 s; a slow or briefly restarted
GCS still answers a TCP connect)."""
GCS_RECONNECT_ENV = "RAY_gcs_rpc_server_reconnect_timeout_s"
GCS_RECONNECT_S = "86400"
"""The engine's own Ray (set before ``ray.init`` unless the user set it): a Ray call already waiting on the head
when it went does not make Ray end the engine's process after 60 s; the watch decides, within
:data:`HEAD_LOST_AFTER_S`."""


def split_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``host:port``, ``[v6]:port`` or ``ray://host:port``; None for anything else."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


class HeadWatch:
    """Probes the head at ``address`` (``host:port`` of its GCS) until it is lost or the watch is stopped."""

    def __init__(self, address: str, on_lost: Callable[[str], None], *, probe_s: float = HEAD_PROBE_S,
                 lost_after_s: float = HEAD_LOST_AFTER_S) -> None:
        self.address = address
        self._on_lost = on_lost
        self._probe_s = probe_s
        self._lost_after_s = lost_after_s
        self.lost: str | None = None
        """Why the head is lost (None while it answers)."""
        self.lost_event = asyncio.Event()
        self._answered_at = time.monotonic()
        """When the last probe that was answered started."""
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.ensure_future(self._watch())

    async def stop(self) -> None:
        self._stopping = True  # a cancellation that ``wait_for`` swallows (Python 3.11) still ends the loop
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def answers(self) -> str | None:
        """One probe: None when the head's GCS port accepts a connection, else why not."""
        where = split_address(self.address)
        if where is None:
            return None  # nothing to probe: never declared lost
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(*where), PROBE_TIMEOUT_S)
        except asyncio.TimeoutError:
            return f"no answer within {PROBE_TIMEOUT_S:g} s"
        except OSError as exc:
            return exc.strerror or str(exc)
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return None

    async def _watch(self) -> None:
        down_since: float | None = None
        while not self._stopping:
            started = time.monotonic()
            problem = await self.answers()
            if problem is None:
                down_since = None
                self._answered_at = started
            else:
                down_since = down_since if down_since is not None else started
                if time.monotonic() - down_since >= self._lost_after_s:
                    self._declare(f"the Ray head at {self.address} is lost: nothing answered there for "
                                  f"{time.monotonic() - down_since:.0f} s ({problem})")
                    return
            await asyncio.sleep(self._probe_s)

    def _declare(self, reason: str) -> None:
        if self.lost is None:
            self.lost = reason
            self.lost_event.set()
            self._on_lost(reason)

    async def confirm(self) -> bool:
        """After a Ray call failed: whether the head is lost (True, once the watch says so) or still answers
        (False, at the first probe answered after the failure). At most about :data:`HEAD_LOST_AFTER_S`."""
        failed_at = time.monotonic()
        while self.lost is None:
            if self._answered_at >= failed_at:
                return False
            if self._task is None or self._task.done():  # not watching: one probe decides
                return await self.answers() is not None
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.lost_event.wait(), 0.1)
        return True
