"""End to end against a REAL llama.cpp ``llama-server`` (issue 10), through the same engine code the product uses.

Needs the binary and the tiny model pair that ``tools/setup_llama_server.sh`` builds into
``${SPECBENCH_CACHE:-~/.cache/specbench}`` (5-17 min the first time on 2 cores, about 1 s afterwards). Without
them every test here is skipped with that command in the reason; with ``SPECBENCH_REQUIRE_LLAMACPP=1`` (CI) a
missing binary is a failure instead. Select with ``-m llamacpp``.

What is asserted is what the real server guarantees (docs/real-engines.md): counts and acceptance are exact
and deterministic (greedy), speed is not (shared 2-core machine), so no test asserts a speedup.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from engine_helpers import (
    md_table,
    of_type,
    plan_for,
    real_engine_paths,
    run_plan,
    wait_no_processes,
    write_sweep,
)

from repo_paths import REPO
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    GpuSampled,
    log_lines,
    MeasurementRecorded,
    ServerLaunching,
    ServerReady,
    ServerStopped,
    WorkloadFinished,
    WorkloadNotRun,
)
from specbench_tui.engine.orchestrator import Orchestrator
from specbench_tui.report.formats import render
from specbench_tui.report.load import load_run
from specbench_tui.rundir.store import RunDir

pytestmark = pytest.mark.llamacpp

SETUP = "tools/setup_llama_server.sh"


@pytest.fixture(scope="module")
def llama() -> dict[str, str]:
    return real_engine_paths(SETUP, ("LLAMA_SERVER", "TINY_TARGET_GGUF", "TINY_DRAFT_GGUF"),
                             require_env="SPECBENCH_REQUIRE_LLAMACPP",
                             what="llama-server or the tiny GGUF models (5-17 min to build the first time, cached in "
                                  "~/.cache/specbench)")


def _sweep(folder: Path, llama: dict[str, str], configs: str, workload: str, marker: str) -> Path:
    text = f"""
[sweep]
name = "llamacpp-test"
baseline = "baseline"
warmup = 1

[engine]
profile = "llamacpp"
launcher = "command"
command = ["{llama['LLAMA_SERVER']}"]
port_base = {{port}}
startup_timeout_s = 60
stall_timeout_s = 30
request_timeout_s = 120
shutdown_grace_s = 5

[server.args]
model = "{llama['TINY_TARGET_GGUF']}"
ctx-size = 2048
parallel = 1
threads = 1

[server.env]
SPECBENCH_TEST_MARKER = "{marker}"
{configs}
{workload}
"""
    return write_sweep(folder, text)


BASELINE = """
[[configs]]
name = "baseline"
"""


def _draft(n: int, draft: str) -> str:
    return f"""
[[configs]]
name = "draft-n{n}"
[configs.args]
model-draft = "{draft}"
spec-type = "draft-simple"
spec-draft-n-max = {n}
"""


NGRAM = """
[[configs]]
name = "ngram"
[configs.args]
spec-type = "ngram-simple"
spec-ngram-simple-size-n = 2
spec-ngram-simple-size-m = 8
"""

CODE = """
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci", "trie"]
max_new_tokens = 96
ignore_eos = true
"""


async def test_sweep_measures_acceptance_against_real_llama_server(tmp_path, llama):
    marker = str(tmp_path)
    path = _sweep(tmp_path / "sweep", llama, BASELINE + _draft(4, llama["TINY_DRAFT_GGUF"]) + NGRAM, CODE, marker)
    outcome, events, run_dir, _ = await run_plan(plan_for(path), tmp_path / "runs")
    assert outcome.state == "completed", outcome
    finished = {e.name: e for e in of_type(events, ConfigFinished)}
    assert {n: f.state for n, f in finished.items()} == {n: ConfigState.DONE for n in ("baseline", "draft-n4", "ngram")}

    # Launch: long flags, --metrics added by the profile, no GPU taken on a machine without one.
    launches = {e.config_id: e for e in of_type(events, ServerLaunching)}
    for launch in launches.values():
        assert launch.argv[0] == llama["LLAMA_SERVER"] and "--metrics" in launch.argv
        assert launch.argv[-4:-2] == ("--host", "127.0.0.1")
    # Readiness from /health; the context is the slot's (ctx-size / parallel) from /props.
    ready = of_type(events, ServerReady)
    assert len(ready) == 3 and all(r.context_length == 2048 and 0 < r.startup_s < 30 for r in ready)

    by_config: dict[str, list[dict]] = {}
    names = {e.config_id: e.name for e in of_type(events, ServerLaunching)}
    for event in of_type(events, MeasurementRecorded):
        by_config.setdefault(names[event.config_id], []).append(event.record)
    for name, records in by_config.items():
        assert len(records) == 2, name
        for record in records:
            assert record["status"] == "ok", record
            assert record["completion_tokens"] == 96 and record["finish_reason"] == "length"
            assert record["prompt_tokens"] > 0 and record["ttft_s"] > 0 and record["e2e_s"] >= record["ttft_s"]
    # Acceptance: exactly 1 for the baseline (no draft_n in timings), > 1 with a draft model.
    for record in by_config["baseline"]:
        assert record["accept_length"] == 1.0 and record["verify_ct"] == 96 and record["accept_rate"] is None
    for record in by_config["draft-n4"]:
        assert record["accept_length"] > 1.3 and record["verify_ct"] < 96
        assert 0 < record["accept_rate"] <= 1
    # Greedy speculation is lossless: the same text as the baseline, item by item.
    base = {r["item"]: r["output_sha"] for r in by_config["baseline"]}
    assert all(base[r["item"]] == r["output_sha"] for r in by_config["draft-n4"] + by_config["ngram"])

    # The server's own figures: /metrics counters diffed around the measured requests, and the log lines.
    logs = {names[e.config_id]: e.server_log for e in of_type(events, WorkloadFinished)}
    assert logs["baseline"]["source"] == "metrics" and logs["baseline"]["accept_length"] == 1.0
    assert logs["baseline"]["drafts"] == 0 and logs["baseline"]["lines"] == 0
    draft = logs["draft-n4"]
    assert draft["accept_length"] > 1.3 and draft["drafts"] > 0
    # llama-server prints a request's `draft acceptance` line after the response is sent, so under load the last
    # request's line can land after the workload's window closes: one or both lines, never more, never none.
    assert 1 <= draft["lines"] <= 2
    assert draft["accepted_tokens"] == sum(round(r["completion_tokens"] - r["verify_ct"])
                                           for r in by_config["draft-n4"])
    assert draft["log_accept_length"] is not None and draft["log_accept_length"] > 1
    draft_id = next(cid for cid, n in names.items() if n == "draft-n4")
    assert any("draft acceptance =" in e.line for e in log_lines(events) if e.config_id == draft_id)
    assert "draft acceptance =" in run_dir.log_path("draft-n4", draft_id).read_text()

    # No GPU on this machine: said once, with an empty sample, so the GPU panel shows "no GPU visible".
    assert [e.samples for e in of_type(events, GpuSampled)] == [()]

    # Teardown: SIGTERM once, exit 0, nothing left.
    stopped = of_type(events, ServerStopped)
    assert len(stopped) == 3 and all(s.exit_code == 0 and not s.leftover_pids for s in stopped), stopped
    assert wait_no_processes(marker) == []


# llama-server's own per-request line (tools/server, docs/real-engines.md §4), read here with its own regex.
_DRAFT_LINE = re.compile(r"draft acceptance = (\d+\.\d{5}) \( *(\d+) accepted / *(\d+) generated\), "
                         r"mean len = +(\d+\.\d{2})$")


def _server_lines(log: str, measured: int) -> list[tuple[int, int, float]]:
    """(accepted, generated, mean len) of the last ``measured`` requests' ``draft acceptance`` lines (the
    warm-up's comes first), from llama-server's own log text."""
    found = [m for m in (_DRAFT_LINE.search(line) for line in log.splitlines()) if m]
    return [(int(m.group(2)), int(m.group(3)), float(m.group(4))) for m in found[len(found) - measured:]]


def _num(cell: str) -> float:
    return float(cell.split()[0].rstrip("^~"))


async def test_report_shows_llamacpps_own_figures_beside_ours(tmp_path, llama):
    """Issue 27: the results and acceptance tables (md, json) and the headless line show llama-server's own
    figures under their names (acceptance length per drafting step, from llamacpp:spec_decode_* as its log's
    ``mean len``; draft acceptance rate as its ``draft acceptance``) beside ours (tokens per target forward),
    distinct where the definitions differ (n-gram: 1.1 against 2.5) and equal where they are the same."""
    marker = str(tmp_path)
    path = _sweep(tmp_path / "sweep", llama, BASELINE + _draft(4, llama["TINY_DRAFT_GGUF"]) + NGRAM, CODE, marker)
    outcome, events, run_dir, _ = await run_plan(plan_for(path), tmp_path / "runs")
    assert outcome.state == "completed", outcome
    names = {e.config_id: e.name for e in of_type(events, ServerLaunching)}
    ids = {n: i for i, n in names.items()}
    records: dict[str, list[dict]] = {}
    for event in of_type(events, MeasurementRecorded):
        records.setdefault(names[event.config_id], []).append(event.record)
    counters = {names[e.config_id]: e.server_log for e in of_type(events, WorkloadFinished)}
    run = load_run(run_dir.path)
    md, doc = render(run, "md"), json.loads(render(run, "json"))
    results = {r["config"]: r for r in md_table(md, "Results: code (code, greedy, 1 repeat)")}
    accepted = {r["config"]: r for r in md_table(md, "Acceptance: code")}
    cells = {c["config"]: c for c in doc["analysis"]["acceptance"]["cells"]}
    # The counter names the report cites are llama-server's own (its /metrics as captured, tests/data/llamacpp).
    captured = (REPO / "tests/data/llamacpp/draft-n4/metrics_after.txt").read_text()
    for name in ("draft-n4", "ngram"):
        mine = records[name]
        drafted = [r for r in mine if r["accept_rate"] is not None]
        lines = _server_lines(run_dir.log_path(name, ids[name]).read_text(), len(drafted))
        server = counters[name]
        # The counters over the workload are what llama-server printed per request, token for token.
        assert server["accepted_tokens"] == sum(a for a, _, _ in lines), (name, server, lines)
        assert server["draft_tokens"] == sum(g for _, g, _ in lines), (name, server, lines)
        length = 1 + server["accepted_tokens"] / server["drafts"]  # its mean len over the workload
        steps = sum(a / (m - 1) for a, _, m in lines if m > 1)  # the steps behind each line's rounded mean len
        assert length == pytest.approx(1 + sum(a for a, _, _ in lines) / steps, abs=0.02), (name, lines)
        ours = sum(r["completion_tokens"] for r in mine) / sum(r["verify_ct"] for r in mine)
        rate = sum(a for a, _, _ in lines) / sum(g for _, g, _ in lines)
        # Results table: each column under its definition's name, ours and the server's.
        row = results[name]
        assert _num(row["tok/target fwd"]) == pytest.approx(ours, abs=0.006), row
        assert _num(row["server accept len/draft step"]) == pytest.approx(length, abs=0.006), row
        # Acceptance table: the same two, and llama-server's draft acceptance rate (ours from its timings agrees).
        table = accepted[name]
        assert _num(table["tokens per target forward (client)"]) == pytest.approx(ours, abs=0.006), table
        server_length = table["acceptance length (server, per drafting step)"]
        assert server_length.split()[0] == f"{length:.2f}" and "(differs)" not in server_length, table
        draft_rate = table["draft acceptance rate"]  # no "(server ...)" beside it: ours and the counters agree
        assert draft_rate.split()[0] == f"{rate:.3f}" and "(server" not in draft_rate, table
        # JSON (4 decimals): the names, the source, and agreement where the definitions are one.
        cell = cells[name]
        assert cell["client_definition"] == "tokens per target forward", cell
        assert cell["server_definition"] == "acceptance length", cell
        assert cell["server_acceptance_length"] == pytest.approx(length, abs=1e-4), cell
        assert cell["acceptance_length"] == pytest.approx(ours, abs=1e-4), cell
        assert cell["server_tokens_per_target_forward"] == pytest.approx(ours, abs=1e-4), cell
        assert cell["server_draft_acceptance_rate"] == pytest.approx(rate, abs=1e-4), cell
        assert cell["draft_acceptance_rate"] == pytest.approx(rate, abs=1e-4), cell
        assert cell["client_server_agree"] is True, cell
        for counter in re.findall(r"llamacpp:\w+", cell["server_source"]):
            assert f"\n{counter} " in captured, counter
    # n-gram drafts on few steps: per target forward and per drafting step are far apart, and labelled apart.
    assert _num(results["ngram"]["server accept len/draft step"]) > _num(results["ngram"]["tok/target fwd"]) + 0.3
    assert "tokens per target forward" in md and "llamacpp:spec_decode_num_drafts_total" in md
    assert wait_no_processes(marker) == []


async def test_server_killed_mid_stream_is_a_crash(tmp_path, llama):
    marker = str(tmp_path)
    workload = """
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci", "quicksort", "binary_search", "lru_cache", "merge_intervals", "trie"]
max_new_tokens = 700
ignore_eos = true
"""
    path = _sweep(tmp_path / "sweep", llama, _draft(16, llama["TINY_DRAFT_GGUF"]) + BASELINE, workload, marker)
    plan = plan_for(path)
    victim = plan.by_name("draft-n16")
    pids: dict[str, int] = {}
    killed: list[float] = []
    loop = asyncio.get_running_loop()

    def kill() -> None:
        os.kill(pids[victim.id], signal.SIGKILL)
        killed.append(loop.time())

    def watch(event) -> None:
        if isinstance(event, ServerLaunching):
            pids[event.config_id] = event.pid
        # After the first measurement the next request starts at once: kill while its stream is in flight.
        if isinstance(event, MeasurementRecorded) and event.config_id == victim.id and not killed:
            loop.call_later(0.05, kill)
            killed.append(0.0)

    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    orchestrator = Orchestrator(plan, run_dir)
    events: list = []
    orchestrator.subscribe(events.append)
    orchestrator.subscribe(watch)
    try:
        outcome = await orchestrator.run()
    finally:
        run_dir.close()
    assert outcome.state == "completed"
    finished = {e.name: e for e in of_type(events, ConfigFinished)}
    crashed = finished["draft-n16"]
    assert crashed.state == ConfigState.CRASHED, crashed
    assert "SIGKILL" in (crashed.reason or ""), crashed.reason
    records = [e.record for e in of_type(events, MeasurementRecorded) if e.config_id == victim.id]
    # The request in flight ends without [DONE]: that is the server's death, recorded as an error whose reason
    # is the crash (``--retry-crashed`` runs it again), never a zero; the rest of the workload is "not run".
    assert [r["status"] for r in records] == ["ok", "error"], records
    assert records[1]["error_kind"] == "crash" and "SIGKILL" in records[1]["error"], records[1]
    assert [e.workload for e in of_type(events, WorkloadNotRun) if e.config_id == victim.id] == ["code"]
    log = run_dir.log_path("draft-n16", victim.id).read_text()
    assert log.count("launch_slot_") == log.count("total time") + 1, "the kill did not land mid-request"
    stop = next(e for e in of_type(events, ServerStopped) if e.config_id == victim.id)
    assert stop.exit_code == -signal.SIGKILL and not stop.leftover_pids
    # The sweep goes on with the next configuration.
    assert finished["baseline"].state == ConfigState.DONE
    assert wait_no_processes(marker) == []


async def test_unloadable_model_fails_before_ready_with_a_llamacpp_signature(tmp_path, llama):
    marker = str(tmp_path)
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    configs = f"""
[[configs]]
name = "baseline"
[configs.args]
model = "{bad}"
"""
    path = _sweep(tmp_path / "sweep", llama, configs, CODE, marker)
    _, events, _, _ = await run_plan(plan_for(path), tmp_path / "runs")
    finished = of_type(events, ConfigFinished)[0]
    assert finished.state in (ConfigState.CRASHED, ConfigState.FAILED), finished
    assert (finished.signature or "").startswith("llamacpp_"), finished
    assert "before ready" in (finished.reason or "")
    assert not of_type(events, MeasurementRecorded)
    assert wait_no_processes(marker) == []


def test_shipped_sweep_runs_headless(tmp_path, llama):
    """The done-when command: ``specbench run sweeps/llamacpp-tiny.toml --headless`` on a prepared machine."""
    env = {**os.environ, **llama, "SPECBENCH_TEST_MARKER": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "specbench_tui", "run", str(REPO / "sweeps" / "llamacpp-tiny.toml"),
                           "--headless"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "sweep completed" in out, out
    for name in ("baseline", "draft-n2", "draft-n4", "draft-n8", "draft-n16", "ngram"):
        assert f"{name}: DONE" in out, out
    assert "tokens per target forward 1.00" in out  # the baseline, under its definition
    # Each workload's line: ours, then llama-server's counters under their own name (issue 27).
    ngram = next(line for line in out.splitlines() if "ngram: code:" in line)
    assert re.search(r"tokens per target forward 1\.\d\d, server counters: acceptance length \d\.\d\d per "
                     r"drafting step, \d+ of \d+ drafted tokens accepted", ngram), ngram
    head = next(line for line in out.splitlines() if line.startswith("configuration "))
    assert "tok/target fwd" in head and "accept len" not in head, head
    assert wait_no_processes(str(tmp_path)) == []
