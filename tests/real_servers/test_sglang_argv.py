"""Our argv is SGLang's argv: every configuration of every shipped sweep parses with SGLang 0.5.23's own parser.

The parser (``ServerArgs.add_cli_args`` on an ``argparse.ArgumentParser``, triton stubbed) lives in a separate
environment, ``.venv-sglang``, made by ``bash tools/setup_sglang_parser_env.sh`` (sglang 0.5.23 without its GPU
dependencies, the small packages its import needs, and a CPU torch). One subprocess parses everything, since
importing sglang costs seconds.

Fork flags (``PlannedConfig.fork_flags``, e.g. DDTree's ``--speculative-ddtree-budget``) do not exist in 0.5.23:
they are removed with their values before parsing and listed as unchecked. ``--speculative-algorithm`` is a
free string in 0.5.23, so ``DDTREE`` parses; whether a server knows it is only decided at start-up (the plan
notes it). The checked-in flag lists in ``specbench_tui/core/`` must equal what ``tools/dump_sglang_flags.py``
prints from the same parser.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from repo_paths import REPO
from specbench_tui.core.launch import launcher_prefix, server_argv
from specbench_tui.core.plan import build_plan
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.paths import shipped_sweeps

pytestmark = pytest.mark.sglang

SETUP = "bash tools/setup_sglang_parser_env.sh"

PROBE = r'''
import contextlib, io, json, sys
sys.path.insert(0, sys.argv[1])
import dump_sglang_flags as dump

request = json.load(sys.stdin)
version, parser = dump.sglang_parser()
results = {}
for name, argv in request["argv"].items():
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            namespace = parser.parse_args(argv)
        results[name] = {"ok": True, "values": {k: getattr(namespace, k) for k in request["show"]
                                                if hasattr(namespace, k)}}
    except SystemExit as exc:
        results[name] = {"ok": False, "code": exc.code, "error": err.getvalue().strip().splitlines()[-1:]}
dumps = {}
for option in ([], ["--shapes"]):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        dump.main(option)
    dumps["shapes" if option else "flags"] = out.getvalue()
json.dump({"version": version, "results": results, "dumps": dumps}, sys.stdout, default=str)
'''


def _sglang_python() -> Path | None:
    override = os.environ.get("SPECBENCH_SGLANG_PYTHON")
    candidate = Path(override) if override else REPO / ".venv-sglang" / "bin" / "python"
    return candidate if candidate.exists() else None


def _strip_fork_flags(argv: list[str], fork_flags: tuple[str, ...]) -> list[str]:
    """argv without each fork flag and the values that follow it (up to the next ``--flag``)."""
    out: list[str] = []
    dropping = False
    for part in argv:
        if part.startswith("--"):
            dropping = part in fork_flags
        if not dropping:
            out.append(part)
    return out


def _shipped_argv() -> tuple[dict[str, list[str]], dict[str, tuple[str, ...]]]:
    """Per ``sweep/config`` of every SGLang sweep: the argv SGLang would get (fork flags removed), and the fork flags removed."""
    argvs: dict[str, list[str]] = {}
    unchecked: dict[str, tuple[str, ...]] = {}
    for key, (argv, fork_flags, _) in _shipped_configs().items():
        argvs[key] = _strip_fork_flags(argv, fork_flags)
        if fork_flags:
            unchecked[key] = fork_flags
    return argvs, unchecked


def _shipped_configs() -> dict[str, tuple[list[str], tuple[str, ...], Any]]:
    """Per ``sweep/config`` of every SGLang sweep: the full argv the launcher passes, its fork flags, the config."""
    out: dict[str, tuple[list[str], tuple[str, ...], Any]] = {}
    for path in shipped_sweeps():
        plan = build_plan(load_sweep(path))
        engine = plan.sweep.engine
        if engine.profile != "sglang":
            continue  # other engines' flags are checked against their own binaries (tests/unit/core/test_core_llamacpp.py)
        prefix = len(launcher_prefix(engine, sys.executable))
        for config in plan.configs:
            full = server_argv(engine, config, sys.executable, engine.port_base,
                               api_key="secret" if engine.api_key_env else None)[prefix:]
            out[f"{path.stem}/{config.name}"] = (full, config.fork_flags, config)
    return out


NEGATIVE = {
    "negative/unknown-flag": ["--model-path", "m", "--bogus-flag", "1"],
    "negative/removed-cuda-graph-max-bs": ["--model-path", "m", "--cuda-graph-max-bs", "8"],
    "negative/bad-int": ["--model-path", "m", "--tp-size", "four"],
    "positive/ddtree-algorithm-name": ["--model-path", "m", "--speculative-algorithm", "DDTREE"],
    "positive/abbreviation-tp": ["--model-path", "m", "--tp", "2"],
}


@pytest.fixture(scope="module")
def parsed() -> dict[str, Any]:
    python = _sglang_python()
    if python is None:
        message = (f"SGLANG 0.5.23 PARSER ENVIRONMENT MISSING: {REPO / '.venv-sglang'} does not exist, so the shipped "
                   f"sweeps' argv were NOT checked against SGLang's own parser. Install it with: {SETUP}")
        if os.environ.get("SPECBENCH_REQUIRE_SGLANG_PARSER") == "1":
            pytest.fail(message)
        pytest.skip(message)
    argvs, unchecked = _shipped_argv()
    request = {"argv": {**argvs, **NEGATIVE}, "show": ["speculative_algorithm", "tp_size"]}
    result = subprocess.run([str(python), "-c", PROBE, str(REPO / "tools")], input=json.dumps(request),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"the SGLang parser probe failed (re-run {SETUP}):\n{result.stderr[-3000:]}"
    data: dict[str, Any] = json.loads(result.stdout)
    data["argv"], data["unchecked"] = argvs, unchecked
    data["configs"] = _shipped_configs()
    return data


def test_parser_is_sglang_0_5_23(parsed: dict[str, Any]) -> None:
    assert parsed["version"] == "0.5.23"


def _flags(argv: list[str] | tuple[str, ...]) -> list[str]:
    return [part.split("=", 1)[0] for part in argv if part.startswith("--")]


def _value(argv: list[str], flag: str) -> str | None:
    for i, part in enumerate(argv):
        if part == flag and i + 1 < len(argv):
            return argv[i + 1]
        if part.startswith(flag + "="):
            return part.split("=", 1)[1]
    return None


def test_every_shipped_configuration_parses(parsed: dict[str, Any]) -> None:
    failures = {name: parsed["results"][name] for name in parsed["argv"] if not parsed["results"][name]["ok"]}
    assert not failures, json.dumps(failures, indent=2)
    assert len(parsed["argv"]) >= 24 + 55
    # What was parsed is the whole configuration: every flag it declares but the fork's, and SGLang reads the
    # algorithm and the tensor parallelism the plan assumes (a parse of a truncated argv passes too).
    for name, (full, fork_flags, config) in parsed["configs"].items():
        checked = parsed["argv"][name]
        expected = [f for f in _flags(full) if f not in fork_flags]
        assert _flags(checked) == expected, (name, checked)
        assert set(_flags(config.argv)) - set(fork_flags) <= set(expected), (name, config.argv)
        values = parsed["results"][name]["values"]
        assert values["tp_size"] == config.tp, (name, values, config.tp)
        algorithm = _value(checked, "--speculative-algorithm")
        assert values["speculative_algorithm"] == algorithm, (name, values, algorithm)


def test_unchecked_fork_flags_are_listed(parsed: dict[str, Any]) -> None:
    """Print (shown with -rA) and warn which fork flags 0.5.23's parser could not check, per configuration."""
    unchecked: dict[str, tuple[str, ...]] = parsed["unchecked"]
    flags = sorted({flag for names in unchecked.values() for flag in names})
    summary = (f"{len(parsed['argv'])} configurations checked against SGLang {parsed['version']}; fork flags "
               f"NOT checked (absent from the release parser): {', '.join(flags) or 'none'} in "
               f"{len(unchecked)} configurations: {', '.join(sorted(unchecked))}")
    print(summary)
    if flags:
        warnings.warn(summary, UserWarning, stacklevel=1)
    assert flags == ["--speculative-ddtree-budget"]
    assert all(not any(flag in parsed["argv"][name] for flag in flags) for name in unchecked)


def test_ddtree_algorithm_name_parses_because_it_is_a_free_string(parsed: dict[str, Any]) -> None:
    result = parsed["results"]["positive/ddtree-algorithm-name"]
    assert result["ok"] and result["values"]["speculative_algorithm"] == "DDTREE"
    seed = parsed["results"]["qwen-ddtree-sm120/ddtree-b15-tp4"]
    assert seed["ok"] and seed["values"] == {"speculative_algorithm": "DDTREE", "tp_size": 4}


def test_the_probe_can_fail(parsed: dict[str, Any]) -> None:
    results = parsed["results"]
    assert not results["negative/unknown-flag"]["ok"]
    assert "unrecognized arguments: --bogus-flag" in results["negative/unknown-flag"]["error"][0]
    assert "ambiguous option: --cuda-graph-max-bs" in results["negative/removed-cuda-graph-max-bs"]["error"][0]
    assert not results["negative/bad-int"]["ok"]
    assert results["positive/abbreviation-tp"]["ok"]  # why the planner itself refuses abbreviations


@pytest.mark.parametrize(("dump", "resource"), [("flags", "sglang_0_5_23_flags.txt"),
                                                ("shapes", "sglang_0_5_23_flag_shapes.tsv")])
def test_checked_in_flag_lists_equal_the_parser(parsed: dict[str, Any], dump: str, resource: str) -> None:
    shipped = resources.files("specbench_tui.core.engines").joinpath(resource).read_text()
    assert shipped == parsed["dumps"][dump], (
        f"specbench_tui/core/engines/{resource} is stale: regenerate it with "
        f".venv-sglang/bin/python tools/dump_sglang_flags.py{' --shapes' if dump == 'shapes' else ''} > "
        f"specbench_tui/core/engines/{resource}")


def test_strip_fork_flags_removes_values_too() -> None:
    argv = ["--a", "1", "--fork", "8", "9", "--b", "--fork2", "x", "--c", "2"]
    assert _strip_fork_flags(argv, ("--fork", "--fork2")) == ["--a", "1", "--b", "--c", "2"]
