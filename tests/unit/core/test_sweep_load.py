"""Loading sweep files: defaults, types, relative paths, and the shipped sweeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from specbench_tui.core.errors import SweepError
from specbench_tui.core.sweep.loader import load_sweep, parse_sweep
from specbench_tui.core.sweep.schema import EngineSpec
from specbench_tui.paths import resolve_sweep, shipped_sweeps

MINIMAL = '''
[sweep]
name = "mini"

[[configs]]
name = "ar"

[[workloads]]
kind = "code"
'''


def write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_minimal_sweep_gets_documented_defaults(tmp_path: Path) -> None:
    sweep = load_sweep(write(tmp_path, MINIMAL))
    assert sweep.name == "mini"
    assert sweep.description == ""
    assert sweep.baseline is None
    assert sweep.runs_dir == Path("runs")
    assert sweep.gpus is None
    assert (sweep.concurrent, sweep.lossless_check) == (False, False)
    assert sweep.engine == EngineSpec()
    assert sweep.engine.launcher == "simulator" and sweep.engine.profile == "sglang"
    assert sweep.server_args == () and sweep.server_env == ()
    (config,) = sweep.configs
    assert (config.name, config.matrix, config.args, config.fork_args, config.exclude) == ("ar", (), (), (), ())
    (workload,) = sweep.workloads
    assert workload.name == "code" and workload.kind == "code"
    assert (workload.max_new_tokens, workload.repeats, workload.warmup) == (256, 1, 1)
    assert workload.temperature == 0.0 and workload.ignore_eos is True
    assert workload.param("items") == ("fibonacci", "quicksort")


def test_sweep_level_repeats_and_warmup_flow_into_workloads(tmp_path: Path) -> None:
    text = MINIMAL.replace('name = "mini"', 'name = "mini"\nrepeats = 4\nwarmup = 0') + \
        '\n[[workloads]]\nname = "h"\nkind = "haiku"\nrepeats = 2\n'
    sweep = load_sweep(write(tmp_path, text))
    assert [(w.name, w.repeats, w.warmup) for w in sweep.workloads] == [("code", 4, 0), ("h", 2, 0)]


def test_types_are_converted(tmp_path: Path) -> None:
    text = MINIMAL.replace('name = "mini"', 'name = "mini"\ngpus = [2, 3]') + '''
[engine]
startup_timeout_s = 5
host = "0.0.0.0"
[server.args]
mem-fraction-static = 0.8
trust-remote-code = true
cuda-graph-bs-decode = [1, 2, 4]
[server.env]
FLAG = true
NUMBER = 3
'''
    sweep = load_sweep(write(tmp_path, text))
    assert sweep.gpus == (2, 3)
    assert sweep.engine.startup_timeout_s == 5.0 and isinstance(sweep.engine.startup_timeout_s, float)
    assert dict(sweep.server_args) == {"mem-fraction-static": 0.8, "trust-remote-code": True,
                                       "cuda-graph-bs-decode": (1, 2, 4)}
    assert dict(sweep.server_env) == {"FLAG": "1", "NUMBER": "3"}


def test_gpu_count_becomes_indices(tmp_path: Path) -> None:
    sweep = load_sweep(write(tmp_path, MINIMAL.replace('name = "mini"', 'name = "mini"\ngpus = 3')))
    assert sweep.gpus == (0, 1, 2)


def test_relative_paths_resolve_against_the_sweep_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "campaign"
    (folder / "profiles").mkdir(parents=True)
    (folder / "profiles" / "fast.toml").write_text("")
    (folder / "data").mkdir()
    (folder / "data" / "q.jsonl").write_text("{\"prompt\": \"hi\"}\n")
    text = MINIMAL + '''
[engine]
sim_profile = "profiles/fast.toml"
python = "../envs/sglang/bin/python"

[[workloads]]
name = "spec"
kind = "prompts_file"
path = "data/q.jsonl"
'''
    path = write(folder, text)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    sweep = load_sweep(Path("..") / "campaign" / "s.toml")
    assert sweep.engine.sim_profile == str((folder / "profiles" / "fast.toml").resolve())
    assert sweep.engine.python == str((tmp_path / "envs" / "sglang" / "bin" / "python").resolve())
    assert sweep.workloads[1].param("path") == str((folder / "data" / "q.jsonl").resolve())
    assert path.exists()


def test_bare_python_name_is_left_for_path_lookup(tmp_path: Path) -> None:
    sweep = load_sweep(write(tmp_path, MINIMAL + '[engine]\npython = "python3"\n'))
    assert sweep.engine.python == "python3"


def test_all_issues_are_reported_in_file_order(tmp_path: Path) -> None:
    text = '''[sweep]
name = "x"
gpus = "eight"
[engine]
launchr = "sglang"
[[configs]]
name = "a"
marix = {}
[[workloads]]
kind = "coding"
'''
    with pytest.raises(SweepError) as caught:
        load_sweep(write(tmp_path, text))
    issues = caught.value.issues
    assert [(i.line, i.key) for i in issues] == [(3, "sweep.gpus"), (5, "engine.launchr"), (8, "configs[0].marix"),
                                               (10, "workloads[0].kind")]
    assert issues[1].hint == "did you mean 'launcher'?"
    assert all(i.path.endswith("s.toml") for i in issues)


def test_display_path_is_used_in_messages(tmp_path: Path) -> None:
    with pytest.raises(SweepError) as caught:
        load_sweep(write(tmp_path, MINIMAL.replace('name = "mini"', "name = 1")), display_path="nice/name.toml")
    assert str(caught.value) == "nice/name.toml:3: sweep.name: expected a string, got an integer (1)"


def test_unreadable_file_is_a_sweep_error(tmp_path: Path) -> None:
    with pytest.raises(SweepError) as caught:
        load_sweep(tmp_path / "missing.toml")
    assert "cannot read the sweep file" in str(caught.value)


def test_dates_are_not_flag_values(tmp_path: Path) -> None:
    with pytest.raises(SweepError) as caught:
        parse_sweep(MINIMAL + "[server.args]\nmodel-path = 1979-05-27\n", tmp_path / "s.toml")
    assert "got a TOML date" in str(caught.value)


def test_shipped_sweeps_load_and_resolve_by_stem() -> None:
    names = {p.stem for p in shipped_sweeps()}
    assert {"qwen-ddtree-sm120", "eagle3"} <= names
    for stem in names:
        assert resolve_sweep(stem).name == f"{stem}.toml"
        sweep = load_sweep(resolve_sweep(stem))
        assert sweep.configs and sweep.workloads


def test_seed_campaign_is_what_the_issue_asks_for() -> None:
    sweep = load_sweep(resolve_sweep("qwen-ddtree-sm120"))
    args = dict(sweep.server_args)
    assert args["context-length"] == 32768
    assert str(args["model-path"]).startswith("/dev/shm/")
    ddtree = next(c for c in sweep.configs if c.algorithm == "ddtree")
    assert dict(ddtree.matrix) == {"budget": (8, 12, 15, 16, 32, 64), "tp": (1, 4, 8)}
    assert dict(ddtree.fork_args) == {"speculative-ddtree-budget": "{budget}"}


def test_flag_name_mistakes_are_reported_with_other_problems(tmp_path: Path) -> None:
    """One pass finds a loader problem and a flag problem, so one edit fixes the file."""
    text = MINIMAL.replace('name = "ar"', 'name = "ar"\nargs = { tp = 2 }').replace('kind = "code"', 'kind = "cod"')
    with pytest.raises(SweepError) as caught:
        load_sweep(write(tmp_path, text))
    assert [(i.line, i.key) for i in caught.value.issues] == [(7, "configs[0].args.tp"), (10, "workloads[0].kind")]
