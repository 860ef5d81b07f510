"""Nothing lost, nothing doubled: SIGKILL at random moments with resume after each, a full disk, and a run
directory that cannot be written.

The random-kill test kills ``specbench run --headless`` N times (SPECBENCH_RANDOM_KILLS, default 5; the
bench ``bench/bench_random_kill.py`` runs 20) at seeded random moments, resumes after each, and compares the
end result with an uninterrupted run of the same sweep on the simulator's deterministic mode: the same
measurement keys, each exactly once, the same statuses and token counts, the same final configuration states.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from engine_helpers import plan_for
from reliability_helpers import (
    CONFIGS,
    KEYS_PER_CONFIG,
    MARKER_VAR,
    final_states,
    headless,
    key,
    make_sweep,
    marker_env,
    new_marker,
    records,
    seeded,
    server_pids,
    the_run_dir,
    wait_gone,
)

pytestmark = pytest.mark.e2e

COMPARED = ("status", "prompt_tokens", "completion_tokens", "output_sha", "finish_reason", "verify_ct")


def _complete(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> tuple[int, str, float]:
    started = time.monotonic()
    proc = headless(args, cwd, env)
    out = proc.communicate(timeout=timeout)[0].decode(errors="replace")
    return proc.returncode, out, time.monotonic() - started


def _summary(run_dir: Path) -> tuple[dict, dict]:
    recs = records(run_dir)
    counts = Counter(key(r) for r in recs)
    doubled = [k for k, n in counts.items() if n > 1]
    assert not doubled, f"measurements recorded more than once: {doubled}"
    return {key(r): {f: r.get(f) for f in COMPARED} for r in recs}, final_states(run_dir)


def _event_count(run_dir: Path | None) -> int:
    try:
        return (run_dir / "events.jsonl").read_bytes().count(b"\n") if run_dir else 0
    except OSError:
        return 0


def random_kill_soak(folder: Path, kills: int, seed_name: str = "random-kill", repeats: int = 1,
                     log=lambda text: None) -> dict:
    """The soak: returns what it did (also used by bench/bench_random_kill.py).

    Each kill waits for a random number of new events in ``events.jsonl`` (0 to 12: before a launch, during
    start-up, between requests, between configurations, in teardown), then a random 0-300 ms, then SIGKILL.
    """
    rng = seeded(seed_name)
    folder.mkdir(parents=True, exist_ok=True)
    sweep = make_sweep(folder)
    sweep.write_text(sweep.read_text().replace("repeats = 1", f"repeats = {repeats}"))
    marker = new_marker()
    env = marker_env(marker)

    ref_runs = folder / "reference"
    code, out, reference_s = _complete([str(sweep), "--runs-dir", str(ref_runs)], folder, env)
    assert code == 0, out
    ref_dir = the_run_dir(ref_runs)
    assert ref_dir is not None
    reference, ref_states = _summary(ref_dir)
    assert len(reference) == CONFIGS * KEYS_PER_CONFIG * repeats
    assert set(ref_states.values()) == {"done"}
    assert wait_gone(marker) == []

    runs = folder / "runs"
    run_dir: Path | None = None
    moments = []
    for number in range(kills):
        args = ["--resume", str(run_dir)] if run_dir else [str(sweep), "--runs-dir", str(runs)]
        wait_events = rng.randrange(0, 13)
        jitter = rng.uniform(0.0, 0.3)
        before = _event_count(run_dir)
        started = time.monotonic()
        engine = headless(args, folder, env)
        while engine.poll() is None and time.monotonic() - started < 60:
            current = run_dir or the_run_dir(runs)
            if _event_count(current) - before >= wait_events:
                break
            time.sleep(0.005)
        time.sleep(jitter)
        servers = len(server_pids(marker, engine.pid))
        finished_first = engine.poll() is not None
        if not finished_first:
            os.kill(engine.pid, signal.SIGKILL)
        engine.wait(10)
        assert engine.stdout is not None
        engine.stdout.close()
        after_s = time.monotonic() - started
        survivors = wait_gone(marker, engine.pid)
        assert survivors == [], f"kill {number + 1}: servers outlived SIGKILL: {survivors}"
        run_dir = run_dir or the_run_dir(runs)
        done = len({key(r) for r in records(run_dir)}) if run_dir else 0
        moments.append({"kill": number + 1, "after_s": round(after_s, 3), "after_events": wait_events,
                        "servers_up": servers, "finished_first": finished_first, "measurements": done})
        log(f"kill {number + 1}/{kills} after {after_s:.2f} s ({wait_events} new events + {jitter * 1000:.0f} ms): "
            f"{servers} server processes up, {done}/{len(reference)} measurements"
            f"{' (the run had already ended)' if finished_first else ''}")
    if run_dir is None:  # every kill landed before the run directory existed
        code, out, _ = _complete([str(sweep), "--runs-dir", str(runs)], folder, env)
        run_dir = the_run_dir(runs)
    else:
        code, out, _ = _complete(["--resume", str(run_dir)], folder, env)
    assert code == 0, out
    assert wait_gone(marker) == []
    assert run_dir is not None
    result, states = _summary(run_dir)
    assert set(result) == set(reference), (set(result) ^ set(reference))
    assert result == reference, "a measurement differs from the uninterrupted run"
    assert states == ref_states
    return {"kills": moments, "reference_s": reference_s, "run_dir": str(run_dir)}


def test_random_sigkills_then_resume_equal_an_uninterrupted_run(tmp_path):
    kills = int(os.environ.get("SPECBENCH_RANDOM_KILLS", "5"))
    report = random_kill_soak(tmp_path, kills)
    assert len(report["kills"]) == kills
    assert any(k["servers_up"] for k in report["kills"]), "no kill landed while a server was up"


# ----------------------------------------------------------------------------------------------- full disk


def _enospc_after(monkeypatch, module, name: str, calls: int) -> dict:
    original = getattr(module, name)
    state = {"calls": 0, "raised": 0}

    def failing(*args, **kwargs):
        state["calls"] += 1
        if state["calls"] > calls:
            state["raised"] += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, failing)
    return state


async def _run_in_process(tmp_path, monkeypatch, fail_after: int):
    from specbench_tui.rundir import store
    from specbench_tui.engine.orchestrator import Orchestrator
    from specbench_tui.rundir.store import RunDir

    marker = new_marker()
    monkeypatch.setenv(MARKER_VAR, marker)
    monkeypatch.delenv("SPECBENCH_SIM_PROFILE", raising=False)
    sweep = make_sweep(tmp_path)
    plan = plan_for(sweep)
    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    run_dir.write_json("run.json", {"sweep_path": str(sweep)})  # as session.prepare_run does
    state = _enospc_after(monkeypatch, store, "_write_all", fail_after)
    orchestrator = Orchestrator(plan, run_dir)
    seen: list = []
    orchestrator.subscribe(seen.append)
    started = time.monotonic()
    try:
        outcome = await orchestrator.run()
    finally:
        run_dir.close()
        monkeypatch.undo()
    return outcome, run_dir, marker, state, time.monotonic() - started


@pytest.mark.parametrize("fail_after", [seeded("enospc").randrange(3, 40)])
async def test_full_disk_stops_cleanly_and_resume_completes(tmp_path, monkeypatch, fail_after):
    outcome, run_dir, marker, state, took = await _run_in_process(tmp_path, monkeypatch, fail_after)
    assert state["raised"] >= 1, "the injected ENOSPC never fired"
    assert outcome.state == "failed"
    assert "cannot be written" in (outcome.reason or "") and "No space left on device" in (outcome.reason or "")
    assert wait_gone(marker) == [], "a server outlived the full disk"
    assert took < 30
    # Nothing half-written breaks resume: the same run directory resumes to a complete result.
    env = marker_env(marker)
    code, out, _ = _complete(["--resume", str(run_dir.path)], tmp_path, env)
    assert code == 0, out
    result, states = _summary(run_dir.path)
    assert len(result) == CONFIGS * KEYS_PER_CONFIG
    assert set(states.values()) == {"done"}
    assert wait_gone(marker) == []


async def test_full_disk_while_writing_a_server_log_stops_the_sweep(tmp_path, monkeypatch):
    from specbench_tui.engine import logpump
    from specbench_tui.engine.orchestrator import Orchestrator
    from specbench_tui.rundir.store import RunDir

    marker = new_marker()
    monkeypatch.setenv(MARKER_VAR, marker)
    monkeypatch.delenv("SPECBENCH_SIM_PROFILE", raising=False)
    sweep = make_sweep(tmp_path)
    sweep.write_text(sweep.read_text().replace("startup_timeout_s = 60", "startup_timeout_s = 5"))
    plan = plan_for(sweep)
    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())

    class FullLog:
        """The log file of a disk that fills up after 2000 bytes."""

        def __init__(self, pump, raw):
            self.pump, self.raw = pump, raw

        def write(self, data):
            self.pump.written_total = getattr(self.pump, "written_total", 0) + len(data)
            if self.pump.written_total > 2000:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.raw.write(data)

        def flush(self):
            self.raw.flush()

    original_emit = logpump.LogPump._emit
    monkeypatch.setattr(logpump.LogPump, "_emit", lambda self, raw, log: original_emit(self, raw, FullLog(self, log)))
    orchestrator = Orchestrator(plan, run_dir)
    # Without the fix every configuration waits for its start-up timeout: stop after the first one.
    orchestrator.subscribe(lambda e: orchestrator.abort(now=True) if type(e).__name__ == "ConfigFinished" else None)
    try:
        outcome = await orchestrator.run()
    finally:
        run_dir.close()
        alive = wait_gone(marker)
        # The dead pump leaves "Task exception was never retrieved": let its finaliser log now. (Left to a
        # later garbage collection it can run inside pytest's ast.parse, whose Python 3.11 traceback caret
        # code calls ast.parse again: "SystemError: AST constructor recursion depth mismatch".)
        await asyncio.sleep(0)
        gc.collect()
    assert alive == []
    assert outcome.state == "failed", outcome
    assert "cannot be written" in (outcome.reason or "")


# ------------------------------------------------------------------------------------ unwritable run directory


def test_runs_dir_under_a_regular_file_is_refused_before_any_launch(tmp_path):
    """A real unwritable place that works even as root: a path whose parent is a regular file."""
    marker = new_marker()
    sweep = make_sweep(tmp_path)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file, not a folder\n")
    code, out, _took = _complete([str(sweep), "--runs-dir", str(blocker / "runs")], tmp_path, marker_env(marker))
    assert code == 2, out
    assert "cannot create a run directory" in out and "Not a directory" in out, out
    assert "Traceback" not in out
    assert wait_gone(marker) == []
    assert blocker.read_text() == "a file, not a folder\n"


def test_run_directory_becoming_unwritable_mid_run_stops_the_sweep(tmp_path):
    marker = new_marker()
    sweep = make_sweep(tmp_path)
    runs = tmp_path / "runs"
    env = marker_env(marker)
    engine = headless([str(sweep), "--runs-dir", str(runs)], tmp_path, env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            run_dir = the_run_dir(runs)
            if run_dir and any(e for e in (run_dir / "events.jsonl").read_text().splitlines()
                               if '"ConfigFinished"' in e):
                break
            assert engine.poll() is None, engine.stdout.read().decode(errors="replace")
            time.sleep(0.02)
        logs = run_dir / "logs"
        # Nothing can be created under a file, even by root. The engine launches the next server within
        # milliseconds and may re-create the folder between our rmtree and our create: then try again.
        for _ in range(100):
            shutil.rmtree(logs, ignore_errors=True)
            try:
                with open(logs, "x") as handle:
                    handle.write("the logs folder is now a file\n")
                break
            except (FileExistsError, IsADirectoryError):
                continue
        assert logs.is_file()
        try:
            # A hang guard (a sweep that went on instead would end with 0, not 3): the stop tears a server
            # down, seconds on a loaded 2-core box.
            out = engine.communicate(timeout=60)[0].decode(errors="replace")
        except subprocess.TimeoutExpired:
            engine.kill()
            out = engine.communicate(timeout=10)[0].decode(errors="replace")
            pytest.fail(f"the engine did not stop within 60 s:\n{out}")
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(5)
    assert wait_gone(marker, engine.pid) == []
    assert engine.returncode == 3, out
    assert "cannot be written" in out and "logs" in out, out
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines() if x.strip()]
    failed = [e for e in events if e.get("type") == "ConfigFinished" and e.get("state") == "failed"]
    assert not failed, "configurations were failed one by one instead of the sweep stopping"
