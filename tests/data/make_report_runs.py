"""Write the two synthetic run directories the report tests read: ``report_run_a/`` and ``report_run_b/``.

Deterministic (fixed seeds and timestamps), so the golden files stay valid; regenerate with::

    .venv/bin/python tests/data/make_report_runs.py

The plan is built by the real planner from a small sweep (AR baseline, DFlash b16 at TP1/2/4 (no ar-tp2 in the
plan, so TP2 has no baseline), DDTree budgets 8..64 at TP1 and TP4, an NGRAM server whose acceptance is 1.0).
Run A holds what a report must survive: ddtree-b8-tp1 and ddtree-b12-tp1 crash with
``cuda_illegal_instruction`` (with excerpts; b12 after a few measurements and one error), ddtree-b64-tp4 is
skipped with a reason, one zero-output measurement (ddtree-b32-tp4, haiku), one clamped prompt, a lossless
mismatch on the fastest code configuration (ddtree-b64-tp1), repeats with spread. Run B is the same campaign
"after a driver upgrade": TP4 about 12 % faster, a higher TTFT at TP1, ddtree-b12-tp1 no longer crashes,
ngram-tp1 dropped and ddtree-b24-tp1 added (configurations only in one run).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from specbench_tui.core.events import (  # noqa: E402
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    CrashDetected,
    Event,
    MeasurementRecorded,
    Notice,
    ServerLaunching,
    ServerReady,
    ServerStopped,
    SweepFinished,
    SweepStarted,
    WorkloadFinished,
    WorkloadNotRun,
    WorkloadStarted,
)
from specbench_tui.core.plan import PlannedConfig, build_plan  # noqa: E402
from specbench_tui.core.records import Measurement  # noqa: E402
from specbench_tui.core.sweep.loader import load_sweep  # noqa: E402

SWEEP = """\
# Synthetic report fixture (tests/data/make_report_runs.py): small, realistic, deterministic.
[sweep]
name = "report-fixture"
description = "AR vs DFlash vs DDTree budgets 8-64 at TP1/TP4 (synthetic)"
baseline = "ar-tp{{tp}}"
gpus = 4
repeats = 3
warmup = 0
lossless_check = true

[engine]
profile = "sglang"
launcher = "simulator"

[server.args]
model-path = "/dev/shm/Qwen3.6-27B"
context-length = 32768

[[configs]]
name = "ar-tp{{tp}}"
algorithm = "autoregressive"
matrix = {{ tp = [1, 4] }}
args = {{ tp-size = "{{tp}}" }}

[[configs]]
name = "dflash-b{{budget}}-tp{{tp}}"
algorithm = "dflash"
matrix = {{ budget = [16], tp = [1, 2, 4] }}
[configs.args]
tp-size = "{{tp}}"
speculative-algorithm = "DFLASH"
speculative-draft-model-path = "/dev/shm/Qwen3.6-27B-DFlash-b16"
speculative-num-draft-tokens = "{{budget}}"

[[configs]]
name = "ddtree-b{{budget}}-tp{{tp}}"
algorithm = "ddtree"
matrix = {{ budget = {budgets}, tp = [1, 4] }}
[configs.args]
tp-size = "{{tp}}"
speculative-algorithm = "DDTREE"
speculative-draft-model-path = "/dev/shm/Qwen3.6-27B-DFlash-b16"
disable-overlap-schedule = true
page-size = 1
[configs.fork_args]
speculative-ddtree-budget = "{{budget}}"
[[configs.exclude]]
budget = 64
tp = 4
reason = "budget 64 at TP4 does not fit the CUDA-graph memory on 32 GB cards (seen OOM at capture)"
{ngram}
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci", "quicksort"]
max_new_tokens = 512

[[workloads]]
name = "haiku"
kind = "haiku"
count = 2
max_new_tokens = 64
temperature = 0.7

[[workloads]]
name = "long-context"
kind = "long_context"
prompt_tokens = [1024, "max"]
max_new_tokens = 256
repeats = 2
"""

NGRAM = """
[[configs]]
name = "ngram-tp1"
algorithm = "ngram"
args = { tp-size = 1, speculative-algorithm = "NGRAM" }
"""

ITEMS = {"code": ("fibonacci", "quicksort"), "haiku": ("haiku-0", "haiku-1"), "long-context": ("ctx-1024", "ctx-max")}
REPEATS = {"code": 3, "haiku": 3, "long-context": 2}
BASE_TPS = {1: 31.0, 2: 52.0, 4: 78.0}
"""Autoregressive decode tok/s of a 27B model per TP (the speed every speedup is against)."""
ALPHA = {"code": 0.8, "haiku": 0.55, "long-context": 0.7}
"""Per-draft-token acceptance probability per workload (greedy code drafts best)."""
TTFT = {"code": 0.09, "haiku": 0.07, "long-context": 2.4}
EXCERPT = (
    "[2026-05-04 10:12:07 TP0] Decode batch. #running-req: 1, #token: 1411, token usage: 0.01, accept len: 3.12",
    "[2026-05-04 10:12:07 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "sglang/srt/speculative/ddtree_worker.py", line 412, in verify',
    "    torch.cuda.synchronize()",
    "RuntimeError: CUDA error: an illegal instruction was encountered",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.",
)


class Clock:
    """Deterministic timestamps, one second apart."""

    def __init__(self, start: float) -> None:
        self.now = start

    def tick(self, seconds: float = 1.0) -> float:
        self.now += seconds
        return self.now


def accept_length(config: PlannedConfig, workload: str) -> float:
    """Expected tokens per verify step: DFlash drafts a 15-token chain, a DDTree of ``budget`` nodes covers
    alternatives (a higher per-level acceptance) to a depth of log2(budget) + 1."""
    if config.algorithm == "ngram":
        return 1.0
    alpha = ALPHA[workload]
    depth = 15.0
    if config.algorithm == "ddtree":
        budget = int(config.param("budget", 16))
        alpha = 1 - (1 - alpha) / (1 + budget / 24)
        depth = math.log2(budget) + 1
    return float(1.0 + alpha * (1 - alpha ** depth) / (1 - alpha))


def decode_tps(config: PlannedConfig, workload: str, speed: dict[int, float]) -> float:
    base = BASE_TPS[config.tp] * speed.get(config.tp, 1.0)
    if config.algorithm == "autoregressive":
        return base
    if config.algorithm == "ngram":
        return base * 0.96
    cost = 1.25 if config.algorithm == "dflash" else 1.12 + 0.0075 * int(config.param("budget", 16))
    return base * accept_length(config, workload) / cost


def sha(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def measurements_for(config: PlannedConfig, workload: str, rng: random.Random, speed: dict[int, float],
                     ttft_scale: dict[int, float], limit: int | None = None) -> list[Measurement]:
    out: list[Measurement] = []
    for repeat in range(REPEATS[workload]):
        repeat_noise = 1 + rng.uniform(-0.04, 0.04)
        for item in ITEMS[workload]:
            if limit is not None and len(out) >= limit:
                return out
            tps = decode_tps(config, workload, speed) * repeat_noise * (1 + rng.uniform(-0.02, 0.02))
            if item == "ctx-max":
                tps *= 0.82
            drawn = accept_length(config, workload) * (1 + rng.uniform(-0.03, 0.03))
            al = max(drawn, 1.0) if config.algorithm != "autoregressive" else None
            completion = {"code": 512, "haiku": 48, "long-context": 256}[workload]
            verify = round(completion / al) if al else None
            output = (sha(workload, item) if workload != "haiku" else sha(config.name, workload, item, repeat))
            if config.name == "ddtree-b64-tp1" and workload == "code" and item == "quicksort" and repeat == 1:
                output = sha("diverged", item)
            ttft = TTFT[workload] * ttft_scale.get(config.tp, 1.0) * (1 + rng.uniform(-0.05, 0.05))
            if item == "ctx-max":
                ttft *= 6
            prompt = {"ctx-1024": 1024, "ctx-max": 32256}.get(item, 180)
            common: dict[str, Any] = dict(config_id=config.id, config=config.name, workload=workload, item=item, repeat=repeat,
                                          prompt_tokens=prompt, started_at=1_777_000_000.0 + len(out))
            if config.name == "ddtree-b32-tp4" and workload == "haiku" and item == "haiku-1" and repeat == 2:
                out.append(Measurement(**common, status="zero_output", completion_tokens=0, ttft_s=round(ttft, 4),
                                       e2e_s=round(ttft, 4), finish_reason="stop"))
                continue
            clamped = item == "ctx-max"
            out.append(Measurement(
                **common, status="ok", completion_tokens=completion, ttft_s=round(ttft, 4),
                e2e_s=round(ttft + (completion - 1) / tps, 4), decode_tps=round(tps, 3),
                itl_mean_s=round(1 / tps, 5), accept_length=round(al, 3) if al else None,
                verify_ct=verify, finish_reason="length", clamped=clamped,
                requested_prompt_tokens=32768 if clamped else None, output_sha=output))
    return out


def write_run(name: str, *, budgets: list[int], ngram: bool, crashed: set[str], speed: dict[int, float],
              ttft_scale: dict[int, float], seed: int, env: dict[str, object], root: Path = HERE) -> Path:
    run = root / name
    if run.exists():
        shutil.rmtree(run)
    (run / "logs").mkdir(parents=True)
    text = SWEEP.format(budgets=json.dumps(budgets), ngram=NGRAM if ngram else "")
    (run / "sweep.toml").write_text(text)
    plan = build_plan(load_sweep(run / "sweep.toml", display_path=f"{name}/sweep.toml"))
    run_dir_text = f"runs/{name}"
    (run / "plan.json").write_text(json.dumps(plan.to_json(), indent=2) + "\n")
    (run / "env.json").write_text(json.dumps(env, indent=2) + "\n")
    rng = random.Random(seed)
    clock = Clock(1_777_000_000.0)
    events: list[Event] = [SweepStarted(sweep=plan.sweep.name, run_dir=run_dir_text,
                                        total_configs=len(plan.configs), ts=clock.tick())]
    results: list[Measurement] = []
    for config in plan.configs:
        if config.skipped:
            events.append(ConfigFinished(config_id=config.id, name=config.name, state=ConfigState.SKIPPED,
                                         reason=config.skip_reason, ts=clock.tick()))
            continue
        events += [
            ConfigStateChanged(config_id=config.id, name=config.name, state=ConfigState.LAUNCHING, ts=clock.tick()),
            ServerLaunching(config_id=config.id, name=config.name, argv=config.argv, gpus=tuple(range(config.tp)),
                            port=30000, pid=4000 + len(events), log_path=f"logs/{config.name}.log", ts=clock.tick()),
            ServerReady(config_id=config.id, startup_s=41.5, context_length=32768, ts=clock.tick(40)),
        ]
        if config.name in crashed:
            limit = 0 if "b8" in config.name else 3
            if limit:
                events.append(WorkloadStarted(config_id=config.id, workload="code", ts=clock.tick(),
                                              expected=len(ITEMS["code"]) * REPEATS["code"]))
                done = measurements_for(config, "code", rng, speed, ttft_scale, limit=limit)
                # The request in flight when the server died, recorded as the engine does: an error, the crash.
                error = Measurement(config_id=config.id, config=config.name, workload="code", item="quicksort",
                                    repeat=1, status="error", error_kind="crash",
                                    error="server crashed: cuda_illegal_instruction", started_at=1_777_000_100.0)
                for m in [*done, error]:
                    results.append(m)
                    events.append(MeasurementRecorded(config_id=config.id, record=m.to_json(), ts=clock.tick()))
            events.append(CrashDetected(config_id=config.id, signature="cuda_illegal_instruction", line=EXCERPT[4],
                                        excerpt=EXCERPT, log_line_number=1204, ts=clock.tick()))
            for workload in ITEMS:  # as the engine does, the cut workload too (its missing keys were not run)
                events.append(WorkloadNotRun(config_id=config.id, workload=workload,
                                             reason="server crashed (cuda_illegal_instruction)", ts=clock.tick()))
            events += [
                ServerStopped(config_id=config.id, exit_code=-6, teardown_s=2.1, ts=clock.tick()),
                ConfigFinished(config_id=config.id, name=config.name, state=ConfigState.CRASHED,
                               reason="server exited with code -6 (SIGABRT) during decode",
                               signature="cuda_illegal_instruction", ts=clock.tick()),
            ]
            continue
        weighted: list[tuple[float, int]] = []
        for workload in ITEMS:
            events.append(WorkloadStarted(config_id=config.id, workload=workload, ts=clock.tick(),
                                          expected=len(ITEMS[workload]) * REPEATS[workload]))
            cell = measurements_for(config, workload, rng, speed, ttft_scale)
            for m in cell:
                results.append(m)
                events.append(MeasurementRecorded(config_id=config.id, record=m.to_json(), ts=clock.tick()))
                if m.accept_length and m.verify_ct:
                    weighted.append((m.accept_length, m.verify_ct))
                if m.clamped and m.repeat == 0 and config.name == "ar-tp1":
                    events.append(Notice(level="warning", config_id=config.id, ts=clock.tick(),
                                         text=f"{m.item}: prompt clamped from 32768 to {m.prompt_tokens} tokens "
                                              "to fit the context with the output"))
            accepts = [m.accept_length for m in cell if m.accept_length]
            events.append(WorkloadFinished(
                config_id=config.id, workload=workload, measured=len(cell),
                zero_output=sum(1 for m in cell if m.status == "zero_output"), ts=clock.tick(),
                server_log={"lines": 40, "accept_length": round(max(1.0, sum(accepts) / len(accepts) * 0.97), 3)
                            if accepts else None, "accept_rate": None, "gen_throughput": None,
                            "gen_throughput_max": None}))
        log_accept = (round(max(1.0, sum(a * v for a, v in weighted) / sum(v for _, v in weighted) * 0.97), 2)
                      if weighted else None)
        events += [
            ServerStopped(config_id=config.id, exit_code=0, teardown_s=3.0, ts=clock.tick()),
            ConfigFinished(config_id=config.id, name=config.name, state=ConfigState.DONE,
                           server_log_accept_length=log_accept,
                           gpu_summary={"peak_memory_gib": 29.5, "mean_power_w": 310.0}, ts=clock.tick()),
        ]
    events.append(SweepFinished(state="completed", ts=clock.tick()))
    with open(run / "results.jsonl", "w", encoding="utf-8") as handle:
        for m in results:
            handle.write(json.dumps(m.to_json(), separators=(",", ":")) + "\n")
    with open(run / "events.jsonl", "w", encoding="utf-8") as handle:
        for event in events:
            if event.persist:
                handle.write(json.dumps(event.to_json(), separators=(",", ":")) + "\n")
    for config_name in sorted(crashed):
        (run / "logs" / f"{config_name}.log").write_text("\n".join(EXCERPT) + "\n")
    return run


def fingerprint(driver: str, cuda: str, torch: str) -> dict[str, object]:
    """An ``env.json`` in the shape :mod:`specbench_tui.engine.fingerprint` writes (trimmed)."""
    devices = [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "mem_total_mib": 97887,
                "compute_capability": "12.0", "sm": "sm_120", "architecture": "Blackwell"} for i in range(4)]
    return {"schema": 1, "created": "2026-05-04T10:00:00+00:00", "specbench_version": "0.1.0",
            "host": {"name": "gpu-box-1", "platform": "Linux-6.8.0-x86_64", "machine": "x86_64", "cpu_count": 64},
            "gpus": {"backend": "nvml", "count": 4, "names": {"NVIDIA RTX PRO 6000 Blackwell Server Edition": 4},
                     "driver_version": driver, "cuda_driver_version": cuda, "sm": ["sm_120"], "devices": devices},
            "server_python": {"interpreter": "/opt/sglang-ddtree/bin/python", "python": "3.12.3",
                              "packages": {"sglang": "0.5.23", "sgl-kernel": "0.3.16", "torch": torch,
                                           "triton": "3.5.1", "flashinfer-python": "0.5.3",
                                           "transformers": "4.57.1"}, "torch_cuda": "12.9", "error": None}}


ENV_A = fingerprint("575.51.03", "12.9", "2.9.1")
ENV_B = fingerprint("580.65.06", "13.0", "2.9.1")


def make_runs(root: Path = HERE) -> tuple[Path, Path]:
    """Write both run directories under ``root`` (the committed ones by default); return their paths."""
    run_a = write_run("report_run_a", budgets=[8, 12, 16, 32, 64], ngram=True,
                      crashed={"ddtree-b8-tp1", "ddtree-b12-tp1"}, speed={}, ttft_scale={}, seed=7, env=ENV_A,
                      root=root)
    run_b = write_run("report_run_b", budgets=[8, 12, 16, 24, 32, 64], ngram=False,
                      crashed={"ddtree-b8-tp1"}, speed={4: 1.12}, ttft_scale={1: 1.3}, seed=11, env=ENV_B,
                      root=root)
    return run_a, run_b


def main() -> None:
    run_a, run_b = make_runs()
    print(f"wrote {run_a} and {run_b}")


if __name__ == "__main__":
    main()
