"""GPUs: utilisation, memory, temperature, power and which configuration holds each one."""

from __future__ import annotations

import math
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import DataTable, Static

from specbench_tui.core.state import RunState
from specbench_tui.tui.palette import DEFAULT_PALETTE, Palette
from specbench_tui.tui.safe_text import clean, safe
from specbench_tui.tui.table_cells import update_row

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


class GpuPanel(Vertical):
    """A table of the latest GPU samples, or a hint when there are none."""

    ALLOW_MAXIMIZE = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="panel")
        self.border_title = "4 GPUs"
        self.palette: Palette = DEFAULT_PALETTE
        """Styles from the current theme (set by the app)."""
        self._shown: dict[int, tuple] = {}

    def compose(self) -> ComposeResult:
        yield Static(Text(WAITING_HINT), id="gpu-hint")
        table: DataTable = DataTable(id="gpu-table", cursor_type="row", show_cursor=False)
        table.display = False
        yield table

    def on_mount(self) -> None:
        table = self.query_one("#gpu-table", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)

    @property
    def table(self) -> DataTable:
        return self.query_one("#gpu-table", DataTable)

    def sync(self, state: RunState, force: bool = False) -> None:
        """Show ``state``'s latest samples with the holder of each GPU."""
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
        holders = state.gpu_holders()
        for sample in sorted(samples, key=lambda s: s["index"]):
            index = sample["index"]
            values = (index, clean(sample.get("name") or "", 40), _number(sample, "util_pct"),
                      _number(sample, "mem_used_mib"), _number(sample, "mem_total_mib"), _number(sample, "temp_c"),
                      _number(sample, "power_w"), _number(sample, "power_limit_w"), holders.get(index, ""))
            if not force and self._shown.get(index) == values:
                continue
            cells = self._cells(values)
            if index in self._shown:
                update_row(table, str(index), [key for key, _ in COLUMNS], cells)
            else:
                table.add_row(*cells, key=str(index))
            self._shown[index] = values
        names = ", ".join(sorted({clean(s.get("name") or "", 200) for s in samples} - {""}))
        if state.simulated:  # the fake box's names, memory and power are invented: say so where they show
            self.border_title = "4 GPUs · SIMULATED"
            names = f"simulated {names}"
        self.border_subtitle = Text(names if len(names) <= 48 else names[:47] + "…")

    def _cells(self, values: tuple) -> list[Text]:
        index, _, util, used, total, temp, power, limit, holder = values
        palette = self.palette
        if used is not None and total:
            mem = f"{used / 1024:.1f}/{total / 1024:.1f}"
        elif used is not None:
            mem = f"{used / 1024:.1f}/?"
        else:
            mem = "n/a"
        hot = temp is not None and temp >= 85
        return [
            Text(str(index), style="bold"),
            Text(_bar(util), style=palette.accent if util and util > 5 else palette.muted),
            Text(mem),
            Text(f"{temp:.0f}°C" if temp is not None else "n/a", style=palette.crash if hot else ""),
            Text((f"{power:.0f}" if power is not None else "n/a") + (f"/{limit:.0f}W" if limit else "W")),
            safe(holder or "–", palette.accent if holder else palette.muted, 60),
        ]


class GpuLine(Widget):
    """One line of GPUs for narrow terminals, where the GPU panel gives way: ``GPU 0 97% 118/140G ddtree-b8``."""

    def __init__(self, state: RunState, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.state = state
        self.palette: Palette = DEFAULT_PALETTE
        """Styles from the current theme (set by the app)."""

    def render(self) -> Text:
        state = self.state
        palette = self.palette
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        samples = sorted((s for s in state.gpu_samples if isinstance(s.get("index"), int)), key=lambda s: s["index"])
        text.append(" GPUs ", style=palette.accent)
        if not samples:
            text.append(NO_GPU_HINT if state.gpu_sampled_at is not None else WAITING_HINT, style=palette.muted)
            return text
        holders = state.gpu_holders()
        for position, sample in enumerate(samples):
            if position:
                text.append(" │ ", style=palette.muted)
            index = sample["index"]
            util, used, total = _number(sample, "util_pct"), _number(sample, "mem_used_mib"), \
                _number(sample, "mem_total_mib")
            text.append(f"{index} ", style="bold")
            text.append(f"{util:.0f}%" if util is not None else "n/a",
                        style=palette.accent if util and util > 5 else palette.muted)
            if used is not None:
                text.append(f" {used / 1024:.0f}" + (f"/{total / 1024:.0f}G" if total else "G"))
            holder = holders.get(index)
            if holder:
                text.append(" ")
                text.append(clean(holder, 24), style=palette.accent)
        return text
