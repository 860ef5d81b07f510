"""Acceptance of one configuration (key ``a`` on the results table's selected row), per workload, live.

For each workload it shows the configuration's figures under their glossary names
(:mod:`specbench_tui.core.acceptance`): acceptance length (client and server), draft acceptance rate, accepted
per verified, step cost × with length ÷ cost beside the measured speedup and the factor that limits it, the
conditional acceptance at each draft position as a bar, and the histogram of accepted drafts per verify step as
bars. A workload with categories (a ``prompt_dataset``) adds its speedup and acceptance length matrices,
category × configuration, with the shown configuration's column marked ``▸``.

What it shows is :func:`specbench_tui.application.acceptance_detail.acceptance_detail` of the analysis the
results table shows (the app's latest, from its worker thread); this screen only lays it out, and draws again
when a newer analysis arrives. Every mark is a glyph or a word, so it reads the same under ``NO_COLOR``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from specbench_tui.application.acceptance_detail import (
    AcceptanceDetail,
    WorkloadAcceptance,
    acceptance_detail,
    step_choice,
)
from specbench_tui.core.acceptance import (
    ACCEPTANCE_LENGTH,
    ACCEPTED_PER_VERIFIED,
    CONDITIONAL_ACCEPTANCE,
    DRAFT_ACCEPTANCE_RATE,
    STEP_COST,
    CategoryMatrix,
    CellAcceptance,
    sparkline,
)
from specbench_tui.core.results import RunAnalysis
from specbench_tui.tui.key_bar import KeyBar
from specbench_tui.tui.palette import DEFAULT_PALETTE, Palette
from specbench_tui.tui.safe_text import clean

POLL_S = 0.5
"""How often the screen looks for a newer analysis (an identity check; drawing happens only when it changed)."""
FULL, EMPTY = "█", "░"
DASH = "–"
BAR_MIN, BAR_MAX = 10, 40
"""Width of a bar in cells: what the terminal leaves beside its label and value, within these bounds."""


def bar(value: float | None, width: int) -> str:
    """``value`` in [0, 1] as ``width`` cells of ``█`` then ``░`` (all ``·`` when there is no value)."""
    if value is None:
        return "·" * width
    full = max(0, min(width, round(value * width)))
    return FULL * full + EMPTY * (width - full)


def _num(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return DASH if value is None else f"{value:.{digits}f}{suffix}"


def _figures(item: WorkloadAcceptance, cell: CellAcceptance, palette: Palette) -> Text:
    """The named figures of one workload: two lines (the acceptance side, the cost side)."""
    text = Text()
    server = _num(cell.server_acceptance_length)
    if cell.server_acceptance_length is not None and not cell.agree:
        server += " (differs)"
    text.append(f"{item.client.name} ", palette.muted)
    text.append(_num(cell.acceptance_length), palette.accent)
    if cell.server_acceptance_length is not None and item.client is ACCEPTANCE_LENGTH:
        text.append(f" (server {server})", palette.muted)
    elif cell.server_acceptance_length is not None:  # llama.cpp, vLLM: the server counts the steps that drafted
        text.append(f" · server's {ACCEPTANCE_LENGTH.name} per drafting step ", palette.muted)
        text.append(server, palette.accent)
    text.append(f" · {DRAFT_ACCEPTANCE_RATE.name} ", palette.muted)
    text.append(_num(cell.draft_acceptance_rate, 3), palette.accent)
    text.append(f" · {ACCEPTED_PER_VERIFIED.name} ", palette.muted)
    text.append(_num(cell.accepted_per_verified), palette.accent)
    text.append(f"\n{STEP_COST.name} ", palette.muted)
    text.append(_num(cell.step_cost), palette.accent)
    text.append(" · length ÷ cost ", palette.muted)
    text.append(_num(cell.predicted_speedup, 2, "×"), palette.accent)
    text.append(" · measured speedup ", palette.muted)
    text.append(_num(item.measured_speedup, 2, "×"), palette.accent)
    text.append(f" · limited by {cell.limit or DASH}", palette.muted)
    return text


def _bars(title: str, labels: Sequence[str], values: Sequence[float | None], shown: Sequence[str], width: int,
          palette: Palette) -> Text:
    text = Text(title, palette.primary)
    for label, value, figure in zip(labels, values, shown):
        text.append(f"\n  {label:>4} ")
        text.append(bar(value, width), palette.accent)
        text.append(f" {figure}")
    return text


def _matrix(matrix: CategoryMatrix, what: str, values: dict[tuple[str, str], float], config_id: str,
            palette: Palette) -> Table:
    table = Table(title=f"{what} by category: {clean(matrix.workload, 40)}", title_justify="left",
                  title_style=palette.primary, box=None, padding=(0, 1), show_edge=False, pad_edge=False)
    table.add_column("category", no_wrap=True, overflow="ellipsis", max_width=18)
    for cid, name in matrix.configs:
        marked = cid == config_id
        table.add_column(("▸ " if marked else "") + clean(name, 20), justify="right", no_wrap=True,
                         header_style="bold" if marked else "", style="bold" if marked else "")
    for category in matrix.categories:
        table.add_row(clean(category, 40), *(_num(values.get((category, cid))) for cid, _ in matrix.configs))
    return table


def workload_block(item: WorkloadAcceptance, detail: AcceptanceDetail, width: int,
                   palette: Palette = DEFAULT_PALETTE) -> RenderableType:
    """Everything the screen shows for one workload of the configuration."""
    parts: list[RenderableType] = []
    cell = item.cell
    bar_width = max(BAR_MIN, min(BAR_MAX, width - 24))
    if not detail.speculative:
        parts.append(Text(f"not speculative: no draft is proposed ({ACCEPTANCE_LENGTH.name} 1.00 by definition)",
                          palette.muted))
    elif item.why is not None and (cell is None or cell.acceptance_length is None):
        parts.append(Text(item.why, palette.zero_output if "ZERO-OUTPUT" in item.why else palette.warning))
    elif cell is None:
        parts.append(Text("no acceptance figures yet", palette.muted))
    else:
        parts.append(_figures(item, cell, palette))
        if item.positions:
            where = " (server counters)" if item.positions_from_server else ""
            parts.append(_bars(f"{CONDITIONAL_ACCEPTANCE.name}{where} {sparkline(item.positions)}",
                               [f"k={k}" for k in range(1, len(item.positions) + 1)], item.positions,
                               [_num(v) for v in item.positions], bar_width, palette))
        if item.shares:
            parts.append(_bars(f"accepted drafts per verify step (histogram over {item.steps} verify steps)",
                               [str(k) for k in range(len(item.shares))], item.shares,
                               [f"{s:6.1%}" for s in item.shares], bar_width, palette))
    if item.matrix is not None:
        parts.append(_matrix(item.matrix, "speedup", item.matrix.speedup, detail.config_id, palette))
        parts.append(_matrix(item.matrix, ACCEPTANCE_LENGTH.name, item.matrix.acceptance_length, detail.config_id,
                             palette))
    return Group(Text(f" {clean(item.workload, 60)}", style="bold"), Padding(Group(*parts), (0, 0, 0, 2)))


class AcceptanceScreen(Screen[None]):
    """One configuration's acceptance per workload; ``n``/``p`` step to the next or previous configuration."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back", id="acceptance-close"),
        Binding("n", "step(1)", "Next config", id="acceptance-next", tooltip="the next configuration"),
        Binding("p", "step(-1)", "Prev config", id="acceptance-prev", tooltip="the previous configuration"),
        Binding("q", "close", "Back", show=False, id="acceptance-close-q"),
        Binding("a", "close", "Back", show=False, id="acceptance-close-a"),
    ]
    DEFAULT_CSS = """
    AcceptanceScreen #acceptance-title { height: 1; background: $panel; }
    AcceptanceScreen #acceptance-body { height: 1fr; }
    AcceptanceScreen .acceptance-workload { height: auto; margin-bottom: 1; }
    """

    def __init__(self, source: Callable[[], RunAnalysis | None], config_id: str | None,
                 palette: Palette = DEFAULT_PALETTE) -> None:
        super().__init__()
        self.source = source
        """The analysis the results table shows now (the app's latest), or None before the first."""
        self.config_id = config_id
        self.palette = palette
        self.shown: RunAnalysis | None = None
        self.detail: AcceptanceDetail | None = None
        """What is drawn now."""

    def compose(self) -> ComposeResult:
        yield Static(id="acceptance-title")
        yield VerticalScroll(id="acceptance-body")
        yield KeyBar()

    def on_mount(self) -> None:
        self.redraw()
        self.set_interval(POLL_S, self._poll)

    def on_resize(self) -> None:
        if self.is_attached:
            self.redraw()

    def _poll(self) -> None:
        if self.source() is not self.shown:
            self.redraw()

    def action_close(self) -> None:
        self.dismiss()

    def action_step(self, step: int) -> None:
        if self.detail is not None:
            self.config_id = step_choice(self.detail, step)
            self.redraw()

    def redraw(self) -> None:
        analysis = self.shown = self.source()
        detail = self.detail = acceptance_detail(analysis, self.config_id)
        body = self.query_one("#acceptance-body", VerticalScroll)
        if detail is None:
            title = "waiting for the first results"
            blocks: list[RenderableType] = [Text(" nothing measured yet", self.palette.muted)]
        else:
            self.config_id = detail.config_id
            title = (f"{clean(detail.config, 60)} ({detail.index + 1}/{len(detail.choices)} configurations, "
                     f"{detail.state}) · live")
            width = self.app.size.width
            blocks = [workload_block(item, detail, width, self.palette) for item in detail.workloads]
            if not blocks:
                blocks = [Text(" no workload measured yet", self.palette.muted)]
        self.query_one("#acceptance-title", Static).update(
            Text(f" acceptance · {title}", no_wrap=True, overflow="ellipsis"))
        shown = list(body.query(".acceptance-workload").results(Static))
        for widget in shown[len(blocks):]:
            widget.remove()
        for index, block in enumerate(blocks):
            if index < len(shown):
                shown[index].update(block)
            else:
                body.mount(Static(block, classes="acceptance-workload"))


@runtime_checkable
class ShowsAnalysis(Protocol):
    """What the screen reads of the app: the analysis the results table shows, and the theme's palette."""

    analysis: RunAnalysis | None
    palette: Palette


def open_acceptance(app: App[Any], config_id: str | None) -> None:
    """Push the acceptance screen of ``config_id`` over ``app``'s latest analysis (once: a second ``a`` while it
    is open does nothing)."""
    if not isinstance(app, ShowsAnalysis) or any(isinstance(s, AcceptanceScreen) for s in app.screen_stack):
        return
    shown = app
    app.push_screen(AcceptanceScreen(lambda: shown.analysis, config_id, shown.palette))
