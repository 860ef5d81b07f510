"""The app's output read as a terminal shows it (a bench helper, on pyte's terminal emulator).

The key benches find a key's answer in the raw bytes the app writes: fast enough to run beside the app without
taking its CPU, and exact as long as the answer's text reaches the terminal in one run of bytes. A text drawn in
pieces (part of a line, a cursor move, the rest) is on the screen all the same but never in the bytes in one
piece: raw matching counts it as a press never answered. :func:`first_shown` replays the whole output through a
terminal emulator after the run and says when each text was first on the screen, so that a press the raw match
missed is told apart: drawn in pieces (its real time), or never on the screen (a real miss).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyte


def screen_pattern(expect: bytes | re.Pattern[bytes]) -> re.Pattern[str]:
    """What a raw-bytes expectation looks for, as a pattern for one line of the screen's text (escape sequences
    a raw pattern allows between its words are never in the screen's text, so they simply never match)."""
    if isinstance(expect, bytes):
        return re.compile(re.escape(expect.decode()))
    return re.compile(expect.pattern.decode(), expect.flags & re.IGNORECASE)


def first_shown(chunks: Sequence[tuple[float, bytes]], waits: Sequence[tuple[float, float, re.Pattern[str]]],
                cols: int, rows: int) -> list[float | None]:
    """For each wait ``(after, until, pattern)``: the arrival time of the first chunk (stamped ``after`` or later,
    ``until`` at the latest) whose drawing put ``pattern`` on a line of the screen where no line had it just
    before, else None. An answer is a change: a text already on screen when the wait starts (the last press's)
    counts only once it was drawn again after being gone. ``chunks`` is the whole output from the first byte
    (arrival time, bytes), in order."""
    screen = pyte.Screen(cols, rows)
    stream = pyte.ByteStream(screen)
    found: list[float | None] = [None] * len(waits)
    order = sorted(range(len(waits)), key=lambda i: waits[i][0])
    first_open = 0  # waits before this one (in order of start) have ended or been found

    def shown(pattern: re.Pattern[str], lines: list[str]) -> bool:
        return any(pattern.search(line) for line in lines)

    for at, data in chunks:
        if not data:
            break
        while first_open < len(order) and (found[order[first_open]] is not None or waits[order[first_open]][1] < at):
            first_open += 1
        open_now = [i for i in order[first_open:] if waits[i][0] <= at <= waits[i][1] and found[i] is None]
        before = screen.display if open_now else []
        stream.feed(data)
        if open_now:
            after = screen.display
            for index in open_now:
                pattern = waits[index][2]
                if shown(pattern, after) and not shown(pattern, before):
                    found[index] = at
    return found
