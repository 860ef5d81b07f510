"""The glossary and the per-position math of core/acceptance.py, the simulator's per-position truth, the
dataset loader and the random-token check (no server)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from specbench_tui.core.acceptance import (
    GLOSSARY,
    SERVER_FIGURES,
    cell_acceptance,
    conditional_from_histogram,
    conditional_from_positions,
    histogram_accept_length,
    sparkline,
)
from specbench_tui.core.engines.registry import get_profile
from specbench_tui.core.prompt_datasets import SAMPLE_PATH, load_dataset, random_token_warning
from specbench_tui.core.prompts import PromptsFileError, code_prompts
from specbench_tui.core.records import Measurement
from specbench_tui.sim.args import parse_args, resolve
from specbench_tui.sim.profile import load_profile
from specbench_tui.sim.speed import SpeedModel


def test_conditional_acceptance_from_a_histogram() -> None:
    # 10 steps accepted 0, 30 accepted 1, 60 accepted 2: P(1) = 90/100, P(2 | 1) = 60/90
    assert conditional_from_histogram([10, 30, 60]) == pytest.approx((0.9, 60 / 90))
    assert histogram_accept_length([10, 30, 60]) == pytest.approx(1 + (30 + 120) / 100)
    assert conditional_from_histogram([5, 0, 0]) == (0.0, None)


def test_conditional_acceptance_from_vllms_per_position_counters() -> None:
    # real-servers.md: vLLM ngram, 4 positions; 100 drafts accepted 80, 56, 38, 27 at positions 0..3
    assert conditional_from_positions([80, 56, 38, 27], 100) == pytest.approx((0.8, 0.7, 38 / 56, 27 / 38))


def test_sparkline_spans_zero_to_one() -> None:
    assert sparkline([0.0, 0.5, 1.0, None]) == "▁▅█·"


def test_every_definition_is_named_and_each_engine_maps_its_figures() -> None:
    names = [d.name for d in GLOSSARY]
    assert len(set(names)) == 6 and all("accept" not in d.label or d.label != "accept" for d in GLOSSARY)
    for engine in SERVER_FIGURES:
        assert get_profile(engine) is not None
        assert all(d in GLOSSARY for _, d in SERVER_FIGURES[engine])


def test_each_definition_has_one_short_name_that_names_it() -> None:
    """The narrow views' labels (the TUI's results column and its sort, the live log's decode line) come from the
    glossary: short, distinct, never the bare word; on each engine the results column names its client figure."""
    from specbench_tui.core.acceptance import BARE_ACCEPT, client_definition

    shorts = [d.short for d in GLOSSARY]
    assert len(set(shorts)) == len(GLOSSARY) and all(0 < len(s) <= 8 for s in shorts)
    assert not any(BARE_ACCEPT.search(s) for s in shorts)
    assert BARE_ACCEPT.search("accept") and not BARE_ACCEPT.search("accept len: 3.1, accept rate: 0.6")
    assert [client_definition(e).short for e in ("sglang", "llamacpp", "vllm")] == ["acc.len", "tok/fwd", "tok/fwd"]


def _m(**kw: object) -> Measurement:
    base = {"config_id": "c", "config": "c", "workload": "w", "item": "i", "repeat": 1, "status": "ok"}
    return Measurement(**{**base, **kw})  # type: ignore[arg-type]


def test_step_cost_times_acceptance_gives_the_speedup() -> None:
    # baseline: 10 ms per token; speculative: 3 tokens per 15 ms step -> cost 1.5, length 3, speedup 2
    base = [_m(config_id="b", completion_tokens=300, itl_mean_s=0.010, decode_tps=100.0)]
    spec = [_m(completion_tokens=300, verify_ct=100, itl_mean_s=0.005, decode_tps=200.0, accept_length=3.0,
               correct_drafts=200, proposed_drafts=300, accept_histogram=(0, 0, 100))]
    cell = cell_acceptance("c", "w", spec, base)
    assert cell.step_cost == pytest.approx(1.5) and cell.acceptance_length == pytest.approx(3.0)
    assert cell.predicted_speedup == pytest.approx(2.0)
    assert cell.draft_acceptance_rate == pytest.approx(2 / 3) and cell.accepted_per_verified == pytest.approx(2.0)
    assert cell.limit == "step cost"  # every draft accepted: only the cost loses anything
    assert cell.agree


def test_client_and_server_disagreeing_are_both_kept() -> None:
    cell = cell_acceptance("c", "w", [_m(completion_tokens=300, verify_ct=100, accept_length=2.5, itl_mean_s=0.01)])
    assert not cell.agree and cell.acceptance_length == 3.0 and cell.server_acceptance_length == 2.5


def _eagle(steps: int) -> SpeedModel:
    resolved = resolve(parse_args(["--model-path", "Qwen/Qwen3-8B", "--speculative-algorithm", "EAGLE3",
                                   "--speculative-draft-model-path", "X", "--speculative-num-steps", str(steps),
                                   "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens",
                                   str(steps + 1)]))
    return SpeedModel(load_profile({}), resolved)


def test_the_simulator_decays_per_position_and_its_draws_follow_the_truth() -> None:
    model = _eagle(5)
    truth = model.expected_conditional_acceptance("code")
    assert len(truth) == 5 and all(a > b for a, b in zip(truth, truth[1:]))
    assert truth[1] == pytest.approx(truth[0] * model.position_decay)
    share = model.expected_histogram("code")
    assert sum(share) == pytest.approx(1.0)
    assert model.expected_accept_length("code") == pytest.approx(1 + sum(k * s for k, s in enumerate(share)))
    rng = random.Random(3)
    alpha = model.alpha("code", 0.0)
    histogram = [0] * 6
    for _ in range(40000):
        histogram[model.draw_accepted(rng, alpha)] += 1
    for measured, expected in zip(conditional_from_histogram(histogram), truth):
        assert measured == pytest.approx(expected, abs=0.01)


def test_the_shipped_sample_has_every_spec_bench_category() -> None:
    prompts = load_dataset(SAMPLE_PATH)
    assert {p.category for p in prompts} == {"mt_bench", "translation", "summarization", "qa", "math_reasoning",
                                             "rag"}
    assert all(p.turns for p in prompts if p.category == "mt_bench")
    assert random_token_warning("sample", [p.text for p in prompts]) is None
    assert len(load_dataset(SAMPLE_PATH, per_category=1)) == 6
    assert [p.category for p in load_dataset(SAMPLE_PATH, categories=["qa"])] == ["qa"] * 3


def test_speed_bench_rows_and_single_turn_flag(tmp_path: Path) -> None:
    path = tmp_path / "speed.jsonl"
    rows = [{"question_id": "coding-1", "category": "coding", "sub_category": "python", "turns": ["Write a loop.",
             "Now in C."], "multiturn": False, "source": "ours"},
            {"question_id": "math-1", "category": "math", "sub_category": "algebra", "turns": ["Solve x + 1 = 2."],
             "multiturn": False}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    prompts = load_dataset(path, "speed_bench")
    assert [(p.item, p.category, p.turns) for p in prompts] == [("coding-1", "coding", ()), ("math-1", "math", ())]
    assert [p.category for p in load_dataset(path, "speed_bench", category_field="sub_category")] == [
        "python", "algebra"]


@pytest.mark.parametrize(("line", "message"), [
    ('{"question_id": 1, "turns": ["x"]}', "missing 'category'"),
    ('{"question_id": 1, "category": "qa", "turns": []}', "'turns' must be a non-empty list"),
    ('{"question_id": "a", "category": "qa", "turns": ["x"]}', "'question_id' must be an integer"),
    ('not json', "not JSON"),
])
def test_a_bad_line_names_file_line_and_fix(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"question_id": 9, "category": "qa", "turns": ["ok"]}\n' + line + "\n")
    with pytest.raises(PromptsFileError, match=rf"q\.jsonl:2: .*{message}" if message != "not JSON" else "q.jsonl:2"):
        load_dataset(path, "mt_bench")


def test_random_token_prompts_warn_and_real_ones_do_not() -> None:
    rng = random.Random(0)
    vocab = ["".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(rng.randint(2, 7))) for _ in range(500)]
    gibberish = [" ".join(rng.choice(vocab) for _ in range(60)) for _ in range(3)]
    warning = random_token_warning("rand", gibberish)
    assert warning is not None and "random tokens" in warning and "'rand'" in warning
    symbols = ["".join(rng.choice("ĠÂ#@%&*0123456789") for _ in range(300))]
    assert random_token_warning("sym", symbols) is not None
    assert random_token_warning("code", [p.text for p in code_prompts(["fibonacci", "quicksort"])]) is None
