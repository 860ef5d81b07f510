"""Helpers for the tests against SGLang 0.5.23's REAL server on CPU (tests/real_servers/test_sglang_real*.py).

The environment and the tiny model come from ``tools/setup_sglang_cpu.sh``; :func:`sglang_paths` finds them (or
skips, or fails under ``SPECBENCH_REQUIRE_SGLANG=1``). :class:`RawServer` starts one server outside the product,
for the tests that read its endpoints and lines directly; the product's own runs go through the orchestrator.
"""

from __future__ import annotations

import json
import os
import signal
import re
import subprocess
import sys
import threading
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


def sim_argv(port: int, *extra: str) -> list[str]:
    """The simulator with the real server's arguments (:func:`argv`) but :data:`SIM_SKIPS`."""
    out = [sys.executable, "-m", "specbench_tui.sim", "--model-path", "Qwen/Qwen3-8B", "--host", "127.0.0.1",
           "--port", str(port)]
    for key, value in CPU_ARGS.items():
        if key not in SIM_SKIPS:
            out += [f"--{key}"] if value is True else [f"--{key}", str(value)]
    return [*out, *extra]


SIM_SKIPS = frozenset({"device", "mem-fraction-static"})
"""The simulator pretends to be a GPU box: a 0.3 memory fraction leaves its pretend 8B model no room."""


class RawServer:
    """One server started directly (its own process group), its output in ``log``: SGLang's own (``paths``
    from :func:`sglang_paths`), or the simulator (``paths`` None)."""

    def __init__(self, paths: dict[str, str] | None, folder: Path, *extra: str,
                 env: dict[str, str] | None = None) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.port = find_free_port("127.0.0.1", 31000 + (os.getpid() * 13) % 2000)
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = folder / "server.log"
        self.marker = str(folder)
        env = {**os.environ, **CPU_ENV, "SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0",
               "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0", "SPECBENCH_TEST_MARKER": self.marker, **(env or {})}
        command = argv(paths, self.port, *extra) if paths is not None else sim_argv(self.port, *extra)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=folder,
                                         start_new_session=True)

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


STARTUP_MARKERS = (
    "server_args=", "Init parallel begin.", "Init parallel ends.", "Load weight begin.", "Load weight end.",
    "KV Cache is allocated.", "Memory pool end.", "max_total_num_tokens=", "Capture target decode CUDA graph begin.",
    "Capture target decode CUDA graph end.", "Uvicorn running on", "Prefill batch", "The server is fired up and ready to roll!",
)
"""The start-up lines the product or a reader meets, in SGLang 0.5.23's order (a CPU server captures no graph)."""
_STAMP = re.compile(r"^\[[^\]]*\]\s*")
INFO_KEYS = ("context_length", "max_running_requests", "max_req_input_len", "speculative_adaptive",
             "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens",
             "cuda_graph_max_bs_decode", "cuda_graph_config", "internal_states")
"""The ``/server_info`` keys the product reads (core/engines/sglang.py)."""
STATE_KEYS = ("effective_max_running_requests_per_dp", "decode_cuda_graph_bs")


def startup_sequence(text: str) -> list[str]:
    """Which :data:`STARTUP_MARKERS` the log holds, in the order they first appear."""
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines()):
        message = _STAMP.sub("", line)
        for marker in STARTUP_MARKERS:
            if marker not in seen and (message.startswith(marker) or (marker == "Uvicorn running on"
                                                                      and marker in message)):
                seen[marker] = number
    return sorted(seen, key=seen.__getitem__)


def metric_names(text: str) -> dict[str, list[str]]:
    """Each ``sglang:`` family of a ``/metrics`` text with its sorted label names. A counter is named by its
    samples' ``_total`` name (0.5.23 declares it so; older exporters declare the bare name)."""
    kinds: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE sglang:"):
            _, _, name, kind = line.split()[:4]
            kinds[name] = kind
    families: dict[str, set[str]] = {}
    for name, kind in kinds.items():
        families[name + "_total" if kind == "counter" and not name.endswith("_total") else name] = set()
    for line in text.splitlines():
        if not line.startswith("sglang:"):
            continue
        sample = re.split(r"[{ ]", line, maxsplit=1)[0]
        base = sample if sample in families else next(
            (f for f in families if sample.startswith(f) and sample[len(f):] in ("_bucket", "_sum", "_count")),
            sample)
        labels = re.findall(r'(\w+)="', line.partition("{")[2].partition("}")[0]) if "{" in line else []
        families.setdefault(base, set()).update(labels)
    return {name: sorted(labels) for name, labels in sorted(families.items())}


def capture(server: RawServer) -> dict[str, Any]:
    """What the product and the simulator comparison read from a ready server: its start-up sequence, the
    ``/server_info`` keys the product reads, ``/v1/models``, ``/flush_cache`` idle and busy, and ``/metrics``."""
    status, body = server.get("/server_info")
    assert status == 200, body
    info = json.loads(body)
    state = (info.get("internal_states") or [{}])[0]
    _, models = server.get("/v1/models")
    idle = server.request("POST", "/flush_cache")
    busy = _busy_flush(server)
    _, metrics = server.get("/metrics")
    return {
        "startup": startup_sequence(server.text()),
        "server_info_keys": sorted(k for k in INFO_KEYS if k in info),
        "internal_state_keys": sorted(k for k in STATE_KEYS if k in state),
        "server_info": {"context_length": info.get("context_length"),
                        "max_running_requests": info.get("max_running_requests"),
                        "speculative_adaptive": info.get("speculative_adaptive"),
                        "decode_cuda_graph_bs": state.get("decode_cuda_graph_bs")},
        "models_max_model_len": json.loads(models)["data"][0].get("max_model_len"),
        "flush_idle": [idle[0], idle[1].splitlines()[0] if idle[1] else ""],
        "flush_busy": [busy[0], busy[1].splitlines()[0] if busy[1] else ""],
        "metrics": metric_names(metrics),
    }


def _busy_flush(server: RawServer) -> tuple[int, str]:
    """``/flush_cache`` while a long request runs (SGLang refuses it then)."""
    body = {"text": "def fibonacci(n):", "sampling_params": {"max_new_tokens": 400, "temperature": 0,
                                                             "ignore_eos": True}}
    worker = threading.Thread(target=server.request, args=("POST", "/generate", body), daemon=True)
    worker.start()
    deadline = time.monotonic() + 60
    answer = (0, "")
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if "Decode batch" in server.text() or "Prefill batch, #new-seq: 1, #new-token: " in server.text():
            answer = server.request("POST", "/flush_cache")
            if answer[0] != 200:
                break
    worker.join(300)
    return answer
