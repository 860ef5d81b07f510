"""The line-API table the queue, results and GPU panels draw with: only visible lines rendered, colours resolved
from the theme when drawn, a header line that stays, a row cursor that keys and the mouse move."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import App, ComposeResult

from specbench_tui.application.rows import Mark, ViewCell, ViewRow, clean_text
from specbench_tui.tui.table_view import CURSOR, HEADER, MARK_CLASSES, TableView, fit


class Table(TableView):
    COLUMNS: ClassVar[tuple[tuple[str, str], ...]] = (("name", "name"), ("value", "value"))
    MARKS: ClassVar[frozenset[Mark]] = frozenset({Mark.CRASHED, Mark.MUTED})


def rows(count: int, crashed: frozenset[int] = frozenset()) -> list[ViewRow]:
    return [ViewRow(f"k{i}", (ViewCell(f"row {i}", Mark.CRASHED if i in crashed else Mark.PLAIN, i),
                              ViewCell(str(i * 10), Mark.MUTED, i * 10))) for i in range(count)]


class TableApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.chosen: list[str] = []
        self.headers: list[str] = []

    def compose(self) -> ComposeResult:
        yield Table()

    def on_table_view_row_selected(self, message: TableView.RowSelected) -> None:
        self.chosen.append(message.key)

    def on_table_view_header_selected(self, message: TableView.HeaderSelected) -> None:
        self.headers.append(message.column_key)


def text_of(table: TableView, y: int) -> str:
    return "".join(segment.text for segment in table.render_line(y)).rstrip()


async def test_only_the_visible_lines_are_rendered_under_a_header_that_stays() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        table.set_rows(rows(5000))
        await pilot.pause()
        assert 0 < len(table._strips) <= table.size.height  # 5,000 rows, a screenful drawn
        assert text_of(table, 0).split() == ["name", "value"]
        assert text_of(table, 1).split() == ["row", "0", "0"]
        table.scroll_to(y=100, animate=False, immediate=True)
        await pilot.pause()
        assert text_of(table, 0).split() == ["name", "value"]  # the header stays at the top
        assert text_of(table, 1).split() == ["row", "100", "1000"]


async def test_keys_move_the_cursor_into_view_and_enter_chooses_its_row() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        table.set_rows(rows(50))
        table.focus()
        await pilot.press("down", "down")
        assert table.cursor_key == "k2"
        await pilot.press("end")
        assert table.cursor_key == "k49"
        visible = table.scrollable_content_region.height - 1
        assert table.scroll_y <= 49 < table.scroll_y + visible
        await pilot.press("home", "pagedown")
        assert table.cursor_row > 2 and table.scroll_y <= table.cursor_row < table.scroll_y + visible
        await pilot.press("enter")
        await pilot.pause()
        assert app.chosen == [table.cursor_key]


async def test_a_click_selects_a_row_a_second_click_chooses_it_and_a_label_sorts() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        table.set_rows(rows(5))
        await pilot.pause()
        await pilot.click(Table, offset=(2, 3))  # row k2 (under the header)
        assert table.cursor_key == "k2" and app.chosen == []
        await pilot.click(Table, offset=(2, 3))
        await pilot.pause()
        assert app.chosen == ["k2"]
        await pilot.click(Table, offset=(table.column_widths[0] + 3, 0))  # the second column's label
        await pilot.pause()
        assert app.headers == ["value"]


async def test_the_cursor_stays_on_its_row_when_the_rows_come_in_another_order() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        table.set_rows(rows(10))
        table.move_cursor(row=3)
        table.set_rows(list(reversed(rows(10))))
        await pilot.pause()
        assert table.cursor_key == "k3" and table.cursor_row == 6


async def test_a_theme_change_recolours_the_same_rows_at_render_time() -> None:
    """No row is rebuilt or restyled: the crashed cell takes each theme's error colour when it is drawn."""
    from textual.color import Color

    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        shown = rows(5, crashed=frozenset({3}))
        table.set_rows(shown)
        for theme in ("textual-dark", "textual-light", "nord"):
            app.theme = theme
            await pilot.pause()
            wanted = Color.parse(app.get_css_variables()["error"]).rich_color.get_truecolor()
            drawn = table.drawn_style("k3", "name")
            assert drawn.color is not None and drawn.color.get_truecolor() == wanted and drawn.bold, theme
            assert all(new is old for new, old in zip(table.rows, shown, strict=True))


def test_each_panel_declares_every_mark_its_rows_carry() -> None:
    """Only declared marks are component classes (Textual styles each one again on every theme change), so a
    panel must name every mark its rows can carry: the queue's for every state, holding or not, and the
    results' for every flag, best or not."""
    import itertools

    from specbench_tui.application.results_rows import ResultRow, view_row
    from specbench_tui.application.viewmodel import ConfigLine, ShownState, queue_row
    from specbench_tui.tui.gpu_panel import GpuTable
    from specbench_tui.tui.queue_panel import QueuePanel
    from specbench_tui.tui.results_panel import ResultsPanel

    def marks(row: ViewRow) -> set[Mark]:
        return {row.mark, *(cell.mark for cell in row.cells)}

    carried: set[Mark] = set()
    for state, holding in itertools.product(ShownState, (True, False)):
        carried |= marks(queue_row(ConfigLine("c", "c", state.value, "", "", "", holding)))
    assert carried <= QueuePanel.MARKS, carried - QueuePanel.MARKS
    carried = set()
    flags = ("crashed", "partial", "capped", "noisy", "idle_draft", "is_baseline", "all_zero")
    for values in itertools.product((False, True), repeat=len(flags) + 3):
        chosen = dict(zip(flags, values[:len(flags)], strict=True))
        zero, fast, best = values[len(flags):]
        row = ResultRow(config="c", workload="w", order=(0, 0), count=1, tps=None if zero else 10.0,
                        ttft_ms=1.0, accept=1.0, speedup=1.5 if fast else 0.5, zero_output=int(zero), errors=0,
                        note="", **chosen)
        carried |= marks(view_row("k", row, best))
    assert carried <= ResultsPanel.MARKS, carried - ResultsPanel.MARKS
    assert {Mark.ACTIVE, Mark.STRONG, Mark.MUTED} <= GpuTable.MARKS
    for panel in (QueuePanel, ResultsPanel, GpuTable):  # the marks are its component classes, and no more
        declared = TableView.COMPONENT_CLASSES | panel.COMPONENT_CLASSES
        assert declared == {HEADER, CURSOR} | {MARK_CLASSES[m] for m in panel.MARKS if m is not Mark.PLAIN}


async def test_a_mark_the_table_does_not_declare_is_drawn_plain() -> None:
    app = TableApp()
    async with app.run_test(size=(40, 12)) as pilot:
        table = app.query_one(Table)
        table.set_rows([ViewRow("k", (ViewCell("best", Mark.BEST), ViewCell("plain")))])
        await pilot.pause()
        assert table.drawn_style("k", "name") == table.drawn_style("k", "value")


def test_a_cell_is_cut_to_its_width_with_an_ellipsis() -> None:
    assert fit("abc", 5) == "abc  "
    assert fit("abcdef", 4) == "abc…"
    assert fit("日本語", 4) == "日 …" or fit("日本語", 4) == "日…"


async def test_hostile_text_is_drawn_as_it_is() -> None:
    """Markup, escapes and control characters in a cell are text (the application layer cleaned them)."""
    app = TableApp()
    async with app.run_test(size=(60, 8)) as pilot:
        table = app.query_one(Table)
        hostile = clean_text("[/crash]\x1b[31mred\x00\udcff", 40)
        table.set_rows([ViewRow("k", (ViewCell(hostile, Mark.CRASHED), ViewCell("[b]x[/b]")))])
        await pilot.pause()
        line = text_of(table, 1)
        assert "[/crash]" in line and "[b]x[/b]" in line and "\x1b" not in line and "\x00" not in line


async def test_a_crash_draws_its_queue_row_red_at_the_first_crash_event(tmp_path: Path) -> None:
    """The direct path: the first ``CrashDetected`` (before the excerpt, the teardown and the results' analysis)
    turns the queue row's state, glyph and name into the theme's error colour in the drain that takes it."""
    from textual.color import Color
    from tui_fakes import T0, FakeEngine

    from specbench_tui.core.events import ConfigState, ConfigStateChanged, CrashDetected
    from specbench_tui.tui.app import SpecbenchApp
    from specbench_tui.tui.queue_panel import QueuePanel

    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48)) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        queue = app.sweep_screen.query_one(QueuePanel)
        view = app.state.ordered_configs()[1]  # not the cursor row: drawn in the cursor's looks
        engine.emit(ConfigStateChanged(config_id=view.config_id, name=view.name, state=ConfigState.RUNNING, ts=T0))
        app.drain_events()
        assert queue.get_cell(view.config_id, "state").mark is Mark.ACTIVE
        engine.emit(CrashDetected(config_id=view.config_id, signature="cuda_illegal_instruction", line="boom",
                                  excerpt=("boom",), log_line_number=4, complete=False, ts=T0 + 1))
        app.drain_events()  # one drain, no analysis waited for
        error = Color.parse(app.get_css_variables()["error"]).rich_color.get_truecolor()
        for column in ("glyph", "config", "state", "note"):
            assert queue.get_cell(view.config_id, column).mark is Mark.CRASHED, column
            drawn = queue.drawn_style(view.config_id, column).color
            assert drawn is not None and drawn.get_truecolor() == error, column
