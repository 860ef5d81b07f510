"""The CLI and the library layers stay light: checked in fresh interpreters via ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("textual", "httpx", "torch", "triton", "sglang", "rich", "scipy")


def _loaded_after(code: str) -> list[str]:
    probe = (
        "import sys, json\n"
        f"{code}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(HEAVY)!r}))))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    modules: list[str] = json.loads(result.stdout.strip().splitlines()[-1])
    return modules


def test_importing_the_cli_loads_nothing_heavy() -> None:
    assert _loaded_after("import specbench_tui.cli") == []


def test_help_loads_nothing_heavy() -> None:
    loaded = _loaded_after(
        "from specbench_tui import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "try:\n    cli.main(['validate', '--help'])\nexcept SystemExit:\n    pass"
    )
    assert loaded == []


def test_validate_loads_nothing_heavy() -> None:
    loaded = _loaded_after(
        "import contextlib, io\n"
        "from specbench_tui import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert cli.main(['validate', 'qwen-ddtree-sm120']) == 0"
    )
    assert loaded == []


def test_specbench_help_subprocess() -> None:
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "specbench_tui", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "validate" in result.stdout
    imported = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    assert not imported & set(HEAVY), imported & set(HEAVY)


def test_core_and_engine_never_import_textual() -> None:
    code = (
        "import importlib, pkgutil, sys, json\n"
        "import specbench_tui.core, specbench_tui.engine, specbench_tui.application, specbench_tui.rundir.store\n"
        "names = ['specbench_tui.rundir.store']\n"
        "for package in (specbench_tui.core, specbench_tui.engine, specbench_tui.application):\n"
        "    for info in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
        "        importlib.import_module(info.name)\n"
        "        names.append(info.name)\n"
        "print(json.dumps({'modules': names, 'textual': [m for m in sys.modules if m.split('.')[0] == 'textual']}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert "specbench_tui.core.sweep" in found["modules"] and "specbench_tui.engine.orchestrator" in found["modules"]
    assert "specbench_tui.application.runner" in found["modules"] and "specbench_tui.rundir.store" in found["modules"]
    assert found["textual"] == [], found["textual"]
