"""SGLang 0.5.23's REAL server on CPU, through the product (issue 50).

Needs ``.venv-sglang`` with the server's CPU dependencies, the ``sgl_kernel`` stand-in and the tiny model that
``tools/setup_sglang_cpu.sh`` prepares; without them every test here is skipped with that command in the reason,
and with ``SPECBENCH_REQUIRE_SGLANG=1`` (CI) a missing install is a failure instead. Select with ``-m sglang_real``.
A server takes 60-90 s to start on 2 idle cores, so the module starts two, in one sweep run: an autoregressive
configuration measured cold, and an NGRAM configuration whose first verify step crashes for real on CPU
(SGLang's ``torch_native`` attention has no target-verify path), a crash with real lines and a real crash path.
What SGLang runs on CPU and what only a GPU shows: docs/servers.md.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
import time
from pathlib import Path

import pytest
from engine_helpers import of_type, plan_for, wait_no_processes, write_sweep
from sglang_real import CPU_ARGS, CPU_ENV, STARTUP_TIMEOUT_S, RawServer, capture, sglang_paths

from repo_paths import TESTS
from specbench_tui.core.engines.sglang import parse_batch_line
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    CrashDetected,
    LogLines,
    MeasurementRecorded,
    Notice,
    ServerReady,
    ServerStopped,
)
from specbench_tui.engine.orchestrator import Orchestrator
from specbench_tui.rundir.store import RunDir

pytestmark = [pytest.mark.sglang_real, pytest.mark.xdist_group("sglang_real")]

CAPTURE = TESTS / "data" / "sglang_real" / "capture.json"
CRASH_GONE_S = 5.0
"""The issue's bound: the server tree is gone within this long of the crash line (measured: about 1 s)."""
ITEMS = ("fibonacci", "quicksort", "binary_search")
MAX_NEW = 24


@pytest.fixture(scope="module")
def sglang() -> dict[str, str]:
    return sglang_paths()


def _toml_value(value: object) -> str:
    if value is True:
        return "true"
    return str(value) if isinstance(value, int) else f'"{value}"'


def _sweep(paths: dict[str, str], marker: str) -> str:
    args = "\n".join(f"{key} = {_toml_value(value)}" for key, value in CPU_ARGS.items())
    env = "\n".join(f'{key} = "{value}"' for key, value in CPU_ENV.items())
    return f"""
[sweep]
name = "sglang-real"
baseline = "ar"
repeats = 1
warmup = 0
[engine]
profile = "sglang"
launcher = "sglang"
python = "{paths['SGLANG_PYTHON']}"
port_base = {{port}}
startup_timeout_s = {STARTUP_TIMEOUT_S}
stall_timeout_s = 180
request_timeout_s = 300
shutdown_grace_s = 60
[server.args]
model-path = "{paths['SGLANG_TINY_MODEL']}"
{args}
[server.env]
{env}
SPECBENCH_TEST_MARKER = "{marker}"
[[configs]]
name = "ar"
algorithm = "autoregressive"
[[configs]]
name = "ngram"
algorithm = "ngram"
args = {{ speculative-algorithm = "NGRAM" }}
[[workloads]]
name = "code"
kind = "code"
items = {list(ITEMS)!r}
max_new_tokens = {MAX_NEW}
temperature = 0.0
ignore_eos = true
"""


@pytest.fixture(scope="module")
def sweep_run(sglang, tmp_path_factory) -> dict:
    """One sweep run of both configurations (two real servers), its events and its run directory."""
    folder = tmp_path_factory.mktemp("sglang-real")
    marker = str(folder)
    plan = plan_for(write_sweep(folder / "sweep", _sweep(sglang, marker)))
    run_dir = RunDir.create(folder / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    orchestrator = Orchestrator(plan, run_dir)
    events: list = []
    stamped: list[tuple[float, object]] = []
    orchestrator.subscribe(events.append)
    orchestrator.subscribe(lambda event: stamped.append((time.time(), event)))

    async def run():
        return await asyncio.wait_for(orchestrator.run(), 2 * STARTUP_TIMEOUT_S + 600)

    try:
        outcome = asyncio.run(run())
    finally:
        run_dir.close()
    left = wait_no_processes(marker, timeout_s=30)
    ids = {c.id: c.name for c in plan.configs}
    return {"outcome": outcome, "events": events, "stamped": stamped, "run": run_dir, "ids": ids,
            "by_name": {name: cid for cid, name in ids.items()}, "left": left, "folder": folder}


def _of(run: dict, cls: type, name: str) -> list:
    cid = run["by_name"][name]
    return [e for e in of_type(run["events"], cls) if e.config_id == cid]


def _log_text(run: dict, name: str) -> str:
    return "\n".join(e.text for e in _of(run, LogLines, name))


def test_autoregressive_reaches_ready_and_is_measured_cold(sweep_run):
    """Ready on the ready line; context from /v1/models (4096: /server_info's context_length is null); the cap
    from /server_info's scheduler state (2500 on this machine); no CUDA graph said as such; every answer whole,
    each after an accepted flush."""
    assert sweep_run["outcome"].state == "completed"
    finished = _of(sweep_run, ConfigFinished, "ar")[0]
    assert finished.state == ConfigState.DONE, finished
    ready = _of(sweep_run, ServerReady, "ar")
    assert len(ready) == 1 and ready[0].context_length == 4096, ready
    assert ready[0].running_cap == 2500, ready
    assert ready[0].graph_ceiling is None, ready  # decode_cuda_graph_bs: [] on CPU: no graph captured
    notices = [n.text for n in _of(sweep_run, Notice, "ar")]
    assert any("no CUDA graphs captured" in text for text in notices), notices
    assert not any("CUDA graphs up to batch" in text for text in notices), notices
    records = [e.record for e in _of(sweep_run, MeasurementRecorded, "ar")]
    assert len(records) == len(ITEMS), records
    for record in records:
        assert record["status"] == "ok" and record["completion_tokens"] == MAX_NEW, record
        assert record["cache"] == "cold" and record["started_cold"] is True, record
        assert record["prompt_tokens"] > 0 and record["ttft_s"] > 0, record


def test_every_prefill_and_decode_line_is_parsed(sweep_run):
    """The real server's stats lines (0.5.23 on CPU: ``cpu graph: False`` where a GPU says ``cuda graph``), each
    read by the product's parser with its figures."""
    lines = [line for line in _log_text(sweep_run, "ar").splitlines() if re.search(r"(Prefill|Decode) batch", line)]
    kinds = {"prefill": 0, "decode": 0}
    for line in lines:
        parsed = parse_batch_line(line)
        assert parsed is not None, line
        kinds[parsed.kind] += 1
        assert parsed.running_req is not None and parsed.queue_req is not None, line
        if parsed.kind == "decode":
            assert parsed.gen_throughput is not None and parsed.num_token is not None, line
            assert parsed.token_usage is not None, line
            assert parsed.graph is False, line   # 'cpu graph: False': on CPU every decode step runs eager
        else:
            assert parsed.new_tokens is not None and parsed.input_throughput is not None, line
    assert kinds["prefill"] >= len(ITEMS) and kinds["decode"] >= 1, (kinds, lines)


def test_ngram_crash_is_red_with_the_exception_as_its_cause(sweep_run):
    """NGRAM resolves for real (the 48 reset, 12 draft tokens), then its first verify step crashes in
    ``torch_native``: CRASHED, the exception line as the cause, an excerpt, and the server tree gone within
    :data:`CRASH_GONE_S` of the crash line (the crash diagnostics are off at launch)."""
    finished = _of(sweep_run, ConfigFinished, "ngram")[0]
    assert finished.state == ConfigState.CRASHED, finished
    assert finished.signature == "python_exception", finished
    assert "AttributeError: 'NoneType' object has no attribute 'shape'" in (finished.reason or ""), finished
    crash = [c for c in _of(sweep_run, CrashDetected, "ngram") if c.complete]
    assert crash and {(c.signature, c.line) for c in crash} == {(crash[-1].signature, crash[-1].line)}, crash
    assert crash[-1].line.startswith("AttributeError: "), crash
    assert any("torch_native_backend.py" in line for line in crash[-1].excerpt), crash[-1].excerpt
    text = _log_text(sweep_run, "ngram")
    assert "Max running requests is reset to 48 for speculative decoding" in text
    assert "speculative_num_draft_tokens is set to 12 by default for ngram" in text
    at = 0
    for line in json.loads(CAPTURE.read_text())["crash_sequence"]:  # the checked-in crash lines, in order
        assert line in text[at:], (line, text[at:][-3000:])
        at = text.index(line, at)
    stamped = sweep_run["stamped"]
    cid = sweep_run["by_name"]["ngram"]
    crashed_at = next(t for t, e in stamped if isinstance(e, CrashDetected) and e.config_id == cid)
    stopped_at = next(t for t, e in stamped if isinstance(e, ServerStopped) and e.config_id == cid)
    stop = _of(sweep_run, ServerStopped, "ngram")[0]
    assert not stop.leftover_pids, stop
    assert stopped_at - crashed_at < CRASH_GONE_S, (stopped_at - crashed_at, stop)
    print(f"sglang-real: NGRAM crash line -> server tree gone in {stopped_at - crashed_at:.2f} s")  # the record
    assert sweep_run["left"] == []


def test_sglang_is_launched_without_crash_diagnostics(sweep_run):
    """SGLANG_PYSPY_DUMP_BEFORE_CRASH and SGLANG_CUDA_COREDUMP_BEFORE_CRASH are 0 at launch (the sweep sets
    neither): the crashed server never says it sleeps before its diagnostics."""
    text = _log_text(sweep_run, "ngram")
    assert "Sleeping 5 seconds before crash diagnostics" not in text
    assert "Waiting 60.0 seconds for CUDA coredumps" not in text
    assert Path(sweep_run["run"].path).exists()


@pytest.fixture(scope="module")
def live_capture(sglang, tmp_path_factory) -> dict:
    server = RawServer(sglang, tmp_path_factory.mktemp("sglang-capture"))
    try:
        server.wait_ready()
        return capture(server)
    finally:
        server.stop()


def test_the_checked_in_capture_is_the_real_servers(live_capture):
    """tests/data/sglang_real/capture.json (what the simulator is held to) is what SGLang's server says now:
    its start-up sequence, the /server_info keys the product reads, /v1/models, /flush_cache idle (200) and busy
    (400), and every /metrics family with its labels."""
    checked_in = json.loads(CAPTURE.read_text())
    differ = sorted(key for key, value in live_capture.items() if value != checked_in[key])
    if differ:
        live = Path(tempfile.mkdtemp(prefix="sglang-capture-")) / "capture.json"
        live.write_text(json.dumps(live_capture, indent=1))
        pytest.fail(f"the real server now differs from {CAPTURE} in {differ}: its capture is in {live} (refresh the "
                    "checked-in one from it, keeping its note and crash_sequence, and re-explain the simulator's "
                    "differences in sim_differences.json)")
