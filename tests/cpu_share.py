"""Who may use the test machine's cores at once: a timing test never runs beside a real server.

A real server on the CPU (vLLM's build, llama-server, SGLang 0.5.23) takes every core while it loads and serves,
its compute threads spinning between steps. A test that judges timings against a closed-form truth (the crossover
demo's B*, the context ladder's C*, an open loop's send schedule) measures the simulator, and a simulator starved
by such a server measures the host instead: CI once read eagle3-s11's speedup at concurrency 8 as below 1 where
the truth is 1.08 (B* 9.84, the report's interval (…, 8]) while the other xdist worker ran the real engines.

So the two kinds share one lock file per test session (``fcntl.flock``): a module of real-server tests holds it
shared from its first test until the worker moves to another module (its server fixture lives that long), so real
servers may still run side by side with each other and with everything else; a test marked ``timing`` holds it
exclusively for its own run, waiting for the real server of the other worker to finish its module. A second
file is the turnstile that keeps a waiting timing test from starving: every taker passes it, and a timing test holds
it while it waits, so a real-server module that starts meanwhile queues behind it instead of slipping in between.
Without pytest-xdist nothing runs beside anything and the lock is never contended.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

CPU_HUNGRY = ("llamacpp", "vllm", "sglang_real")
"""The markers of tests that run a real server on the CPU."""


LOCK_DIR = "SPECBENCH_TEST_CPU_LOCK_DIR"
"""The environment variable naming the session's lock folder: set once by the first process that loads the
conftest (pytest's main process, before it starts the xdist workers, which inherit it), removed by it at the end."""


def lock_path() -> Path:
    """The session's lock file: the same in every xdist worker of one run, distinct between runs side by side."""
    if LOCK_DIR not in os.environ:
        os.environ[LOCK_DIR] = tempfile.mkdtemp(prefix="specbench-tests-cpu-")
    folder = os.environ[LOCK_DIR]
    return Path(folder) / "cpu.lock"


class CpuShare:
    """This worker's hold on the lock: ``None``, shared (a real-server module) or exclusive (a timing test)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.turnstile = path.with_name(path.name + ".turn")
        self._fd: int | None = None
        self._mode: int | None = None
        self._module: str | None = None

    @property
    def mode(self) -> int | None:
        return self._mode

    def hold(self, mode: int | None, module: str | None = None) -> None:
        """Hold the lock in ``mode`` (``fcntl.LOCK_SH``, ``fcntl.LOCK_EX`` or ``None``: released), blocking until
        granted. A shared hold is given up and taken again when the module changes, so a timing test that waits in
        the other worker gets its turn between two real-server modules."""
        if mode == self._mode and module == self._module:
            return
        self.release()
        if mode is None:
            return
        turn = os.open(self.turnstile, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(turn, fcntl.LOCK_EX)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._fd, mode)
        finally:
            os.close(turn)
        self._mode, self._module = mode, module

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor drops its flock
        self._fd = self._mode = self._module = None
