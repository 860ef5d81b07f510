"""Issue 26, the product side without a server: the ``[measure] cache`` policy in the sweep format, validate's
warnings (a speculative configuration above SGLang's 48 reset, a simulated acceptance on a real server), and the
parsers that read what a real SGLang 0.5.23 says (running caps, retraction warnings, adaptive step switches,
decode lines of a second DP rank, DFlash/DSpark block sizes as draft budgets). The lines parsed are SGLang's own
format strings, quoted from its source (see each test)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specbench_tui.core.engines.registry import get_profile
from specbench_tui.core.engines.sglang import adaptive_steps, graph_ceiling, parse_stats_line, running_cap
from specbench_tui.core.errors import SweepError
from specbench_tui.core.logparse import RETRACT, STEPS, adaptive_figures, summarize_decode
from specbench_tui.core.plan import build_plan
from specbench_tui.core.sweep.loader import load_sweep

HEAD = """[sweep]
name = "t"
baseline = "ar"
[engine]
launcher = "LAUNCHER"
PROFILE
[server.args]
model-path = "/tmp/m"
"""


def _sweep(tmp_path: Path, body: str, launcher: str = "simulator", profile: str = "") -> Path:
    path = tmp_path / "s.toml"
    path.write_text(HEAD.replace("LAUNCHER", launcher).replace("PROFILE", profile) + body)
    return path


AR_EAGLE = """[[configs]]
name = "ar"
[[configs]]
name = "eagle3"
args = { speculative-algorithm = "EAGLE3", speculative-draft-model-path = "/tmp/d" }
"""


# ------------------------------------------------------------------------------------------- cache policy


def test_the_cache_policy_is_cold_by_default_and_a_workload_may_say_warm(tmp_path: Path) -> None:
    sweep = load_sweep(_sweep(tmp_path, AR_EAGLE + '[[workloads]]\nkind = "haiku"\n'
                                        '[[workloads]]\nkind = "code"\ncache = "warm"\n'))
    assert sweep.cache == "cold"
    assert [w.cache for w in sweep.workloads] == ["cold", "warm"]
    plan = build_plan(sweep)
    workloads = plan.to_json()["workloads"]
    assert isinstance(workloads, list)
    assert [w["cache"] for w in workloads] == ["cold", "warm"]


def test_measure_warm_is_every_workloads_default(tmp_path: Path) -> None:
    sweep = load_sweep(_sweep(tmp_path, '[measure]\ncache = "warm"\n' + AR_EAGLE + '[[workloads]]\nkind = "haiku"\n'))
    assert sweep.cache == "warm" and sweep.workloads[0].cache == "warm"


@pytest.mark.parametrize("where", ["measure", "workload"])
def test_a_bad_cache_value_is_an_error_at_its_line(tmp_path: Path, where: str) -> None:
    body = (('[measure]\ncache = "cool"\n' + AR_EAGLE + '[[workloads]]\nkind = "haiku"\n') if where == "measure"
            else AR_EAGLE + '[[workloads]]\nkind = "haiku"\ncache = "cool"\n')
    path = _sweep(tmp_path, body)
    with pytest.raises(SweepError) as err:
        load_sweep(path)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("cache"))
    text = str(err.value)
    assert f"{path}:{line}" in text and "cold" in text and "warm" in text, text


def test_cold_is_refused_where_the_engine_cannot_flush_and_warm_is_said(tmp_path: Path) -> None:
    """llama-server and vllm serve have no server-wide flush endpoint (their profiles say what they offer)."""
    llama = 'profile = "llamacpp"'
    body = '[[configs]]\nname = "ar"\n[[workloads]]\nkind = "haiku"\n'
    with pytest.raises(SweepError) as err:
        load_sweep(_sweep(tmp_path, '[measure]\ncache = "cold"\n' + body, "command", llama + '\ncommand = ["x"]'))
    assert "cannot" in str(err.value) and "slots" in str(err.value), str(err.value)
    path = _sweep(tmp_path, body, "command", llama + '\ncommand = ["x"]')
    path.write_text(path.read_text().replace("model-path", "model"))  # llama-server's flag
    sweep = load_sweep(path)
    assert sweep.cache == "warm" and sweep.workloads[0].cache == "warm"
    notes = build_plan(sweep).notes
    assert any(": warning: measurements run warm" in n for n in notes), notes
    assert get_profile("vllm").flush_cache_path is None and "reset_prefix_cache" in get_profile("vllm").cache_flush_note
    assert get_profile("sglang").flush_cache_path == "/flush_cache"


# ----------------------------------------------------------------------------------------------- validate


def _warnings(tmp_path: Path, body: str, launcher: str = "simulator") -> list[str]:
    return [n for n in build_plan(load_sweep(_sweep(tmp_path, body, launcher))).notes if ": warning: " in n]


LOAD = '[[workloads]]\nkind = "code"\nconcurrency = [1, 64]\n'


def test_validate_warns_about_a_speculative_configuration_above_48_naming_the_baseline_cap(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    warnings = _warnings(tmp_path, AR_EAGLE + LOAD)
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("concurrency"))
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(f"{path}:{line}: warning: 'eagle3'"), warnings[0]
    assert "at 48" in warnings[0] and "baseline 'ar'" in warnings[0] and "max-running-requests = 64" in warnings[0]
    out = subprocess.run([sys.executable, "-m", "specbench_tui", "validate", str(path)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and f"{path}:{line}: warning:" in out.stdout, out.stdout[-2000:] + out.stderr


def test_no_cap_warning_with_max_running_requests_or_below_48(tmp_path: Path) -> None:
    lifted = AR_EAGLE.replace('speculative-draft-model-path = "/tmp/d"',
                              'speculative-draft-model-path = "/tmp/d", max-running-requests = 64')
    assert _warnings(tmp_path, lifted + LOAD) == []
    assert _warnings(tmp_path, AR_EAGLE + LOAD.replace("64", "48")) == []


def test_a_simulated_acceptance_on_a_real_server_is_flagged(tmp_path: Path) -> None:
    body = '[server.env]\nSGLANG_SIMULATE_ACC_LEN = "3"\n' + AR_EAGLE + '[[workloads]]\nkind = "haiku"\n'
    path = tmp_path / "s.toml"
    warnings = _warnings(tmp_path, body, "sglang")
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("SGLANG_SIMULATE"))
    assert [w for w in warnings if w.startswith(f"{path}:{line}: warning: SGLANG_SIMULATE_ACC_LEN")], warnings
    assert _warnings(tmp_path, body, "simulator") == []  # the simulator is where it belongs


# ------------------------------------------------------------------------------------------ what SGLang says


def test_dflash_and_dspark_block_sizes_are_the_draft_budget() -> None:
    sglang = get_profile("sglang")
    assert sglang.draft_budget(["--speculative-algorithm", "DFLASH", "--speculative-dflash-block-size", "16"]) == 16
    assert sglang.draft_budget(["--speculative-algorithm", "DSPARK", "--speculative-dspark-block-size", "8"]) == 8


def test_the_running_cap_and_graph_ceiling_come_from_server_info() -> None:
    """``/server_info``: the resolved server args (``max_running_requests``) and ``internal_states[]`` with
    ``effective_max_running_requests_per_dp`` (``internal_state.py`` ``_add_topology``)."""
    assert running_cap({"max_running_requests": 48}) == 48
    per_dp = {"max_running_requests": 96, "internal_states": [{"effective_max_running_requests_per_dp": 48}] * 2}
    assert running_cap(per_dp) == 96
    assert running_cap({}) is None
    assert graph_ceiling({"cuda_graph_max_bs_decode": 64}) == 64


# scheduler.py update_running_batch: msg_prefix + f"#retracted_reqs: {len(retracted_reqs)}, #new_tokens_gained: ..."
RETRACT_LINE = ("[2026-12-01 10:00:00 DP1 TP4] KV cache pool is full. Retract requests. #retracted_reqs: 3, "
                "#new_tokens_gained: 812, #new_token_ratio: 0.6123 -> 0.8400")
# eagle_worker_v2.py apply_runtime_state / adaptive_spec_params.py AdaptiveSpeculativeParams.__init__
SWITCH_LINE = "[2026-12-01 10:00:01] Switch adaptive runtime state: steps 3 -> 0, draft_tokens 4 -> 1"
INIT_LINE = "[2026-12-01 10:00:00] AdaptiveSpeculativeParams initialized: steps=3, candidate_steps=[1, 3, 5, 7]"


def _decode(dp: int | None, tp: int, running: int, gen: float, accept: float = 2.0) -> str:
    prefix = f"DP{dp} TP{tp}" if dp is not None else f"TP{tp}"
    return (f"[2026-12-01 10:00:00 {prefix}] Decode batch, #running-req: {running}, #token: 100, token usage: 0.01, "
            f"accept len: {accept:.2f}, accept rate: 0.50, cuda graph: True, gen throughput (token/s): {gen:.2f}, "
            "#queue-req: 0")


def test_retraction_warnings_and_adaptive_switches_are_read() -> None:
    retract = parse_stats_line(RETRACT_LINE)
    assert retract is not None and retract.kind == RETRACT and retract.num_token == 3 and retract.dp_rank == 1
    switch, init = parse_stats_line(SWITCH_LINE), parse_stats_line(INIT_LINE)
    assert switch is not None and switch.kind == STEPS and switch.num_token == 0
    assert init is not None and init.kind == STEPS and init.num_token == 3
    summary = summarize_decode([retract, parse_stats_line(_decode(None, 0, 4, 10.0))])  # type: ignore[list-item]
    assert summary.to_json()["retract_warnings"] == 1 and summary.to_json()["retracted_requests"] == 3


def test_decode_lines_of_a_second_dp_rank_are_counted_once_each() -> None:
    """DP attention over 8 GPUs: each DP group's leader (``DP0 TP0``, ``DP1 TP4``) logs its own decode lines."""
    lines = [parse_stats_line(_decode(0, 0, 8, 100.0, 2.0)), parse_stats_line(_decode(1, 4, 8, 60.0, 3.0)),
             parse_stats_line(_decode(1, 5, 8, 60.0, 3.0))]  # TP5 repeats its group's line: not counted
    summary = summarize_decode([b for b in lines if b is not None])
    assert summary.lines == 2 and summary.dp_ranks == 2
    assert summary.accept_length == pytest.approx(2.5) and summary.gen_throughput == pytest.approx(160.0)


def test_adaptive_steps_from_the_log_else_from_the_tiers() -> None:
    """``adaptive_spec_params.py`` DEFAULT_ADAPTIVE_CONFIG: {1,3,5,7} from batch 1, {0,1,3} from 8, {0,1} from
    32, {0} from 64."""
    assert [adaptive_steps(b) for b in (1, 7, 8, 31, 32, 63, 64, 500)] == [
        (1, 3, 5, 7), (1, 3, 5, 7), (0, 1, 3), (0, 1, 3), (0, 1), (0, 1), (0,), (0,)]
    wide = [b for b in (parse_stats_line(_decode(None, 0, 64, 10.0)),) if b is not None]
    tiers = adaptive_figures(wide, adaptive_steps)
    assert tiers["spec_steps"] == [0] and tiers["speculation"] == "off" and tiers["steps_source"] == "tiers"
    switch = parse_stats_line(SWITCH_LINE)
    assert switch is not None
    logged = adaptive_figures([switch, *wide], adaptive_steps, start_steps=3)
    assert logged["spec_steps"] == [0, 3] and logged["speculation"] == "mixed" and logged["steps_source"] == "log"
