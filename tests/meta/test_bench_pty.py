"""The UI benchmarks' terminal (bench/_pty.py): what it waits for is found even after old output was dropped."""

from __future__ import annotations

import os
import re
import sys
import threading
import time

import pytest

from repo_paths import REPO

sys.path.insert(0, str(REPO / "bench"))

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


def test_an_answer_drawn_in_pieces_is_read_from_the_screen_and_one_never_drawn_stays_a_miss() -> None:
    """A program in a real pty writes "Results sorted by TTFT" in two pieces with a cursor move between them (as a
    compositor writing a line's chops does), much later a row's line, and never "Theme: x". The raw match cannot
    see the first text; replayed through the terminal emulator (``bench/_screen.py``), the first is on screen from
    the second piece's chunk on, the row from its own, and the third is never there."""
    from _screen import first_shown, screen_pattern
    from bench_ui import row_with

    script = (r"import sys, time; w = sys.stdout.write; f = sys.stdout.flush;"
              r"w('\x1b[2J\x1b[5;10HResults sor'); f(); time.sleep(0.3);"
              r"w('\x1b[1;1Hx\x1b[5;21Hted by TTFT'); f(); time.sleep(0.3);"
              r"w('\x1b[9;1H ddtree-b3 \x1b[38;2;1;2;3m  skipped'); f(); time.sleep(5)")
    app = PtyProcess([sys.executable, "-c", script], cols=60, rows=12)
    try:
        start = time.monotonic()
        assert app.wait_for(b"skipped", start, 10) is not None
        assert app.wait_for(b"Results sorted by TTFT", start, 0.1) is None  # in pieces: raw matching misses it
        expectations: list[bytes | re.Pattern[bytes]] = [b"Results sorted by TTFT", row_with("ddtree-b3", "skipped"),
                                                          b"Theme: x"]
        waits = [(start, start + 10, screen_pattern(e)) for e in expectations]
        sorted_at, row_at, theme_at = first_shown(app.chunks, waits, 60, 12)
        second_piece = next(at for at, data in app.chunks if b"ted by TTFT" in data)
        assert sorted_at == second_piece
        row_chunk = next(at for at, data in app.chunks if b"skipped" in data)
        assert row_at == row_chunk
        assert theme_at is None
        # An answer is a change: a text already on screen when the wait starts does not answer it, though the
        # chunks after it keep it on screen (the last press's toast is not the next press's answer).
        assert first_shown(app.chunks, [(second_piece + 0.01, start + 10, screen_pattern(b"Results sorted"))],
                           60, 12) == [None]
    finally:
        app.close()


def test_a_press_is_stamped_before_it_is_written_so_an_answer_never_comes_before_its_key(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The terminal echoes what is typed at once (a cooked pty): the answer is in the output the moment the key is
    written. The bench's thread is then held up for 0.2 s right after its write (as a busy box preempts it): the
    press must still be stamped before its answer, and the answer found. Stamped after the write, the echo was
    stamped first and the press counted as never answered."""
    import _pty

    app = PtyProcess([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        real_write = os.write

        def preempted(fd: int, data: bytes) -> int:
            written = real_write(fd, data)
            if fd == app.master:
                time.sleep(0.2)
            return written

        monkeypatch.setattr(_pty.os, "write", preempted)
        sent = app.send(b"ping")
        seen = app.wait_for(b"ping", sent, 2)
        assert seen is not None and 0 <= seen - sent < 0.2
    finally:
        app.close()
