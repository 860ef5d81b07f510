"""A cold-cache flush that fails (issue 49, point 2): answered 400 forever, or never answered. Its retries are
bounded in time and are no progress; the failure is remembered for the server (not retried for every request);
the configuration is measured warm within ``stall_timeout_s`` and says so in every record and in the report."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import plan_for, run_plan, write_sweep
from hostile_http import HostileServer

from repo_paths import TESTS
from specbench_tui.core.engines import registry
from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.core.events import Event, Notice
from specbench_tui.engine.client import ServerClient
from specbench_tui.rundir.store import RunDir
from specbench_tui.report.formats import render
from specbench_tui.report.load import load_run

SWEEP = """
[sweep]
name = "flush-fails"
gpus = 1
repeats = 2
warmup = 0
[engine]
launcher = "simulator"
startup_timeout_s = 60
stall_timeout_s = 12
port_base = {port}
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
[measure]
cache = "cold"
[[configs]]
name = "ar"
[[workloads]]
kind = "code"
items = ["fibonacci", "quicksort"]
max_new_tokens = 8
"""


@pytest.mark.parametrize("behaviour", ["http_400", "no_answer"])
def test_the_client_gives_up_a_failing_flush_within_its_deadline(behaviour: str) -> None:
    async def scenario() -> tuple[bool, float, int, int]:
        async with HostileServer(behaviour) as server:
            client = ServerClient(server.url, dataclasses.replace(SGLANG, flush_cache_path="/flush_cache"))
            waits = 0

            def counted() -> None:
                nonlocal waits
                waits += 1

            start = time.monotonic()
            try:
                flushed = await client.flush_cache(deadline_s=1.5, pause_s=0.1, on_wait=counted)
            finally:
                await client.aclose()
            return flushed, time.monotonic() - start, len(server.requests), waits

    flushed, took, asked, waits = asyncio.run(scenario())
    assert not flushed
    assert took < 3.0, took
    assert asked >= 1 and (behaviour == "no_answer" or asked >= 5), asked


@pytest.mark.e2e
@pytest.mark.parametrize("behaviour", ["http_400", "no_answer"])
def test_a_configuration_whose_flush_fails_is_measured_warm_and_says_so(tmp_path: Path, behaviour: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario() -> tuple[tuple[Any, list[Event], RunDir, Any], float, list[tuple[str, str]]]:
        async with HostileServer(behaviour) as flusher:
            # an absolute URL: the client's flush goes to the hostile server, everything else to the simulator
            broken = dataclasses.replace(SGLANG, flush_cache_path=f"{flusher.url}/flush_cache")
            monkeypatch.setitem(registry._ENGINES, "sglang", broken)
            path = write_sweep(tmp_path, SWEEP)
            start = time.monotonic()
            result = await run_plan(plan_for(path), tmp_path / "runs", timeout_s=240)
            return result, time.monotonic() - start, list(flusher.requests)

    (outcome, events, run_dir, _), took, asked = asyncio.run(scenario())
    records = [json.loads(line) for line in (run_dir.path / "results.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["status"] == "ok" for r in records), records
    assert all(r["cache"] == "warm" and r["started_cold"] is False for r in records), records
    states = [getattr(e, "state", None) for e in events if type(e).__name__ == "ConfigFinished"]
    assert [str(getattr(s, "value", s)) for s in states] == ["done"], states
    # one failed flush for the server (bounded by its deadline), not one series per request
    flush_deadline = 12 / 3
    tries = len(asked)
    assert tries <= flush_deadline / 0.25 + 2, tries
    assert took < 120, took
    notices = [e.text for e in events if isinstance(e, Notice) and "did not flush" in e.text]
    assert len(notices) == 1 and "measured warm" in notices[0], notices
    run = load_run(run_dir.path)
    for fmt in ("txt", "md"):
        text = render(run, fmt)
        assert "caches: cold" not in text, text
        assert "caches: warm" in text, text


def test_a_run_recorded_cold_whose_flushes_failed_reads_warm(tmp_path: Path) -> None:
    """A run written before failed flushes were stamped warm (cache = cold, started_cold = false) reads as the
    policy that held, in every format."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(TESTS / "data" / "acceptance_demo_run", run)
    results = run / "results.jsonl"
    assert results.read_text().count('"started_cold":true') > 0
    results.write_text(results.read_text().replace('"started_cold":true', '"started_cold":false'))
    loaded = load_run(run)
    for fmt in ("txt", "md", "html"):
        text = render(loaded, fmt)
        assert "caches: cold" not in text.lower() and "caches: warm" in text.lower(), fmt
