"""specbench recommend (core/recommend.py, report/recommend.py): the winner per workload and band, what was
excluded and why, the winner's exact command, vLLM's draft-token schedule and the confirm sweep."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from repo_paths import REPO
from specbench_tui.core.analysis import analyse
from specbench_tui.core.recommend import Band, deploy_argv, recommend, vllm_schedule
from specbench_tui.core.records import Measurement



def cfg(cid: str, name: str, speculative: bool, budget: int | None = None) -> dict[str, Any]:
    argv = ["--model-path", "m", "--decode-log-interval", "5"]
    if speculative:
        argv += ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", str(budget)]
    return {"id": cid, "name": name, "algorithm": "eagle3" if speculative else "autoregressive", "tp": 1,
            "argv": argv, "params": {}, "baseline": "ar" if speculative else None, "skip_reason": None,
            "speculative": speculative, "draft_budget": budget}


def cell(cid: str, name: str, tps: float, accept: float | None, repeat: int = 1) -> list[Measurement]:
    return [Measurement(config_id=cid, config=name, workload="w", item=item, repeat=repeat, status="ok",
                        decode_tps=tps, ttft_s=0.01, e2e_s=1.0, completion_tokens=64, accept_length=accept,
                        output_sha=f"sha-{item}") for item in ("a", "b")]


def sequential_plan(*configs: dict[str, Any]) -> dict[str, Any]:
    return {"sweep": "s", "engine": "sglang", "configs": list(configs),
            "workloads": [{"name": "w", "kind": "code", "temperature": 0.0, "repeats": 2}]}


def test_a_configuration_whose_drafts_were_idle_is_never_the_winner() -> None:
    """The idle one is the fastest (a server that skips drafting can be): it is excluded, with why."""
    plan = sequential_plan(cfg("a0", "ar", False), cfg("s1", "idle", True, 4), cfg("s2", "works", True, 2),
                           cfg("s3", "silent", True, 3))
    ms = [*cell("a0", "ar", 100.0, None), *cell("s1", "idle", 180.0, 1.01), *cell("s2", "works", 150.0, 2.4),
          *cell("s3", "silent", 170.0, None)]
    rec = recommend(analyse(plan, ms, []), plan)
    (band,) = rec.bands
    assert band.winner == "works"
    why = {e.config: e.why for e in band.excluded}
    assert why["idle"] == "idle drafts: acceptance length 1.01"
    assert why["silent"] == "idle drafts: no verify step recorded (speculation never engaged)"
    assert band.runner_up == "ar" and band.margin == pytest.approx(0.5)


def test_the_printed_command_is_the_plans_argv_without_our_measuring_flags() -> None:
    config = cfg("s1", "e", True, 4)
    assert deploy_argv(config, "sglang") == ["--model-path", "m", "--speculative-algorithm", "EAGLE3",
                                             "--speculative-num-steps", "4"]
    assert deploy_argv({"argv": ["--metrics", "-m", "x"]}, "llamacpp") == ["-m", "x"]


def _band(first: str, last: str, winner: str | None, speculative: bool) -> Band:
    loads = (first,) if first == last else (first, last)
    return Band("w", "concurrency", loads, winner, winner, speculative, None, None, None)


VLLM_SCHEDULE = [_band("c1", "c4", "k5", True), _band("c6", "c8", "k3", True), _band("c12", "c64", "ar", False)]
VLLM_CONFIGS = {"k5": {"draft_budget": 5}, "k3": {"draft_budget": 3}, "ar": {}}


def test_the_vllm_schedule_covers_every_batch_size_from_1_with_each_bands_draft_length() -> None:
    assert vllm_schedule(VLLM_SCHEDULE, VLLM_CONFIGS) == [[1, 5, 5], [6, 11, 3], [12, 64, 0]]


@pytest.mark.vllm
def test_the_vllm_schedule_loads_in_vllms_own_parser() -> None:
    python = REPO / ".venv-vllm" / "bin" / "python"
    if not python.exists():
        pytest.skip("no .venv-vllm (tools/setup_vllm.sh)")
    schedule = json.dumps(vllm_schedule(VLLM_SCHEDULE, VLLM_CONFIGS))
    code = ("import json, sys\nfrom vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup\n"
            f"dense = build_dynamic_sd_schedule_lookup(json.loads({schedule!r}), 64, 5)\n"
            "print(json.dumps([dense[1], dense[5], dense[6], dense[11], dense[12], dense[64]]))")
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [5, 5, 3, 3, 0, 0]
