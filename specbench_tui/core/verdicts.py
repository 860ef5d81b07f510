"""A configuration's outcome as every view names it, decided once: ``zero-out`` and ``partial`` for a done one.

Crashed, zero output and partial are three different troubles: the server died (its state, from the engine's
crash signature or exit), it answered with no tokens on some workload (the ledger's ``zero_output`` count), or a
workload was cut short (the analysis's coverage). The engine's ending line, the TUI's queue, header and end toast
all take the word from here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping

from specbench_tui.core.acceptance import ACCEPTANCE_LENGTH
from specbench_tui.core.events import ConfigState
from specbench_tui.core.results import (
    FLAG_BURST,
    FLAG_CLAMPED,
    FLAG_FROM_MEMORY,
    FLAG_IDLE,
    FLAG_MISMATCH,
    FLAG_RETRACTED,
    RunAnalysis,
)

ZERO_OUTPUT = "zero-out"
PARTIAL = "partial"

STATE_ORDER = tuple(state.value for state in (ConfigState.DONE, ConfigState.CRASHED, ConfigState.FAILED,
                                              ConfigState.SKIPPED, ConfigState.LAUNCHING, ConfigState.READY,
                                              ConfigState.RUNNING, ConfigState.PENDING))


def partial_configs(analysis: RunAnalysis | None) -> frozenset[str]:
    """Configurations with a workload cut short (analysis coverage ``partial``)."""
    if analysis is None:
        return frozenset()
    return frozenset(c.id for c in analysis.configs if any(row.partial for row in analysis.rows_of(c.id)))


def zero_output_configs(analysis: RunAnalysis | None) -> frozenset[str]:
    """Configurations with at least one answer of no tokens."""
    if analysis is None:
        return frozenset()
    return frozenset(c.id for c in analysis.configs
                     if (totals := analysis.totals_for(c.id)) is not None and totals.n_zero_output > 0)


def config_verdict(state: str, *, zero_output: bool, partial: bool) -> str:
    """The word for a configuration in ``state``: a done one that answered with no tokens somewhere is
    ``zero-out``, one with a workload cut short ``partial``; any other state is its own word."""
    if state == ConfigState.DONE.value:
        if zero_output:
            return ZERO_OUTPUT
        if partial:
            return PARTIAL
    return state


def state_counts(states: Mapping[str, str], zero_output: Collection[str] = (), partial: Collection[str] = ()) -> str:
    """``9 done (1 zero-out, 1 partial), 1 crashed``: how many configurations ended in each state, in a fixed
    order, the done ones that are not what "done" suggests said inside it."""
    counts = Counter(states.values())
    order = [s for s in STATE_ORDER if counts.get(s)] + sorted(set(counts) - set(STATE_ORDER))
    parts = [f"{counts[s]} {s}" for s in order]
    done = ConfigState.DONE.value
    if counts.get(done):
        ids = [cid for cid, state in states.items() if state == done]
        zero = [cid for cid in ids if cid in zero_output]
        cut = [cid for cid in ids if cid not in zero_output and cid in partial]
        inner = [f"{len(group)} {word}" for group, word in ((zero, ZERO_OUTPUT), (cut, PARTIAL)) if group]
        if inner:
            parts[order.index(done)] += f" ({', '.join(inner)})"
    return ", ".join(parts) or "no configuration"


def verdict_counts(verdicts: Iterable[str]) -> Counter[str]:
    """How many configurations carry each word."""
    return Counter(verdicts)


FLAG_NOTES = {
    FLAG_MISMATCH: "✖ output differs from baseline",
    FLAG_IDLE: f"draft idle ({ACCEPTANCE_LENGTH.name} ≈ 1)",
    FLAG_BURST: "answers came in one burst: no decode rate",
    FLAG_CLAMPED: "prompt clamped to the context",
    FLAG_FROM_MEMORY: "drafted from memory",
    FLAG_RETRACTED: "retracted",
}
"""How a row flag reads in a note, the same in the TUI's results table and the end summary (flags counted
elsewhere in the row, zero output, errors, partial, are not repeated)."""


def flag_note(flag: str) -> str:
    """A flag's note (:data:`FLAG_NOTES`; an unknown flag as its words)."""
    return FLAG_NOTES.get(flag, flag.replace("_", " "))
