"""``specbench serve`` holds at most REFUSED_HELD_MAX refused websockets open for their minute (issue 49, point 8):
past it each refused tab gets its refusal and is closed at once, so a page reloading in a loop cannot pile them up."""

from __future__ import annotations

import asyncio
import contextlib
import time

from specbench_tui.tui import web


class FakeSocket:
    """A refused tab's websocket that never sends anything (a page left open)."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = asyncio.Event()

    async def send_bytes(self, data: bytes) -> None:
        self.sent.append(data)

    async def close(self) -> None:
        self.closed.set()

    def __aiter__(self) -> FakeSocket:
        return self

    async def __anext__(self) -> object:
        await self.closed.wait()
        raise StopAsyncIteration


class Server:
    """What ``GuardedServer._refuse`` reads of its server."""

    tabs: dict[object, object] = {}
    max_tabs = 4

    def __init__(self) -> None:
        self.refused: set[object] = set()

    _drain = staticmethod(web.GuardedServer._drain)


def test_refused_tabs_past_the_cap_are_closed_at_once() -> None:
    async def scenario() -> tuple[int, float, int]:
        server = Server()
        sockets = [FakeSocket() for _ in range(web.REFUSED_HELD_MAX + 20)]
        tasks = [asyncio.create_task(web.GuardedServer._refuse(server, s)) for s in sockets]  # type: ignore[arg-type]
        start = time.monotonic()
        extra = sockets[web.REFUSED_HELD_MAX:]
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(s.closed.wait() for s in extra)), 5)
        took = time.monotonic() - start
        held = len(server.refused)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return held, took, sum(1 for s in sockets if s.sent)

    held, took, told = asyncio.run(scenario())
    assert took < 2.0, "the refused tabs past the cap were held"
    assert held == web.REFUSED_HELD_MAX
    assert told == web.REFUSED_HELD_MAX + 20, "every refused tab is told why"
