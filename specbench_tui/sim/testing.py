"""Helpers to run the simulator as a real subprocess in tests and benchmarks (stdlib only).

:class:`SimProcess` launches ``python -m specbench_tui.sim`` in a process group of its own, in the caller's
session (as the engine's keeper starts a server: a server in a session of its own is another scheduling group,
which can starve the measuring client), collects its stderr lines in a thread, waits for SGLang's ready
line, and always SIGKILLs the whole group on exit.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from types import TracebackType

READY_LINE = "The server is fired up and ready to roll!"


def free_port() -> int:
    """A TCP port the OS says is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid`` (Linux ``/proc``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().decode(errors="replace").rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


def group_left(pgid: int, within: float = 10.0) -> list[int]:
    """The processes of group ``pgid`` still alive after waiting up to ``within`` seconds for them to go.

    Death is not instant: a child killed by ``PR_SET_PDEATHSIG`` (or by its own ``getppid()`` poll) needs a
    scheduling slot to exit, which on a loaded machine can take seconds after its parent's exit status is
    already known. Tests that check "nothing is left" ask this, never a single look."""
    deadline = time.monotonic() + within
    left = group_pids(pgid)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = group_pids(pgid)
    return left


class SimProcess:
    """One simulator subprocess: ``with SimProcess(["--tp-size", "2"]) as sim: sim.wait_ready()``."""

    def __init__(self, args: Sequence[str] = (), *, model: str = "Qwen/Qwen3-27B", port: int | None = None,
                 profile_toml: str | None = None, env: Mapping[str, str] | None = None,
                 add_defaults: bool = True) -> None:
        self.port = port or free_port()
        argv = [sys.executable, "-m", "specbench_tui.sim"]
        if add_defaults:
            argv += ["--model-path", model, "--port", str(self.port)]
        self.argv = argv + list(args)
        self.env = dict(os.environ)
        self.env.pop("SPECBENCH_SIM_PROFILE", None)
        if profile_toml is not None:
            self.env["SPECBENCH_SIM_PROFILE_TOML"] = profile_toml
        self.env.update(env or {})
        self.lines: list[str] = []
        self.proc: subprocess.Popen[bytes] | None = None
        self.pgid = 0
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self.started_at = 0.0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> SimProcess:
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=self.env, process_group=0)
        self.pgid = self.proc.pid
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._lock:
                self.lines.append(line)
            if READY_LINE in line:
                self._ready.set()

    @property
    def stderr(self) -> str:
        with self._lock:
            return "\n".join(self.lines)

    def wait_ready(self, timeout: float = 30.0) -> float:
        """Seconds from launch to the ready line; raises ``TimeoutError`` (with the log) otherwise. The default is
        generous (about 1 s quiet): the wait ends at the line, and a loaded 2-core CI box starts processes slowly."""
        deadline = time.monotonic() + timeout
        while not self._ready.wait(0.02):
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"simulator exited with {self.proc.returncode}:\n{self.stderr}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"simulator not ready after {timeout} s:\n{self.stderr}")
        return time.monotonic() - self.started_at

    def wait_exit(self, timeout: float = 10.0) -> int:
        assert self.proc is not None
        code = self.proc.wait(timeout)
        if self._reader is not None:
            self._reader.join(2.0)
        return code

    def wait_for_line(self, text: str, timeout: float = 30.0) -> str:
        """The first stderr line containing ``text``; raises ``TimeoutError`` otherwise (generous by default: the
        wait ends at the line)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                for line in self.lines:
                    if text in line:
                        return line
            time.sleep(0.02)
        raise TimeoutError(f"no line with {text!r} after {timeout} s:\n{self.stderr}")

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signum)

    def kill(self) -> None:
        """SIGKILL the whole process group and reap the main process."""
        if self.proc is None:
            return
        try:
            os.killpg(self.pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        if self._reader is not None:
            self._reader.join(2.0)

    def __enter__(self) -> SimProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.kill()
