"""``specbench validate`` catches what would fail at run time (issue 46, point 1): a fork's misspelt
``speculative-algorithm`` beside its own ``algorithm`` label (even with fork_args), a near-miss algorithm label,
and prompt sizes or ``max_new_tokens`` that cannot fit ``context-length`` less the reserved speculative tokens;
each with file, line and fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench_tui.cli import main
from specbench_tui.paths import resolve_sweep

DEMO = resolve_sweep("demo")

_LONG = """
[[workloads]]
name = "long"
kind = "long_context"
prompt_tokens = [4096, {size}]
max_new_tokens = 64
"""


def _demo(tmp_path: Path, *edits: tuple[str, str], extra: str = "") -> tuple[Path, str]:
    text = DEMO.read_text()
    profile = (DEMO.parent / "sim-profiles" / "demo.toml").resolve()
    text = text.replace('sim_profile = "sim-profiles/demo.toml"', f'sim_profile = "{profile}"')
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    path = tmp_path / "mine.toml"
    path.write_text(text + extra)
    return path, text + extra


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _validate(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, str, str]:
    code = main(["validate", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_demo_as_shipped_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _validate(capsys, DEMO)
    assert code == 0, err


def test_a_fork_flag_misspelling_its_own_algorithm_is_refused(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # the ddtree block has fork_args: a fork may register any name, but DDTRE beside algorithm = "ddtree" is a typo
    path, text = _demo(tmp_path, ('speculative-algorithm = "DDTREE"', 'speculative-algorithm = "DDTRE"'))
    code, _, err = _validate(capsys, path)
    assert code == 2
    line = _line_of(text, 'speculative-algorithm = "DDTRE"')
    assert f"mine.toml:{line}: configs[2].args.speculative-algorithm: --speculative-algorithm DDTRE is not an " \
           "algorithm of sglang 0.5.23 nor this configuration's algorithm 'ddtree'" in err
    assert "did you mean 'DDTREE'?" in err


def test_a_near_miss_algorithm_label_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, text = _demo(tmp_path, ('algorithm = "autoregressive"', 'algorithm = "autoregresive"'))
    code, _, err = _validate(capsys, path)
    assert code == 2
    line = _line_of(text, 'algorithm = "autoregresive"')
    assert f"mine.toml:{line}: configs[0].algorithm: algorithm = 'autoregresive' is not an algorithm label" in err
    assert "did you mean 'autoregressive'?" in err


def test_a_prompt_that_cannot_fit_the_context_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, text = _demo(tmp_path, extra=_LONG.format(size=65536))
    code, _, err = _validate(capsys, path)
    assert code == 2
    line = _line_of(text, "prompt_tokens = [4096, 65536]")
    # 32768 less the 32-token margin and the 64 output tokens (the demo's algorithms reserve nothing)
    assert f"mine.toml:{line}: workloads[{text.count('[[workloads]]') - 1}].prompt_tokens[1]: a 65536-token prompt with max_new_tokens = 64 " \
           "cannot fit the context-length 32768" in err
    assert "use at most 32672" in err
    assert "4096-token" not in err
    path, _ = _demo(tmp_path, extra=_LONG.format(size=32672))
    assert _validate(capsys, path)[0] == 0


def test_the_reserved_speculative_tokens_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    eagle = ('[[configs]]\nname = "eagle3"\nalgorithm = "eagle3"\n[configs.args]\nspeculative-algorithm = "EAGLE3"\n'
             'speculative-draft-model-path = "d"\nspeculative-num-steps = 5\nspeculative-eagle-topk = 4\n'
             'speculative-num-draft-tokens = 8\n\n')
    path, _ = _demo(tmp_path, ("[[workloads]]", eagle + "[[workloads]]"), extra=_LONG.format(size=32672))
    code, _, err = _validate(capsys, path)
    assert code == 2
    assert "context-length 32768 less 20 reserved speculative tokens of 'eagle3'" in err and "at most 32652" in err


def test_max_new_tokens_beyond_the_context_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, text = _demo(tmp_path, ("max_new_tokens = 128", "max_new_tokens = 40000"))
    code, _, err = _validate(capsys, path)
    assert code == 2
    line = _line_of(text, "max_new_tokens = 40000")
    assert f"mine.toml:{line}: workloads[0].max_new_tokens: max_new_tokens = 40000 leaves no room for a prompt" in err
    assert "lower max_new_tokens to at most 32720, or raise context-length" in err
