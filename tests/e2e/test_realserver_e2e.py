"""Issue 26's done-when, through the simulator as a real subprocess (it does what SGLang 0.5.23 does: a
server-wide NGRAM corpus and radix cache that ``/flush_cache`` clears and refuses to clear while requests run,
the 48 reset of the running cap, the adaptive tiers and their switch lines, KV-budget retraction with
``num_retractions``): the engine, the analysis and every report format read them as a real server's."""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from engine_helpers import SimulatorSweep

from specbench_tui.core.analysis import analyse
from specbench_tui.core.crossover.points import point_row
from specbench_tui.core.crossover.stats import pcts
from specbench_tui.core.plan import build_plan
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.engine.client import ServerClient
from specbench_tui.core.engines.registry import get_profile
from specbench_tui.sim.testing import SimProcess
from specbench_tui.rundir.store import RunDir

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("default-port-30000")]

FORMATS = ("txt", "md", "csv", "json", "latex", "html")


def _run(tmp_path: Path, text: str) -> tuple[Path, Any]:
    """Run the sweep to its end on the simulator; its run directory and the analysis every view reads."""
    plan = build_plan(load_sweep(_write(tmp_path / "s.toml", text)))
    result = SimulatorSweep(tmp_path).run_sync(plan)
    assert result.outcome.state == "completed", result.outcome
    opened = RunDir.open(result.run_dir.path)
    return opened.path, analyse(plan.to_json(), opened.read_measurements(), opened.read_events())


def _report(run_dir: Path, fmt: str) -> str:
    out = subprocess.run([sys.executable, "-m", "specbench_tui", "report", str(run_dir), "--format", fmt],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------------------------------------ NGRAM

NGRAM = """[sweep]
name = "ngram-CACHE"
gpus = 1
repeats = 3
warmup = 1
[engine]
launcher = "simulator"
startup_timeout_s = 60
[measure]
cache = "CACHE"
[server.args]
model-path = "Qwen/Qwen3-8B"
[[configs]]
name = "ngram"
args = { speculative-algorithm = "NGRAM" }
[[workloads]]
kind = "code"
items = ["fibonacci", "quicksort", "binary_search"]
max_new_tokens = 64
"""


def _by_repeat(records: list[dict[str, Any]]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for r in records:
        out.setdefault(r["repeat"], []).append(r["accept_length"])
    return out


def test_ngram_repeats_under_cold_and_warm(tmp_path: Path) -> None:
    """Cold: every measured request starts with an empty corpus and radix cache, so repeat 3 drafts as little
    as repeat 1. Warm: later repeats are drafted from the server's memory of the earlier ones (acceptance jumps,
    the prefix is cached) and every report marks the cell."""
    cold_dir, cold = _run(tmp_path / "cold", NGRAM.replace("CACHE", "cold"))
    warm_dir, warm = _run(tmp_path / "warm", NGRAM.replace("CACHE", "warm"))
    cold_records, warm_records = _records(cold_dir), _records(warm_dir)
    assert all(r["cache"] == "cold" and r["started_cold"] is True and r["cached_tokens"] == 0 for r in cold_records)
    assert all(r["cache"] == "warm" and r["started_cold"] is False for r in warm_records)
    assert any(r["cached_tokens"] > 0 for r in warm_records if r["repeat"] > 1)
    c, w = _by_repeat(cold_records), _by_repeat(warm_records)
    cold_rise = statistics.fmean(c[3]) - statistics.fmean(c[1])
    warm_rise = statistics.fmean(w[3]) - statistics.fmean(w[1])
    # a memorised repeat drafts nearly all of it; a cold one drafts what the server could not have seen
    assert min(w[3]) > max(c[1] + c[2] + c[3]), (c, w)
    assert warm_rise > 1.0 and abs(cold_rise) < warm_rise / 4, (c, w)
    # cold: repeat 3's mean within repeat 1's spread widened by the requests' own spread across repeats
    spread = max(c[1] + c[3]) - min(c[1] + c[3])
    assert abs(cold_rise) <= spread, (c, w)
    cold_row, warm_row = cold.rows[0], warm.rows[0]
    assert cold_row.cache == "cold" and cold_row.from_memory is None
    assert warm_row.cache == "warm" and warm_row.from_memory == "repeats drafted from memory"
    assert "drafted_from_memory" in warm_row.flags and "drafted_from_memory" not in cold_row.flags
    txt = _report(warm_dir, "txt")
    assert "FROM-MEMORY" in txt and "caches: warm" in txt, txt[:3000]
    assert "FROM-MEMORY" not in _report(cold_dir, "txt") and "caches: cold" in _report(cold_dir, "md")
    data = json.loads(_report(warm_dir, "json"))
    assert data["analysis"]["rows"][0]["from_memory"] == "repeats drafted from memory"
    assert "warm" in _report(warm_dir, "csv").splitlines()[1]


# ------------------------------------------------------------------------------------------------- caps

CAPS = """[sweep]
name = "caps"
gpus = 1
repeats = 1
warmup = 0
baseline = "ar"
[engine]
launcher = "simulator"
startup_timeout_s = 60
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
LIFT
[[configs]]
name = "ar"
[[configs]]
name = "eagle3"
args = { speculative-algorithm = "EAGLE3", speculative-draft-model-path = "d/e", speculative-num-steps = 3, speculative-eagle-topk = 1, speculative-num-draft-tokens = 4 }
[[workloads]]
kind = "code"
max_new_tokens = 16
concurrency = [1, 64]
waves = 1
search = "grid"
"""


def test_an_eagle3_point_above_its_48_cap_is_capped_everywhere(tmp_path: Path) -> None:
    text = CAPS.replace("LIFT", "")
    plan = build_plan(load_sweep(_write(tmp_path / "v.toml", text)))
    assert [n for n in plan.notes if ": warning: 'eagle3'" in n and "at 48" in n], plan.notes  # validate first
    run_dir, analysis = _run(tmp_path, text)
    load = analysis.load
    eagle = next(c for c in analysis.configs if c.name == "eagle3")
    ar = next(c for c in analysis.configs if c.name == "ar")
    point = load.point(eagle.id, "code", "c64")
    assert point.running_cap == 48 and point.capped == "capped (64 in flight, cap 48)"
    assert load.point(eagle.id, "code", "c1").capped is None and load.point(ar.id, "code", "c64").capped is None
    crossover = load.crossover(eagle.id, "code")
    assert crossover.capped == ("eagle3 c64 capped (64 in flight, cap 48)",)
    assert any(e.capped for e in load.schedule if e.load == "c64")
    for fmt in FORMATS:
        assert "capped (64 in flight, cap 48)" in _report(run_dir, fmt), fmt
    data = json.loads(_report(run_dir, "json"))
    cross = next(c for c in data["load"]["crossover_concurrency"] if c["config"] == "eagle3")
    assert cross["rests_on_capped"] is True
    points = {(p["config"], p["load"]): p for p in data["analysis"]["load"]["points"]}
    assert points[("eagle3", "c64")]["capped"] == "capped (64 in flight, cap 48)"
    assert points[("ar", "c64")]["capped"] is None
    assert "rests on capped point" in _report(run_dir, "txt")
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    ready = {e["config_id"]: e for e in events if e["type"] == "ServerReady"}
    assert ready[eagle.id]["running_cap"] == 48 and ready[ar.id]["running_cap"] > 64  # facts of the configuration


def test_with_max_running_requests_64_nothing_is_capped(tmp_path: Path) -> None:
    text = CAPS.replace("LIFT", "max-running-requests = 64")
    assert not [n for n in build_plan(load_sweep(_write(tmp_path / "v.toml", text))).notes if ": warning: " in n]
    run_dir, analysis = _run(tmp_path, text)
    assert all(p.running_cap == 64 and p.capped is None for p in analysis.load.points)
    assert all(not c.capped for c in analysis.load.crossovers)
    for fmt in FORMATS:
        assert "capped (" not in _report(run_dir, fmt), fmt


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------------- adaptive, retraction

ADAPTIVE = """[sweep]
name = "adaptive"
gpus = 1
repeats = 1
warmup = 0
baseline = "ar"
[engine]
launcher = "simulator"
startup_timeout_s = 60
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
max-running-requests = 64
decode-log-interval = 2
EXTRA
[[configs]]
name = "ar"
[[configs]]
name = "eagle3-adaptive"
args = { speculative-algorithm = "EAGLE3", speculative-draft-model-path = "d/e", speculative-num-steps = 3, speculative-eagle-topk = 1, speculative-num-draft-tokens = 4, speculative-adaptive = true }
[[workloads]]
kind = "code"
WORKLOAD
waves = 1
search = "grid"
"""


def test_an_adaptive_configurations_points_show_the_steps_that_ran(tmp_path: Path) -> None:
    run_dir, analysis = _run(tmp_path, ADAPTIVE.replace("EXTRA", "").replace(
        "WORKLOAD", "max_new_tokens = 32\nconcurrency = [1, 64]"))
    config = next(c for c in analysis.configs if c.name == "eagle3-adaptive")
    ar = next(c for c in analysis.configs if c.name == "ar")
    low, high = analysis.load.point(config.id, "code", "c1"), analysis.load.point(config.id, "code", "c64")
    # batch 1: the tier {1,3,5,7} keeps speculating; at 64 in flight the tiers {0,1,3}, {0,1}, {0} switch it off
    assert low.spec_steps and 0 not in low.spec_steps and low.speculation == "on", low
    assert high.spec_steps and 0 in high.spec_steps and high.speculation in ("off", "mixed"), high
    assert analysis.load.point(ar.id, "code", "c64").spec_steps is None
    txt = _report(run_dir, "txt")
    assert "steps " + ",".join(map(str, low.spec_steps)) in txt, txt[-4000:]
    csv_rows = [line for line in _report(run_dir, "csv").splitlines() if ",c64," in line and "eagle3-adaptive" in line]
    assert csv_rows and ("mixed" in csv_rows[0] or "off" in csv_rows[0]), csv_rows


def test_a_retracted_request_is_flagged_and_kept_out_of_p99_ttft(tmp_path: Path) -> None:
    run_dir, analysis = _run(tmp_path, ADAPTIVE.replace("EXTRA", "max-total-tokens = 3000").replace(
        "WORKLOAD", "max_new_tokens = 96\nignore_eos = false\nconcurrency = [1, 32]"))
    records = _records(run_dir)
    retracted = [r for r in records if r.get("num_retractions")]
    assert retracted, "the simulator's small KV pool retracted nothing"
    hit = {(r["config_id"], r["load"]) for r in retracted}
    config_id, label = sorted(hit)[0]
    point = analysis.load.point(config_id, "code", label)
    mine = [r for r in records if r["config_id"] == config_id and r.get("load") == label and r["status"] == "ok"]
    kept = [r["ttft_s"] for r in mine if not r.get("num_retractions")]
    assert point.n_retracted == sum(1 for r in mine if r.get("num_retractions")) > 0
    assert point.ttft_s == pcts(kept)  # the retracted requests are not in the percentiles
    # asked for, they are
    from specbench_tui.core.cells import acceptance
    from specbench_tui.core.records import Measurement

    ms = [Measurement.from_json(r) for r in records if r["config_id"] == config_id and r.get("load") == label]
    workload = analysis.load.workloads[0]
    with_them = point_row(config_id, "x", workload, label, ms, {}, len(ms), 1, acceptance, include_retracted=True)
    assert with_them.ttft_s == pcts([r["ttft_s"] for r in mine])
    txt = _report(run_dir, "txt")
    assert "retracted" in txt
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    logs = [e.get("server_log") or {} for e in events if e.get("type") == "LoadPointFinished"]
    assert any(log.get("retract_warnings") for log in logs), logs


# ------------------------------------------------------------------------------------------------ flush


def test_the_flush_is_retried_until_sglang_accepts_it(tmp_path: Path) -> None:
    """SGLang answers 400 "Cache not flushed because there are pending requests" while a request runs; the client
    retries until the request is done, then the flush is accepted."""
    async def scenario(url: str) -> tuple[bool, int, int]:
        client = ServerClient(url, get_profile("sglang"))
        try:
            long = asyncio.ensure_future(client.generate("Write a long story.", {"max_new_tokens": 400,
                                                                               "ignore_eos": True}))
            async with httpx.AsyncClient(base_url=url) as raw:
                for _ in range(200):  # wait until the request runs: a plain flush is then refused
                    refused = (await raw.post("/flush_cache")).status_code
                    if refused == 400:
                        break
                    await asyncio.sleep(0.01)
            waits = 0

            def counted() -> None:
                nonlocal waits
                waits += 1

            flushed = await client.flush_cache(on_wait=counted, pause_s=0.05, attempts=2000)
            result = await long
            assert result.ok, result.error
            return flushed, waits, refused
        finally:
            await client.aclose()

    with SimProcess([], model="Qwen/Qwen3-8B") as sim:
        sim.wait_ready()
        flushed, waits, refused = asyncio.run(scenario(sim.url))
        assert refused == 400
        assert flushed and waits > 0
        assert "Cache not flushed because there are pending requests" in sim.stderr
        assert "Cache flushed successfully!" in sim.stderr
