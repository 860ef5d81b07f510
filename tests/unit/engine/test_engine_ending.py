"""How a sweep ended: one exit code and one closing line for ``--headless`` and the TUI alike."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from specbench_tui.core.events import ConfigState
from specbench_tui.engine.ending import (
    EXIT_CLUSTER_LOST,
    EXIT_CONFIG_FAILED,
    EXIT_GPU_HELD,
    EXIT_HANGUP,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_STORE,
    ending_line,
    exit_code,
    state_counts,
)
from specbench_tui.engine.orchestrator import SweepOutcome

DONE, CRASHED, FAILED, SKIPPED, PENDING = (ConfigState.DONE, ConfigState.CRASHED, ConfigState.FAILED,
                                           ConfigState.SKIPPED, ConfigState.PENDING)


@pytest.mark.parametrize(("outcome", "hangup", "code"), [
    (SweepOutcome("completed", states={"a": DONE, "b": SKIPPED}), False, EXIT_OK),
    (SweepOutcome("completed", states={"a": DONE, "b": CRASHED}), False, EXIT_CONFIG_FAILED),
    (SweepOutcome("completed", states={"a": FAILED}), False, EXIT_CONFIG_FAILED),
    (SweepOutcome("aborted", states={"a": DONE, "b": PENDING}), False, EXIT_INTERRUPTED),
    (SweepOutcome("aborted", states={"a": CRASHED, "b": PENDING}), True, EXIT_HANGUP),
    (SweepOutcome("failed", failure="preflight"), False, EXIT_INVALID),
    (SweepOutcome("failed", failure="store", states={"a": CRASHED}), False, EXIT_STORE),
    (SweepOutcome("failed", failure="gpu_release", states={"a": DONE}), False, EXIT_GPU_HELD),
    (SweepOutcome("failed", failure="cluster", states={"a": DONE, "b": PENDING}), False, EXIT_CLUSTER_LOST),
])
def test_exit_code(outcome: SweepOutcome, hangup: bool, code: int) -> None:
    assert exit_code(outcome, hangup=hangup) == code


def test_counts_in_a_fixed_order_and_the_reason_with_the_resume_command() -> None:
    outcome = SweepOutcome("aborted", "stopped on request; continue with specbench run --resume runs/x",
                           states={"p": PENDING, "c": CRASHED, "d1": DONE, "d2": DONE, "s": SKIPPED})
    assert state_counts(outcome) == "2 done, 1 crashed, 1 skipped, 1 pending"
    assert ending_line(outcome) == ("sweep aborted: 2 done, 1 crashed, 1 skipped, 1 pending; stopped on request; "
                                    "continue with specbench run --resume runs/x")
    assert ending_line(SweepOutcome("completed")) == "sweep completed: no configuration"


class _Analysis:
    """Just what :func:`state_counts` reads of a run's analysis: its configurations, and per configuration its
    totals and cells."""

    def __init__(self, zero: set[str], partial: set[str]) -> None:
        self.zero, self.partial = zero, partial
        self.configs = [SimpleNamespace(id=cid) for cid in ("d1", "d2", "z", "p", "zp", "c", "s")]

    def totals_for(self, config_id: str) -> object:
        return SimpleNamespace(n_zero_output=1 if config_id in self.zero else 0)

    def rows_of(self, config_id: str) -> list[object]:
        return [SimpleNamespace(partial=config_id in self.partial)]


def test_done_configurations_that_answered_nothing_or_were_cut_are_said_inside_done() -> None:
    """The end line agrees with the header: a zero-output or partial configuration is done, and said so."""
    outcome = SweepOutcome("completed", states={"d1": DONE, "d2": DONE, "z": DONE, "p": DONE, "zp": DONE,
                                                "c": CRASHED, "s": SKIPPED})
    analysis = _Analysis(zero={"z", "zp", "c"}, partial={"p", "zp", "c"})
    assert state_counts(outcome, analysis) == "5 done (2 zero-out, 1 partial), 1 crashed, 1 skipped"  # type: ignore[arg-type]
    assert ending_line(outcome, _Analysis(set(), set())) == "sweep completed: 5 done, 1 crashed, 1 skipped"  # type: ignore[arg-type]
