"""run_tui: the engine comes from the runner's factory; a missing runner or a refused sweep is reported."""

from __future__ import annotations

import argparse
import sys
import types
from typing import TYPE_CHECKING, Any, cast

import pytest

from specbench_tui.tui.main import run_tui

if TYPE_CHECKING:
    from specbench_tui.core.results import RunAnalysis
    from specbench_tui.engine.orchestrator import SweepOutcome
    from specbench_tui.tui.main import EndedEngine


def _args() -> argparse.Namespace:
    return argparse.Namespace(sweep="demo", resume=None, retry_crashed=False, runs_dir=None, no_mouse=True,
                              theme=None, headless=False)


def test_missing_runner_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "specbench_tui.application.runner", None)
    assert run_tui(_args()) == 1
    assert "engine runner is not available" in capsys.readouterr().err


@pytest.mark.parametrize(("made", "code"), [(None, 2), (3, 3)])
def test_refused_sweep_returns_the_factory_code(monkeypatch: pytest.MonkeyPatch, made: object, code: int) -> None:
    runner = types.ModuleType("specbench_tui.application.runner")
    runner.make_engine = lambda args: made  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "specbench_tui.application.runner", runner)
    assert run_tui(_args()) == code


class _Ended:
    """What ``run_tui`` reads of an engine once the app is gone."""

    def __init__(
        self,
        outcome: SweepOutcome | None,
        error: BaseException | None = None,
        table: str = "TABLE",
        analysis: RunAnalysis | None = None,
    ) -> None:
        self.outcome, self.error, self.run_dir, self._table = outcome, error, "runs/x", table
        self._analysis = analysis

    def summary_table(self) -> str:
        return self._table

    def analysis(self) -> RunAnalysis | None:
        return self._analysis


def _ended(*args: Any, **kwargs: Any) -> EndedEngine:
    """An ``_Ended`` as the engine ``_ending`` takes (its run_dir is a str and its analysis may be None: ``_ending``
    prints the one and reads the other only for a silent server)."""
    return cast("EndedEngine", _Ended(*args, **kwargs))


@pytest.mark.parametrize(("states", "code"), [({"a": "done"}, 0), ({"a": "done", "b": "crashed"}, 1)])
def test_the_ending_is_headless_s(capsys: pytest.CaptureFixture, states: dict[str, str], code: int) -> None:
    """After the app: the summary table stays in the terminal, then how the sweep ended, with headless's code."""
    from specbench_tui.core.events import ConfigState
    from specbench_tui.engine.orchestrator import SweepOutcome
    from specbench_tui.tui.main import _ending

    outcome = SweepOutcome("completed", states={k: ConfigState(v) for k, v in states.items()})
    assert _ending(_ended(outcome), 0) == code
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "TABLE"
    assert out[-2].startswith("specbench: sweep completed: 1 done")
    assert out[-1] == "specbench: run directory runs/x"


def test_quitting_mid_sweep_says_how_to_continue_and_exits_130(capsys: pytest.CaptureFixture) -> None:
    from specbench_tui.core.events import ConfigState
    from specbench_tui.engine.orchestrator import SweepOutcome
    from specbench_tui.tui.main import _ending

    outcome = SweepOutcome("aborted", "stopped on request; continue with specbench run --resume runs/x",
                           states={"a": ConfigState.DONE, "b": ConfigState.PENDING})
    assert _ending(_ended(outcome), 0) == 130
    assert "continue with specbench run --resume runs/x" in capsys.readouterr().out


def test_a_failed_preflight_prints_its_reasons_not_a_count(capsys: pytest.CaptureFixture) -> None:
    from specbench_tui.core.events import ConfigState
    from specbench_tui.engine.orchestrator import SweepOutcome
    from specbench_tui.tui.main import _ending

    outcome = SweepOutcome("failed", "pre-flight failed", states={"a": ConfigState.PENDING, "b": ConfigState.PENDING},
                           failure="preflight")
    reasons = ["GPU 3 is held by pid 4242 (python)", "port 30000 is in use"]
    assert _ending(_ended(outcome), 0, preflight_problems=reasons) == 2
    out = capsys.readouterr().out
    assert "pre-flight failed, nothing was launched" in out
    assert "  - GPU 3 is held by pid 4242 (python)" in out and "  - port 30000 is in use" in out
    assert "2 pending" not in out and "TABLE" not in out
    assert "run directory" not in out  # a failed pre-flight leaves none behind


def test_an_engine_error_is_said_and_fails(capsys: pytest.CaptureFixture) -> None:
    from specbench_tui.tui.main import _ending

    assert _ending(_ended(None, RuntimeError("boom")), 0) == 1
    captured = capsys.readouterr()
    assert "the engine stopped unexpectedly: RuntimeError('boom')" in captured.err
    assert "TABLE" not in captured.out and "run directory runs/x" in captured.out


@pytest.mark.e2e
def test_quitting_the_real_tui_in_a_terminal_leaves_the_ending_in_the_scrollback(tmp_path) -> None:
    """`specbench run` on a pseudo-terminal (as over SSH), `q` then `y` mid-sweep: the terminal keeps the summary
    and the command that continues the run, and the exit code says the sweep was stopped, not done."""
    import os
    import re

    from reliability_helpers import TerminalRun, make_sweep, new_marker, server_pids, wait_for, wait_gone

    marker = new_marker()
    run = TerminalRun(make_sweep(tmp_path), tmp_path / "runs", marker)
    proc, master, chunks = run.proc, run.master, run.chunks
    try:
        wait_for(lambda: len(server_pids(marker, proc.pid)) >= 3, 60, what="a server with its children")
        os.write(master, b"q")

        def shown(text: str) -> bool:
            plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r", "", b"".join(chunks).decode(errors="replace"))
            return text in plain

        # A dialog asks first while the sweep runs (the TUI attached to its engine: detach or stop, y stops; on
        # its own: quit, y quits): y only once it is up (a fixed second was not always enough under load).
        wait_for(lambda: shown("Stop sweep (s)") or shown("Quit (y)") or proc.poll() is not None, 60,
                 what="the quit dialog")
        try:
            os.write(master, b"y")
        except OSError:  # the app had quit without asking, and the terminal with it
            pass
        assert proc.wait(timeout=60) == 130
        run.reader.join(5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        run.close()
        wait_gone(marker, proc.pid, timeout_s=5)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r", "", b"".join(chunks).decode(errors="replace"))
    ending = text[text.rindex("decode tok/s per workload"):]
    assert re.search(r"^ar\s+(done|pending)\s", ending, re.M), ending
    assert re.search(r"^specbench: sweep aborted: .*continue with specbench run --resume .*runs/", ending, re.M), ending
    assert "specbench: run directory" in ending


def test_a_server_that_returned_no_tokens_fails_the_tui_run_as_headless(capsys: pytest.CaptureFixture) -> None:
    """Every request of a configuration came back empty: the sweep 'completed', but exits 1 (as headless)."""
    from specbench_tui.core.analysis import analyse
    from specbench_tui.core.events import ConfigState
    from specbench_tui.core.records import Measurement
    from specbench_tui.engine.orchestrator import SweepOutcome
    from specbench_tui.tui.main import _ending

    silent = analyse({}, [Measurement("c", "silent", "w", "i", 1, "zero_output")])
    ended = _ended(SweepOutcome("completed", states={"c": ConfigState.DONE}), analysis=silent)
    assert _ending(ended, 0) == 1
    assert _ending(_ended(SweepOutcome("completed", states={"c": ConfigState.DONE})), 0) == 0


LOAD_SWEEP = """
[sweep]
name = "x"
baseline = "ar"
gpus = 1
repeats = 1
warmup = 0
[engine]
launcher = "simulator"
[server.args]
model-path = "Qwen/Qwen3-8B"
[[configs]]
name = "ar"
[[configs]]
name = "eagle"
args = { speculative-algorithm = "EAGLE3", speculative-draft-model-path = "d", speculative-num-steps = 2, speculative-eagle-topk = 1, speculative-num-draft-tokens = 3 }
[[workloads]]
kind = "code"
max_new_tokens = 64
concurrency = [1, 8]
requests = 4
search = "grid"
"""


def test_a_load_sweeps_end_summary_says_each_configurations_figures_not_dashes() -> None:
    """The crossover sweep's end summary (headless and after the TUI) was all dashes: its only workload has a load
    axis, and the table had columns for sequential workloads only."""
    from pathlib import Path

    from specbench_tui.core.analysis import analyse
    from specbench_tui.core.plan import build_plan
    from specbench_tui.core.records import Measurement
    from specbench_tui.core.sweep.loader import parse_sweep
    from specbench_tui.engine.ending import render_summary

    plan = build_plan(parse_sweep(LOAD_SWEEP, Path("sweeps/load.toml")))
    records, start = [], 1000.0
    for config in plan.configs:
        for load, base in (("c1", 100.0), ("c8", 60.0)):
            speed = base * (1.0 if config.name == "ar" else 2.0 if load == "c1" else 0.8)
            for item in range(4):
                start += 1
                records.append(Measurement(config_id=config.id, config=config.name, workload="code", item=f"i{item}",
                                           repeat=0, status="ok", prompt_tokens=100, completion_tokens=64,
                                           ttft_s=0.05, e2e_s=64 / speed, decode_tps=speed, started_at=start,
                                           load=load))
    table = render_summary(analyse(plan.to_json(), records, []))
    rows = {line.split()[0]: line for line in table.splitlines() if line.split() and line.split()[0] in ("ar", "eagle")}
    assert "2.00x@c1 -> 0.80x@c8 B* (1, 8]" in rows["eagle"], table
    assert " base " in rows["ar"] and "tok/s@c1" in rows["ar"], table
    assert rows["eagle"].split().count("2.00x") == 1 and " 50 " in rows["eagle"], table  # speedup, TTFT at c1
