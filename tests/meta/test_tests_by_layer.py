"""The tests live by layer (docs/testing.md, "Where the tests live"): every test module sits in a layer folder,
never directly in tests/ (which holds only what the folders share), its file name is unique across the folders
(test modules are top-level modules named by their file), and every folder that holds tests is on pytest's
``pythonpath`` (a test may import another folder's test module by name)."""

from __future__ import annotations

import tomllib
from collections import Counter
from pathlib import Path

from repo_paths import REPO, TESTS

LAYERS = ("unit/core", "unit/engine", "unit/application", "unit/rundir", "unit/report", "unit/sim", "unit/cli",
          "tui", "e2e", "real_servers", "meta")
"""The layer folders under tests/, as docs/testing.md lists them."""


def _test_modules(tests: Path) -> list[Path]:
    return sorted(path for path in tests.rglob("test_*.py") if "data" not in path.relative_to(tests).parts)


def misplaced(tests: Path) -> list[str]:
    """Test modules under ``tests`` that are not in a layer folder (directly in tests/, or in a folder of their
    own), as paths relative to ``tests``."""
    return [str(path.relative_to(tests)) for path in _test_modules(tests)
            if path.parent.relative_to(tests).as_posix() not in LAYERS]


def test_every_test_module_sits_in_a_layer_folder() -> None:
    wrong = misplaced(TESTS)
    assert not wrong, (f"these test modules are not in a layer folder: {wrong}; move each with `git mv` into the "
                       f"folder of the layer it exercises (tests/{{{','.join(LAYERS)}}}, see docs/testing.md)")


def test_the_check_sees_a_module_directly_in_tests(tmp_path: Path) -> None:
    for folder in ("unit/core", "tui"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / f"test_{folder.replace('/', '_')}.py").write_text("")
    (tmp_path / "helpers.py").write_text("")
    assert misplaced(tmp_path) == []
    (tmp_path / "test_stray.py").write_text("")
    (tmp_path / "unit" / "test_half_way.py").write_text("")
    assert misplaced(tmp_path) == ["test_stray.py", "unit/test_half_way.py"]


def test_test_module_names_are_unique_across_folders() -> None:
    twice = sorted(name for name, count in Counter(path.name for path in _test_modules(TESTS)).items() if count > 1)
    assert not twice, f"test modules are top-level modules: rename one of each pair: {twice}"


def test_every_layer_folder_is_on_pytests_pythonpath() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    on_path = set(config["tool"]["pytest"]["ini_options"]["pythonpath"])
    missing = sorted(f"tests/{layer}" for layer in LAYERS if f"tests/{layer}" not in on_path)
    assert "tests" in on_path and not missing, f"add to [tool.pytest.ini_options] pythonpath: {missing or ['tests']}"
