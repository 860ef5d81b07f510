"""The keeper's launch gives it a process group of its own in the measuring process's session, on asyncio's loops
and on uvloop, which Ray's workers run whenever it is installed (it refuses ``process_group``: every configuration
failed on a Ray node with "unexpected kwargs: process_group"). uvloop is not a test dependency: that half runs
where it is installed (``pip install uvloop``) and is skipped elsewhere."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Coroutine
from typing import TypeVar

import pytest

from specbench_tui.engine.server import spawn_in_own_group

T = TypeVar("T")
CHILD = "import os, sys; os.write(int(sys.argv[1]), f'{os.getpgrp() == os.getpid()} {os.getsid(0)}'.encode())"


async def _child_group_and_session() -> tuple[bool, int]:
    read, write = os.pipe()
    try:
        proc = await spawn_in_own_group([sys.executable, "-c", CHILD, str(write)], stdout=write,
                                        env=dict(os.environ), pass_fds=(write,))
        await proc.wait()
        own, session = os.read(read, 100).decode().split()
        return own == "True", int(session)
    finally:
        os.close(read)
        os.close(write)


def _asyncio_run(main: Callable[[], Coroutine[object, object, T]]) -> T:
    return asyncio.run(main())


def _uvloop_run(main: Callable[[], Coroutine[object, object, T]]) -> T:
    uvloop = pytest.importorskip("uvloop")
    result: T = uvloop.run(main())
    return result


@pytest.mark.parametrize("run", [_asyncio_run, _uvloop_run], ids=["asyncio", "uvloop"])
def test_the_keeper_gets_a_group_of_its_own_in_our_session(run: Callable[..., tuple[bool, int]]) -> None:
    own_group, session = run(_child_group_and_session)
    assert own_group and session == os.getsid(0)
