"""The test suite is type-checked too: `mypy tests` with pyproject.toml's override for the test modules (a test may
leave a function unannotated; whatever it annotates is checked). A failure prints mypy's own report. Like
tests/meta/test_static_checks.py, this runs the tool from the test environment's bin directory."""

from __future__ import annotations

import re
import subprocess
import tomllib

import pytest
from test_static_checks import _tool
from repo_paths import REPO

ROOT = REPO

# Files whose errors could not be fixed yet (each is an edit left for its owner). The list only shrinks: a file
# listed here that mypy finds clean fails the test until it is taken off.
NOT_YET_CHECKED: frozenset[str] = frozenset()

_ERROR = re.compile(r"^(?P<path>[^:\s]+\.py):\d+: error: ")


def _mypy_errors_by_file() -> tuple[dict[str, list[str]], str]:
    argv = [_tool("mypy"), "tests"]
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = f"{' '.join(argv)}:\n{result.stdout}\n{result.stderr}"
    errors: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        match = _ERROR.match(line)
        if match:
            errors.setdefault(match["path"], []).append(line)
    if result.returncode != 0 and not errors:  # mypy itself failed (bad config, crash): its report says why
        pytest.fail(f"mypy did not run:\n{report}")
    return errors, report


def test_the_tests_type_check() -> None:
    errors, report = _mypy_errors_by_file()
    unexpected = {path: lines for path, lines in errors.items() if path not in NOT_YET_CHECKED}
    assert not unexpected, (
        "type errors in the tests:\n"
        + "\n".join(line for lines in unexpected.values() for line in lines)
        + f"\n\nfull report: {report}"
    )
    now_clean = sorted(NOT_YET_CHECKED - set(errors))
    assert not now_clean, f"these files type-check now; take them off NOT_YET_CHECKED: {now_clean}"


def test_every_test_module_is_named_in_the_mypy_override() -> None:
    """The test modules are top-level modules, which mypy's overrides can only name one by one: a new file under
    tests/ must join the list, or it is checked as strictly as the package (every function annotated)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    overrides = config["tool"]["mypy"]["overrides"]
    named = {module for block in overrides if block.get("check_untyped_defs") is False for module in block["module"]}
    modules = {path.stem for path in (ROOT / "tests").rglob("*.py")}
    missing = sorted(modules - named)
    assert not missing, f"add these to the tests' [[tool.mypy.overrides]] in pyproject.toml: {missing}"
