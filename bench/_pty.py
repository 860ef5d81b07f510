"""Running a program in a real pseudo-terminal and watching it from outside (a bench helper, stdlib only).

:class:`PtyProcess` starts a command on the slave side of a fresh pty (its own session, a fixed window size,
``TERM=xterm-256color``), drains everything it writes on a reader thread (each read stamped with
``time.monotonic()``), and offers what the UI benchmarks measure from outside the app:

- :meth:`wait_for`: when given bytes first appear in the output after a moment (key-press-to-screen);
- :meth:`cpu_seconds`: user+system CPU of the process's threads from ``/proc/PID/task/*/stat``, optionally
  leaving out threads by kernel name (the bench's own load generator);
- :meth:`peak_rss_mb`: ``VmHWM`` of ``/proc/PID/status``.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import threading
import time
from collections.abc import Mapping, Sequence

TICKS = os.sysconf("SC_CLK_TCK")


class PtyProcess:
    def __init__(self, argv: Sequence[str], *, cols: int = 160, rows: int = 48,
                 env: Mapping[str, str] | None = None, cwd: str | None = None, keep_bytes: int = 4 << 20) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        full_env = dict(os.environ)
        full_env.update({"TERM": "xterm-256color", "COLORTERM": "truecolor"})
        for variable in ("COLUMNS", "LINES"):
            full_env.pop(variable, None)
        full_env.update(env or {})
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(list(argv), stdin=slave, stdout=slave, stderr=slave, env=full_env, cwd=cwd,
                                     start_new_session=True, close_fds=True)
        os.close(slave)
        self.master = master
        self.pid = self.proc.pid
        self.chunks: list[tuple[float, bytes]] = []
        self.dropped = 0
        """Chunks dropped from the front of ``chunks`` so far (the readers' positions count from the first ever)."""
        self.total_bytes = 0
        self._keep = keep_bytes
        self._kept = 0
        self._lock = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True, name="pty-reader")
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 1 << 16)
            except OSError:
                data = b""
            self._append(time.monotonic(), data)
            if not data:
                return

    def _append(self, at: float, data: bytes) -> None:
        """Keep a chunk read at ``at`` (empty: the end), dropping the oldest beyond ``keep_bytes``."""
        with self._lock:
            self.chunks.append((at, data))
            self.total_bytes += len(data)
            self._kept += len(data)
            while self._kept > self._keep and len(self.chunks) > 1:
                self._kept -= len(self.chunks[0][1])
                del self.chunks[0]
                self.dropped += 1
            self._lock.notify_all()

    def send(self, data: bytes) -> float:
        """Write ``data`` to the terminal (as typed keys); returns the moment just before it was written. (Stamped
        after the write, a bench preempted right after it by a busy box stamped its press after the answer had
        come and been stamped by the reader thread: an answer "before" its key, never seen, or one read 0-3 ms
        after it.)"""
        sent = time.monotonic()
        os.write(self.master, data)
        return sent

    def wait_for(self, needle: bytes, after: float, timeout: float) -> float | None:
        """The arrival time of the first output chunk after ``after`` that completes ``needle``, or None."""
        deadline = time.monotonic() + timeout
        seen = 0  # chunks read so far, counted from the first ever (old ones are dropped from the front)
        tail = b""
        with self._lock:
            while True:
                seen, unread = self._unread(seen)
                for at, data in unread:
                    seen += 1
                    if at < after:
                        continue
                    if not data:
                        return None
                    if needle in tail + data:
                        return at
                    tail = (tail + data)[-len(needle):]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._lock.wait(remaining)

    def _unread(self, seen: int) -> tuple[int, list[tuple[float, bytes]]]:
        """Where the chunks not yet read start (counted from the first ever; those dropped meanwhile are skipped)
        and those chunks (under the lock)."""
        start = max(seen, self.dropped)
        return start, self.chunks[start - self.dropped:]

    def wait_for_pattern(self, pattern: re.Pattern[bytes], after: float, timeout: float) -> float | None:
        """The arrival time of the first output chunk after ``after`` where ``pattern`` is found (in that chunk
        joined to the 4 KiB before it), or None."""
        deadline = time.monotonic() + timeout
        seen = 0
        tail = b""
        with self._lock:
            while True:
                seen, unread = self._unread(seen)
                for at, data in unread:
                    seen += 1
                    if at < after:
                        continue
                    if not data:
                        return None
                    if pattern.search(tail + data):
                        return at
                    tail = (tail + data)[-4096:]
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._lock.wait(remaining)

    def output_since(self, after: float) -> bytes:
        with self._lock:
            return b"".join(d for t, d in self.chunks if t >= after)

    def threads(self) -> dict[int, tuple[str, float]]:
        """{tid: (kernel name, CPU seconds)} of the process's threads now."""
        found = {}
        base = f"/proc/{self.pid}/task"
        try:
            tids = os.listdir(base)
        except OSError:
            return found
        for tid in tids:
            try:
                with open(f"{base}/{tid}/stat", "rb") as fh:
                    raw = fh.read().decode(errors="replace")
            except OSError:
                continue
            name = raw[raw.index("(") + 1: raw.rindex(")")]
            fields = raw[raw.rindex(")") + 2:].split()
            found[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / TICKS)
        return found

    def cpu_seconds(self, exclude: Sequence[str] = ()) -> float:
        """CPU seconds of the process so far, less threads whose kernel name is in ``exclude`` (live ones)."""
        return sum(cpu for name, cpu in self.threads().values() if name not in exclude)

    def peak_rss_mb(self) -> float | None:
        try:
            with open(f"/proc/{self.pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def rss_mb(self) -> float | None:
        try:
            with open(f"/proc/{self.pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        """Kill the process group if it is still there, and close the terminal."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        self._reader.join(2)
        try:
            os.close(self.master)
        except OSError:
            pass

    def __enter__(self) -> PtyProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
