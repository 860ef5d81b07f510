"""The load runners and the shipped crossover demo, end to end on the simulator's ground truth."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from engine_helpers import SimulatorSweep
from narrowing import present

from repo_paths import REPO
from specbench_tui.core.load import arrival_offsets
from specbench_tui.core.records import Measurement
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.engine.loadrun import run_point
from specbench_tui.engine.workloads import Labels
from specbench_tui.sim.profile import load_profile
from specbench_tui.sim.speed import ground_truth_crossover



class FakeWorkload:
    """Records when each request was sent and how many were in flight; answers after ``delay_s``."""

    def __init__(self, delay_s: float = 0.02) -> None:
        self.delay_s = delay_s
        self.sent: list[float] = []
        self.in_flight = 0
        self.peak = 0

    def items(self) -> list[str]:
        return ["a", "b", "c"]

    async def run(self, item: str, repeat: int, session: Any, labels: Labels) -> Measurement:
        self.sent.append(time.monotonic())
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(self.delay_s)
        self.in_flight -= 1
        return Measurement(config_id=labels.config_id, config=labels.config, workload=labels.workload, item=item,
                           repeat=repeat, status="ok", decode_tps=10.0)


def test_closed_loop_keeps_exactly_n_requests_in_flight() -> None:
    workload, recorded = FakeWorkload(), list[Measurement]()
    run = asyncio.run(run_point(workload, None, Labels("c", "cfg", "w"), "c4", 2, 12, 0,  # type: ignore[arg-type]
                                recorded.append, set()))
    assert workload.peak == 4 and run.sent == 12 and len(recorded) == 12
    assert {m.load for m in recorded} == {"c4"} and {m.repeat for m in recorded} == {2}
    assert sorted(m.item for m in recorded) == sorted(f"{i}#{r}" for i in "abc" for r in range(4))
    assert 0.05 < run.wall_s < 1.0  # three waves of 20 ms


async def _with_wake_ups(run: Any) -> tuple[float, list[float]]:
    """Await ``run`` (a coroutine) beside a probe that sleeps 2 ms at a time: when ``run`` was entered, and how
    late each of the probe's wake-ups was. A loaded machine (or a GC pause) makes every wake-up of this event loop
    late, the probe's and the runner's alike: the probe's figures are the yardstick for the runner's."""
    late: list[float] = []

    async def probe() -> None:
        while True:
            asked = time.monotonic()
            await asyncio.sleep(0.002)
            late.append(time.monotonic() - asked - 0.002)

    task = asyncio.create_task(probe())
    await asyncio.sleep(0)  # the probe sleeps from here on
    entered = time.monotonic()  # run_point takes its start before its first await: at most a stall later
    try:
        await run
    finally:
        task.cancel()
    return entered, late


def test_open_loop_sends_on_the_seeded_poisson_schedule() -> None:
    workload, recorded = FakeWorkload(delay_s=0.05), list[Measurement]()
    start = time.monotonic()
    entered, wake_ups = asyncio.run(_with_wake_ups(run_point(
        workload, None, Labels("c", "cfg", "w"), "r40", 1, 20, 11, recorded.append, set())))  # type: ignore[arg-type]
    offsets = arrival_offsets(40.0, 20, 11, "w", "r40", 1)
    assert len(recorded) == 20 and {m.load for m in recorded} == {"r40"}
    # Measured from the point's start (not from the first send, which a stall may delay: the others then looked
    # early), and against the loop's own wake-ups in the same run (on a loaded 2-core box they are late by tens
    # of milliseconds, for the probe as for the runner).
    late = [t - entered - o for t, o in zip(workload.sent, offsets)]
    # on schedule, whatever is in flight: never early, and late only by the event loop's wake-ups (a schedule
    # that drifted, or waited for answers, would be late by their sum)
    assert min(late) > -0.002, late
    assert statistics.median(late) < 0.01 + statistics.median(wake_ups), (late, statistics.median(wake_ups))
    assert max(late) < 0.02 + max(wake_ups), (late, max(wake_ups))
    assert workload.peak > 1  # arrivals do not wait for answers (open loop)
    assert time.monotonic() - start >= offsets[-1]


def _truths() -> dict[str, float]:
    """Each demo configuration's B* from the ground-truth profile, in closed form."""
    profile = load_profile({"SPECBENCH_SIM_PROFILE": str(REPO / "sweeps" / "sim-profiles" / "crossover.toml")})
    det = profile["deterministic"]
    ar = next(r for r in det["config"] if r["algorithm"] == "NONE")["tok_s"]
    out = {}
    for rule in det["config"]:
        if rule["algorithm"] == "EAGLE3":
            steps = rule["num_steps"]
            out[f"eagle3-s{steps}"] = ground_truth_crossover(ar, rule["tok_s"], rule["accept_length"], steps + 1,
                                                             det["batch_ms_per_token"])
    return out


@pytest.mark.timing  # never beside a real server (tests/cpu_share.py)
@pytest.mark.e2e
@pytest.mark.xdist_group("default-port-30000")  # servers on the default port base: one xdist worker runs them
def test_crossover_demo_finds_every_true_crossover_with_under_half_the_grid(tmp_path: Path) -> None:
    """Done-when: sweeps/crossover-demo.toml on the simulator; the report's crossover_concurrency intervals hold
    the closed-form B* of every configuration, found with at most half the (configuration, load point) grid;
    resuming the finished run measures nothing more."""
    truths = _truths()
    assert len(truths) == 6
    run = subprocess.run([sys.executable, "-m", "specbench_tui", "run", str(REPO / "sweeps" / "crossover-demo.toml"),
                          "--headless", "--runs-dir", str(tmp_path)], capture_output=True, text=True, timeout=400)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    # the end summary says each configuration's interval as the report does; on a loaded machine a noisy point may
    # widen an interval (noisy points never decide one), so the line must hold the truth, not one exact text
    printed = re.search(r"^B\* code: eagle3-s7 \((\d+), (\d+)\]", run.stdout, re.MULTILINE)
    assert printed, run.stdout[-3000:]
    assert int(printed[1]) < truths["eagle3-s7"] <= int(printed[2]), printed[0]
    run_dir = next(tmp_path.iterdir())
    report = subprocess.run([sys.executable, "-m", "specbench_tui", "report", str(run_dir), "--format", "json"],
                            capture_output=True, text=True, timeout=60)
    data = json.loads(report.stdout)["load"]
    crossovers = {c["config"]: c for c in data["crossover_concurrency"]}
    assert set(crossovers) == set(truths)
    for name, truth in truths.items():
        low, high = crossovers[name]["interval"]
        held = (low if low is not None else float("-inf")) < truth <= (high if high is not None else float("inf"))
        assert held, f"{name}: truth {truth:.2f} outside {crossovers[name]}\n{_measured_points(run_dir, name)}"
    grid = len(present(load_sweep(REPO / "sweeps" / "crossover-demo.toml").workloads[0].load).concurrency) * 7
    assert data["grid_points"] == grid == 84
    assert data["points_measured"] <= grid / 2, data["points_measured"]
    measured = {(m["config"], m["load"]) for m in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert len(measured) == data["points_measured"]
    again = subprocess.run([sys.executable, "-m", "specbench_tui", "run", "--resume", str(run_dir), "--headless"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "launching" not in again.stdout
    after = {(m["config"], m["load"]) for m in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())}
    assert after == measured
    _recommend_prints_the_plans_argv(run_dir, tmp_path / "confirm.toml")


def _measured_points(run_dir: Path, name: str) -> str:
    """What a failed interval was decided from, for CI's log: the report's load rows of the configuration and its
    baseline (tok/s per user, spread, speedup, marks) and any word on the host's load. CI once filed eagle3-s11
    (B* 9.84) under (…, 8] and its log said no more."""
    text = subprocess.run([sys.executable, "-m", "specbench_tui", "report", str(run_dir), "--format", "md"],
                          capture_output=True, text=True, timeout=60)
    lines = (text.stdout + text.stderr).splitlines()
    wanted = ("| configuration | load ", f"| {name} | c", "| ar | c")
    return "\n".join(line for line in lines if line.startswith(wanted) or "host" in line)


def _recommend_prints_the_plans_argv(run_dir: Path, confirm: Path) -> None:
    """Issue 47: ``specbench recommend`` on the demo's run prints per band the winner's command line, equal to the
    plan's argv for that configuration (our --decode-log-interval removed), and its confirm sweep validates."""
    out = subprocess.run([sys.executable, "-m", "specbench_tui", "recommend", str(run_dir), "--confirm", str(confirm)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    plan = {c["name"]: c["argv"] for c in json.loads((run_dir / "plan.json").read_text())["configs"]}
    # A band may have no winner ("no winner (ddtree-b8: noisy…)": a loaded machine's noisy points decide nothing);
    # it prints no command line.
    winners = re.findall(r"^  c[\d–c]+: (?!no winner)(\S+) ", out.stdout, re.MULTILINE)
    commands = re.findall(r"^    command: (.*)$", out.stdout, re.MULTILINE)
    assert winners and len(winners) == len(commands), out.stdout
    for winner, command in zip(winners, commands):
        argv = plan[winner]
        i = argv.index("--decode-log-interval")
        assert shlex.split(command) == ["python", "-m", "sglang.launch_server", *argv[:i], *argv[i + 2:]], winner
    valid = subprocess.run([sys.executable, "-m", "specbench_tui", "validate", str(confirm)], capture_output=True,
                           text=True, timeout=60)
    assert valid.returncode == 0, valid.stdout[-2000:] + valid.stderr[-2000:]


OPEN_LOOP = """
[sweep]
name = "open-loop"
gpus = 1
repeats = 3
warmup = 0
[engine]
launcher = "simulator"
sim_profile = "PROFILE"
startup_timeout_s = 60
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
[[configs]]
name = "ar"
[[workloads]]
kind = "code"
max_new_tokens = 9
request_rate = [25]
requests = 12
arrival_seed = 5
"""


@pytest.mark.timing  # never beside a real server (tests/cpu_share.py)
@pytest.mark.e2e
@pytest.mark.xdist_group("default-port-30000")  # servers on the default port base: one xdist worker runs them
def test_an_open_loop_point_sends_on_its_seeded_schedule_through_the_real_engine(tmp_path: Path) -> None:
    sweep = tmp_path / "open.toml"
    sweep.write_text(OPEN_LOOP.replace("PROFILE", str(REPO / "sweeps" / "sim-profiles" / "crossover.toml")))
    run = subprocess.run([sys.executable, "-m", "specbench_tui", "run", str(sweep), "--headless", "--runs-dir",
                          str(tmp_path / "runs")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    run_dir = next((tmp_path / "runs").iterdir())
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(records) == 36 and {r["load"] for r in records} == {"r25"} and all(r["status"] == "ok" for r in records)
    on_schedule = []
    for repeat in sorted({r["repeat"] for r in records}):
        sent = sorted(r["started_at"] for r in records if r["repeat"] == repeat)
        offsets = arrival_offsets(25.0, 12, 5, "code", "r25", repeat)
        # The point's start is not on record: measured from the send that was least late (the first send, late
        # itself on a loaded box, made the others look early). Another schedule (a wrong seed, salt or rate) is
        # off by tens of milliseconds from gap to gap, so the typical send would be far from the least late one.
        origin = min(t - o for t, o in zip(sent, offsets))
        late = [t - origin - o for t, o in zip(sent, offsets)]
        assert len(late) == 12 and max(late) < 2.0, (repeat, late)  # a bound for a starved engine; the schedule: below
        if statistics.median(late) < 0.015 and max(late) < 0.15:
            on_schedule.append(repeat)
    # A starved engine (on a loaded 2-core box its loop was seen stalled 0.5-1 s) sends what fell due in a stall
    # late, all at once; a repeat it spared shows the schedule to the millisecond. A wrong seed, rate or salt, or
    # sends that wait for answers, fail every repeat.
    assert on_schedule, "no repeat followed its seeded schedule"
    report = subprocess.run([sys.executable, "-m", "specbench_tui", "report", str(run_dir), "--format", "csv"],
                            capture_output=True, text=True, timeout=60)
    lines = report.stdout.splitlines()
    assert "load,load_axis,load_value,output_tps" in lines[0]
    assert any(",r25,request_rate,25," in line for line in lines[1:])


RESUME_SWEEP = """
[sweep]
name = "resume-search"
gpus = 1
repeats = 3  # three, so a point a loaded box's stall spread shows as noisy and cannot decide the bracket
warmup = 0
baseline = "ar"
[engine]
launcher = "simulator"
sim_profile = "PROFILE"
startup_timeout_s = 60
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
max-running-requests = 64
stream-interval = 4  # as in the demo: fewer chunks, so a busy loop's stalls cost autoregressive less
[measure]  # the closed-form B* counts decode steps only; a cold point also pays each prompt's whole prefill
cache = "warm"
[[configs]]
name = "ar"
[[configs]]
name = "eagle3-s7"
args = { speculative-algorithm = "EAGLE3", speculative-draft-model-path = "d/e", speculative-num-steps = 7, speculative-eagle-topk = 1, speculative-num-draft-tokens = 8 }
[[workloads]]
kind = "code"
max_new_tokens = 37  # 36 decode tokens, as in the demo: with 12, a loaded box's late reads flipped speedups near 1
concurrency = [1, 4, 8, 16, 24, 32, 64]
waves = 1
"""


@pytest.mark.timing  # never beside a real server (tests/cpu_share.py)
@pytest.mark.e2e
def test_an_adaptive_search_stopped_between_rounds_resumes_where_it_was(simulator_sweep: SimulatorSweep) -> None:
    """The search keeps nothing the run directory does not hold: stopped after its first round and resumed, it
    measures no point twice and still brackets the true B* between grid neighbours."""
    from specbench_tui.core.analysis import analyse
    from specbench_tui.core.events import Event, Notice
    from specbench_tui.core.plan import build_plan
    from specbench_tui.rundir.store import RunDir

    sweep = simulator_sweep.write(
        RESUME_SWEEP.replace("PROFILE", str(REPO / "sweeps" / "sim-profiles" / "crossover.toml")), name="s.toml")
    plan = build_plan(load_sweep(sweep))

    def at_round_2(e: Event) -> bool:
        return isinstance(e, Notice) and "round 2" in e.text

    first = simulator_sweep.run_sync(plan, stop_when=at_round_2)
    assert first.outcome.state != "completed"
    run_dir = first.run_dir
    before = {(m["config"], m["load"]) for m in map(json.loads, (run_dir.path / "results.jsonl").read_text().splitlines())}
    ends = {("ar", "c1"), ("ar", "c64"), ("eagle3-s7", "c1"), ("eagle3-s7", "c64")}
    assert ends < before and len(before - ends) == 1  # the ends, and the first probe (ahead of its baseline)
    assert next(iter(before - ends))[0] == "eagle3-s7"
    assert simulator_sweep.run_sync(plan, run_dir=RunDir.open(run_dir.path), resumed=True).outcome.state == "completed"
    records = [json.loads(line) for line in (run_dir.path / "results.jsonl").read_text().splitlines()]
    keys = [(r["config"], r["load"], r["item"], r["repeat"]) for r in records]
    assert len(keys) == len(set(keys))  # nothing measured twice
    analysis = analyse(plan.to_json(), RunDir.open(run_dir.path).read_measurements(),
                       RunDir.open(run_dir.path).read_events())
    c = present(present(analysis.load).crossover(plan.configs[1].id, "code"))
    # B* = 19.6 (sim-profiles/crossover.toml): (16, 24] on a quiet box; a noisy point may widen the bracket (CI's
    # loaded 2 cores once read 0.92x at c24 as a speedup with one repeat), but it must still hold the truth
    truth = _truths()["eagle3-s7"]
    assert c.low is not None and c.high is not None and c.low < truth <= c.high, (c.low, c.high)
    assert (c.low, c.high) in {(16.0, 24.0), (8.0, 24.0), (16.0, 32.0), (8.0, 32.0)}, (c.low, c.high)
