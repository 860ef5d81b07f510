"""The UI benchmarks' terminal (bench/_pty.py): what it waits for is found even after old output was dropped."""

from __future__ import annotations

import re
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from _pty import PtyProcess


@pytest.mark.parametrize("wait", ["bytes", "pattern"])
def test_what_is_awaited_is_found_though_older_output_was_dropped_meanwhile(wait: str) -> None:
    """A waiter that has read everything so far; then the awaited chunk comes and, the kept output being full, the
    oldest chunk is dropped in the same moment: the waiter must still read the new chunk (it used to count its
    place in the list from the front that had just moved, and missed it)."""
    app = PtyProcess([sys.executable, "-c", "import time; time.sleep(30)"], keep_bytes=100)
    try:
        found: list[float | None] = []
        for _ in range(20):
            app._append(time.monotonic(), b"x" * 10)
        after = time.monotonic()

        def waiter() -> None:
            if wait == "bytes":
                found.append(app.wait_for(b"awaited", after, 10))
            else:
                found.append(app.wait_for_pattern(re.compile(rb"aw\w+d"), after, 10))

        thread = threading.Thread(target=waiter)
        thread.start()
        time.sleep(0.2)  # the waiter has read every chunk and waits for more
        app._append(time.monotonic(), b"awaited!!!")  # one chunk in, the oldest out
        thread.join(15)
        assert found and found[0] is not None, f"{wait}: the awaited chunk came but was never read"
    finally:
        app.proc.kill()
        app.proc.wait(5)
