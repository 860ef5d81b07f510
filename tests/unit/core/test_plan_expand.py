"""Plan expansion: matrix × name template, exact argv, excludes, EAGLE skip rules, fork flags, env templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench_tui.core.errors import SweepError
from specbench_tui.core.engines.sglang import eagle_skip_reason
from specbench_tui.core.plan import Plan, build_plan
from specbench_tui.core.sweep.loader import parse_sweep
from specbench_tui.paths import resolve_sweep
from specbench_tui.core.sweep.loader import load_sweep

HEAD = '''
[sweep]
name = "t"
gpus = 8
baseline = "ar-tp{tp}"

[server.args]
model-path = "/m"
trust-remote-code = true
enable-metrics = false
cuda-graph-bs-decode = [1, 2, 4]

[server.env]
SHARED = "yes"

[[workloads]]
kind = "haiku"
'''


def plan_of(text: str, tmp_path: Path) -> Plan:
    return build_plan(parse_sweep(HEAD + text, tmp_path / "t.toml"))


def issues_of(text: str, tmp_path: Path) -> list[str]:
    with pytest.raises(SweepError) as caught:
        plan_of(text, tmp_path)
    return [str(issue) for issue in caught.value.issues]


DDTREE = '''
[[configs]]
name = "ar-tp{tp}"
matrix = { tp = [1, 4] }
args = { tp-size = "{tp}" }

[[configs]]
name = "ddtree-b{budget}-tp{tp}"
matrix = { budget = [8, 16], tp = [1, 4] }
env = { DDTREE_TAG = "b{budget}" }
[configs.args]
tp-size = "{tp}"
speculative-algorithm = "DDTREE"
speculative-draft-model-path = "/d"
[configs.fork_args]
speculative-ddtree-budget = "{budget}"
[[configs.exclude]]
budget = 8
tp = 4
reason = "crashes on SM120"
'''


def test_matrix_times_template_in_order(tmp_path: Path) -> None:
    plan = plan_of(DDTREE, tmp_path)
    assert [c.name for c in plan.configs] == ["ar-tp1", "ar-tp4", "ddtree-b8-tp1", "ddtree-b8-tp4",
                                              "ddtree-b16-tp1", "ddtree-b16-tp4"]
    assert plan.configs[3].params == (("budget", 8), ("tp", 4))
    assert [c.source_index for c in plan.configs] == [0, 0, 1, 1, 1, 1]


def test_exact_argv(tmp_path: Path) -> None:
    plan = plan_of(DDTREE, tmp_path)
    ar = plan.by_name("ar-tp4")
    assert ar is not None
    # true → bare flag, false → omitted, an array → several values; then the configuration's own flags.
    assert ar.argv == ("--model-path", "/m", "--trust-remote-code", "--cuda-graph-bs-decode", "1", "2", "4",
                       "--tp-size", "4")
    dd = plan.by_name("ddtree-b16-tp1")
    assert dd is not None
    assert dd.argv[-8:] == ("--tp-size", "1", "--speculative-algorithm", "DDTREE", "--speculative-draft-model-path",
                            "/d", "--speculative-ddtree-budget", "16")
    assert dd.fork_flags == ("--speculative-ddtree-budget",)
    assert ar.fork_flags == ()
    assert (dd.tp, dd.dp, dd.gpus_needed) == (1, 1, 1)
    assert plan.by_name("ddtree-b16-tp4").gpus_needed == 4  # type: ignore[union-attr]


def test_env_is_templated_and_merged(tmp_path: Path) -> None:
    plan = plan_of(DDTREE, tmp_path)
    assert plan.by_name("ddtree-b16-tp1").env == (("DDTREE_TAG", "b16"), ("SHARED", "yes"))  # type: ignore[union-attr]
    assert plan.by_name("ar-tp1").env == (("SHARED", "yes"),)  # type: ignore[union-attr]


def test_exclude_skips_with_reason_and_baselines_match(tmp_path: Path) -> None:
    plan = plan_of(DDTREE, tmp_path)
    skipped = [(c.name, c.skip_reason) for c in plan.configs if c.skipped]
    assert skipped == [("ddtree-b8-tp4", "crashes on SM120")]
    assert [c.name for c in plan.runnable()] == ["ar-tp1", "ar-tp4", "ddtree-b8-tp1", "ddtree-b16-tp1",
                                                 "ddtree-b16-tp4"]
    assert plan.by_name("ddtree-b16-tp4").baseline == "ar-tp4"  # type: ignore[union-attr]
    assert plan.by_name("ar-tp4").baseline is None  # type: ignore[union-attr]


def test_algorithm_label_defaults_from_the_flag(tmp_path: Path) -> None:
    plan = plan_of(DDTREE, tmp_path)
    assert plan.by_name("ar-tp1").algorithm == "autoregressive"  # type: ignore[union-attr]
    assert plan.by_name("ddtree-b8-tp1").algorithm == "ddtree"  # type: ignore[union-attr]


def test_fork_only_algorithm_is_noted(tmp_path: Path) -> None:
    (note,) = plan_of(DDTREE, tmp_path).notes
    assert "DDTREE" in note and "0.5.23 does not ship" in note


def test_whole_placeholder_keeps_the_parameter_type(tmp_path: Path) -> None:
    text = '''
[[configs]]
name = "g-{graphs}"
matrix = { graphs = [true, false] }
args = { disable-cuda-graph = "{graphs}", served-model-name = "m-{graphs}" }
'''
    plan = plan_of(text, tmp_path)
    on, off = plan.configs
    assert "--disable-cuda-graph" in on.argv and "--disable-cuda-graph" not in off.argv
    assert on.argv[-2:] == ("--served-model-name", "m-true")


EAGLE = '''
[[configs]]
name = "e-s{s}-k{k}-d{d}"
matrix = { s = [1, 3], k = [1, 4], d = [2, 4, 16] }
[configs.args]
speculative-algorithm = "EAGLE3"
speculative-draft-model-path = "/d"
speculative-num-steps = "{s}"
speculative-eagle-topk = "{k}"
speculative-num-draft-tokens = "{d}"
'''


def test_eagle_points_sglang_rejects_or_rewrites_are_skips(tmp_path: Path) -> None:
    plan = plan_of(EAGLE, tmp_path)
    reasons = {c.name: c.skip_reason for c in plan.configs}
    assert reasons["e-s1-k1-d2"] is None
    assert reasons["e-s3-k4-d4"] is None
    assert reasons["e-s3-k4-d16"] == ("steps×topk+1 = 13 < num_draft_tokens = 16: SGLang cannot build that draft "
                                      "tree")
    assert reasons["e-s1-k4-d16"] == ("steps×topk+1 = 5 < num_draft_tokens = 16: SGLang cannot build that draft "
                                      "tree")
    assert reasons["e-s3-k1-d2"] == ("with topk=1 SGLang forces num_draft_tokens to steps+1 = 4: it would measure "
                                     "that point's server again")
    assert reasons["e-s3-k1-d4"] is None


def test_eagle_partial_triple_is_a_skip() -> None:
    reason = eagle_skip_reason({"speculative-algorithm": "eagle", "speculative-num-steps": 3})
    assert reason is not None and "set together" in reason
    assert eagle_skip_reason({"speculative-algorithm": "EAGLE3"}) is None
    assert eagle_skip_reason({"speculative-algorithm": "DFLASH", "speculative-num-steps": 3}) is None


def test_dflash_misconfiguration_is_an_error_not_a_skip(tmp_path: Path) -> None:
    text = '''
[[configs]]
name = "dflash-tp{tp}"
matrix = { tp = [1, 4] }
[configs.args]
tp-size = "{tp}"
speculative-algorithm = "DFLASH"
'''
    issues = issues_of(text, tmp_path)
    line = (HEAD + text).splitlines().index('speculative-algorithm = "DFLASH"') + 1
    assert len(issues) == 1, issues  # one issue for the configuration, not one per matrix point
    assert f":{line}: configs[0].args.speculative-algorithm: --speculative-algorithm DFLASH needs " \
           "--speculative-draft-model-path" in issues[0]


def test_value_errors_point_at_the_matrix_value(tmp_path: Path) -> None:
    issues = issues_of(DDTREE.replace("budget = [8, 16]", "budget = [8, -1]").replace("budget = 8\ntp = 4",
                                                                                        "budget = 8\ntp = 1"), tmp_path)
    assert len(issues) == 1, issues
    assert "configs[1].matrix.budget[1]: --speculative-ddtree-budget expects a positive integer, got -1" in issues[0]


def test_excluded_point_may_exceed_the_gpu_pool(tmp_path: Path) -> None:
    text = DDTREE.replace("tp = [1, 4] }\nenv", "tp = [1, 16] }\nenv").replace("tp = 4\nreason", "tp = 16\nreason")
    text = text.replace('name = "ar-tp{tp}"\nmatrix = { tp = [1, 4] }', 'name = "ar-tp{tp}"\nmatrix = { tp = [1] }')
    issues = issues_of(text, tmp_path)
    # b8-tp16 is excluded (no error); b16-tp16 is not.
    assert len(issues) == 1 and "configs[1].matrix.tp: tp = 16 needs 16 GPUs (tp × dp × pp) but the GPU pool " \
        "has 8 (sweep.gpus on line 4)" in issues[0], issues


def test_same_server_twice_is_an_error(tmp_path: Path) -> None:
    text = '''
[[configs]]
name = "a"
args = { tp-size = 1 }
[[configs]]
name = "b"
args = { tp-size = 1 }
'''
    (issue,) = issues_of(text, tmp_path)
    assert "'b' and 'a' resolve to the same flags and environment" in issue


def test_seed_campaign_plan() -> None:
    plan = build_plan(load_sweep(resolve_sweep("qwen-ddtree-sm120")))
    names = [c.name for c in plan.configs]
    assert names[:3] == ["ar-tp1", "ar-tp4", "ar-tp8"]
    assert len(plan.configs) == 3 + 3 + 18
    assert {c.name for c in plan.configs if c.skipped} == {"ddtree-b8-tp8", "ddtree-b12-tp8"}
    b15 = plan.by_name("ddtree-b15-tp4")
    assert b15 is not None and "--speculative-ddtree-budget" in b15.argv
    assert b15.argv[b15.argv.index("--speculative-ddtree-budget") + 1] == "15"
    assert b15.baseline == "ar-tp4" and b15.gpus_needed == 4
