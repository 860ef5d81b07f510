"""GPUs: utilisation, memory, temperature, power and which configuration holds each one."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Static

from specbench_tui.application.rows import Mark, ViewCell, ViewRow, clean_text
from specbench_tui.core.nodes import node_totals
from specbench_tui.core.state import RunState
from specbench_tui.tui.palette import Palette, palette_of
from specbench_tui.tui.safe_text import clean
from specbench_tui.tui.table_view import TableView

COLUMNS = (("gpu", "GPU"), ("util", "util"), ("mem", "mem GiB"), ("temp", "temp"), ("power", "power"),
           ("holder", "held by"))
NO_GPU_HINT = "No GPU visible (no NVIDIA driver or device): GPU figures are n/a."
WAITING_HINT = "Waiting for GPU telemetry…"


def _number(sample: dict[str, Any], key: str) -> float | None:
    value = sample.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


def _bar(percent: float | None, width: int = 5) -> str:
    if percent is None:
        return "n/a"
    filled = max(0, min(width, round(percent / 100 * width)))
    return f"{percent:3.0f}% " + "█" * filled + "░" * (width - filled)


class GpuTable(TableView):
    """The GPUs' rows (no cursor: nothing to select)."""

    COLUMNS: ClassVar[tuple[tuple[str, str], ...]] = COLUMNS
    MARKS: ClassVar[frozenset[Mark]] = frozenset({Mark.ACTIVE, Mark.CRASHED, Mark.MUTED, Mark.STRONG})

    def texts_at(self, index: int) -> list[str]:
        """Row ``index``'s cells as shown."""
        return [cell.text for cell in self.row_at(index).cells]


class GpuPanel(Vertical):
    """A table of the latest GPU samples, or a hint when there are none."""

    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="panel")
        self.border_title = "4 GPUs"

    def compose(self) -> ComposeResult:
        yield Static(Text(WAITING_HINT), id="gpu-hint")
        table = GpuTable(id="gpu-table", show_cursor=False)
        table.display = False
        yield table

    @property
    def table(self) -> GpuTable:
        return self.query_one("#gpu-table", GpuTable)

    def sync(self, state: RunState) -> None:
        """Show ``state``'s latest samples with the holder of each GPU; with cluster nodes, node by node, each
        node's GPUs under a row of its totals."""
        hint = self.query_one("#gpu-hint", Static)
        table = self.table
        samples = [s for s in state.gpu_samples if isinstance(s.get("index"), int)]
        if not samples:
            hint.update(Text(NO_GPU_HINT if state.gpu_sampled_at is not None else WAITING_HINT))
            hint.display = True
            table.display = False
            return
        hint.display = False
        table.display = True
        table.set_rows([ViewRow(key, self._cells(values)) for key, values in self._rows(state, samples)])
        names = ", ".join(sorted({clean(s.get("name") or "", 200) for s in samples} - {""}))
        nodes = len({s.get("node") for s in samples})
        if state.on_nodes:
            names = f"{nodes} node{'s' if nodes != 1 else ''} · {names}"
        if state.simulated:  # the fake box's names, memory and power are invented: say so where they show
            self.border_title = "4 GPUs · SIMULATED"
            names = f"simulated {names}"
        self.border_subtitle = Text(names if len(names) <= 48 else names[:47] + "…")

    @staticmethod
    def _rows(state: RunState, samples: list[dict[str, Any]]) -> list[tuple[str, tuple[Any, ...]]]:
        """(row key, plain values) in display order: GPUs by index, under a totals row per node on a cluster."""
        grouped = state.on_nodes
        labels = state.node_labels() if grouped else {}
        holders = state.node_gpu_holders()
        by_node: dict[str | None, list[dict[str, Any]]] = {}
        for sample in samples:
            by_node.setdefault(sample.get("node"), []).append(sample)
        rows: list[tuple[str, tuple[Any, ...]]] = []
        for node, group in by_node.items():
            prefix = f"{node}\0" if grouped else ""
            if grouped:
                totals = node_totals(group)
                models = ", ".join(f"{count}× {clean(name, 40)}" for name, count in totals["models"].items())
                rows.append((f"{prefix}node", (clean(labels.get(node, node or "?"), 40), "", totals["util_pct"],
                                               totals["mem_used_mib"], totals["mem_total_mib"], totals["temp_c"],
                                               totals["power_w"], totals["power_limit_w"], models, True)))
            for sample in sorted(group, key=lambda s: s["index"]):
                index = sample["index"]
                rows.append((f"{prefix}{index}", (
                    f"  {index}" if grouped else index, clean(sample.get("name") or "", 40), _number(sample, "util_pct"),
                    _number(sample, "mem_used_mib"), _number(sample, "mem_total_mib"), _number(sample, "temp_c"),
                    _number(sample, "power_w"), _number(sample, "power_limit_w"), _holder(holders, node, sample),
                    False)))
        return rows

    @staticmethod
    def _cells(values: tuple[Any, ...]) -> tuple[ViewCell, ...]:
        index, _, util, used, total, temp, power, limit, holder, is_node = values
        if used is not None and total:
            mem = f"{used / 1024:.1f}/{total / 1024:.1f}"
        elif used is not None:
            mem = f"{used / 1024:.1f}/?"
        else:
            mem = "n/a"
        hot = temp is not None and temp >= 85
        return (
            ViewCell(str(index), Mark.ACTIVE if is_node else Mark.STRONG),
            ViewCell(_bar(util), Mark.ACTIVE if util and util > 5 else Mark.MUTED),
            ViewCell(mem),
            ViewCell(f"{temp:.0f}°C" if temp is not None else "n/a", Mark.CRASHED if hot else Mark.PLAIN),
            ViewCell((f"{power:.0f}" if power is not None else "n/a") + (f"/{limit:.0f}W" if limit else "W")),
            ViewCell(clean_text(holder or "–", 60), Mark.ACTIVE if holder and not is_node else Mark.MUTED),
        )


def _holder(holders: dict[tuple[str | None, int], str], node: str | None, sample: dict[str, Any]) -> str:
    """Who holds the GPU: this sweep's configuration, else another specbench run (its lease's holder, as the
    engine read it: ``specbench pid 123 of alice (run_dir …)``), else nobody (an empty string)."""
    ours = holders.get((node, sample["index"]))
    if ours:
        return ours
    elsewhere = sample.get("held_elsewhere")
    return f"leased: {elsewhere}" if isinstance(elsewhere, str) and elsewhere else ""


def _append_gpu(text: Text, sample: dict[str, Any], detail: int, holder: str, palette: Palette) -> None:
    """One GPU of :class:`GpuLine` at ``detail``: its index and utilisation, its memory (2) and holder (1, 2)."""
    util, used, total = _number(sample, "util_pct"), _number(sample, "mem_used_mib"), _number(sample, "mem_total_mib")
    text.append(f"{sample['index']} ", style="bold")
    text.append(f"{util:.0f}%" if util is not None else "n/a", style=palette.accent if util and util > 5 else palette.muted)
    if used is not None and detail >= 2:
        text.append(f" {used / 1024:.0f}" + (f"/{total / 1024:.0f}G" if total else "G"))
    if holder and detail >= 1:
        text.append(" ")
        text.append(clean(holder, 24 if detail >= 2 else 12), style=palette.accent)


class GpuLine(Widget):
    """One line of GPUs for narrow terminals, where the GPU panel gives way: ``GPU 0 97% 118/140G ddtree-b8``."""

    def __init__(self, state: RunState, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state


    def render(self) -> Text:
        """Every GPU on one line: with memory and holder when they fit the width, else shorter, down to
        ``0 97%`` per GPU (no GPU is cut off the end while a shorter form would show it)."""
        width = self.size.width
        text = self._line(detail=2)
        for detail in (1, 0):
            if not width or text.cell_len <= width:  # not laid out (hidden): the full line
                break
            text = self._line(detail)
        return text

    def _line(self, detail: int) -> Text:
        """The line at ``detail`` 2 (utilisation, memory, holder), 1 (utilisation, holder) or 0 (utilisation)."""
        state = self.state
        palette = palette_of(self)
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        samples = [s for s in state.gpu_samples if isinstance(s.get("index"), int)]
        text.append(" GPUs ", style=palette.accent)
        if not samples:
            text.append(NO_GPU_HINT if state.gpu_sampled_at is not None else WAITING_HINT, style=palette.muted)
            return text
        holders = state.node_gpu_holders()
        labels = state.node_labels() if state.on_nodes else None
        node: object = object()
        bar = " │ " if detail else " "
        for position, sample in enumerate(samples):  # node by node (the state's order), by index within one
            if labels is not None and sample.get("node") != node:
                node = sample.get("node")
                if position:
                    text.append(" ‖ ", style=palette.muted)
                text.append(clean(labels.get(sample.get("node"), "?"), 24) + ": ", style=palette.accent)
            elif position:
                text.append(bar, style=palette.muted)
            _append_gpu(text, sample, detail, _holder(holders, sample.get("node"), sample), palette)
        return text
