"""The log pump: a server's merged stdout/stderr, read as bytes, written to its log file, handed on as lines.

It reads fixed-size chunks rather than ``readline`` so that a line of any length (a 1 MB traceback, a
progress bar that never prints a newline) cannot raise ``LimitOverrunError``; a line longer than
``max_line`` bytes is cut into pieces. ``\\r`` progress bars (tqdm writes to stderr) are collapsed to
what a terminal would show: only the last state reaches the file, and intermediate states are offered
to ``on_progress`` at most every ``progress_interval_s``. Bytes are decoded per line with
``errors="replace"``, so invalid UTF-8 becomes U+FFFD instead of an exception.

Every line goes through ``redact`` (the server's API key out) before it is written or handed on. A log file
that cannot be written (a full disk, ``logs/`` gone) never stops the pump: the error goes to
``on_write_error`` once, writing stops, and the output is still drained and handed on, since a server
blocked on a full pipe would never print its ready line nor exit.

The work is done per read, not per line: the complete lines of a chunk are split, decoded, redacted and
written at once, and handed to ``on_block`` / ``on_lines`` as one batch when that is given
(``bench/bench_logpump.py`` measures the throughput), so a server that floods its log is never held back by the
pipe. :func:`widen_pipe` makes a read up to :data:`CHUNK` bytes: fewer, bigger batches; :class:`PipeReader`
reads them straight from the pipe. Valid UTF-8 that redaction leaves alone is written and handed on as it was
read (no re-encoding). A batch reader's ``scan`` (the watch's RE2 pass) runs on a worker thread while the pump
decodes, writes and counts the same bytes: RE2 lets go of the GIL, so a second core searches meanwhile.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Protocol, cast

LineHandler = Callable[[int, str], None]
"""Called with (1-based line number, text without the newline)."""
LinesHandler = Callable[[int, list[str]], None]
"""Called with (1-based number of the first line, the lines of one read, without newlines)."""
BlockHandler = Callable[[int, int, str, bytes, object], None]
"""Called with (number of the first line, how many lines, the lines joined by ``\n``, that text as UTF-8, what
``scan`` found in those bytes or :data:`NOT_SCANNED`): a batch reader that searches the whole batch at once needs
not split, join nor encode it."""
Scan = Callable[[bytes], object]
"""A pure function of a batch's bytes (thread-safe: it runs on the pump's worker thread)."""
NOT_SCANNED = object()
"""Handed to ``on_block`` in place of the scan's result when there was none (no ``scan``, or the bytes handed on
are not the ones read: redacted, or invalid UTF-8 replaced)."""

CHUNK = 1 << 20
SCAN_ON_THREAD_MIN = 64 << 10
"""A batch this long or longer is scanned on the worker thread while the pump writes it; a shorter one (a live
server's few lines a read) is scanned where it is handed on: the hop to the thread and back costs more than the
search it would overlap."""
"""Bytes asked for per read; a pipe widened by :func:`widen_pipe` holds that much."""


def widen_pipe(fd: int, size: int = CHUNK) -> int:
    """Ask the kernel for a ``size``-byte pipe buffer on ``fd`` (Linux ``F_SETPIPE_SZ``; unprivileged up to
    ``/proc/sys/fs/pipe-max-size``, 1 MiB by default); the size granted, or 0 where it cannot be changed. A
    server's output then arrives in batches of up to ``size`` bytes instead of 64 KiB."""
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if setsize is None:
        return 0
    try:
        return int(fcntl.fcntl(fd, setsize, size))
    except OSError:
        return 0


class PipeReader:
    """The read end of a pipe, read straight into batches of up to ``n`` bytes: one ``os.read`` per batch, no
    :class:`asyncio.StreamReader` between (which reads 256 KiB at a time, pauses at 128 KiB and copies every
    byte twice more). What :class:`LogPump` needs of a stream: ``await read(n)``, ``b""`` at end of file."""

    def __init__(self, fd: int) -> None:
        """``fd``: the read end, owned from now on (:meth:`close` closes it)."""
        os.set_blocking(fd, False)
        self._fd: int | None = fd
        self._waiter: asyncio.Future[None] | None = None

    def fileno(self) -> int:
        if self._fd is None:
            raise ValueError("the pipe reader is closed")
        return self._fd

    async def read(self, n: int) -> bytes:
        """Up to ``n`` bytes, as soon as some are there; ``b""`` at end of file or once closed. Yields to the
        event loop on every call, even when data was waiting: a flood must not starve the other tasks."""
        loop = asyncio.get_running_loop()
        await asyncio.sleep(0)  # before the read: a reader cancelled here loses nothing
        while self._fd is not None:
            try:
                return os.read(self._fd, n)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                return b""
            fd = self._fd
            self._waiter = loop.create_future()
            loop.add_reader(fd, _wake, self._waiter)
            try:
                await self._waiter
            finally:
                self._waiter = None
                if self._fd is not None:
                    loop.remove_reader(fd)
        return b""

    def close(self) -> None:
        """Stop reading and close the pipe (a reader waiting gets ``b""``); safe to call more than once. Must
        run on the loop the reads run on (it removes the fd from its selector)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if self._waiter is not None:
            with contextlib.suppress(RuntimeError):
                asyncio.get_running_loop().remove_reader(fd)
            _wake(self._waiter)
        os.close(fd)

    def __del__(self) -> None:
        # Never while a read waits (the reading coroutine holds the reader): no selector knows the fd any more.
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class ByteStream(Protocol):
    """What the pump reads: :class:`asyncio.StreamReader` or :class:`PipeReader`."""

    async def read(self, n: int, /) -> bytes: ...


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

    def __init__(self, stream: ByteStream, log_path: Path, on_line: LineHandler, *,
                 on_progress: Callable[[str], None] | None = None, max_line: int = 1 << 20,
                 progress_interval_s: float = 0.5, log: BinaryIO | None = None,
                 redact: Callable[[str], str] | None = None,
                 on_write_error: Callable[[OSError], None] | None = None,
                 on_lines: LinesHandler | None = None, on_block: BlockHandler | None = None,
                 scan: Scan | None = None) -> None:
        """``log``: the log file already opened for appending (``run`` closes it); else ``run`` opens
        ``log_path``. ``on_lines``, when given, receives each read's lines as one batch instead of
        ``on_line`` receiving them one by one; ``on_block`` (which wins over both) receives the batch with its
        joined text and bytes. ``scan`` (with ``on_block``): run on each batch's bytes on a worker thread while
        the pump decodes, writes and counts them (RE2 lets go of the GIL: a second core does the search meanwhile),
        its result handed to ``on_block``."""
        self._stream = stream
        self._log_path = log_path
        self._log = log
        self._on_line = on_line
        self._on_lines = on_lines
        self._on_block = on_block
        self._scan = scan if on_block is not None else None
        self._scanner: concurrent.futures.ThreadPoolExecutor | None = None
        self._on_progress = on_progress
        self._redact = redact
        self._on_write_error = on_write_error
        self.write_error: OSError | None = None
        """The first error writing the log file; nothing is written after it."""
        self._max_line = max_line
        self._progress_interval_s = progress_interval_s
        self._last_progress = 0.0
        self._buffer = bytearray()
        self.lines = 0
        """Lines handed on so far."""
        self.handler_errors = 0

    async def run(self) -> None:
        """Pump until end of file (the process closed its output); the log file is flushed as lines arrive.
        An unwritable log file is reported to ``on_write_error``, never raised: the output is drained anyway."""
        log = self._log
        if log is None:
            try:
                self._log_path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self._log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
                log = os.fdopen(fd, "ab")
            except OSError as exc:
                self._write_failed(exc)
        sink = log if log is not None else cast(BinaryIO, _Discard())
        if self._scan is not None:
            self._scanner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="logscan")
        try:
            while True:
                data = await self._stream.read(CHUNK)
                if not data:
                    break
                self.feed(data, sink)
                self._flush(sink)
            if self._buffer:
                self._emit(bytes(self._buffer), sink)
                self._buffer.clear()
                self._flush(sink)
        finally:
            if self._scanner is not None:
                self._scanner.shutdown(wait=False, cancel_futures=True)
                self._scanner = None
            if log is not None:
                with contextlib.suppress(OSError):  # what a full disk did not take is lost: already reported
                    log.close()

    def _flush(self, log: BinaryIO) -> None:
        if self.write_error is None:
            try:
                log.flush()
            except OSError as exc:
                self._write_failed(exc)

    def _write_failed(self, exc: OSError) -> None:
        """Stop writing the log file and say so once; the lines are still handed on."""
        if self.write_error is None:
            self.write_error = exc
            if self._on_write_error is not None:
                self._call(self._on_write_error, exc)

    def feed(self, data: bytes, log: BinaryIO) -> None:
        """Split ``data`` (appended to what is pending) into lines and emit the complete ones."""
        last = data.rfind(b"\n")
        if last >= 0:
            view = memoryview(data)  # one copy of the complete lines, none of the rest
            block = b"".join((self._buffer, view[:last])) if self._buffer else data[:last]
            self._buffer = bytearray(view[last + 1:])
            if len(block) > self._max_line:  # only then can a line in it be too long (a read is smaller)
                block = _cut_long_lines(block, self._max_line)
            self._emit(block, log)
        else:
            self._buffer += data
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
            self._call(self._on_progress, self._redacted(_decode(shown)))

    def _redacted(self, text: str) -> str:
        return self._redact(text) if self._redact is not None else text

    def _emit(self, block: bytes, log: BinaryIO) -> None:
        """Emit the lines of ``block`` (complete lines, joined by ``\n``, the last one without it)."""
        if b"\r" in block:
            block = b"\n".join(_visible(line) for line in block.split(b"\n"))
        scanning = self._scanner.submit(self._scan, block) \
            if self._scanner is not None and self._scan is not None and len(block) >= SCAN_ON_THREAD_MIN else None
        try:
            raw = block.decode("utf-8")
        except UnicodeDecodeError:
            raw, valid = _decode(block), False
        else:
            valid = True
        text = self._redacted(raw)
        # Valid UTF-8 that redaction left alone is its own encoding: written and handed on as read.
        data = block if valid and text == raw else text.encode("utf-8", errors="replace")
        if self.write_error is None:
            try:
                log.write(data)
                log.write(b"\n")
            except OSError as exc:
                self._write_failed(exc)
        first = self.lines + 1
        if self._on_block is not None:
            count = text.count("\n") + 1
            self.lines += count
            self._call(self._on_block, first, count, text, data, self._scanned(scanning, block, data))
            return
        lines = text.split("\n")
        self.lines += len(lines)
        if self._on_lines is not None:
            self._call(self._on_lines, first, lines)
            return
        for number, line in enumerate(lines, start=first):
            self._call(self._on_line, number, line)

    def _scanned(self, scanning: concurrent.futures.Future[object] | None, block: bytes, data: bytes) -> object:
        """What ``scan`` found in ``data``: the worker's result when it scanned these very bytes, else the scan
        run here; :data:`NOT_SCANNED` without a scan or when it failed (the reader then searches itself)."""
        if self._scan is None:
            return NOT_SCANNED
        try:
            if scanning is not None and data is block:
                return scanning.result()
            if scanning is not None:
                scanning.cancel()
            return self._scan(data)
        except Exception:  # noqa: BLE001 - isolation: the pump outlives any reader's bug
            self.handler_errors += 1
            return NOT_SCANNED

    def _call(self, handler: Callable[..., None], *args: object) -> None:
        """A failing handler must not stop the pump (the server would block on a full pipe)."""
        try:
            handler(*args)
        except Exception:  # noqa: BLE001 - isolation: the pump outlives any reader's bug
            self.handler_errors += 1


def _cut_long_lines(block: bytes, max_line: int) -> bytes:
    """``block`` with every line longer than ``max_line`` bytes cut into lines of ``max_line`` (as the pending
    bytes of a line without its end are cut): a long line can end in one read, or its end can come after a
    pending part that was just under the limit."""
    lines = block.split(b"\n")
    if all(len(line) <= max_line for line in lines):
        return block
    return b"\n".join(line[at:at + max_line] for line in lines for at in range(0, max(len(line), 1), max_line))


class _Discard:
    """Where the lines go when the log file could not even be opened."""

    def write(self, data: bytes) -> int:
        return len(data)

    def flush(self) -> None:
        return None
