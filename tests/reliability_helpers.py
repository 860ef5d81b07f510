"""Shared by the reliability and security tests: a tiny deterministic sweep, a headless engine subprocess,
and the server processes it launched, found by a marker in their environment (the engine passes its
environment to every server, and the simulator passes it to its scheduler and detokenizer children)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import time
import uuid
from pathlib import Path

from engine_helpers import headless_engine, processes_where, record_key, wait_until_none, write_sweep

MARKER_VAR = "SPECBENCH_TEST_MARKER"

PROFILE = """
seed = 3
[deterministic]
enabled = true
tok_s = 1500.0
accept_length = 2.0
ttft_ms = 5.0
[output]
eos = false
[shutdown]
poll_s = 0.05
"""

SWEEP = """
[sweep]
name = "reliability"
gpus = 1
repeats = 1
warmup = 0

[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = {port}
startup_timeout_s = 60
stall_timeout_s = 30
shutdown_grace_s = 3
gpu_release_timeout_s = 1
{engine_extra}

[server.args]
model-path = "Qwen/Qwen3-8B"
{server_extra}

[[configs]]
name = "ar"
algorithm = "autoregressive"
args = { tp-size = 1 }

[[configs]]
name = "dflash-b{budget}"
algorithm = "dflash"
matrix = { budget = [8, 16] }
[configs.args]
speculative-algorithm = "DFLASH"
speculative-draft-model-path = "z-lab/Qwen3-8B-DFlash-b16"
speculative-num-draft-tokens = "{budget}"

[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci", "quicksort"]
max_new_tokens = {max_new_tokens}

[[workloads]]
name = "math"
kind = "arithmetic"
count = 1
max_new_tokens = {max_new_tokens}
"""

CONFIGS = 3
KEYS_PER_CONFIG = 3  # code: 2 items, math: 1 item, 1 repeat


def sweep_text(*, engine_extra: str = "", server_extra: str = "", max_new_tokens: int = 48) -> str:
    return (SWEEP.replace("{engine_extra}", engine_extra).replace("{server_extra}", server_extra)
            .replace("{max_new_tokens}", str(max_new_tokens)))


def make_sweep(folder: Path, **kwargs) -> Path:
    return write_sweep(folder, sweep_text(**kwargs), PROFILE)


def marker_env(marker: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env[MARKER_VAR] = marker
    env.pop("SPECBENCH_SIM_PROFILE", None)
    env.update(extra or {})
    return env


def new_marker() -> str:
    return f"specbench-test-{uuid.uuid4().hex}"


def marked(marker: str, exclude: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Live (non-zombie) processes whose environment holds ``MARKER_VAR=marker``."""
    needle = f"{MARKER_VAR}={marker}".encode()
    return processes_where(lambda environ: needle in environ.split(b"\0"), exclude, dead=("Z", "X"))


def server_pids(marker: str, engine_pid: int | None = None) -> list[int]:
    """The servers' processes (the engine itself, which carries the marker too, left out)."""
    return marked(marker, {engine_pid} if engine_pid else set())


def wait_gone(marker: str, engine_pid: int | None = None, timeout_s: float = 10.0) -> list[int]:
    """Survivors after ``timeout_s`` (SIGKILLed afterwards so a failing test leaves nothing behind)."""
    return wait_until_none(lambda: server_pids(marker, engine_pid), timeout_s)


def wait_for(predicate, timeout_s: float, poll_s: float = 0.02, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


def headless(args: list[str], cwd: Path, env: dict[str, str], tui: bool = False) -> subprocess.Popen[bytes]:
    """``specbench run ... --headless`` as a subprocess (its own session, like a login shell's job)."""
    return headless_engine(args, cwd, env, tui=tui, new_session=True)


def _jsonl(path: Path) -> list[dict]:
    """The objects of a JSON-lines file; lines torn by a kill (resume ignores them too) left out."""
    out: list[dict] = []
    if not path.exists():
        return out
    for line in path.read_text(errors="replace").splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(data, dict):
            out.append(data)
    return out


def records(run_dir: Path) -> list[dict]:
    return _jsonl(run_dir / "results.jsonl")


def events(run_dir: Path) -> list[dict]:
    return _jsonl(run_dir / "events.jsonl")


key = record_key


def final_states(run_dir: Path) -> dict[str, str]:
    """The last ConfigFinished state of each configuration."""
    return {e["config_id"]: e["state"] for e in events(run_dir) if e.get("type") == "ConfigFinished"}


def the_run_dir(runs: Path) -> Path | None:
    found = sorted(runs.glob("*/events.jsonl")) if runs.exists() else []
    return found[0].parent if found else None


def seeded(name: str) -> random.Random:
    """A random source seeded from SPECBENCH_TEST_SEED (default fixed) and the test's name."""
    seed = os.environ.get("SPECBENCH_TEST_SEED", "20240611")
    return random.Random(f"{seed}:{name}")


class TerminalRun:
    """``specbench run SWEEP`` (plus ``extra``) on a pseudo-terminal of 120×36, as over SSH, with ``marker`` in its
    environment; what it writes is drained into :attr:`chunks` by a thread of its own. ``close`` closes the
    terminal (the caller stops the process first)."""

    def __init__(self, sweep: Path, runs_dir: Path, marker: str, extra: tuple[str, ...] = (),
                 env: dict[str, str] | None = None) -> None:
        import pty
        import sys
        import threading

        self.master, slave = pty.openpty()
        full_env = {**marker_env(marker, env), "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "36"}
        self.proc = subprocess.Popen([sys.executable, "-m", "specbench_tui", "run", str(sweep), "--runs-dir",
                                      str(runs_dir), "--no-mouse", *extra], stdin=slave, stdout=slave,
                                     stderr=slave, env=full_env, start_new_session=True, close_fds=True)
        os.close(slave)
        self.chunks: list[bytes] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.chunks.append(data)

    @property
    def output(self) -> bytes:
        return b"".join(self.chunks)

    def close(self) -> None:
        os.close(self.master)
