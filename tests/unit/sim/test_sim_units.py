"""In-process checks of the simulator's parts: tokenizer, speed model, profile rules, log formats."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from repo_paths import REPO
from specbench_tui.sim import kvpool, logs, tokenizer
from specbench_tui.sim.adaptive import DEFAULT_ADAPTIVE_CONFIG, AdaptiveSteps, tier_steps
from specbench_tui.sim.args import parse_args, resolve
from specbench_tui.sim.caches import NgramCorpus, PrefixCache
from specbench_tui.sim.profile import ProfileError, first_rule, load_profile
from specbench_tui.sim.speed import SpeedModel, config_facts

def _resolved(*argv: str):
    return resolve(parse_args(["--model-path", "Qwen/Qwen3-27B", *argv]))


def test_prefill_line_format() -> None:
    line = logs.format_prefill("comma", 1, 28, 0, 0.0, 0, 0, 0, False, 1234.5)
    assert line == ("Prefill batch, #new-seq: 1, #new-token: 28, #cached-token: 0, token usage: 0.00, "
                    "#running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, "
                    "input throughput (token/s): 1234.50")
    assert logs.format_prefill("period", 1, 28, 0, 0.0, 0, 0).startswith("Prefill batch. #new-seq: 1,")


def test_tokenizer_is_deterministic_and_chat_overhead_is_fixed() -> None:
    text = "Write a Python function that parses 2024-01-01 dates, please."
    assert tokenizer.encode(text) == tokenizer.encode(text)
    assert tokenizer.split_pieces("Hello world") == ["Hello", " world"]
    n = len(tokenizer.encode(text))
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": text}]
    _, ids = tokenizer.apply_chat_template(messages)
    expected = n + len(tokenizer.encode("Be brief.")) + 2 * tokenizer.CHAT_MESSAGE_OVERHEAD
    assert len(ids) == expected + tokenizer.CHAT_GENERATION_OVERHEAD
    assert tokenizer.decode(tokenizer.encode(text)) == text


@pytest.mark.parametrize(("prompt", "kind"), [
    ("Write a Python function to merge two sorted lists.", "code"),
    ("Solve: 17 * 23 = ?", "math"),
    ("Return a JSON object with the fields name and age.", "json"),
    ("Write a haiku about autumn.", "creative"),
    ("What is the capital of France?", "chat"),
])
def test_classifier(prompt: str, kind: str) -> None:
    assert tokenizer.classify(prompt, 20) == kind
    assert tokenizer.classify(prompt, 9000) == "long"


def test_output_is_lossless_across_algorithms() -> None:
    seed = tokenizer.prompt_seed(tokenizer.encode("Write a Python function"))
    a = [next(p) for p in [tokenizer.output_pieces("code", seed)] for _ in range(50)]
    gen = tokenizer.output_pieces("code", seed)
    assert a == [next(gen) for _ in range(50)]


def test_default_speeds_are_plausible_for_a_27b_model() -> None:
    profile = load_profile({})
    ar = SpeedModel(profile, _resolved())
    assert 60 <= 1 / ar.step_seconds(1, 1000) <= 70
    ddtree = SpeedModel(profile, _resolved("--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "X",
                                           "--speculative-ddtree-budget", "15"))
    tok_s = ddtree.expected_accept_length("code") / ddtree.step_seconds(1, 1000)
    assert 125 <= tok_s <= 155
    rng = random.Random(1)
    alpha = ddtree.alpha("code", 0.0)
    mean = sum(1 + ddtree.draw_accepted(rng, alpha) for _ in range(20000)) / 20000
    assert mean == pytest.approx(ddtree.expected_accept_length("code"), rel=0.03)
    assert ddtree.expected_accept_length("code") > ddtree.expected_accept_length("creative")
    assert SpeedModel(profile, _resolved("--tp-size", "4")).step_seconds(1, 1000) < ar.step_seconds(1, 1000)


def test_deterministic_mode_spreads_fractional_accept_lengths() -> None:
    profile = load_profile({"SPECBENCH_SIM_PROFILE_TOML": "[deterministic]\nenabled = true\ntok_s = 100\naccept_length = 2.5"})
    det = SpeedModel(profile, _resolved("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "X")).deterministic
    assert det is not None and det.step_s == pytest.approx(0.025)
    assert [det.committed(i) for i in range(4)] == [2, 3, 2, 3]
    ar = SpeedModel(profile, _resolved()).deterministic
    assert ar is not None and ar.accept_length == 1 and ar.step_s == pytest.approx(0.01)


def test_profile_rules_and_errors(tmp_path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[[crash]]\nalgorithm = "DDTREE"\nbudget = [8, 12]\nwhen = "warmup"\n')
    profile = load_profile({"SPECBENCH_SIM_PROFILE": str(path)})
    facts = config_facts(_resolved("--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "X",
                                   "--speculative-ddtree-budget", "8"))
    assert first_rule(profile["crash"], facts) is not None
    assert first_rule(profile["crash"], dict(facts, budget=15)) is None
    with pytest.raises(ProfileError, match="unknown profile key: speed.warp"):
        load_profile({"SPECBENCH_SIM_PROFILE_TOML": "[speed]\nwarp = 9"})
    with pytest.raises(ProfileError, match="when must be one of"):
        load_profile({"SPECBENCH_SIM_PROFILE_TOML": '[[crash]]\nwhen = "sometimes"'})


def test_shipped_profiles_load() -> None:
    root = REPO / "sweeps" / "sim-profiles"
    files = sorted(root.glob("*.toml"))
    assert files, "sweeps/sim-profiles/*.toml missing"
    for path in files:
        load_profile({"SPECBENCH_SIM_PROFILE": str(path)})


def test_adaptive_tiers_route_by_batch_size_with_graph_padding() -> None:
    assert [tier_steps(DEFAULT_ADAPTIVE_CONFIG, bs) for bs in (1, 7, 8, 31, 32, 63, 64, 500)] == [
        [1, 3, 5, 7], [1, 3, 5, 7], [0, 1, 3], [0, 1, 3], [0, 1], [0, 1], [0], [0]]
    lines: list[str] = []
    steps = AdaptiveSteps(3, DEFAULT_ADAPTIVE_CONFIG, [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64], lines.append)
    assert [steps.activate_for_batch(bs) for bs in (1, 5, 33, 57, 1)] == [3, 3, 1, 0, 3]  # 5 pads to 8, 33 to 40
    assert lines[1:] == ["Switch adaptive runtime state: steps 3 -> 1, draft_tokens 4 -> 2",
                         "Switch adaptive runtime state: steps 1 -> 0, draft_tokens 2 -> 1",
                         "Switch adaptive runtime state: steps 0 -> 3, draft_tokens 1 -> 4"]


def test_scheduler_running_cap_and_retraction_order_are_sglangs() -> None:
    assert kvpool.max_running_requests(None, 1_000_000, 262144) == 2048  # the estimate's floor
    assert kvpool.max_running_requests(None, 1_000_000, 32768) == 4096  # its ceiling
    assert kvpool.max_running_requests(None, 3000, 32768) == 1500  # half the pool
    assert kvpool.max_running_requests(48, 1_000_000, 32768) == 48
    assert kvpool.max_running_requests(64, 1_000_000, 32768, attn_dp_size=4) == 16
    reqs = [SimpleNamespace(output_ids=[0] * n_out, input_ids=[0] * n_in) for n_out, n_in in
            ((5, 10), (1, 10), (1, 50), (9, 1))]
    assert kvpool.retraction_order(reqs) == [3, 0, 1, 2]  # the last is retracted first: fewest out, longest in
    assert kvpool.retract_message(2, 812, 0.6, 0.05) == (
        "KV cache pool is full. Retract requests. #retracted_reqs: 2, #new_tokens_gained: 812, "
        "#new_token_ratio: 0.6000 -> 0.0500")


def test_ngram_corpus_knows_other_runs_of_a_stream_until_reset() -> None:
    corpus = NgramCorpus(100)
    corpus.put(("code", 7), "a", 40)
    assert corpus.known(("code", 7), "a") == 0 and corpus.known(("code", 7), "b") == 40  # not its own run
    corpus.settle(("code", 7), "a")
    assert corpus.known(("code", 7), "a") == 40
    corpus.put(("chat", 1), "c", 90)  # over capacity: the oldest stream goes
    assert corpus.known(("code", 7), "x") == 0 and corpus.known(("chat", 1), "x") == 90
    corpus.reset()
    assert corpus.known(("chat", 1), "x") == 0 and corpus.tokens == 0
    cache = PrefixCache(1000)
    cache.insert([1, 2, 3, 4])
    assert cache.match([1, 2, 3, 4]) == 3 and cache.match([1, 2, 9]) == 2 and cache.match([5]) == 0
    cache.reset()
    assert cache.match([1, 2, 3, 4]) == 0
