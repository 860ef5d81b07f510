"""Each engine's own acceptance figures under their names: vLLM's and llama.cpp's per-position counters become
conditional acceptance per position in the analysis and the report (the counter text as vLLM exposes it,
docs of ../shared/reference/real-servers.md: ``vllm:spec_decode_num_accepted_tokens_per_pos_total{position="0..3"}``)."""

from __future__ import annotations

import re

import pytest
from narrowing import present

from repo_paths import TESTS
from specbench_tui.core.acceptance import SERVER_FIGURES, client_definition, server_definition, server_length_figure
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
    cell = present(present(analysis.acceptance).cell("n", "w"))
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


DATA = TESTS / "data"
# What each real server printed, captured verbatim (docs/real-engines.md §7, docs/real-engines-vllm.md): its log,
# its /metrics, its responses (vLLM's per-request metrics are quoted verbatim in its page, not in a fixture).
CAPTURED = {
    "llamacpp": ("llamacpp/draft-n4/stderr.log", "llamacpp/draft-n4/metrics_after.txt",
                 "llamacpp/draft-n4/completion.json"),
    "vllm": ("vllm/ngram4.log", "vllm/metrics_ngram4_full.txt", "../../docs/real-engines-vllm.md"),
}


@pytest.mark.parametrize("engine", sorted(CAPTURED))
def test_server_figure_names_are_the_servers_own_words(engine: str) -> None:
    """Every name the glossary maps for llama.cpp and vLLM is text the real server printed: a log field, a
    counter, a response key (ours, the client's, are named as ours)."""
    text = "\n".join((DATA / name).read_text() for name in CAPTURED[engine])
    for figure, _definition in SERVER_FIGURES[engine]:
        if figure.startswith("client: "):
            continue
        quoted = re.fullmatch(r"log '(.+)'", figure)
        words = [quoted.group(1)] if quoted else re.findall(r"[\w:.]+[a-z_]\w*", figure.replace("1 + ", ""))
        for word in words:
            last = word.rsplit(".", 1)[-1]
            assert (word if quoted or ":" in word else f'"{last}"') in text, (engine, figure, word)


def test_server_figures_mean_what_the_glossary_says() -> None:
    """The servers' own lines, as captured: llama.cpp's ``draft acceptance`` is accepted / generated (the
    draft acceptance rate), vLLM's ``Avg Draft acceptance rate`` is Accepted / Drafted."""
    line = next(x for x in (DATA / "llamacpp/draft-n4/stderr.log").read_text().splitlines() if "draft acceptance =" in x)
    llama = re.search(r"draft acceptance = ([\d.]+) \( *(\d+) accepted / *(\d+) generated\)", line)
    assert llama is not None
    assert float(llama.group(1)) == pytest.approx(int(llama.group(2)) / int(llama.group(3)), abs=1e-5)
    assert present(server_definition("llamacpp", "log 'draft acceptance'")).name == "draft acceptance rate"
    line = next(x for x in (DATA / "vllm/ngram4.log").read_text().splitlines() if "SpecDecoding metrics" in x)
    vllm = re.search(r"Accepted: (\d+) tokens, Drafted: (\d+) tokens.*Avg Draft acceptance rate: ([\d.]+)%", line)
    assert vllm is not None
    assert float(vllm.group(3)) == pytest.approx(100 * int(vllm.group(1)) / int(vllm.group(2)), abs=0.05)
    assert present(server_definition("vllm", "log 'Avg Draft acceptance rate'")).name == "draft acceptance rate"
    for engine in ("llamacpp", "vllm"):  # the counters' acceptance length is the log's, per drafting step
        assert present(server_definition(engine, present(server_length_figure(engine)))).name == "acceptance length"
        assert client_definition(engine).name == "tokens per target forward"
    assert server_length_figure("sglang") is None
