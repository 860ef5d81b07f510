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
