"""Tables that keep each cell's rendering: they draw exactly what ``DataTable`` draws, and render a cell again only
when it changed (a sort, a resize or a focus change re-renders nothing)."""

from __future__ import annotations

from typing import Any, cast

from rich.text import Text
from textual.app import App, ComposeResult
from textual.coordinate import Coordinate
from textual.geometry import Offset, Region
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from specbench_tui.tui.textual_private import CachedCellsTable, rows_pending

ROWS = 30


class Tables(App[None]):
    CSS = "DataTable { height: 33; }"

    def compose(self) -> ComposeResult:
        yield CachedCellsTable(id="kept", cursor_type="row")
        yield DataTable(id="plain", cursor_type="row")

    def on_mount(self) -> None:
        for table in self.query(DataTable):
            table.add_column("name", key="name")
            table.add_column("value", key="value")
            table.add_column("plain", key="plain")  # cells with no style of their own: one segment each
            for i in range(ROWS):
                table.add_row(Text(f"row-{i:02d} [x]", style="bold" if i % 3 else "italic"),
                              Text(f"{(i * 37) % 101}", style="red"), Text("é漢" if i % 4 else f"{i}"), key=f"r{i}")


def drawn(segments: Any) -> list[tuple[str, object]]:
    """What a terminal shows of segments: each character with its style (a run of one style drawn as one segment
    or as several, Rich's ``None`` style or a null one, and mouse metadata or none, show the same; where the
    mouse finds a row and column is checked through the mouse itself)."""
    return [(character, segment.style.clear_meta_and_links() if segment.style else None)
            for segment in segments for character in segment.text]


def lines(table: DataTable) -> list[list[tuple[str, object]]]:
    """The table's lines as the screen asks for them (``render_lines``: a frame's constants are set there)."""
    return [drawn(strip) for strip in table.render_lines(Region(0, 0, table.size.width, table.size.height))]


def narrow(*tables: DataTable) -> None:
    for table in tables:
        table.styles.height = 10
        table.styles.width = 16  # narrower than its columns: room to scroll across


def draw(table: DataTable) -> None:
    table.render_lines(Region(0, 0, table.size.width, table.size.height))


async def test_same_lines_as_datatable_through_updates_sorts_cursor_moves_and_focus() -> None:
    app = Tables()
    async with app.run_test(size=(60, 70)) as pilot:
        kept, plain = app.query_one("#kept", CachedCellsTable), app.query_one("#plain", DataTable)
        app.set_focus(None)
        await pilot.pause()
        assert lines(kept) == lines(plain)
        for table in (kept, plain):
            table.update_cell("r3", "value", Text("999", style="green"))
            table.sort("value", key=lambda cell: int(cell.plain))
            table.move_cursor(row=4)
        await pilot.pause()
        assert lines(kept) == lines(plain)
        kept.focus()
        await pilot.pause()
        focused_kept = lines(kept)
        plain.focus()
        await pilot.pause()
        assert focused_kept == lines(plain)
        assert lines(kept) != focused_kept  # the cursor row looks different without focus: not a stale cell


async def test_same_lines_as_datatable_with_zebra_stripes_the_cursor_and_the_mouse_over_a_row() -> None:
    """A row's line is put together from per-frame constants (its style, the edge right of its cells): striped
    rows, the cursor row and the hovered row still read as ``DataTable`` draws them."""
    app = Tables()
    async with app.run_test(size=(60, 70)) as pilot:
        kept, plain = app.query_one("#kept", CachedCellsTable), app.query_one("#plain", DataTable)
        for table in (kept, plain):
            table.zebra_stripes = True
            table.move_cursor(row=3)
        kept.focus()
        await pilot.pause()
        await pilot.hover("#kept", offset=(5, 7))
        await pilot.pause()
        hovered_kept: list[list[Any]] = lines(kept)
        plain.focus()
        await pilot.hover("#plain", offset=(5, 7))
        await pilot.pause()
        hovered_plain = lines(plain)
        assert hovered_kept == hovered_plain
        assert kept.hover_coordinate.row == plain.hover_coordinate.row == 6
        edges = [line[-1][1] for line in hovered_kept[4:8]]  # right of the last cell
        # the cursor row (3), an even (4) and an odd row (5) and the hovered row (6): four looks of the edge
        assert len({(edge.color, edge.bgcolor) for edge in edges}) == 4


async def test_same_lines_as_datatable_scrolled_down_and_across_with_the_mouse_over_the_header() -> None:
    """A row's line is found from its index under the scroll offset and cropped when the table is scrolled across;
    the header's line is kept only while the mouse, the scroll and the looks stay the same."""
    app = Tables()
    async with app.run_test(size=(60, 70)) as pilot:
        kept, plain = app.query_one("#kept", CachedCellsTable), app.query_one("#plain", DataTable)
        narrow(kept, plain)
        for table in (kept, plain):
            table.move_cursor(row=9)
        kept.focus()
        await pilot.pause()
        for table in (kept, plain):
            table.scroll_to(x=3, y=7, animate=False)
        await pilot.pause()
        assert kept.scroll_offset == plain.scroll_offset == Offset(3, 7)
        scrolled = lines(kept)
        plain.focus()
        await pilot.pause()
        assert scrolled == lines(plain)
        assert "".join(character for character, _ in scrolled[1]).startswith("w-07")  # row 7, from column 3
        drawn_lines = []
        for selector, table in (("#kept", kept), ("#plain", plain)):
            table.focus()
            for offset, row in (((2, 0), -1), ((2, 4), 10)):  # the mouse over the header, then over a row
                await pilot.hover(selector, offset=offset)
                await pilot.pause()
                assert table.hover_coordinate.row == row
                drawn_lines.append(lines(table))
        assert drawn_lines[0][0] != drawn_lines[1][0]  # the header looks hovered, then not
        assert drawn_lines[:2] == drawn_lines[2:]


async def test_a_sort_renders_no_cell_again_and_a_changed_cell_is_rendered_again() -> None:
    app = Tables()
    async with app.run_test(size=(60, 70)) as pilot:
        kept = app.query_one("#kept", CachedCellsTable)
        await pilot.pause()
        draw(kept)
        before = {slot: entry[2] for slot, entry in kept._kept_cells.items()}
        assert before
        kept.sort("value", key=lambda cell: int(cell.plain), reverse=True)
        kept.sort("value", key=lambda cell: int(cell.plain))
        kept.move_cursor(row=2)
        draw(kept)
        again = {slot: entry[2] for slot, entry in kept._kept_cells.items() if slot in before}
        assert all(again[slot] is before[slot] for slot in again)  # the same rendering, not a new one
        row_key, _ = kept.coordinate_to_cell_key(Coordinate(5, 0))
        kept.update_cell(row_key, "value", Text("5", style="red"))
        draw(kept)
        changed = [slot for slot, entry in kept._kept_cells.items() if slot in before and entry[2] is not before[slot]]
        assert [(slot[0], cast(ColumnKey, slot[1]).value) for slot in changed] == [(row_key, "value")]


async def test_the_header_follows_a_column_widened_by_a_new_row_drawn_before_it_was_measured() -> None:
    """A row added, a frame drawn (a busy machine draws before the table's idle measuring), then the row measured
    and its column widened: the header is drawn with the new width, not kept from that frame."""
    app = Tables()
    async with app.run_test(size=(60, 70)) as pilot:
        kept = app.query_one("#kept", CachedCellsTable)
        app.set_focus(None)
        await pilot.pause()
        kept.add_row(Text("a-much-longer-name-than-the-others"), Text("7"), key="wide")
        draw(kept)  # before the idle measuring: the old widths
        await pilot.pause()
        assert not rows_pending(kept)  # measured meanwhile
        text = ["".join(segment[0] for segment in line) for line in lines(kept)]
        row = next(line for line in text if "a-much-longer" in line)
        assert text[0].index("value") == row.index("7"), text[0]


def test_render_cell_gives_richs_segments_for_every_kind_of_cell() -> None:
    """The fast path (a cell that fits, neither justified nor multi-line) and Rich's own path give the same segments;
    cells that do not fit, justified or multi-line ones take Rich's path."""
    from rich.console import Console
    from rich.padding import Padding
    from rich.style import Style
    from textual.renderables.styled import Styled

    from specbench_tui.tui.textual_private import render_cell

    console = Console(width=160, color_system="truecolor", force_terminal=True)
    spans = Text("ab cd", style="bold red")
    spans.stylize("italic", 0, 1)
    spans.stylize(Style(bgcolor="#102030"), 3, 5)
    cells = [Text(""), Text("", style="red"), Text("abc"), Text("abc", style="red"), Text("a b  ", style="on blue"),
             Text("é漢字x", style="red"), spans, Text("abcdefghij", no_wrap=True, overflow="ellipsis"),
             Text("right", justify="right"), Text("two\nlines"), Text("a\tb")]
    styles = [(Style(), Style()), (Style(color="green", bgcolor="black"), Style(bold=True)),
              (Style(bgcolor="#123456"), Style(meta={"row": 1}))]
    for cell in cells:
        for width in (0, 1, 3, 5, 8, 12):
            for padding in (0, 1, 2):
                for pre, post in styles:
                    options = console.options.update_dimensions(width, 1).update(no_wrap=True)
                    rich = console.render_lines(Styled(Padding(cell, (0, padding)), pre_style=pre, post_style=post),
                                                options)
                    ours = render_cell(console, console.options, cell, width, padding, pre, post)
                    assert [drawn(line) for line in ours] == [drawn(line) for line in rich], (
                        repr(cell), width, padding, pre, post)
                    assert sum(map(len, ours)) <= sum(map(len, rich))


async def test_a_scrollbar_that_comes_after_the_table_scrolled_shows_where_it_is() -> None:
    """Textual sets a thumb only when the offset changes while its bar is shown: a table scrolled before its bar
    came (a followed row, a frame early on a busy machine) must not draw the thumb at the top."""
    app = Tables()
    async with app.run_test(size=(60, 70)) as pilot:
        table = app.query_one("#kept", CachedCellsTable)
        table.styles.height = 10  # 30 rows in 10 lines: room to scroll
        await pilot.pause()
        assert table.max_scroll_y >= 5
        table.show_vertical_scrollbar = False
        table.scroll_y = 5
        assert table.scroll_y == 5 and table.vertical_scrollbar.position == 0
        table.show_vertical_scrollbar = True
        assert table.vertical_scrollbar.position == 5


async def test_a_table_drawn_at_two_widths_keeps_the_lines_of_both() -> None:
    """A panel maximised (``m``) and back in its place: its lines at the first width are still kept, so the
    restore draws no row again; the lines are what ``DataTable`` draws at each width."""
    app = Tables()
    async with app.run_test(size=(60, 70)) as pilot:
        kept, plain = app.query_one("#kept", CachedCellsTable), app.query_one("#plain", DataTable)
        app.set_focus(None)
        await pilot.pause()
        for table in (kept, plain):
            table.styles.width = 40
        await pilot.pause()
        narrow = lines(kept)
        at_40 = {slot: entry[2] for slot, entry in kept._kept_lines.items()}
        assert len(at_40) >= ROWS
        for table in (kept, plain):
            table.styles.width = 50
        await pilot.pause()
        assert kept.size.width == 50 and lines(kept) == lines(plain)
        for table in (kept, plain):
            table.styles.width = 40
        await pilot.pause()
        assert lines(kept) == narrow == lines(plain)
        again = {slot: entry[2] for slot, entry in kept._kept_lines.items() if slot in at_40}
        assert len(again) == len(at_40) and all(again[slot] is at_40[slot] for slot in at_40)  # not drawn again


class Clicked(Tables):
    """:class:`Tables` that records what each table says it was clicked on."""

    def __init__(self) -> None:
        super().__init__()
        self.said: list[tuple[str | None, str, object]] = []

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        self.said.append((message.data_table.id, "row", message.cursor_row))

    def on_data_table_cell_selected(self, message: DataTable.CellSelected) -> None:
        self.said.append((message.data_table.id, "cell", message.coordinate))

    def on_data_table_header_selected(self, message: DataTable.HeaderSelected) -> None:
        self.said.append((message.data_table.id, "header", message.column_index))


async def test_the_mouse_finds_the_row_and_column_datatable_finds() -> None:
    """The rows drawn here carry no mouse metadata (``DataTable`` puts the row and column on every segment):
    hovering and clicking anywhere, the header, a cell, right of the last cell, below the last row, scrolled down
    and across, find the same row and column as on ``DataTable`` itself, and say the same."""
    app = Clicked()
    async with app.run_test(size=(60, 70)) as pilot:
        kept, plain = app.query_one("#kept", CachedCellsTable), app.query_one("#plain", DataTable)
        narrow(kept, plain)
        await pilot.pause()
        for x, y in ((4, 6),):  # scrolled down and across
            for table in (kept, plain):
                table.scroll_to(x=x, y=y, animate=False)
            await pilot.pause()
            width = kept.size.width
            found: dict[str, list[object]] = {"#kept": [], "#plain": []}
            for selector, table in (("#kept", kept), ("#plain", plain)):
                for offset in [(column, row) for row in (0, 1, 9) for column in range(0, width, 2)] + [(width - 1, 2)]:
                    await pilot.hover(selector, offset=offset)
                    found[selector].append(table.hover_coordinate)
                for offset in ((1, 0), (2, 3), (width - 2, 4), (12, 8), (12, 8)):  # the last twice: selected
                    await pilot.click(selector, offset=offset)
                    await pilot.pause()
                    found[selector].append(table.cursor_coordinate)
            assert kept.scroll_offset == plain.scroll_offset == Offset(x, y)
            assert found["#kept"] == found["#plain"]
            assert len(set(found["#kept"])) >= 7
        said = {name: [(what, where) for table, what, where in app.said if table == name] for name in ("kept", "plain")}
        assert said["kept"] == said["plain"]
        assert {what for what, _ in said["kept"]} == {"header", "row"}
