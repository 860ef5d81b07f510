"""A table drawn line by line from view rows: only the visible lines are rendered, colours taken at render time.

:class:`TableView` is a ``ScrollView`` (as :mod:`~specbench_tui.tui.log_file_view` and toolong's ``LogLines``): it
holds :class:`~specbench_tui.application.rows.ViewRow` records (text and a semantic class per cell, built in the
application layer) and renders the lines on screen from them. A cell's look is its mark's component class
(``table-view--crashed``, ``table-view--zero-out``…, styled in TCSS from theme variables), resolved when a line is
drawn, so a theme change is one refresh of what is on screen. A header line stays at the top; the cursor row is
the selected row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from specbench_tui.application.rows import Mark, ViewCell, ViewRow

HEADER = "table-view--header"
CURSOR = "table-view--cursor"
MARK_CLASSES = {mark: f"table-view--{mark.value}" for mark in Mark}
"""The component class of each mark (``plain`` has no look of its own: it is drawn in the table's style)."""
STRIPS_KEPT = 256
"""Rendered rows kept (a screenful is a few dozen; each strip holds caches of its own the collector walks)."""


def fit(text: str, width: int) -> str:
    """``text`` in exactly ``width`` cells: padded, or cut with an ellipsis."""
    if cell_len(text) <= width:
        return set_cell_size(text, width)
    return set_cell_size(text, max(0, width - 1)) + "…" if width > 0 else ""


class TableView(ScrollView, can_focus=True):
    """Rows of cells under a header line, with a row cursor; draws only the lines on screen."""

    COLUMNS: ClassVar[tuple[tuple[str, str], ...]] = ()
    """(key, label) of each column, in the order of each row's cells."""
    DROPPABLE: ClassVar[tuple[str, ...]] = ()
    """Columns left out, in this order, while the table is wider than the view: the last column (a verdict, a
    reason) gets their room instead of being cut at the view's edge."""
    MARKS: ClassVar[frozenset[Mark]] = frozenset()
    """The marks this table's rows carry (a subclass names them): each is a component class, and Textual styles
    every component class of every node again on each theme change, so a table declares only what it draws. A
    mark not named here is drawn plain."""
    COMPONENT_CLASSES: ClassVar[set[str]] = {HEADER, CURSOR}
    DEFAULT_CSS = """
    TableView > .table-view--header { text-style: bold; background: $panel; color: $foreground; }
    TableView > .table-view--cursor { background: $block-cursor-blurred-background; }
    TableView:focus > .table-view--cursor {
        background: $block-cursor-background; color: $block-cursor-foreground; text-style: $block-cursor-text-style;
    }
    TableView > .table-view--crashed { color: $error; text-style: bold; }
    TableView > .table-view--zero-out { color: $warning; text-style: bold; }
    TableView > .table-view--partial { color: $warning; }
    TableView > .table-view--capped, TableView > .table-view--noisy, TableView > .table-view--idle-draft {
        color: $warning;
    }
    TableView > .table-view--best { color: $success; text-style: bold; }
    TableView > .table-view--faster, TableView > .table-view--done { color: $success; }
    TableView > .table-view--slower { color: $warning; }
    TableView > .table-view--active { color: $accent; text-style: bold; }
    TableView > .table-view--muted { color: $foreground-darken-3; text-style: dim; }
    TableView > .table-view--strong { text-style: bold; }
    """
    """Each mark's look from the theme (``app.tcss`` adds the looks without colour, for ``NO_COLOR``)."""

    def __init_subclass__(cls, **kwargs: bool) -> None:  # (Textual's class options are all flags)
        if "MARKS" in cls.__dict__:  # (Textual adds the base's header and cursor classes to these)
            cls.COMPONENT_CLASSES = {MARK_CLASSES[mark] for mark in cls.MARKS if mark is not Mark.PLAIN}
        super().__init_subclass__(**kwargs)

    class RowSelected(Message):
        """Enter, or a click on the cursor row."""

        def __init__(self, table: TableView, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> TableView:
            return self.table

    class HeaderSelected(Message):
        """A click on a column's label."""

        def __init__(self, table: TableView, column_key: str) -> None:
            super().__init__()
            self.table = table
            self.column_key = column_key

        @property
        def control(self) -> TableView:
            return self.table

    def __init__(self, *, id: str | None = None, classes: str | None = None, show_cursor: bool = True) -> None:
        super().__init__(id=id, classes=classes)
        self.show_cursor = show_cursor
        self.labels = [label for _, label in self.COLUMNS]
        """Each column's label (a panel may rename one)."""
        self.cursor_row = 0
        """The index of the selected row."""
        self._rows: list[ViewRow] = []
        self._index: dict[str, int] = {}
        self._measured: dict[str, tuple[ViewRow, tuple[int, ...]]] = {}
        self._widths: list[int] = []
        self._drawn_columns: tuple[int, ...] = ()
        """The indices of the columns drawn (all but the :attr:`DROPPABLE` ones the view has no room for)."""
        self._strips: LRUCache[tuple[str, bool], tuple[ViewRow, Strip]] = LRUCache(STRIPS_KEPT)
        self._header: Strip | None = None
        self._styles: dict[str, Style] | None = None
        self._follow_key: str | None = None
        """The row to bring into view once the table has been laid out with it."""
        self._followed_key: str | None = None
        """The row last brought into view (kept in view when the table changes size)."""
        self._followed_y = 0.0
        """Where the table was last scrolled to follow a row (the user scrolling elsewhere stops it)."""

    # ------------------------------------------------------------------------------------------ rows

    @property
    def column_keys(self) -> tuple[str, ...]:
        return tuple(key for key, _ in self.COLUMNS)

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def rows(self) -> list[ViewRow]:
        """The rows in display order."""
        return list(self._rows)

    def set_rows(self, rows: Sequence[ViewRow]) -> None:
        """Show ``rows`` in this order; the cursor stays on the row it was on (by key) when that row is still there."""
        selected = self.cursor_key
        before = {row.key: row for row in self._rows}
        # An unchanged row keeps its record, so that its measured widths and drawn line are kept too.
        self._rows = [known if (known := before.get(row.key)) is row or known == row else row for row in rows]
        self._index = {row.key: index for index, row in enumerate(self._rows)}
        self._measure()
        if selected is not None and selected in self._index:
            self.cursor_row = self._index[selected]
        self.cursor_row = max(0, min(self.cursor_row, len(self._rows) - 1))
        self._fit_columns()
        self.refresh()

    def _fit_columns(self) -> None:
        """Choose the columns drawn for the view's width (droppable ones go while the table is wider than it) and
        size the virtual area to them."""
        keys = self.column_keys
        shown = list(range(len(self._widths)))
        room = self.scrollable_content_region.width
        for key in self.DROPPABLE:
            if sum(self._widths[i] + 2 for i in shown) <= room:
                break
            if key in keys and keys.index(key) in shown:
                shown.remove(keys.index(key))
        if tuple(shown) != self._drawn_columns:
            self._drawn_columns = tuple(shown)
            self._strips.clear()
            self._header = None
        self.virtual_size = Size(sum(self._widths[i] + 2 for i in self._drawn_columns), len(self._rows) + 1)

    def on_resize(self, event: events.Resize) -> None:
        """Another width may leave room for other columns; a followed row stays in view."""
        self._fit_columns()
        self._follow_again()

    @property
    def shown_columns(self) -> tuple[str, ...]:
        """The keys of the columns drawn now, in order."""
        return tuple(self.column_keys[i] for i in self._drawn_columns)

    def _measure(self) -> None:
        """Each column as wide as its widest cell or label (a changed row is measured again, the others kept)."""
        widths = [cell_len(label) for label in self.labels]
        measured: dict[str, tuple[ViewRow, tuple[int, ...]]] = {}
        for row in self._rows:
            known = self._measured.get(row.key)
            sizes = known[1] if known is not None and known[0] is row else tuple(cell_len(c.text) for c in row.cells)
            measured[row.key] = (row, sizes)
            widths = [max(width, size) for width, size in zip(widths, sizes)]
        self._measured = measured
        if widths != self._widths:
            self._widths = widths
            self._strips.clear()
            self._header = None

    @property
    def column_widths(self) -> tuple[int, ...]:
        """Each column's width in cells, padding left out (one cell each side)."""
        return tuple(self._widths)

    def get_row_index(self, key: str) -> int:
        """The display index of row ``key`` (``KeyError`` when there is none)."""
        return self._index[key]

    def row(self, key: str) -> ViewRow:
        return self._rows[self._index[key]]

    def row_at(self, index: int) -> ViewRow:
        return self._rows[index]

    def get_cell(self, key: str, column: str) -> ViewCell:
        """Cell ``column`` of row ``key`` (``KeyError`` when there is none)."""
        return self.row(key).cells[self.column_keys.index(column)]

    def drawn_style(self, key: str, column: str) -> Style:
        """The style cell ``column`` of row ``key`` is drawn with now, from the current theme."""
        strip = self._row_strip(self.get_row_index(key), self._looks())
        index = self.column_keys.index(column)
        if index not in self._drawn_columns:
            return Style.null()  # a column left out for the view's width is not drawn
        return list(strip)[self._drawn_columns.index(index)].style or Style.null()

    @property
    def cursor_key(self) -> str | None:
        """The key of the selected row (None when the table is empty)."""
        if not self._rows:
            return None
        return self._rows[min(self.cursor_row, len(self._rows) - 1)].key

    def move_cursor(self, *, row: int) -> None:
        """Select row ``row`` (clamped) and bring it into view."""
        if not self._rows:
            return
        self.cursor_row = max(0, min(row, len(self._rows) - 1))
        self.scroll_to_row(self.cursor_row)
        self.refresh()

    def scroll_to_row(self, index: int, *, centre: bool = False) -> None:
        """Scroll the least that shows row ``index`` (or put it mid-table with ``centre``) under the header."""
        visible = max(1, self.scrollable_content_region.height - 1)
        top = round(self.scroll_y)
        if centre and not top <= index < top + visible:
            self.scroll_to(y=max(0, index - visible // 2), animate=False, immediate=True)
        elif index < top:
            self.scroll_to(y=index, animate=False, immediate=True)
        elif index >= top + visible:
            self.scroll_to(y=index - visible + 1, animate=False, immediate=True)

    # ------------------------------------------------------------------------------------------ following a row
    # A row the user should see (a crash, the configuration that started running) is brought mid-table once the
    # table has been laid out with it, and kept in view while the table changes size (a panel maximised, a
    # scrollbar come), until the user scrolls elsewhere: scrolling at once, before the layout, scrolled by the
    # old height and sometimes left the row below the fold.

    def follow(self, key: str, *, even_if_scrolled: bool = False) -> None:
        """Bring row ``key`` into view after the next refresh, unless the user has scrolled the table away since
        the last followed row (``even_if_scrolled``: whatever the user did)."""
        if not even_if_scrolled and abs(self.scroll_y - self._followed_y) >= 1 and self.scroll_y > 0:
            return  # the user is reading elsewhere
        pending, self._follow_key = self._follow_key, key
        if pending is None:
            self.call_after_refresh(self._scroll_to_followed)

    @property
    def follow_pending(self) -> bool:
        """Whether a row is still to be brought into view (the tests wait for it)."""
        return self._follow_key is not None

    def _scroll_to_followed(self) -> None:
        key, self._follow_key = self._follow_key, None
        if key is None or key not in self._index:
            return
        self.scroll_to_row(self.get_row_index(key), centre=True)
        self._followed_y = self.scroll_y
        self._followed_key = key

    def watch_show_horizontal_scrollbar(self, shown: bool) -> None:
        """The horizontal scrollbar came or went: the rows' height changed without a resize."""
        self._follow_again()

    def _follow_again(self) -> None:
        if (self._followed_key is not None and self._follow_key is None
                and abs(self.scroll_y - self._followed_y) < 1):
            self._follow_key = self._followed_key
            self.call_after_refresh(self._scroll_to_followed)

    # ------------------------------------------------------------------------------------------ keys and mouse
    # The scrolling keys a scroll view binds (up, down, page up and down, home, end) move the cursor; enter chooses
    # its row. A table without a cursor scrolls.

    def action_scroll_up(self) -> None:
        if not self.show_cursor:
            return super().action_scroll_up()
        self.move_cursor(row=self.cursor_row - 1)

    def action_scroll_down(self) -> None:
        if not self.show_cursor:
            return super().action_scroll_down()
        self.move_cursor(row=self.cursor_row + 1)

    def action_page_up(self) -> None:
        if not self.show_cursor:
            return super().action_page_up()
        self.move_cursor(row=self.cursor_row - max(1, self.scrollable_content_region.height - 2))

    def action_page_down(self) -> None:
        if not self.show_cursor:
            return super().action_page_down()
        self.move_cursor(row=self.cursor_row + max(1, self.scrollable_content_region.height - 2))

    def action_scroll_home(self) -> None:
        if not self.show_cursor:
            return super().action_scroll_home()
        self.move_cursor(row=0)

    def action_scroll_end(self) -> None:
        if not self.show_cursor:
            return super().action_scroll_end()
        self.move_cursor(row=len(self._rows) - 1)

    def action_select(self) -> None:
        if (key := self.cursor_key) is not None:
            self.post_message(TableView.RowSelected(self, key))

    def on_key(self, event: events.Key) -> None:
        """Enter chooses the cursor row; ctrl+home and ctrl+end go to the first and last row."""
        action = {"enter": self.action_select, "ctrl+home": self.action_scroll_home,
                  "ctrl+end": self.action_scroll_end}.get(event.key)
        if action is not None and self._rows:
            event.stop()
            event.prevent_default()
            action()

    def on_click(self, event: events.Click) -> None:
        """A label sorts by its column; a row is selected, and a click on the selected row chooses it."""
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            x = offset.x + round(self.scroll_x)
            for index in self._drawn_columns:
                if x < self._widths[index] + 2:
                    self.post_message(TableView.HeaderSelected(self, self.column_keys[index]))
                    return
                x -= self._widths[index] + 2
            return
        index = round(self.scroll_y) + offset.y - 1
        if 0 <= index < len(self._rows):
            if index == self.cursor_row:
                self.action_select()
            else:
                self.move_cursor(row=index)

    # ------------------------------------------------------------------------------------------ drawing

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._forget_looks()

    def on_focus(self) -> None:
        self._forget_looks()
        self.refresh()

    def on_blur(self) -> None:
        self._forget_looks()
        self.refresh()

    def _forget_looks(self) -> None:
        self._styles = None
        self._header = None
        self._strips.clear()

    def _looks(self) -> dict[str, Style]:
        """The styles of the table, its header, its cursor and each mark, from the current theme (kept until the
        styles change)."""
        if self._styles is None:
            styles = {"base": self.rich_style, HEADER: self.get_component_rich_style(HEADER),
                      CURSOR: self.get_component_rich_style(CURSOR)}  # (its translucent background blended)
            for name in MARK_CLASSES.values():  # a mark the table does not declare is drawn plain
                styles[name] = (self.get_component_rich_style(name, partial=True) if name in self.COMPONENT_CLASSES
                                else Style.null())
            self._styles = styles
        return self._styles

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        looks = self._looks()
        base = looks["base"]
        if y == 0:
            strip = self._header_strip(looks)
        else:
            index = scroll_y + y - 1
            if not 0 <= index < len(self._rows):
                return Strip.blank(width, base)
            strip = self._row_strip(index, looks)
        return strip.crop_extend(scroll_x, scroll_x + width, base)

    def _header_strip(self, looks: dict[str, Style]) -> Strip:
        if self._header is None:
            style = looks["base"] + looks[HEADER]
            segments = [Segment(f" {fit(self.labels[i], self._widths[i])} ", style) for i in self._drawn_columns]
            self._header = Strip(segments, sum(self._widths[i] + 2 for i in self._drawn_columns))
        return self._header

    def _row_strip(self, index: int, looks: dict[str, Style]) -> Strip:
        row = self._rows[index]
        cursor = self.show_cursor and index == self.cursor_row
        kept = self._strips.get((row.key, cursor))
        if kept is not None and kept[0] is row:
            return kept[1]
        base = looks["base"]
        over = looks[CURSOR] if cursor else Style.null()  # the cursor's looks over the cell's
        cells, widths = row.cells, self._widths
        segments = [Segment(f" {fit(cells[i].text, widths[i])} ", base + looks[MARK_CLASSES[cells[i].mark]] + over)
                    for i in self._drawn_columns if i < len(cells)]
        strip = Strip(segments, sum(widths[i] + 2 for i in self._drawn_columns if i < len(cells)))
        self._strips[(row.key, cursor)] = (row, strip)
        return strip
