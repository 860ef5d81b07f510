"""Helpers for the tests against SGLang 0.5.23's REAL server on CPU (tests/test_sglang_real*.py).

The environment and the tiny model come from ``tools/setup_sglang_cpu.sh``; :func:`sglang_paths` finds them (or
skips, or fails under ``SPECBENCH_REQUIRE_SGLANG=1``). :class:`RawServer` starts one server outside the product,
for the tests that read its endpoints and lines directly; the product's own runs go through the orchestrator.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from engine_helpers import real_engine_paths, wait_no_processes

from specbench_tui.engine.server import find_free_port

SETUP = "tools/setup_sglang_cpu.sh"
REQUIRE = "SPECBENCH_REQUIRE_SGLANG"
STARTUP_TIMEOUT_S = 420.0
"""A start is 60-90 s on 2 idle cores; the suite's parallel workers can make it several times slower."""

CPU_ARGS = {"device": "cpu", "max-total-tokens": 20000, "mem-fraction-static": 0.3, "enable-metrics": True,
            "decode-log-interval": 10}
"""What the server needs on a CPU-only machine (the CPU platform sizes its KV pool from the machine's RAM
without ``--max-total-tokens``), plus the metrics and the stats-line interval the product reads."""
CPU_ENV = {"SGLANG_USE_CPU_ENGINE": "1"}


def sglang_paths() -> dict[str, str]:
    return real_engine_paths(SETUP, ("SGLANG_PYTHON", "SGLANG_TINY_MODEL"), require_env=REQUIRE,
                             what="SGLang 0.5.23's server on CPU or its tiny model (about 3 min to install)")


def argv(paths: dict[str, str], port: int, *extra: str) -> list[str]:
    out = [paths["SGLANG_PYTHON"], "-m", "sglang.launch_server", "--model-path", paths["SGLANG_TINY_MODEL"],
           "--host", "127.0.0.1", "--port", str(port)]
    for key, value in CPU_ARGS.items():
        out += [f"--{key}"] if value is True else [f"--{key}", str(value)]
    return [*out, *extra]


class RawServer:
    """One real SGLang server started directly (its own process group), its output in ``log``."""

    def __init__(self, paths: dict[str, str], folder: Path, *extra: str) -> None:
        self.port = find_free_port("127.0.0.1", 31000 + (os.getpid() * 13) % 2000)
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = folder / "server.log"
        self.marker = str(folder)
        env = {**os.environ, **CPU_ENV, "SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0",
               "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0", "SPECBENCH_TEST_MARKER": self.marker}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(argv(paths, self.port, *extra), stdout=out, stderr=subprocess.STDOUT,
                                         env=env, cwd=folder, start_new_session=True)

    def wait_ready(self, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "The server is fired up and ready to roll!" in self.text():
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"SGLang exited ({self.proc.returncode}) before ready:\n{self.text()[-4000:]}")
            time.sleep(1.0)
        raise AssertionError(f"SGLang not ready within {timeout_s} s:\n{self.text()[-4000:]}")

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def get(self, path: str) -> tuple[int, str]:
        return self.request("GET", path)

    def request(self, method: str, path: str, body: dict[str, Any] | None = None,
                timeout_s: float = 120.0) -> tuple[int, str]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        wait_no_processes(self.marker, timeout_s=15)
