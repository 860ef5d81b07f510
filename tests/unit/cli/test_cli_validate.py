"""``specbench validate``: the plan with name, id, GPUs and exact argv; skips with reasons; ``--json``."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from specbench_tui.core.errors import did_you_mean
from specbench_tui.cli import main
from specbench_tui.core.plan import build_plan
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.paths import resolve_sweep

SEED = resolve_sweep("qwen-ddtree-sm120")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_seed_plan_lists_every_configuration_with_exact_argv(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", str(SEED))
    assert code == 0, err
    plan = build_plan(load_sweep(SEED))
    lines = out.splitlines()
    assert lines[0] == "sweep qwen-ddtree-sm120: 24 configurations (22 to run, 2 skipped) × 7 workloads"
    for config in plan.configs:
        header = next(i for i, line in enumerate(lines) if line.startswith(f"{config.name}  [{config.id}]  "))
        block = lines[header:header + 6]
        assert f"    argv      {shlex.join(config.argv)}" in block
        if not config.skipped:
            assert lines[header].endswith(f"{config.gpus_needed} GPU" + ("s" if config.gpus_needed > 1 else ""))
    assert "ddtree-b8-tp4  [" in out
    b64 = next(line for line in lines if line.startswith("ddtree-b64-tp8  ["))
    assert b64.endswith("8 GPUs")


def test_skipped_points_show_their_reason(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "validate", str(SEED))
    skipped = [line for line in out.splitlines() if "SKIP:" in line]
    assert len(skipped) == 2
    assert all("SKIP: crashes on SM120: CUDA error: an illegal instruction was encountered" in line for line in skipped)
    assert skipped[0].startswith("ddtree-b8-tp8  [")


def test_fork_flags_and_notes_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "validate", str(SEED))
    assert "    fork-only --speculative-ddtree-budget  (not in the engine's release parser)" in out
    assert "note: configs[2] passes --speculative-algorithm DDTREE, which sglang 0.5.23 does not ship" in out


def test_eagle_skips_show_sglang_rules(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "eagle3")
    assert code == 0
    assert "eagle3-s1-k1-d2-tp1  [" in out
    line = next(line for line in out.splitlines() if line.startswith("eagle3-s1-k4-d8-tp1  ["))
    assert line.endswith("SKIP: steps×topk+1 = 5 < num_draft_tokens = 8: SGLang cannot build that draft tree")


def test_json_output_is_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", "--json", str(SEED))
    assert code == 0
    data = json.loads(out)
    plan = build_plan(load_sweep(SEED))
    assert data["sweep"] == "qwen-ddtree-sm120"
    assert [c["id"] for c in data["configs"]] == [c.id for c in plan.configs]
    first = data["configs"][0]
    assert first["name"] == "ar-tp1" and first["argv"] == list(plan.configs[0].argv)
    assert first["params"] == {"tp": 1} and first["env"] == {"SGLANG_RECORD_STEP_TIME": "1"}
    skipped = [c for c in data["configs"] if c["skip_reason"]]
    assert [c["name"] for c in skipped] == ["ddtree-b8-tp8", "ddtree-b12-tp8"]
    assert {w["name"] for w in data["workloads"]} >= {"code", "long-context"}


def test_validate_writes_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "validate", str(SEED))[0] == 0
    assert list(tmp_path.iterdir()) == []


def test_missing_file_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(capsys, "validate", str(tmp_path / "nope.toml"))
    assert code == 2 and out == ""
    assert "cannot read the sweep file" in err


def test_help_is_clear(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["validate", "--help"])
    assert exited.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "exact server argv" in out and "--json print the plan as JSON" in out


_CHOICES_SWEEP = """\
[sweep]
name = "choices"
[engine]
launcher = "simulator"
[server.args]
model-path = "Qwen/Qwen3-8B"
[[configs]]
name = "spec-b{{budget}}"
algorithm = "{algorithm}"
matrix = {{ budget = [8,
   {bad_budget}] }}
[configs.args]
speculative-algorithm = "{flag}"
speculative-draft-model-path = "z-lab/draft"
speculative-num-draft-tokens = "{{budget}}"
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci"]
max_new_tokens = 16
"""


def _choices(tmp_path: Path, **values: str) -> Path:
    fields = {"algorithm": "dflash", "flag": "DFLASH", "bad_budget": "16", **values}
    path = tmp_path / "sweep.toml"
    path.write_text(_CHOICES_SWEEP.format(**fields))
    return path


def test_a_misspelt_algorithm_is_refused_with_did_you_mean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate", str(_choices(tmp_path, flag="DFLSH")))
    assert code == 2
    assert "sweep.toml:13: configs[0].args.speculative-algorithm: --speculative-algorithm DFLSH is not an " \
           "algorithm of sglang 0.5.23" in err
    assert "did you mean 'DFLASH'?" in err


def test_a_fork_algorithm_the_sweep_declares_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", str(_choices(tmp_path, algorithm="ddtree", flag="DDTREE")))
    assert code == 0, err
    assert "does not ship: the server must be a build (a fork) that registers it" in out
    code, _, err = run(capsys, "validate", str(_choices(tmp_path, algorithm="ddtree", flag="DDTRE")))
    assert code == 2 and "did you mean 'DDTREE'?" in err


def test_a_matrix_type_error_is_located_at_the_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "validate", str(_choices(tmp_path, bad_budget='"x"')))
    assert code == 2
    assert "sweep.toml:11: configs[0].matrix.budget[1]: --speculative-num-draft-tokens expects an integer, " \
           "got 'x'" in err


def test_a_hint_never_lists_an_empty_choice() -> None:
    """With no valid choice left (every matrix axis was itself invalid), no "valid: " hint with nothing after it."""
    assert did_you_mean("budget", []) is None
    assert did_you_mean("budgte", ["budget", "tp"]) == "did you mean 'budget'?"
    assert did_you_mean("zzz", ["budget", "tp"]) == "valid: budget, tp"
