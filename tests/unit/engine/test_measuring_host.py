"""The measuring host on record: the starvation guard, the host's load per window, and ``compare`` withholding
"significant" where the recorded load explains a change."""

from __future__ import annotations

import asyncio
import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from hostile_http import HostileServer

from repo_paths import REPO, TESTS
from specbench_tui.core.events import LoadPointFinished, WorkloadFinished
from specbench_tui.core.measuring_host import HostLoad, server_ttft_mean, starved
from specbench_tui.core.records import STATUS_OK, Measurement
from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.engine.client import ServerClient
from specbench_tui.engine.host_meter import HostMeter
from specbench_tui.engine.workloads import Labels, measurement_from

DATA = TESTS / "data"
LABELS = Labels(config_id="c", config="c", workload="code")


async def _answers(behaviour: str, count: int = 6) -> list[Measurement]:
    """``count`` answers through the product's own client and record builder."""
    async with HostileServer(behaviour) as server:
        client = ServerClient(server.url, SGLANG)
        try:
            results = [await client.generate("hi", {"max_new_tokens": 16}) for _ in range(count)]
        finally:
            await client.aclose()
    return [measurement_from(LABELS, f"i{n}", 0, [r]) for n, r in enumerate(results)]


def test_the_guard_fires_on_answers_read_in_one_piece_and_stays_quiet_on_a_stream() -> None:
    held = asyncio.run(_answers("held"))
    assert all(m.status == STATUS_OK and m.completion_tokens == 16 for m in held)
    why = starved(held)
    assert why is not None and "6 of 6 answers arrived in one piece" in why
    paced = asyncio.run(_answers("paced"))
    assert all((m.e2e_s or 0) - (m.ttft_s or 0) > 0.02 for m in paced), [(m.ttft_s, m.e2e_s) for m in paced]
    assert starved(paced) is None


def test_the_guard_holds_our_ttft_against_the_server_s_own() -> None:
    ms = [Measurement("c", "c", "code", f"i{n}", 0, STATUS_OK, completion_tokens=16, ttft_s=0.120, e2e_s=0.3)
          for n in range(8)]
    assert starved(ms, server_ttft_mean_s=0.110) is None  # ours a little above the server's: the HTTP path
    why = starved(ms, server_ttft_mean_s=0.008)
    assert why is not None and "our mean TTFT 120.0 ms, the server's own 8.0 ms" in why
    before = {'vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"}': 1.0,
              'vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"}': 10.0}
    after = {'vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"}': 1.4,
             'vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"}': 18.0}
    assert server_ttft_mean(before, after, "vllm:time_to_first_token_seconds") == pytest.approx(0.05)
    assert server_ttft_mean(before, before, "vllm:time_to_first_token_seconds") is None


def test_a_starved_point_is_flagged_and_never_evidence() -> None:
    from specbench_tui.core.crossover.points import point_row
    from specbench_tui.core.crossover.results import LoadWorkload
    from specbench_tui.core.load import LoadSpec

    workload = LoadWorkload("code", LoadSpec(concurrency=(4,)))
    event = LoadPointFinished(config_id="c", workload="code", load="c4", repeat=0, wall_s=0.1, requests=4)
    for behaviour, hungry in (("held", True), ("paced", False)):
        ms = [replace(m, load="c4") for m in asyncio.run(_answers(behaviour, 4))]
        row = point_row("c", "c", workload, "c4", ms, {0: event}, 4, 1, lambda ok: (None, None))
        assert (row.starved is not None) is hungry, (behaviour, row.starved)
        assert row.noisy is hungry and (row.noise == row.starved if hungry else True)
    said = replace(event, starved="client starved: our mean TTFT 120.0 ms, the server's own 8.0 ms")
    row = point_row("c", "c", workload, "c4", ms, {0: said}, 4, 1, lambda ok: (None, None))
    assert row.starved == said.starved and row.noisy  # the engine's verdict (with the server's counters) is kept


def test_the_host_meter_records_our_cpu_and_the_load() -> None:
    meter = HostMeter()
    sum(i * i for i in range(300_000))
    host = meter.finish()
    assert host.client_cpu_s > 0 and host.wall_s >= host.client_cpu_s * 0.5 and host.cpus >= 1
    assert HostLoad.from_json(json.loads(json.dumps(host.to_json()))) == replace(
        host, load_avg=round(host.load_avg, 2), client_cpu_s=round(host.client_cpu_s, 4), wall_s=round(host.wall_s, 4))
    assert HostLoad.from_json({"load_avg": "high"}) is None


def _with_host(run: Path, load_avg: float) -> None:
    """Append a WorkloadFinished with the host's load for every (configuration, workload) measured in ``run``."""
    cells = {(r["config_id"], r["workload"]) for r in map(json.loads, (run / "results.jsonl").read_text().splitlines())}
    host = HostLoad(load_avg=load_avg, cpus=2, client_cpu_s=1.0, wall_s=10.0).to_json()
    with (run / "events.jsonl").open("a") as out:
        for config_id, workload in sorted(cells):
            out.write(json.dumps({**WorkloadFinished(config_id=config_id, workload=workload, host=host).to_json()})
                      + "\n")


def test_compare_withholds_significant_where_the_host_was_saturated(tmp_path: Path) -> None:
    from specbench_tui.report.compare import compare_runs, render_compare
    from specbench_tui.report.load import load_run

    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(DATA / "report_run_a", a)
    shutil.copytree(DATA / "report_run_b", b)
    _with_host(a, 0.4)
    _with_host(b, 0.5)
    calm = compare_runs(load_run(a), load_run(b))
    significant = [r for r in calm.rows if r.decode_tps.significant]
    assert significant, "the fixture's runs differ significantly somewhere (else this test proves nothing)"
    assert not any(r.host for r in calm.rows)
    hot_b = tmp_path / "hot"
    shutil.copytree(DATA / "report_run_b", hot_b)
    _with_host(hot_b, 5.9)
    loaded = load_run(hot_b)
    assert any("saturated host" in w for w in loaded.warnings)
    hot = compare_runs(load_run(a), loaded)
    assert not any(r.decode_tps.significant or r.ttft_s.significant or r.accept_length.significant for r in hot.rows)
    assert all("B at load 5.9 on 2 cores" in r.host for r in hot.rows)
    text = render_compare(hot)
    assert "no change there is called significant" in text and "saturated host: B at load 5.9" in text


HOST_SWEEP = """
[sweep]
name = "host-on-record"
gpus = 1
warmup = 0
[engine]
launcher = "simulator"
sim_profile = "PROFILE"
startup_timeout_s = 60
port_base = {port}
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
[[configs]]
name = "ar"
[[workloads]]
name = "one-by-one"
kind = "code"
items = ["fibonacci"]
max_new_tokens = 24
[[workloads]]
name = "loaded"
kind = "code"
items = ["fibonacci", "quicksort"]
max_new_tokens = 24
concurrency = [2]
waves = 1
"""


@pytest.mark.e2e
def test_a_run_records_the_host_per_workload_and_load_point_and_env_json_its_cores(tmp_path: Path) -> None:
    from engine_helpers import plan_for, run_plan, write_sweep

    profile = REPO / "sweeps" / "sim-profiles" / "deterministic.toml"
    path = write_sweep(tmp_path, HOST_SWEEP.replace("PROFILE", str(profile)))
    outcome, events, run_dir, _ = asyncio.run(run_plan(plan_for(path), tmp_path / "runs", timeout_s=300))
    assert outcome.state == "completed", outcome
    finished = [e for e in events if isinstance(e, WorkloadFinished)]
    points = [e for e in events if isinstance(e, LoadPointFinished)]
    windows: list[WorkloadFinished | LoadPointFinished] = []
    assert {e.workload for e in finished} == {"one-by-one", "loaded"} and points
    sequential = [e for e in finished if e.workload == "one-by-one"]  # a load workload's windows are its points
    windows += [*sequential, *points]
    for event in windows:
        host = HostLoad.from_json(event.host)
        assert host is not None and host.cpus >= 1 and host.wall_s > 0 and host.client_cpu_s > 0, event
    assert all(p.starved is None for p in points), [p.starved for p in points]
    env = json.loads((run_dir.path / "env.json").read_text())
    assert env["host"]["cpus_usable"] >= 1 and len(env["host"]["load_avg_at_start"]) == 3
