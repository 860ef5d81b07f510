"""run_tui: the engine comes from the runner's factory; a missing runner or a refused sweep is reported."""

from __future__ import annotations

import argparse
import sys
import types

import pytest

from specbench_tui.tui.main import run_tui


def _args() -> argparse.Namespace:
    return argparse.Namespace(sweep="demo", resume=None, retry_crashed=False, runs_dir=None, no_mouse=True,
                              theme=None, headless=False)


def test_missing_runner_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "specbench_tui.engine.runner", None)
    assert run_tui(_args()) == 1
    assert "engine runner is not available" in capsys.readouterr().err


@pytest.mark.parametrize(("made", "code"), [(None, 2), (3, 3)])
def test_refused_sweep_returns_the_factory_code(monkeypatch: pytest.MonkeyPatch, made: object, code: int) -> None:
    runner = types.ModuleType("specbench_tui.engine.runner")
    runner.make_engine = lambda args: made  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "specbench_tui.engine.runner", runner)
    assert run_tui(_args()) == code
