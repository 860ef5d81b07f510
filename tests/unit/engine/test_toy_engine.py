"""An engine added from one module (``tests/toy_engine.py`` + ``toy_engine_flags.tsv``), as
``docs/adding-an-engine.md`` says: the registry finds it, sweeps validate against its flags and rules, the log
view takes its hints, and ``specbench run --headless`` runs a sweep on it end to end against a stand-in server
launched as a real subprocess, with its results recorded and analysed by its own rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import toy_engine
from engine_helpers import headless_engine, wait_no_processes

from repo_paths import TESTS
from specbench_tui.core.analysis import analyse
from specbench_tui.core.engines.base import EngineProfile
from specbench_tui.core.engines.registry import ENV_MODULES, EngineLoadError, engine_names, get_profile, register
from specbench_tui.core.errors import SweepError
from specbench_tui.core.plan import build_plan
from specbench_tui.core.records import Measurement
from specbench_tui.core.signatures import LEVEL_FATAL, LEVEL_INFO, SignatureSet, line_level
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.tui.log_style import classify, compact_line

SERVER = TESTS / "toy_server.py"


def _sweep(folder: Path, configs: str, port: int = 39650) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "toy.toml"
    path.write_text(f"""
[sweep]
name = "toy-sweep"
baseline = "base"

[engine]
profile = "toy"
launcher = "command"
command = ["{sys.executable}", "{SERVER}"]
port_base = {port}
startup_timeout_s = 30
stall_timeout_s = 30
request_timeout_s = 30
shutdown_grace_s = 5

[server.args]
token-delay-ms = 10                  # the drafting configurations stream twice as fast

[server.env]
SPECBENCH_TEST_MARKER = "{folder}"

[[configs]]
name = "base"
{configs}

[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci", "trie"]
max_new_tokens = 24
temperature = 0.0
ignore_eos = true
""")
    return path


DRAFT = """
[[configs]]
name = "draft-w{w}"
matrix = { w = [2, 4] }
[configs.args]
draft-window = "{w}"
"""


def test_the_guide_names_every_field_of_the_interface():
    """``docs/adding-an-engine.md`` walks through every field an engine module can set, and every helper it
    names exists: the guide and the code cannot drift apart silently."""
    import dataclasses
    import re

    from specbench_tui.core.engines import base, registry
    from specbench_tui.core.engines.base import EngineFlags, LogHints

    doc = (TESTS.parent / "docs" / "adding-an-engine.md").read_text()
    named = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", doc))
    for cls in (EngineProfile, EngineFlags, LogHints):
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in named]
        assert not missing, f"docs/adding-an-engine.md does not say what {cls.__name__}.{missing} is for"
    for helper in ("flag_table", "table_release", "openai_usage_meta", "draft_acceptance_meta", "STREAM_OPENAI",
                   "STREAM_SGLANG"):
        assert helper in named and hasattr(base, helper), helper
    assert "register(EngineProfile(" in doc and hasattr(registry, "register")
    assert registry.ENV_MODULES in doc and registry.ENTRY_POINT_GROUP in doc
    for path in re.findall(r"`((?:specbench_tui|tests)/[\w/.]+\.(?:py|tsv))`", doc):
        assert (TESTS.parent / path).is_file(), path


def test_the_module_registers_the_engine():
    assert get_profile("toy") is toy_engine.TOY
    assert "toy" in engine_names() and engine_names()[:3] == ("sglang", "llamacpp", "vllm")
    assert get_profile("toy").flags().release == "toy-server 1"
    register(toy_engine.TOY)  # the same engine again: harmless
    impostor = EngineProfile(name="toy", load_flags=toy_engine.toy_flags, ready_line=None, health_path="/",
                             info_path="/", generate_path="/", tokenize_path="/", abort_path=None,
                             flush_cache_path=None)
    with pytest.raises(ValueError, match="already registered"):
        register(impostor)


def test_sweeps_are_checked_against_its_flags_and_rules(tmp_path):
    plan = build_plan(load_sweep(_sweep(tmp_path, DRAFT)))
    assert [c.name for c in plan.configs] == ["base", "draft-w2", "draft-w4"]
    assert plan.configs[1].argv == ("--token-delay-ms", "10", "--draft-window", "2")
    assert plan.configs[0].gpus_needed == 1 and plan.to_json()["engine"] == "toy"
    with pytest.raises(SweepError) as info:
        build_plan(load_sweep(_sweep(tmp_path, '[configs.args]\ndraft-windw = 2\n')))
    assert "--draft-windw is not a flag of toy toy-server 1" in str(info.value)
    assert "did you mean 'draft-window'?" in str(info.value)
    with pytest.raises(SweepError) as info:
        build_plan(load_sweep(_sweep(tmp_path, '[configs.args]\ncrash-after = 2\n')))
    assert "toy.toml:25: configs[0].args.crash-after: --crash-after only melts a drafting server" in str(info.value)
    with pytest.raises(SweepError) as info:
        path = _sweep(tmp_path, "")
        path.write_text(path.read_text().replace('launcher = "command"', 'launcher = "sglang"'))
        build_plan(load_sweep(path))
    assert "engine profile 'toy' has no launcher 'sglang'" in str(info.value)


def test_its_crash_signature_and_log_hints():
    """The crash signature is what makes a line fatal (the engine's verdict, which records the crash: the sweep
    below ends ``crashed`` with ``toy_meltdown``); the log hint only raises the line to ``error`` when read back
    from disk, where no verdict comes with it."""
    line = "TOY MELTDOWN: reactor breach"
    signatures = SignatureSet(builtins=get_profile("toy").crash_signatures)
    match = signatures.match(line)
    assert match is not None and match.name == "toy_meltdown"
    assert signatures.match("toy stats: accept len 2.00, gen 250.5 tok/s") is None
    assert line_level(line, signatures) == LEVEL_FATAL  # the engine's verdict on a live line
    assert classify(line, LEVEL_FATAL) == "fatal"  # the live panel draws the verdict it is given
    assert line_level(line) == LEVEL_INFO  # no generic error word in it: without the hint it would be plain
    assert classify(line) == "error"  # read back from disk: the toy's hint raises it, never to fatal
    assert compact_line("toy stats: accept len 2.00, gen 250.5 tok/s") == "Decode ▸ 250.5 tok/s · accept 2.00"
    assert get_profile("toy").parse_stats_line("toy stats: accept len 2.00, gen 250.5 tok/s").accept_length == 2.0


def test_an_engine_not_loaded_says_how_to_load_it(tmp_path):
    path = _sweep(tmp_path, "")
    path.write_text(path.read_text().replace('profile = "toy"', 'profile = "toyy"'))
    with pytest.raises(SweepError) as info:
        load_sweep(path)
    assert "toy.toml:7: engine.profile: unknown engine profile 'toyy'" in str(info.value)
    assert "did you mean 'toy'?; an engine module of your own is named in SPECBENCH_ENGINES" in str(info.value)


def test_a_broken_engine_module_is_named(monkeypatch):
    code = ("import os, sys\nos.environ['SPECBENCH_ENGINES'] = 'toy_engine, no_such_engine_module'\n"
            "from specbench_tui.core.engines import registry\n"
            "try:\n    registry.get_profile('toy')\nexcept registry.EngineLoadError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(TESTS)})
    assert "engine module 'no_such_engine_module' named by SPECBENCH_ENGINES=toy_engine, no_such_engine_module " \
           "cannot be imported: ModuleNotFoundError" in done.stdout, done.stdout + done.stderr
    assert issubclass(EngineLoadError, ImportError) and ENV_MODULES == "SPECBENCH_ENGINES"
    # From the command line: the message and the fix, exit 2, no traceback.
    done = subprocess.run([sys.executable, "-m", "specbench_tui", "validate", str(TESTS.parent / "sweeps" / "demo.toml")],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SPECBENCH_ENGINES": "no_such_engine_module"})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("specbench: engine module 'no_such_engine_module' named by SPECBENCH_ENGINES"), \
        done.stderr
    assert "take it out of SPECBENCH_ENGINES" in done.stderr


def _read_run(runs: Path) -> tuple[Path, dict, list[Measurement], list]:
    from specbench_tui.rundir.store import RunDir

    run_dir = next(p for p in runs.iterdir() if p.is_dir())
    store = RunDir(run_dir)
    return run_dir, json.loads((run_dir / "plan.json").read_text()), store.read_measurements(), store.read_events()


def test_specbench_runs_a_sweep_on_it_end_to_end(tmp_path):
    crash = """
[[configs]]
name = "melt"
[configs.args]
draft-window = 2
crash-after = 2
"""
    path = _sweep(tmp_path / "sweep", DRAFT + crash, port=39660)
    runs = tmp_path / "runs"
    env = {**os.environ, "SPECBENCH_ENGINES": "toy_engine",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
    engine = headless_engine([str(path), "--runs-dir", str(runs)], tmp_path, env)
    try:
        output = engine.communicate(timeout=240)[0].decode(errors="replace")
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(5)
    assert engine.returncode == 1, output  # a configuration crashed (on purpose): the run says so
    assert not wait_no_processes(str(tmp_path / "sweep")), "a toy server outlived the sweep"

    run_dir, plan_json, measurements, events = _read_run(runs)
    assert plan_json["engine"] == "toy"
    env = json.loads((run_dir / "env.json").read_text())
    assert list(env["server_python"]["packages"]) == ["httpx"]  # the engine's own list of server packages
    launched = [e for e in events if type(e).__name__ == "ServerLaunching"]
    assert launched and all(e.argv[:2] == (sys.executable, str(SERVER)) for e in launched)
    analysis = analyse(plan_json, measurements, events)
    states = {c.name: c.state for c in analysis.configs}
    assert states == {"base": "done", "draft-w2": "done", "draft-w4": "done", "melt": "crashed"}, output
    melt = analysis.config(next(c.id for c in analysis.configs if c.name == "melt"))
    assert melt is not None and melt.signature == "toy_meltdown" and "TOY MELTDOWN" in (melt.crash_line or "")
    by_config = {c.name: c for c in analysis.configs}
    assert not by_config["base"].speculative and by_config["draft-w4"].speculative
    assert by_config["draft-w4"].budget == 4  # from --draft-window, by the engine's budget flag
    # plan.json records both, so a report in a process that never imported the engine module reads the same.
    elsewhere = analyse({**plan_json, "engine": "not-registered-here"}, measurements, events)
    assert [(c.speculative, c.budget) for c in elsewhere.configs] == [
        (c.speculative, c.budget) for c in analysis.configs] == [(False, None), (True, 2), (True, 4), (True, 2)]
    for name in ("draft-w2", "draft-w4"):
        row = analysis.row(by_config[name].id, "code")
        assert row is not None and row.n_ok == 2, output
        assert row.accept_length == pytest.approx(2.0)  # 24 tokens in 12 target steps, from the final chunk
        assert row.lossless.status == "pass"
        assert row.speedup is not None and row.speedup.median > 1.0
        assert row.server_log_accept_length == pytest.approx(2.0)  # its stats lines, parsed by the module
    logs = {p.name.rsplit("-", 1)[0]: p.read_text() for p in (run_dir / "logs").glob("*.log")}
    assert "toy server ready" in logs["base"] and "TOY MELTDOWN: reactor breach" in logs["melt"]
