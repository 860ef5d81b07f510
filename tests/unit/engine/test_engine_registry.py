"""The engine registry and what each built-in engine module answers beyond the wire: which configurations
speculate and their draft budget (the analysis asks the run's engine), the log view's hints, and engines found
through ``SPECBENCH_ENGINES`` or an installed package's entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from repo_paths import TESTS
from specbench_tui.core.analysis import analyse
from specbench_tui.core.engines.registry import ENTRY_POINT_GROUP, engine_names, get_profile
from specbench_tui.tui.log_style import classify, compact_line, problem_keywords


def _plan(engine: str | None, argv: list[str], algorithm: str = "autoregressive") -> dict:
    plan = {"sweep": "s", "configs": [{"id": "c1", "name": "c", "algorithm": algorithm, "tp": 1, "argv": argv,
                                       "params": {}, "baseline": None}], "workloads": []}
    if engine is not None:
        plan["engine"] = engine
    return plan


def _config(engine: str | None, argv: list[str], algorithm: str = "autoregressive"):
    return analyse(_plan(engine, argv, algorithm), []).configs[0]


@pytest.mark.parametrize(("engine", "argv", "speculative", "budget"), [
    ("sglang", ["--speculative-algorithm", "EAGLE3", "--speculative-num-draft-tokens", "16"], True, 16),
    ("sglang", ["--speculative-ddtree-budget=24"], False, 24),
    (None, ["--speculative-algorithm", "NGRAM"], True, None),  # a plan.json from before plans named their engine
    ("llamacpp", ["--spec-type", "ngram-simple", "--spec-draft-n-max", "8"], True, 8),
    ("llamacpp", ["--model-draft", "/d.gguf"], False, None),  # a draft model alone never drafts
    ("llamacpp", ["--spec-type", "none"], False, None),
    ("vllm", ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": 3})], True, 3),
    ("vllm", ["--speculative-config", '{"method": "eagle3", "num_speculative_tokens": "5"}'], True, 5),
    ("vllm", ["--max-num-seqs", "4"], False, None),
])
def test_each_engine_says_which_configurations_speculate_and_their_budget(engine, argv, speculative, budget):
    config = _config(engine, argv)
    assert (config.speculative, config.budget) == (speculative, budget)


def test_a_declared_algorithm_speculates_on_any_engine_and_an_unknown_engine_falls_back_to_it():
    assert _config("llamacpp", [], "draft-model").speculative
    assert not _config("vllm", [], "baseline").speculative
    assert _config("no-such-engine", ["--speculative-algorithm", "EAGLE"], "eagle").speculative
    assert not _config("no-such-engine", ["--speculative-algorithm", "EAGLE"]).speculative  # its flags unknown


def test_log_hints_of_each_engine():
    # Each engine's hints make its dying lines stand out as errors; "fatal" is the engine's verdict alone.
    for line in ("[2025-02-21 22:59:28 TP0] Scheduler hit an exception: boom",
                 "/src/ggml.c:123: GGML_ASSERT(n_tokens > 0) failed",
                 "(EngineCore pid=1) ERROR EngineCore encountered a fatal error."):
        assert classify(line) == "error" and classify(line, "info") == "error" and classify(line, "fatal") == "fatal"
    assert classify("send_error: task id = 3, error: request exceeds the available context size") != "fatal"
    assert b"GGML_ASSERT" in problem_keywords() and b"Error" in problem_keywords()
    # the full-log screen's pre-filter finds every line classify colours (a CRITICAL or deprecated line was missed)
    for line in ("[2025-01-01 00:00:00] CRITICAL the scheduler is gone", "torch.foo is deprecated, use bar",
                 "WARN low memory", "RuntimeError: boom"):
        assert classify(line) != "info", line
        assert any(word in line.encode() for word in problem_keywords()), line
    line = "[2025-01-01 00:00:00] Decode batch, #running-req: 1, accept len: 3.10, gen throughput (token/s): 90.0"
    assert compact_line(line) == "[2025-01-01 00:00:00] Decode ▸ 90.0 tok/s · acc.len 3.10 · run 1"
    assert compact_line("an ordinary line") == "an ordinary line"
    from specbench_tui.tui.log_panel import format_live_line

    shown = format_live_line("eagle", "[2025-01-01 12:00:01 TP0] Decode batch, gen throughput (token/s): 90.0", None)
    assert shown.endswith("│ 12:00:01 TP0 Decode ▸ 90.0 tok/s")  # SGLang's hints: stamp shortened, figures first
    assert format_live_line("w", "main: server is listening", None).endswith("│ main: server is listening")


def test_an_installed_package_adds_an_engine_through_its_entry_point(tmp_path: Path):
    """A package that declares ``[project.entry-points."specbench_tui.engines"]`` is found without
    ``SPECBENCH_ENGINES``: here a fake installed distribution on the path, its module importing the toy engine."""
    site = tmp_path / "site"
    (site / "toyplug-1.0.dist-info").mkdir(parents=True)
    (site / "toyplug-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplug\nVersion: 1.0\n")
    (site / "toyplug-1.0.dist-info" / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ntoy = toyplug\n")
    (site / "toyplug.py").write_text("import toy_engine  # noqa: F401 - registers the engine\n")
    tests = TESTS
    env = {k: v for k, v in os.environ.items() if k != "SPECBENCH_ENGINES"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(tests)])
    code = "from specbench_tui.core.engines.registry import engine_names\nprint(','.join(engine_names()))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.stdout.strip() == "sglang,llamacpp,vllm,toy", done.stderr


def test_the_built_ins_come_first_and_each_has_its_flags():
    assert engine_names()[:3] == ("sglang", "llamacpp", "vllm")
    for name in ("sglang", "llamacpp", "vllm"):
        engine = get_profile(name)
        assert engine.flags().name == name and engine.flags().known_flags
    assert get_profile("sglang").python_modules == {"sglang": "sglang.launch_server", "simulator": "specbench_tui.sim"}
    with pytest.raises(KeyError, match="no engine profile 'nope'; known: sglang, llamacpp, vllm"):
        get_profile("nope")


def test_reports_show_the_server_packages_the_engine_named():
    """``env.json`` records the versions of the packages the run's engine names (``python_packages``); the
    report shows those, whatever the engine (a vLLM run shows vLLM's version, not SGLang's empty slots)."""
    from specbench_tui.report.tables import MAX_ENV_PACKAGES, env_facts

    vllm = {"server_python": {"packages": {"vllm": "0.32.0", "torch": "2.8.0+cpu", "triton": None}}}
    assert env_facts(vllm) == {"vllm": "0.32.0", "torch": "2.8.0+cpu"}
    assert list(get_profile("vllm").python_packages[:2]) == ["vllm", "torch"]
    assert get_profile("llamacpp").python_packages == ()  # a native binary: no interpreter to ask
    hostile = {"server_python": {"packages": {f"p{i}\x1b[2J": "1" for i in range(5000)}}}
    facts = env_facts(hostile)
    assert len(facts) == MAX_ENV_PACKAGES and all("\x1b" not in key for key in facts)


def test_the_simulator_is_a_launcher_of_the_sglang_engine(tmp_path: Path):
    from specbench_tui.core.engines import simulator
    from specbench_tui.core.launch import launcher_prefix
    from specbench_tui.core.sweep.schema import EngineSpec

    sim = EngineSpec(profile="sglang", launcher="simulator", sim_profile="/p/fast.toml")
    real = EngineSpec(profile="sglang", launcher="sglang")
    assert simulator.simulated(sim) and not simulator.simulated(real)
    assert simulator.launch_env(sim) == {"SPECBENCH_SIM_PROFILE": "/p/fast.toml"} and simulator.launch_env(real) == {}
    safe = ["-P"] if sys.version_info >= (3, 11) else []  # never the working directory's code (issue 29)
    assert launcher_prefix(sim, "/py") == ["/py", *safe, "-m", "specbench_tui.sim"]
    assert launcher_prefix(real, "/py") == ["/py", *safe, "-m", "sglang.launch_server"]
    named = EngineSpec(profile="sglang", launcher="sglang", python="/venv/bin/python")
    assert launcher_prefix(named, "/py") == ["/venv/bin/python", "-P", "-m", "sglang.launch_server"]  # 3.11+
    with pytest.raises(ValueError, match="engine profile 'vllm' has no launcher 'simulator'"):
        launcher_prefix(EngineSpec(profile="vllm", launcher="simulator"), "/py")
