"""Each engine's own acceptance figures under their names: vLLM's and llama.cpp's per-position counters become
conditional acceptance per position in the analysis and the report (the counter text as vLLM exposes it,
docs of ../shared/reference/real-servers.md: ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0..3"}``)."""

from __future__ import annotations

import pytest
from narrowing import present

from specbench_tui.core.acceptance import SERVER_FIGURES, server_definition
from specbench_tui.core.analysis import analyse
from specbench_tui.core.engines.llamacpp import LLAMACPP_SPEC_COUNTERS
from specbench_tui.core.engines.vllm import VLLM_SPEC_COUNTERS
from specbench_tui.core.events import WorkloadFinished
from specbench_tui.core.logparse import parse_prometheus, spec_counter_figures
from specbench_tui.core.records import Measurement
from specbench_tui.report.acceptance_view import acceptance_table


def _vllm_metrics(drafts: int, per_position: list[int], prefix: str = "vllm") -> str:
    labels = 'engine="0",model_name="tiny"'
    lines = [f"# TYPE {prefix}:spec_decode_num_drafts_total counter",
             f"{prefix}:spec_decode_num_drafts_total{{{labels}}} {float(drafts)}",
             f"{prefix}:spec_decode_num_draft_tokens_total{{{labels}}} {float(drafts * len(per_position))}",
             f"{prefix}:spec_decode_num_accepted_tokens_total{{{labels}}} {float(sum(per_position))}",
             f"{prefix}:generation_tokens_total{{{labels}}} 1000.0",
             f"{prefix}:tokens_predicted_total 1000.0"]
    lines += [f'{prefix}:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{k}"}} {float(v)}'
              for k, v in enumerate(per_position)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(("names", "prefix"), [(VLLM_SPEC_COUNTERS, "vllm"), (LLAMACPP_SPEC_COUNTERS, "llamacpp")])
def test_per_position_counters_over_a_window(names, prefix: str) -> None:
    before = parse_prometheus(_vllm_metrics(10, [8, 6, 4, 2], prefix))
    after = parse_prometheus(_vllm_metrics(110, [88, 62, 42, 29], prefix))
    figures = spec_counter_figures(before, after, names)
    assert figures is not None and figures["accepted_per_position"] == [80, 56, 38, 27]
    assert figures["drafts"] == 100


def test_server_per_position_acceptance_reaches_the_report() -> None:
    plan = {"sweep": "s", "engine": "vllm", "configs": [
        {"id": "b", "name": "base", "algorithm": "autoregressive", "argv": [], "params": {}, "speculative": False},
        {"id": "n", "name": "ngram", "algorithm": "ngram", "argv": [], "params": {}, "baseline": "base",
         "speculative": True}],
        "workloads": [{"name": "w", "kind": "code", "temperature": 0.0, "repeats": 1}]}
    ms = [Measurement(config_id=c, config=c, workload="w", item="i", repeat=1, status="ok", completion_tokens=100,
                      itl_mean_s=0.01, decode_tps=100.0) for c in ("b", "n")]
    log = {"source": "metrics", "accept_length": 3.01, "drafts": 100, "accepted_per_position": [80, 56, 38, 27]}
    analysis = analyse(plan, ms, [WorkloadFinished(config_id="n", workload="w", measured=1, server_log=log)])
    cell = analysis.acceptance.cell("n", "w")
    assert cell.server_conditional == pytest.approx((0.8, 0.7, 38 / 56, 27 / 38))
    table = acceptance_table(analysis, "w")
    assert table is not None
    assert "0.80 0.70 0.68 0.71 (server)" in table.rows[0]


def test_each_engines_figures_have_their_names() -> None:
    assert present(server_definition("vllm", "log 'Mean acceptance length'")).name == "acceptance length"
    assert present(server_definition("llamacpp", "log 'mean len'")).name == "acceptance length"
    for engine in ("vllm", "llamacpp"):  # the client's figure on these engines: every target forward counted
        assert present(server_definition(engine, "client: completion / (completion - accepted)")).name == (
            "tokens per target forward")
    assert present(server_definition("sglang", "meta_info.spec_accept_length")).name == "acceptance length"
    assert present(server_definition("sglang", "meta_info.spec_accept_rate")).name == "draft acceptance rate"
    assert set(SERVER_FIGURES) == {"sglang", "llamacpp", "vllm"}
