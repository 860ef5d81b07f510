"""The log pump: a server's merged stdout/stderr, read as bytes, written to its log file, handed on as lines.

It reads fixed-size chunks rather than ``readline`` so that a line of any length (a 1 MB traceback, a
progress bar that never prints a newline) cannot raise ``LimitOverrunError``; a line longer than
``max_line`` bytes is cut into pieces. ``\\r`` progress bars (tqdm writes to stderr) are collapsed to
what a terminal would show: only the last state reaches the file, and intermediate states are offered
to ``on_progress`` at most every ``progress_interval_s``. Bytes are decoded per line with
``errors="replace"``, so invalid UTF-8 becomes U+FFFD instead of an exception.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

LineHandler = Callable[[int, str], None]
"""Called with (1-based line number, text without the newline)."""

CHUNK = 64 * 1024


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _visible(raw: bytes) -> bytes:
    """What a terminal shows of a line containing carriage returns: its last non-empty segment."""
    raw = raw.rstrip(b"\r")
    if b"\r" not in raw:
        return raw
    segments = [s for s in raw.split(b"\r") if s.strip()]
    return segments[-1] if segments else b""


class LogPump:
    """Copies one stream to a log file line by line and hands each line to ``on_line``."""

    def __init__(self, stream: asyncio.StreamReader, log_path: Path, on_line: LineHandler, *,
                 on_progress: Callable[[str], None] | None = None, max_line: int = 1 << 20,
                 progress_interval_s: float = 0.5) -> None:
        self._stream = stream
        self._log_path = log_path
        self._on_line = on_line
        self._on_progress = on_progress
        self._max_line = max_line
        self._progress_interval_s = progress_interval_s
        self._last_progress = 0.0
        self._buffer = bytearray()
        self.lines = 0
        """Lines handed on so far."""
        self.handler_errors = 0

    async def run(self) -> None:
        """Pump until end of file (the process closed its output); the log file is flushed as lines arrive."""
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self._log_path, "ab") as log:
            while True:
                data = await self._stream.read(CHUNK)
                if not data:
                    break
                self.feed(data, log)
                log.flush()
            if self._buffer:
                self._emit(bytes(self._buffer), log)
                self._buffer.clear()
                log.flush()

    def feed(self, data: bytes, log: BinaryIO) -> None:
        """Split ``data`` (appended to what is pending) into lines and emit the complete ones."""
        self._buffer += data
        while True:
            newline = self._buffer.find(b"\n")
            if newline < 0:
                break
            line = bytes(self._buffer[:newline])
            del self._buffer[: newline + 1]
            self._emit(line, log)
        self._trim_progress()
        while len(self._buffer) > self._max_line:
            piece = bytes(self._buffer[: self._max_line])
            del self._buffer[: self._max_line]
            self._emit(piece, log)

    def _trim_progress(self) -> None:
        """Drop progress-bar states already overwritten by a ``\\r``, offering the latest to ``on_progress``."""
        last_cr = self._buffer.rfind(b"\r")
        if last_cr <= 0 or last_cr == len(self._buffer) - 1:
            return  # a trailing \r may be the first half of a \r\n split across reads
        shown = _visible(bytes(self._buffer[:last_cr]))
        del self._buffer[: last_cr + 1]
        now = time.monotonic()
        if self._on_progress is not None and shown and now - self._last_progress >= self._progress_interval_s:
            self._last_progress = now
            self._call(self._on_progress, _decode(shown))

    def _emit(self, raw: bytes, log: BinaryIO) -> None:
        text = _decode(_visible(raw))
        log.write(text.encode("utf-8", errors="replace") + b"\n")
        self.lines += 1
        self._call(self._on_line, self.lines, text)

    def _call(self, handler: Callable[..., None], *args: object) -> None:
        """A failing handler must not stop the pump (the server would block on a full pipe)."""
        try:
            handler(*args)
        except Exception:  # noqa: BLE001 - isolation: the pump outlives any reader's bug
            self.handler_errors += 1
