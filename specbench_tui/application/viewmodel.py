"""What a view of a sweep shows, built once per refresh in the application layer: the TUI only draws it.

:func:`build_view` folds the state (the ledger's fold of the events), the analysis (which configurations are
partial) and what a key asked for into one :class:`SweepView`: every configuration's word and note for the queue,
the counts for the header, whether the queue is shown paused. What a configuration's outcome *is* ("zero-out",
"partial") is decided below (:func:`specbench_tui.core.verdicts.config_verdict`); the sentences a user reads
about the sweep file are written here, not in a widget.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

from specbench_tui.application.rows import Mark, ViewCell, ViewRow, clean_text

from specbench_tui.core.crossover.results import PointRow
from specbench_tui.core.events import ConfigState
from specbench_tui.core.results import RunAnalysis
from specbench_tui.core.plan import Plan, PlannedConfig
from specbench_tui.core.state import PAUSED, ConfigView, RunState
from specbench_tui.core.verdicts import PARTIAL, ZERO_OUTPUT, config_verdict, state_counts


def _shown(text: str, limit: int) -> str:
    """``text`` as one printable line of at most ``limit`` characters (names and reasons are untrusted)."""
    line = "".join(ch if ch.isprintable() else " " for ch in str(text))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def sweep_file(plan: Plan) -> str:
    """The sweep file the user ran: a resumed or attached run's plan is read from the run directory's copy, but
    its exclude rules are edited in the user's own file (the run's record of its ``sweep_path``)."""
    return str(plan.sweep.path)


def excluded_hint(plan: Plan, config: PlannedConfig) -> str:
    """Why ``r`` cannot queue an excluded configuration, and the fix: the rule lives in the sweep file the user
    ran (never the run directory's copy, which a resume reads back unchanged)."""
    path = _shown(sweep_file(plan), 200)
    return (f"{_shown(config.name, 80)} cannot run: the sweep file excludes it ({_shown(config.skip_reason or '', 200)})."
            f" Remove or narrow that exclude rule in {path}, then start a new run: specbench run {path}")


# ------------------------------------------------------------------------------------------ the sweep view


class ShownState(str, Enum):
    """The word the queue shows for a configuration: the engine's state, ``paused`` while the queue is, or core's
    verdict on how it ended (zero-out, partial)."""

    PENDING = "pending"
    PAUSED = PAUSED
    LAUNCHING = "launching"
    READY = "ready"
    RUNNING = "running"
    DONE = "done"
    ZERO_OUT = ZERO_OUTPUT
    PARTIAL = PARTIAL
    CRASHED = "crashed"
    FAILED = "failed"
    SKIPPED = "skipped"
    NODE_LOST = "node_lost"
    UNKNOWN = "?"


GLYPHS = {
    ShownState.PENDING: "·", ShownState.PAUSED: "⏸", ShownState.LAUNCHING: "◔", ShownState.READY: "◑",
    ShownState.RUNNING: "▶", ShownState.DONE: "✔", ShownState.CRASHED: "✖", ShownState.FAILED: "✖",
    ShownState.SKIPPED: "↷", ShownState.NODE_LOST: "⚠", ShownState.ZERO_OUT: "▲", ShownState.PARTIAL: "◐",
}
"""A glyph per state, so that crashed, zero output and partial read apart without colour."""

STATE_MARKS = {
    ShownState.CRASHED: Mark.CRASHED, ShownState.FAILED: Mark.CRASHED, ShownState.PAUSED: Mark.ZERO_OUT,
    ShownState.ZERO_OUT: Mark.ZERO_OUT, ShownState.PARTIAL: Mark.PARTIAL, ShownState.NODE_LOST: Mark.PARTIAL,
    ShownState.RUNNING: Mark.ACTIVE, ShownState.LAUNCHING: Mark.ACTIVE, ShownState.READY: Mark.ACTIVE,
    ShownState.DONE: Mark.DONE,
}
"""What each state means on screen (the others are muted)."""
QUEUE_MARKS = frozenset({*STATE_MARKS.values(), Mark.MUTED, Mark.PLAIN})
"""Every mark :func:`queue_row` gives a cell."""


def shown_state(word: str) -> ShownState:
    try:
        return ShownState(word)
    except ValueError:
        return ShownState.UNKNOWN


@dataclass(frozen=True)
class ConfigLine:
    """One configuration as the queue draws it: its word (what a key asked for, else the engine's state with
    core's verdict), the note beside it, where it runs and its start-up time."""

    config_id: str
    name: str
    word: str
    note: str
    where: str
    startup: str
    holding: bool
    """Whether its server holds GPUs now."""

    @property
    def state(self) -> ShownState:
        return shown_state(self.word)


@dataclass(frozen=True)
class SweepView:
    """What every panel of a sweep draws, built once per refresh from the state (the ledger's fold), the
    analysis (which configurations are partial) and what a key asked for that the engine has not confirmed."""

    lines: tuple[ConfigLine, ...] = ()
    ran: int = 0
    """Configurations that ran to an end: done (zero-out and partial included), crashed or failed."""
    to_run: int = 0
    """Configurations to run: all but the skipped ones."""
    crashed: int = 0
    zero_out: int = 0
    partial: int = 0
    skipped: int = 0
    paused: bool = False
    """The queue as shown: what ``p`` asked for until the engine answers, then the engine's state."""


Asked = Mapping[str, tuple[str, str, float]]
"""config id -> (word shown, note, when asked): what a key asked for, shown until the engine confirms."""


def config_note(view: ConfigView) -> str:
    """The note beside a configuration: why it crashed, its progress, its zero-output count or its reason."""
    if view.state.value in ("crashed", "failed"):
        if view.signature and view.reason and view.reason.startswith(f"{view.signature}: "):
            return view.reason  # the final reason names the signature already (``signature: cause``)
        parts = [p for p in (view.signature, view.reason) if p]
        return ": ".join(parts) if parts else view.state.value
    if view.state.active:
        if view.workload:
            return f"{view.workload} · {view.measurements} meas"
        return f"attempt {view.attempt}" if view.attempt > 1 else ""
    if view.zero_output:
        return f"{view.zero_output} of {view.measurements} answers with no tokens"
    if view.reason:
        return view.reason
    if view.state.value == "done":
        return f"{view.measurements} meas"
    return ""


def point_marks(point: PointRow) -> list[str]:
    """What a load point's row says beside its figures: ``capped (64 in flight, cap 48)`` when it sends more
    requests at once than the server runs, an adaptive server's steps, retracted requests, repeats drafted from
    memory (the report's marks, :func:`specbench_tui.report.loadview.point_marks`, in the same words)."""
    return [m for m in (point.capped, point.steps_text,
                        f"{point.n_retracted} retracted" if point.n_retracted else "", point.from_memory) if m]


def capped_configs(analysis: RunAnalysis | None) -> dict[str, str]:
    """config id -> ``capped at c64 (64 in flight, cap 48)`` for each configuration with a capped load point (its
    first; ``+N more`` when there are others): the queue shows it beside the configuration."""
    load = analysis.load if analysis is not None else None
    if load is None:
        return {}
    points: dict[str, list[PointRow]] = {}
    for point in load.points:
        if point.capped:
            points.setdefault(point.config_id, []).append(point)
    out = {}
    for config_id, capped in points.items():
        first = min(capped, key=lambda p: (p.axis, p.value))
        more = f" +{len(capped) - 1} more" if len(capped) > 1 else ""
        out[config_id] = f"capped at {first.load}{more}: {first.capped}"
    return out


def _line(state: RunState, view: ConfigView, asked: Asked, pause_requested: bool | None,
          partial: frozenset[str], labels: Mapping[str | None, str] | None,
          capped: Mapping[str, str]) -> ConfigLine:
    request = asked.get(view.config_id)
    if request is not None:
        word, note = request[0], request[1]
    else:
        word, note = state.display_state(view), config_note(view)
        if pause_requested is not None and view.state is ConfigState.PENDING:
            word = PAUSED if pause_requested else ConfigState.PENDING.value
        word = config_verdict(word, zero_output=bool(view.zero_output), partial=view.config_id in partial)
        if word == PARTIAL:
            note = f"workload cut short · {view.measurements} meas"
        if view.config_id in capped:
            note = f"{note} · {capped[view.config_id]}" if note else capped[view.config_id]
    gpus = view.gpus or view.last_gpus
    where = ",".join(str(g) for g in gpus) if gpus else "–"
    if labels is not None and (view.node is not None or view.launched_at is not None):
        where = f"{where if gpus else 'CPU'} @ {labels.get(view.node, view.node or '?')}"
    return ConfigLine(view.config_id, view.name, word, note, where,
                      f"{view.startup_s:.1f}s" if view.startup_s is not None else "–", bool(view.gpus))


def build_view(state: RunState, *, partial: frozenset[str] = frozenset(), asked: Asked | None = None,
               pause_requested: bool | None = None, capped: Mapping[str, str] | None = None) -> SweepView:
    """The :class:`SweepView` of ``state`` now; ``capped``: :func:`capped_configs` of the latest analysis."""
    asked = asked or {}
    capped = capped or {}
    labels = state.node_labels() if state.on_nodes else None
    views = state.ordered_configs()
    lines = tuple(_line(state, view, asked, pause_requested, partial, labels, capped) for view in views)
    asked_skip = {cid for cid, request in asked.items() if request[0] == ConfigState.SKIPPED.value}
    skipped = sum(1 for v in views if v.state is ConfigState.SKIPPED or v.config_id in asked_skip)
    crashed = sum(1 for v in views if v.state in (ConfigState.CRASHED, ConfigState.FAILED))
    done = [v for v in views if v.state is ConfigState.DONE]
    zero = sum(1 for v in done if v.zero_output)
    cut = sum(1 for v in done if not v.zero_output and v.config_id in partial)
    return SweepView(lines=lines, ran=len(done) + crashed, to_run=max(0, state.total - skipped), crashed=crashed,
                     zero_out=zero, partial=cut, skipped=skipped,
                     paused=state.paused if pause_requested is None else pause_requested)


QUEUE_COLUMNS = ("glyph", "config", "state", "gpus", "startup", "note")
"""The queue's columns, in the order :func:`queue_row` gives its cells."""


def queue_row(line: ConfigLine) -> ViewRow:
    """One configuration as the queue draws it: its cells (:data:`QUEUE_COLUMNS`), each with its meaning."""
    state = line.state
    mark = STATE_MARKS.get(state, Mark.MUTED)
    alarming = mark is Mark.CRASHED
    warned = state in (ShownState.ZERO_OUT, ShownState.PARTIAL)
    cells = (
        ViewCell(GLYPHS.get(state, "?"), mark),
        ViewCell(clean_text(line.name, 120), Mark.CRASHED if alarming else Mark.PLAIN),
        ViewCell(clean_text(line.word, 40), mark),
        ViewCell(clean_text(line.where, 80), Mark.ACTIVE if line.holding else Mark.MUTED),
        ViewCell(line.startup),
        ViewCell(clean_text(line.note, 200), Mark.CRASHED if alarming else (mark if warned else Mark.MUTED)),
    )
    row_mark = mark if mark in (Mark.CRASHED, Mark.ZERO_OUT, Mark.PARTIAL) else Mark.PLAIN
    return ViewRow(line.config_id, cells, row_mark)


def queue_summary(lines: Iterable[ConfigLine]) -> str:
    """``1 running 40 pending 3 skipped``: the configurations as shown (what a key asked for included)."""
    counts: dict[str, int] = {}
    for line in lines:
        counts[line.word] = counts.get(line.word, 0) + 1
    order = ("running", "launching", "ready", "pending", PAUSED, "done", ZERO_OUTPUT, PARTIAL, "crashed", "failed",
             "skipped", "node_lost")
    return clean_text(" ".join(f"{counts[k]} {k}" for k in order if counts.get(k)), 200)


def end_summary(state: RunState, partial: frozenset[str]) -> str:
    """``5 done (1 zero-out, 1 partial), 1 crashed``: how the sweep's configurations ended, in the ending line's
    words (:func:`specbench_tui.core.verdicts.state_counts`)."""
    states = {cid: state.display_state(view) for cid, view in state.configs.items()}
    zero = {cid for cid, view in state.configs.items() if view.zero_output}
    return state_counts(states, zero, partial)
