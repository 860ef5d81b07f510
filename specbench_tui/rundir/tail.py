"""Reading a record file from a remembered offset: the whole lines written since the last read, and no more.

A :class:`Tail` keeps how far it has read a record file (the events or the results); each :meth:`Tail.lines` reads
the bytes written since (up to a byte count, when a client that attached late must stop where its stream
starts), in large blocks, and yields the complete lines. A last line without its newline (being written now, or
cut by a crash) is not consumed: the next read starts at it, so it is read once it is whole and never counted
twice; cut for good, it is ignored, never fatal. A file replaced or truncated under the reader (another inode,
or shorter than the offset) is read again from its start, and :attr:`Tail.restarted` says so, so that the
caller folds again from nothing.

The run directory's rules hold: a regular file only (a FIFO never hangs the reader), a line longer than
:data:`~specbench_tui.rundir.store.MAX_RECORD_BYTES` skipped unread.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from specbench_tui.rundir.store import MAX_RECORD_BYTES, StoreError, open_regular

BLOCK = 4 << 20
"""Bytes read per system call."""


class Tail:
    """How far one record file has been read; see the module docstring."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        """Bytes consumed: every line before it has been yielded (or skipped as too long)."""
        self.restarted = False
        """Set by :meth:`lines` when the file was replaced or truncated since the last read (read from 0)."""
        self.too_long = 0
        """Lines skipped for being longer than :data:`~specbench_tui.rundir.store.MAX_RECORD_BYTES`."""
        self._identity: tuple[int, int] | None = None
        self._skipping = False

    def lines(self, upto: int | None = None) -> Iterator[bytes]:
        """The complete lines from :attr:`offset` to ``upto`` bytes into the file (None: its end now), each with
        its newline. A missing file yields nothing; one that is not a regular file raises :class:`StoreError`."""
        for batch in self.batches(upto):
            for line in batch:
                yield line + b"\n"

    def batches(self, upto: int | None = None) -> Iterator[list[bytes]]:
        """:meth:`lines` a block at a time, each line without its newline (split in one call per block: a
        64 MB events file is 300,000 lines)."""
        self.restarted = False
        try:
            fd = open_regular(self.path)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        try:
            info = os.fstat(fd)
            identity = (info.st_dev, info.st_ino)
            if self._identity is not None and (identity != self._identity or info.st_size < self.offset):
                self.offset, self.restarted, self._skipping = 0, True, False
            self._identity = identity
            end = info.st_size if upto is None else min(upto, info.st_size)
            yield from self._read(fd, end)
        finally:
            os.close(fd)

    def _read(self, fd: int, end: int) -> Iterator[list[bytes]]:
        carry = b""
        position = self.offset
        while position < end:
            block = os.pread(fd, min(BLOCK, end - position), position)
            if not block:
                break
            position += len(block)
            data = carry + block if carry else block
            lines = data.split(b"\n")
            carry = lines.pop()  # after the last newline: a line not yet whole (or b"")
            if self._skipping and len(lines):  # the end of a line too long: passed over
                self._skipping = False
                del lines[0]
            if lines and max(map(len, lines)) > MAX_RECORD_BYTES:
                self.too_long += sum(1 for line in lines if len(line) > MAX_RECORD_BYTES)
                lines = [line for line in lines if len(line) <= MAX_RECORD_BYTES]
            if self._skipping or len(carry) > MAX_RECORD_BYTES:
                if not self._skipping:
                    self.too_long += 1
                self._skipping, carry = True, b""  # passed over unread up to its newline
            self.offset = position - len(carry)
            if lines:
                yield lines
        # A cut last line (no newline yet) stays unconsumed: it is read again once it is whole.
