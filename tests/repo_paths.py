"""Where things are, for tests in any layer folder: the repository, the tests folder and its shared data.

A test module's own location says nothing about these (tests/unit/core/test_x.py sits three folders below the
repository), so a test names them from here rather than from ``Path(__file__)``."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
DATA = TESTS / "data"
GOLDEN = TESTS / "golden"
