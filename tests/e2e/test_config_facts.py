"""Caps are facts of the configuration: the running-request cap and the CUDA-graph ceiling a server reports once
ready are recorded under each configuration's ``facts`` in ``plan.json`` and under ``config_facts`` in
``env.json`` (the simulator reports them as SGLang 0.5.23 does: a speculative server reset to 48)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, cast

import pytest
from engine_helpers import plan_for, run_plan, write_sweep

SWEEP = """
[sweep]
name = "facts"
gpus = 1
repeats = 1
warmup = 0
baseline = "ar"
[engine]
launcher = "simulator"
startup_timeout_s = 60
port_base = {port}
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
[measure]
cache = "warm"
[[configs]]
name = "ar"
[[configs]]
name = "eagle3"
args = { speculative-algorithm = "EAGLE3", speculative-draft-model-path = "d/e", speculative-num-steps = 3, speculative-eagle-topk = 1, speculative-num-draft-tokens = 4 }
[[workloads]]
kind = "code"
max_new_tokens = 9
items = ["fibonacci"]
"""


@pytest.mark.e2e
def test_each_configurations_caps_are_in_plan_json_and_env_json(tmp_path: Path) -> None:
    path = write_sweep(tmp_path, SWEEP)
    _, events, run_dir, _ = asyncio.run(run_plan(plan_for(path), tmp_path / "runs", timeout_s=240))
    ready: dict[str, Any] = {cast(Any, e).config_id: e for e in events if type(e).__name__ == "ServerReady"}
    plan = json.loads((run_dir.path / "plan.json").read_text())
    by_name = {c["name"]: c for c in plan["configs"]}
    eagle = by_name["eagle3"]
    assert eagle["facts"]["running_cap"] == 48, eagle.get("facts")
    assert eagle["facts"]["running_cap"] == ready[eagle["id"]].running_cap
    assert eagle["facts"]["graph_ceiling"] == ready[eagle["id"]].graph_ceiling
    ar = by_name["ar"]
    assert ar["facts"]["running_cap"] == ready[ar["id"]].running_cap and ar["facts"]["running_cap"] != 48
    env = json.loads((run_dir.path / "env.json").read_text())
    assert env["config_facts"][eagle["id"]] == eagle["facts"], env.get("config_facts")
    assert env["config_facts"][ar["id"]] == ar["facts"]
