"""The simulator's command line: SGLang 0.5.23's flag names, argparse's exits, SGLang's resolution rules."""

from __future__ import annotations

import subprocess
import sys

import pytest

from specbench_tui.sim.args import ResolutionError, build_parser, human_readable_int, parse_args, resolve

DDTREE_B8 = ["--speculative-algorithm", "DDTREE", "--speculative-draft-model-path", "X",
             "--speculative-ddtree-budget", "8"]


def _resolve(*argv: str):
    return resolve(parse_args(["--model-path", "Qwen/Qwen3-27B", *argv]))


def test_defaults_match_sglang() -> None:
    ns = parse_args(["--model-path", "m"])
    assert (ns.host, ns.port, ns.tp_size, ns.dp_size, ns.decode_log_interval) == ("127.0.0.1", 30000, 1, 1, 40)
    assert ns.max_prefill_tokens == 16384 and ns.stream_interval == 1 and ns.watchdog_timeout == 300
    assert build_parser().prog == "sglang serve"


@pytest.mark.parametrize(("argv", "dest", "value"), [
    (["--model", "m"], "model_path", "m"),
    (["--tensor-parallel-size", "4"], "tp_size", 4),
    (["--tp", "2"], "tp_size", 2),  # unique prefix, allow_abbrev is on like SGLang
    (["--data-parallel-size", "2"], "dp_size", 2),
    (["--dp", "2"], "dp_size", 2),
    (["--speculative-draft-model", "d"], "speculative_draft_model_path", "d"),
    (["--context-length", "32k"], "context_length", 32000),
    (["--context-length", "1Ki"], "context_length", 1024),
    (["--cuda-graph-bs-decode", "1", "2", "4"], "cuda_graph_bs_decode", [1, 2, 4]),
    (["--speculative-dflash-block-size", "16"], "speculative_dflash_block_size", 16),
    (["--speculative-dflash-enable-ddtree"], "speculative_dflash_enable_ddtree", True),
    (["--mamba-radix-cache-strategy", "extra_buffer"], "mamba_radix_cache_strategy", "extra_buffer"),
])
def test_flag_names_and_aliases(argv: list[str], dest: str, value: object) -> None:
    assert getattr(parse_args(argv), dest) == value


def test_human_readable_int() -> None:
    assert [human_readable_int(v) for v in ("4096", "32k", "1Ki", "1.5M", "2Gi")] == [4096, 32000, 1024, 1500000, 2**31]
    with pytest.raises(ValueError):
        human_readable_int("lots")


@pytest.mark.parametrize(("argv", "message"), [
    (["--bogus-flag"], "error: unrecognized arguments: --bogus-flag"),
    (["--cuda-graph-max-bs", "8"], "error: ambiguous option: --cuda-graph-max-bs could match "
                                   "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill"),
    (["--pp", "2"], "error: ambiguous option: --pp could match"),
    (["--mamba-scheduler-strategy", "extra_buffer"], "error: unrecognized arguments"),
    (["--attention-backend", "nope"], "argument --attention-backend: invalid choice: 'nope'"),
])
def test_bad_flags_exit_2_like_argparse(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(["--model-path", "m", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: sglang serve") and message in err


@pytest.mark.e2e
def test_unknown_flag_exits_2_from_the_command_line() -> None:
    for flag in ("--bogus-flag", "--cuda-graph-max-bs"):
        proc = subprocess.run([sys.executable, "-m", "specbench_tui.sim", "--model-path", "m", flag, "8"],
                              capture_output=True, text=True, timeout=20)
        assert proc.returncode == 2, proc.stderr
        assert ("unrecognized arguments" if flag == "--bogus-flag" else "ambiguous option") in proc.stderr


def test_ddtree_budget_sets_verify_width_and_forces_overlap_off() -> None:
    r = _resolve(*DDTREE_B8)
    assert (r.algorithm, r.budget, r.speculative_num_draft_tokens) == ("DDTREE", 8, 9)
    assert r.disable_overlap_schedule and r.max_running_requests == 48
    assert any("Max running requests is reset to 48" in w for w in r.warnings)


def test_dflash_fork_flag_means_ddtree() -> None:
    r = _resolve("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "X",
                 "--speculative-dflash-enable-ddtree", "--speculative-ddtree-budget", "15")
    assert (r.algorithm, r.speculative_algorithm, r.speculative_num_draft_tokens) == ("DDTREE", "DFLASH", 16)


def test_eagle_rules() -> None:
    assert _resolve("--speculative-algorithm", "nextn").speculative_algorithm == "EAGLE"
    auto = _resolve("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d")
    assert (auto.speculative_num_steps, auto.speculative_eagle_topk, auto.speculative_num_draft_tokens) == (3, 1, 4)
    adjusted = _resolve("--speculative-algorithm", "EAGLE", "--speculative-num-steps", "3",
                        "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "8")
    assert adjusted.speculative_num_draft_tokens == 4
    assert any("adjusted to speculative_num_steps + 1" in w for w in adjusted.warnings)
    with pytest.raises(ResolutionError) as exc:
        _resolve("--speculative-algorithm", "EAGLE", "--speculative-num-draft-tokens", "8")
    assert exc.value.exc_type == "AssertionError"


def test_dflash_rules_and_unknown_algorithm() -> None:
    r = _resolve("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d",
                 "--speculative-num-steps", "3")
    assert (r.speculative_num_steps, r.speculative_num_draft_tokens) == (1, 16)
    assert any("DFLASH only supports speculative_num_steps == 1" in w for w in r.warnings)
    with pytest.raises(ResolutionError, match="Unknown speculative algorithm name: FOO"):
        _resolve("--speculative-algorithm", "FOO")


def test_disable_cuda_graph_is_deprecated_but_accepted() -> None:
    r = _resolve("--disable-cuda-graph")
    assert r.cuda_graph_backend_decode == "disabled"
    assert r.warnings == ["'--disable-cuda-graph' is deprecated and will be removed in a future release. "
                          "Use '--cuda-graph-backend-{decode,prefill}=disabled' instead."]


RESET_48 = ("Max running requests is reset to 48 for speculative decoding. "
            "You can override this by explicitly setting --max-running-requests.")


@pytest.mark.parametrize("argv", [
    ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d"],
    ["--speculative-algorithm", "NEXTN"],
    ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "d"],
    ["--speculative-algorithm", "FROZEN_KV_MTP"],
    ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d"],
    ["--speculative-algorithm", "DSPARK", "--speculative-draft-model-path", "d"],
    ["--speculative-algorithm", "NGRAM"],
])
def test_every_speculative_handler_but_unos_resets_the_cap_to_48_once(argv: list[str]) -> None:
    r = _resolve(*argv)
    assert r.max_running_requests == 48 and r.warnings.count(RESET_48) == 1
    explicit = _resolve(*argv, "--max-running-requests", "64")
    assert explicit.max_running_requests == 64 and RESET_48 not in explicit.warnings


def test_uno_keeps_the_cap_unset_and_needs_its_lora_and_width() -> None:
    r = _resolve("--speculative-algorithm", "UNO", "--uno-lora-path", "l", "--speculative-num-draft-tokens", "4")
    assert r.max_running_requests is None and RESET_48 not in r.warnings
    assert (r.speculative_num_steps, r.speculative_eagle_topk, r.speculative_num_draft_tokens) == (1, 1, 4)
    assert _resolve().max_running_requests is None  # the autoregressive baseline: the scheduler sizes it
    with pytest.raises(ResolutionError, match=r"^UNO requires --uno-lora-path\.$"):
        _resolve("--speculative-algorithm", "UNO", "--speculative-num-draft-tokens", "4")
    with pytest.raises(ResolutionError, match="UNO requires --speculative-num-draft-tokens to be a positive integer"):
        _resolve("--speculative-algorithm", "UNO", "--uno-lora-path", "l")
    with pytest.raises(ResolutionError, match="does not accept --speculative-draft-model-path"):
        _resolve("--speculative-algorithm", "UNO", "--uno-lora-path", "l", "--speculative-draft-model-path", "d")
    with pytest.raises(ResolutionError, match=r"UNO requires TP=PP=1\."):
        _resolve("--speculative-algorithm", "UNO", "--uno-lora-path", "l", "--speculative-num-draft-tokens", "4",
                 "--tp-size", "2")
    with pytest.raises(ResolutionError, match="UNO requires FA3 for both prefill and decode attention; "
                                              "got prefill='triton', decode='triton'."):
        _resolve("--speculative-algorithm", "UNO", "--uno-lora-path", "l", "--speculative-num-draft-tokens", "4",
                 "--attention-backend", "triton")


def test_ngram_defaults_are_sglangs() -> None:
    r = _resolve("--speculative-algorithm", "NGRAM")
    assert (r.speculative_num_draft_tokens, r.speculative_eagle_topk, r.speculative_num_steps) == (12, 10, 1)
    assert (r.algorithm, r.budget, r.enable_mixed_chunk) == ("NGRAM", 11, False)
    assert r.warnings == [RESET_48, "speculative_num_draft_tokens is set to 12 by default for ngram speculative "
                          "decoding. You can override this by explicitly setting --speculative-num-draft-tokens.",
                          "The mixed chunked prefill are disabled because of using ngram speculative decoding."]
    narrow = _resolve("--speculative-algorithm", "NGRAM", "--speculative-ngram-max-bfs-breadth", "4",
                      "--speculative-num-draft-tokens", "9")
    assert (narrow.speculative_eagle_topk, narrow.speculative_num_steps, narrow.budget) == (4, 2, 8)


def test_dspark_verifies_gamma_plus_one() -> None:
    r = _resolve("--speculative-algorithm", "DSPARK", "--speculative-draft-model-path", "d")
    assert (r.speculative_num_draft_tokens, r.budget) == (8, 7)
    assert "DSpark gamma is not set; defaulting to 7." in r.warnings
    five = _resolve("--speculative-algorithm", "DSPARK", "--speculative-draft-model-path", "d",
                    "--speculative-dspark-block-size", "5")
    assert (five.speculative_num_draft_tokens, five.budget) == (6, 5)
    with pytest.raises(ResolutionError, match=r"must equal gamma \+ 1 \(= 6 for gamma=5\), but got "
                                              r"speculative_num_draft_tokens=5\."):
        _resolve("--speculative-algorithm", "DSPARK", "--speculative-draft-model-path", "d",
                 "--speculative-dspark-block-size", "5", "--speculative-num-draft-tokens", "5")


def test_dflash_block_size_is_the_draft_width() -> None:
    r = _resolve("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d",
                 "--speculative-dflash-block-size", "8")
    assert (r.speculative_num_draft_tokens, r.budget) == (8, 7)
    with pytest.raises(ResolutionError, match="For DFLASH they must match"):
        _resolve("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d",
                 "--speculative-dflash-block-size", "8", "--speculative-num-draft-tokens", "16")


def test_adaptive_takes_the_middle_candidate_and_the_widest_reserve() -> None:
    r = _resolve("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d", "--speculative-adaptive")
    assert (r.speculative_num_steps, r.speculative_eagle_topk, r.speculative_num_draft_tokens) == (3, 1, 4)
    assert r.speculative_adaptive and r.max_speculative_num_draft_tokens == 8
    off = _resolve("--speculative-algorithm", "NGRAM", "--speculative-adaptive")
    assert not off.speculative_adaptive and off.max_speculative_num_draft_tokens is None
    assert ("speculative_adaptive disabled: speculative_algorithm=NGRAM (only EAGLE/EAGLE3 are supported). "
            "Falling back to static speculative params.") in off.warnings
    with pytest.raises(ResolutionError, match=r"--speculative-num-steps=2 is not in the adaptive config "
                                              r"candidate_steps \[0, 1, 3, 5, 7\]\. Pass one of those values\."):
        _resolve("--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "d", "--speculative-adaptive",
                 "--speculative-num-steps", "2")
