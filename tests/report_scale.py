"""A load run at the documented configuration limit, built without a server: the sweep file and plan through
the product's own loader and planner, the measurements and the run's events through the run directory's writers
(as the engine writes them). Shared by tests/unit/report/test_report_scale.py and bench/bench_report_scale.py."""

from __future__ import annotations

import math
import random
from pathlib import Path
from typing import Any
from unittest import mock

from specbench_tui.core.events import ConfigFinished, ConfigState
from specbench_tui.core.load import point_keys
from specbench_tui.core.plan import build_plan
from specbench_tui.core.records import Measurement
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.rundir.store import RunDir

LOADS = ("c1", "c8", "c64")

SWEEP = """
[sweep]
name = "report-scale"
gpus = 1
repeats = 1
warmup = 0
baseline = "ar"
[engine]
launcher = "simulator"
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
max-running-requests = 64
[measure]
cache = "warm"
[[configs]]
name = "ar"
[[configs]]
name = "e{a}-{b}"
matrix = { a = [A], b = [B] }
[configs.args]
speculative-algorithm = "EAGLE3"
speculative-draft-model-path = "d/e"
speculative-eagle-topk = 1
speculative-num-steps = "{a}"
speculative-num-draft-tokens = "{b}"
[[workloads]]
kind = "code"
max_new_tokens = 32
concurrency = [1, 8, 64]
requests = 1
search = "grid"
"""


def build_scale_run(folder: Path, configs: int) -> Path:
    """A finished load run of ``configs`` configurations (the baseline and ``configs - 1`` EAGLE3 ones) x 3
    load points, one request each; returns its directory."""
    side = max(1, math.isqrt(configs - 1))
    rows = math.ceil((configs - 1) / side)
    a = ", ".join(str(i) for i in range(1, rows + 1))
    b = ", ".join(str(100 + i) for i in range(side))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "scale.toml"
    path.write_text(SWEEP.replace("[A]", f"[{a}]").replace("[B]", f"[{b}]"))
    plan = build_plan(load_sweep(path))
    run_dir = RunDir.create(folder / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    rng = random.Random(0)
    workload = plan.sweep.workloads[0]
    # The writers fsync every record (a crash keeps what was measured); 30,000 of them would take the build half
    # a minute of disk waits that say nothing about the report, so this synthetic run skips them.
    with mock.patch("os.fsync"):
        _write(run_dir, plan, workload, configs, rng)
    return run_dir.path


def _write(run_dir: RunDir, plan: Any, workload: Any, configs: int, rng: random.Random) -> None:
    try:
        for config in plan.configs[:configs]:
            speed = 1.0 if config.baseline is None else rng.uniform(0.6, 2.5)
            for index, label in enumerate(LOADS):
                for key in point_keys(config.id, workload.name, ["fibonacci"], label, 1, 1):
                    per_user = 100.0 * speed / (1 + index)
                    run_dir.append_measurement(Measurement(
                        config_id=config.id, config=config.name, workload=workload.name, item=key[2], repeat=1,
                        status="ok", load=label, decode_tps=per_user, ttft_s=0.02 * (1 + index), completion_tokens=32,
                        accept_length=2.0 if config.baseline else None, started_at=1.0 + index,
                        e2e_s=32 / per_user))
            run_dir.append_event(ConfigFinished(config_id=config.id, name=config.name, state=ConfigState.DONE))
    finally:
        run_dir.close()
