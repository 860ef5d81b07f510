"""In-process checks of the simulator's parts: tokenizer, speed model, profile rules, log formats."""

from __future__ import annotations

import random

import pytest

from specbench_tui.sim import logs, tokenizer
from specbench_tui.sim.args import parse_args, resolve
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
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1] / "sweeps" / "sim-profiles"
    files = sorted(root.glob("*.toml"))
    assert files, "sweeps/sim-profiles/*.toml missing"
    for path in files:
        load_profile({"SPECBENCH_SIM_PROFILE": str(path)})
