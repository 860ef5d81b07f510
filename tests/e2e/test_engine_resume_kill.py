"""SIGKILL the engine mid-sweep: no server survives it, and resume loses and repeats nothing (done-when test 2)."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import cast

import pytest
from engine_helpers import (
    headless_engine,
    proc_stat,
    processes_with_env,
    record_key,
    wait_no_processes,
)
from sweep_builder import dflash_configs, sim_profile, sim_sweep

pytestmark = pytest.mark.e2e

PROFILE = sim_profile(tok_s=400.0, accept_length=2.0, ttft_ms=10.0, time_scale=None, seed=3)

SWEEP = sim_sweep(
    "kill-resume", sweep={"gpus": 2, "repeats": 2, "warmup": 1},
    engine={"startup_timeout_s": 60, "shutdown_grace_s": 5, "gpu_release_timeout_s": 1},
    server_args={"context-length": 8192}, configs=dflash_configs(),
    workloads=[{"name": "code", "kind": "code", "items": ["fibonacci", "quicksort"], "max_new_tokens": 64},
               {"name": "math", "kind": "arithmetic", "count": 1, "max_new_tokens": 64}])

EXPECTED = 3 * (2 * 2 + 1 * 2)
KILL_AFTER = 8
"""Records before the kill: the first configuration done, the second one part-way through."""

STALL_S = 120.0
"""How long an engine may show no progress at all (no new record, no server started or stopped) before the
test gives up on it: the default ``stall_timeout_s`` after which the engine itself calls a silent server
stalled. The test measures no speed, so it waits for states, never for a guess at how fast the machine is
(a fixed 40 s deadline to reach 8 records, and 60 s for the resumed run, failed under CPU contention, when
the same steps simply took longer); this only turns a hang into a failure."""


def _records(run_dir: Path) -> list[dict]:
    out = []
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line torn by the kill is ignored, as resume does
    return out


class _Engine:
    """A headless engine subprocess whose output is drained in a thread (a full pipe would block it)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        stdout = cast(io.BufferedReader, self.proc.stdout)  # Popen's pipe, buffered (bufsize -1): a BufferedReader
        for chunk in iter(lambda: stdout.read1(65536), b""):
            self._chunks.append(chunk)

    def output(self) -> str:
        if self.proc.poll() is not None:
            self._reader.join(5.0)
        return b"".join(self._chunks).decode(errors="replace")

    def servers(self, marker: str) -> list[int]:
        """Live servers this engine launched (its children that carry ``marker``)."""
        return [pid for pid in processes_with_env(marker) if (stat := proc_stat(pid)) and stat[1] == self.proc.pid]


class _Progress:
    """Fails the test when the observed state has not changed for :data:`STALL_S` seconds."""

    def __init__(self) -> None:
        self.state: object = None
        self.since = time.monotonic()

    def check(self, state: object, engine: _Engine) -> None:
        if state != self.state:
            self.state, self.since = state, time.monotonic()
        assert time.monotonic() - self.since < STALL_S, (
            f"no progress for {STALL_S:.0f} s (records, servers: {state})\n{engine.output()}")


def _run_dir(runs: Path) -> Path | None:
    found = list(runs.glob("*/results.jsonl")) if runs.exists() else []
    return found[0].parent if found else None


def _kill_mid_sweep(engine: _Engine, runs: Path, marker: str) -> tuple[Path, list[int]]:
    """Wait until ``KILL_AFTER`` records are written and a server is up, then SIGKILL the engine.

    The engine is frozen (SIGSTOP) while both are checked and then killed, so the state seen is the state
    it dies in: it cannot finish a configuration and stop its server between the look and the kill (on a
    starved machine the look can come just as a configuration ends). Returns the run directory and the
    servers that were up."""
    progress = _Progress()
    while True:
        assert engine.proc.poll() is None, f"the engine ended before the kill:\n{engine.output()}"
        run_dir = _run_dir(runs)
        count = len(_records(run_dir)) if run_dir else 0
        servers = engine.servers(marker)
        if run_dir is not None and count >= KILL_AFTER and servers:
            engine.proc.send_signal(signal.SIGSTOP)
            count, servers = len(_records(run_dir)), engine.servers(marker)
            if count >= KILL_AFTER and servers:
                engine.proc.send_signal(signal.SIGKILL)  # a stopped process dies of SIGKILL too
                return run_dir, servers
            engine.proc.send_signal(signal.SIGCONT)  # its server was stopping: wait for the next one
        progress.check((count, tuple(servers)), engine)
        time.sleep(0.02)


def _wait_exit(engine: _Engine, run_dir: Path, marker: str) -> int:
    progress = _Progress()
    while engine.proc.poll() is None:
        progress.check((len(_records(run_dir)), tuple(engine.servers(marker))), engine)
        time.sleep(0.05)
    return engine.proc.returncode


def test_sigkill_mid_sweep_then_resume(tmp_path, sweep_file):
    marker = str(tmp_path)
    path = sweep_file(SWEEP, PROFILE)
    runs = tmp_path / "runs"
    engine = _Engine(headless_engine([str(path), "--runs-dir", str(runs)], tmp_path))
    try:
        run_dir, servers = _kill_mid_sweep(engine, runs, marker)
        assert servers, "a server should be running when the engine is killed"
        engine.proc.wait(30)
    finally:
        if engine.proc.poll() is None:
            engine.proc.kill()
    survivors = wait_no_processes(marker)  # children killed by their parent-death signal still exiting
    assert survivors == [], f"server processes outlived the engine: {survivors}"

    before = _records(run_dir)
    assert KILL_AFTER <= len(before) < EXPECTED
    resumed = _Engine(headless_engine(["--resume", str(run_dir)], tmp_path))
    try:
        code = _wait_exit(resumed, run_dir, marker)
    finally:
        if resumed.proc.poll() is None:
            resumed.proc.kill()
    output = resumed.output()
    assert code == 0, output
    assert "(resumed)" in output

    after = _records(run_dir)
    counts = Counter(record_key(r) for r in after)
    assert max(counts.values()) == 1, [k for k, n in counts.items() if n > 1]
    assert len(counts) == EXPECTED
    kept = {record_key(r): r for r in after}
    for record in before:
        assert kept[record_key(record)] == record, "a completed measurement was lost or rewritten"
    not_measured = [r for r in after if r["status"] != "ok" or not (r["decode_tps"] or 0) > 0]
    assert not_measured == [], not_measured
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    finished = [e for e in events if e["type"] == "ConfigFinished"]
    assert sorted(e["state"] for e in finished) == ["done"] * 3
    assert wait_no_processes(marker) == []
