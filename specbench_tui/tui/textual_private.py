"""Every use of a private Textual name, in one module, each checked by tests/test_tui_textual_private.py.

The app reaches past Textual's public surface where its public path is too slow for a live table of thousands of
rows, or has no public way to do what is needed. Each such name is listed in :data:`PRIVATE_NAMES` (Textual
8.2; ``pyproject.toml`` pins ``textual==8.2.8``); a test per name fails on an upgrade that removes or
changes it, so an upgrade says where to look instead of breaking at run time. No other module of the package or
of the tests names a private Textual attribute.

What is here:

* **Rewriting the cells of a** ``DataTable`` **row without measuring the whole column.**
  ``DataTable.update_cell(..., update_width=True)`` re-measures every cell of the column whenever the new value
  is narrower than the column, so rewriting every row (a theme change restyles them all) costs rows² cell
  measurements: minutes for a 1,600-row results table. Here a column only ever grows, measured from the new cell
  alone, which is what a live table wants anyway (columns that shrink and grow back make the table jitter).
  :class:`CachedCellsTable` keeps rendered cells and lines while nothing they depend on changed.
* **A stylesheet that parses the app's CSS once per theme** (:class:`ThemeStylesheet`, below).
* **Scrollbars and a screen's background drawn without Rich** (:class:`QuickScrollBar`, given to a widget by
  :class:`QuickScrollbars`; :class:`QuickBackground`): Textual renders each line through Rich and its styles
  cache; a theme change draws all of them.
* **A key's answer rewritten in its toast** (:func:`retell`) and **a command palette without toasts**
  (:class:`CommandPaletteWithoutToasts`): each mount of a toast lays the whole screen out again.
* **Toasts** the notifier places and takes away itself, the app's batch of screen updates, and what the tests
  wait for before a snapshot (:func:`pending_work`).
"""

from __future__ import annotations

import copy
import time
import weakref
from collections.abc import Callable, Hashable, Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar

from rich.color import Color as RichColor
from rich.console import Console, ConsoleOptions
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual._segment_tools import line_crop
from textual.color import Color
from textual.command import CommandPalette
from textual.css.model import RuleSet
from textual.css.styles import RulesMap
from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode
from textual.geometry import Region
from textual.renderables.styled import Styled
from textual.scrollbar import ScrollBar, ScrollBarCorner, ScrollBarRender
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import DataTable
from textual.widgets._toast import Toast as Toast
from textual.widgets._toast import ToastRack as ToastRack
from textual.widgets.data_table import CellDoesNotExist, CellKey, ColumnKey, RowKey

from textual.app import ScreenStackError
from textual.css.query import NoMatches
from textual.notifications import Notification
from textual.visual import visualize

if TYPE_CHECKING:
    from textual.app import App

_CellLines = list[list[Segment]]
_CellConstants = tuple[int, int, bool, bool, bool, bool, int, dict[tuple[bool, bool, bool, Style], tuple[Style, Style]],
                       Console, ConsoleOptions]
_RowConstants = tuple[tuple[int, ...], int, int, bool, dict[tuple[bool, bool, Style], Style],
                      dict[tuple[bool, bool, Style], Style], tuple[ColumnKey, ...]]
_NO_STYLE = Style.null()
_DEFAULT_BACK = RichColor.parse("#555555")
_DEFAULT_BAR = RichColor.parse("bright_magenta")
"""``ScrollBarRender``'s colours for a style without them."""


KEPT_CELLS = 3000
"""Cell renderings kept per table (a few screens' worth; the oldest half goes when it is full)."""
KEPT_LINES = 600
"""Row lines kept per table."""

_K = TypeVar("_K")
_V = TypeVar("_V")


def _keep(kept: dict[_K, _V], key: _K, value: _V, limit: int) -> None:
    """``kept[key] = value``; past ``limit`` entries the oldest half is dropped (a bounded cache without the cost
    of an LRU's bookkeeping on every hit: what is on screen is simply kept again on its next draw)."""
    kept.pop(key, None)
    kept[key] = value
    if len(kept) > limit:
        for old in list(kept)[: limit // 2]:
            del kept[old]


@lru_cache(maxsize=4096)
def _meta_style(row: int, column: int) -> Style:
    """The mouse metadata ``DataTable`` puts on a cell's segments (which row and column was clicked)."""
    return Style.from_meta({"row": row, "column": column})


def render_cell(console: Console, options: ConsoleOptions, value: Text, width: int, padding: int,
                pre_style: Style, post_style: Style) -> _CellLines:
    """What ``DataTable`` draws for the one-line cell ``value`` (``Styled(Padding(value))`` through Rich's
    ``render_lines``), the same segments; a cell that fits its column and is neither justified nor multi-line
    (nearly every cell) is drawn without Rich's generic machinery, about three times faster: a theme change draws
    every visible cell again. What a terminal shows is the same; the segments may be fewer (a run of one style is
    one segment, as Textual's ``Strip.simplify`` would make it)."""
    inner = width - 2 * padding
    plain = value.plain
    if (inner < 1 or value.justify not in (None, "default") or "\n" in plain or "\t" in plain
            or value.cell_len > inner):
        options = options.update_dimensions(width, 1).update(no_wrap=True)
        return console.render_lines(Styled(Padding(value, (0, padding)), pre_style=pre_style, post_style=post_style),
                                    options)
    tail = inner - value.cell_len + padding  # the fill and the right padding: one run of the cell's styles
    if not value.spans and not value.style:
        # Padding, text and fill all take the cell's styles alone: one segment where Rich makes up to four, drawn
        # the same (each segment of a cell is later given the row's mouse metadata and crosses every step of a
        # frame: a theme change draws every visible cell again).
        text = f"{' ' * padding}{plain}{' ' * tail}"  # never empty: the cell has at least one cell inside
        return [list(Segment.apply_style([Segment(text, _NO_STYLE if padding or tail else None)],
                                         pre_style, post_style))]
    segments = [Segment(" " * padding, _NO_STYLE)] if padding else []
    if value.spans:
        segments.extend(value.render(console))
    elif plain:  # Rich gives a Text's own style to its segments through a span (``Text.join``), as here
        segments.append(Segment(plain, console.get_style(value.style)))
    if tail:
        segments.append(Segment(" " * tail, _NO_STYLE))
    return [list(Segment.apply_style(segments, pre_style, post_style))]


_PLAIN_ALIGN = ("left", "top")
if TYPE_CHECKING:
    from textual.screen import Screen

    _WidgetBase = Widget
    _ScreenBase = Screen[Any]
else:
    _WidgetBase = _ScreenBase = object


def _plainly_styled(widget: Widget) -> bool:
    """Whether ``widget`` is drawn without anything Textual's styles cache adds to its content lines: no border,
    outline, padding, tint, opacity, text opacity or hatch, content at the top left, no selection. (Links are
    styled too, but what is drawn here has none.)"""
    styles = widget.styles
    return (not widget.BLANK and not any(styles.gutter) and not any(edge for edge, _ in styles.outline)
            and not styles.tint.a and widget.opacity == 1.0 and styles.text_opacity == 1.0
            and not styles.has_rule("hatch") and styles.content_align == _PLAIN_ALIGN
            and widget.text_selection is None)


class _Finisher:
    """What Textual's styles cache does to a content line of a plainly styled widget (:func:`_plainly_styled`) as
    wide as the widget: filter it (every filter maps each segment on its own) and crop it to ``crop``."""

    def __init__(self, widget: Widget, crop: Region) -> None:
        _, self.background = widget.background_colors
        self.filters = widget.get_line_filters()
        self.width = widget.size.width
        self.span = crop.column_span

    def filtered(self, segments: list[Segment]) -> list[Segment]:
        for line_filter in self.filters:
            segments = line_filter.apply(segments, self.background)
        return segments

    def strip(self, segments: list[Segment]) -> Strip:
        strip = Strip(segments, self.width)
        return strip if self.span == (0, self.width) else strip.crop(*self.span)


class QuickScrollBar(ScrollBar):
    """A scrollbar that builds its lines from the bar's segments directly: the lines Textual draws
    (``ScrollBarRender.render_bar`` places the thumb; the widget's style, filters and crop are applied as Textual
    applies them) without rendering them through Rich and the styles cache line by line. A bar is a handful of
    distinct segments (the back above the thumb, the thumb, its two ends, the back below), each repeated: each is
    styled and filtered once, and a vertical bar's lines that show the same one share its strip. A theme change
    draws every bar again: six bars were 3-4 ms of its 20 ms frame. Anything not plain (a border, a renderer of
    one's own) takes Textual's path; tests/test_tui_quick_draw.py holds the lines equal to Textual's."""

    def render_lines(self, crop: Region) -> list[Strip]:
        renderer = self.render()
        if type(renderer) is not ScrollBarRender or not _plainly_styled(self):
            return super().render_lines(crop)
        width, height = self.size
        vertical = renderer.vertical
        style = self.app.console.get_style(renderer.style)
        bar = renderer.render_bar(size=height if vertical else width, virtual_size=renderer.virtual_size,
                                  window_size=renderer.window_size, position=renderer.position,
                                  thickness=width if vertical else height, vertical=vertical,
                                  back_color=style.bgcolor or _DEFAULT_BACK, bar_color=style.color or _DEFAULT_BAR)
        cells = bar.segments[:height] if vertical else bar.segments[:width]
        distinct = {id(segment): segment for segment in cells}  # the bar repeats each segment object
        if any(segment.cell_length != (width if vertical else 1) for segment in distinct.values()):
            return super().render_lines(crop)  # (not a bar as Textual draws them: its own path pads and crops)
        base = self.visual_style.rich_style
        finish = _Finisher(self, crop)
        final = {key: finish.filtered([Segment(segment.text, base + segment.style if base else segment.style)])
                 for key, segment in distinct.items()}  # the widget's style under the bar's, as Textual's _Styled
        if not vertical:
            return [finish.strip([part for segment in cells for part in final[id(segment)]])] * crop.height
        strips = {key: finish.strip(segments) for key, segments in final.items()}
        return [strips[id(segment)] for segment in cells[crop.y:crop.bottom]]


def _solid(widget: Widget, crop: Region, color: Color) -> list[Strip]:
    """The lines of a plainly styled widget that Textual draws as a ``Blank`` of ``color``: one strip for all."""
    finish = _Finisher(widget, crop)
    blank = Segment(" " * widget.size.width, Style.from_color(bgcolor=color.rich_color))
    return [finish.strip(finish.filtered([blank]))] * crop.height


class QuickScrollBarCorner(ScrollBarCorner):
    """The corner between two scrollbars, a solid colour, drawn as Textual draws it without its pipeline."""

    def render_lines(self, crop: Region) -> list[Strip]:
        if not _plainly_styled(self) or self.parent is None:
            return super().render_lines(crop)
        return _solid(self, crop, self.parent.styles.scrollbar_corner_color)


class QuickBackground(_ScreenBase):
    """Mixed into a screen class before ``Screen``: the screen's own background, an opaque colour that its
    widgets mostly cover, drawn as Textual draws it (a ``Blank``) without its pipeline line by line: the
    compositor draws every line of it on every full frame (a theme change), covered or not."""

    def render_lines(self, crop: Region) -> list[Strip]:
        background = self.styles.background
        if background.a < 1 or not _plainly_styled(self):
            return super().render_lines(crop)  # (translucent: Textual draws the screen below through it)
        return _solid(self, crop, background)


class QuickScrollbars(_WidgetBase):
    """Mixed into a widget class before its Textual base (``class Table(QuickScrollbars, DataTable)``): gives its
    widgets :class:`QuickScrollBar` scrollbars and a :class:`QuickScrollBarCorner`. Made as Textual makes its own,
    when first asked for (``Widget._vertical_scrollbar``, ``_horizontal_scrollbar``, ``_scrollbar_corner``, each
    started by ``App._start_widget``). Not a widget class itself, so that the widget's CSS stays its base's."""

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        bar: ScrollBar | None = self._vertical_scrollbar
        if bar is None:
            bar = QuickScrollBar(vertical=True, name="vertical", thickness=self.scrollbar_size_vertical)
            self._vertical_scrollbar = bar
            self._start_hidden(bar)
        return bar

    @property
    def horizontal_scrollbar(self) -> ScrollBar:
        bar: ScrollBar | None = self._horizontal_scrollbar
        if bar is None:
            bar = QuickScrollBar(vertical=False, name="horizontal", thickness=self.scrollbar_size_horizontal)
            self._horizontal_scrollbar = bar
            self._start_hidden(bar)
        return bar

    @property
    def scrollbar_corner(self) -> ScrollBarCorner:
        corner: ScrollBarCorner | None = self._scrollbar_corner
        if corner is None:
            corner = QuickScrollBarCorner()
            self._scrollbar_corner = corner
            self.app._start_widget(self, corner)
        return corner

    def _start_hidden(self, bar: ScrollBar) -> None:
        bar.display = False  # (shown by Textual's layout when the widget overflows)
        self.app._start_widget(self, bar)


class CachedCellsTable(QuickScrollbars, DataTable[Any]):
    """A ``DataTable`` that keeps each cell's rendering for as long as the cell and its styles stay the same.

    ``DataTable`` keys its cell cache on a table-wide update counter and throws it away on every restyle, so one
    changed cell, a new sort order, a resize (maximising a panel), a focus change or a moved cursor renders every
    visible cell again through Rich (most of a key's cost on a big table). Here a cell is rendered again only when
    its own value object, width or effective styles change. The data rows it draws carry no mouse metadata
    (``DataTable`` puts the row and column on every segment); a mouse event over them is given what ``DataTable``
    would have found there (:meth:`_add_cell_meta`). Single-line rows only (the app's tables); anything else
    takes ``DataTable``'s own path. Relies on ``DataTable._render_cell``, ``_data``, ``_row_locations``,
    ``_column_locations`` and ``_get_styles_to_render_cell``; a row's line is put together here too
    (``_render_line_in_row``, ``_get_row_style``, ``_labelled_row_exists`` and ``_row_label_column_width``)
    (Textual 8).
    """

    def watch_show_vertical_scrollbar(self, shown: bool) -> None:
        """Textual sets a scrollbar's thumb only when the scroll offset changes while the bar is shown: a table
        scrolled (a followed row) before its bar came would draw the thumb at the top of a scrolled table."""
        if shown:
            self.vertical_scrollbar.position = self.scroll_y

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._kept_cells: dict[tuple[object, ...], tuple[object, tuple[object, ...], _CellLines]] = {}
        self._kept_lines: dict[tuple[RowKey, int, int], tuple[tuple[object, ...], tuple[object, ...], Strip]] = {}
        self._frame_style: Style | None = None
        self._frame_looks: tuple[object, ...] | None = None
        self._frame_cells: _CellConstants | None = None
        self._frame_row: _RowConstants | None = None
        self._styles_version = 0
        self._uniform_rows = True
        """Every row is one line high (``add_row``'s default): a row's line is then found from its index alone."""
        # DataTable's own caches sit behind these (misses only): small, so that they do not hold thousands of
        # strips and segment lists that every full garbage collection walks.
        self._row_render_cache = LRUCache(200)
        self._cell_render_cache = LRUCache(400)
        self._row_renderable_cache = LRUCache(200)
        self._line_cache = LRUCache(200)

    @property
    def rich_style(self) -> Style:
        """The widget's style; worked out once per frame (``DataTable`` asks for it on every line, and each time
        it walks every ancestor's styles)."""
        if self._frame_style is not None:
            return self._frame_style
        style: Style = DOMNode.rich_style.fget(self)  # type: ignore[attr-defined]
        return style

    def render_lines(self, crop: Region) -> list[Strip]:
        self._frame_style = style = DOMNode.rich_style.fget(self)  # type: ignore[attr-defined]
        self._frame_cells = self._cell_constants()
        widths = tuple(column.get_render_width(self) for column in self.ordered_columns)
        self._frame_looks = (style, widths, self.cursor_type, self.show_cursor, self._show_hover_cursor,
                             self.get_pseudo_class_state(), self.fixed_rows, self.fixed_columns, self.zebra_stripes,
                             self.show_row_labels, self._styles_version, self.size.width)
        if self._draws_rows_itself():
            spare = max(0, self.size.width - sum(widths) - self._row_label_column_width)
            self._frame_row = (widths, spare, self.fixed_rows, self.zebra_stripes, {}, {},
                               tuple(column.key for column in self.ordered_columns))
        try:
            return super().render_lines(crop)
        finally:
            self._frame_style = None
            self._frame_looks = None
            self._frame_cells = None
            self._frame_row = None

    def _render_line_in_row(self, row_key: RowKey, line_no: int, base_style: Style, cursor_location: Any,
                            hover_location: Any) -> tuple[_CellLines, _CellLines]:
        """A data row's line as ``DataTable`` makes it (its cells, then the row's style carried to the table's
        right edge), with what is the same for every row of a frame worked out once a frame: the columns' keys and
        widths, the spare width, the row and edge styles; and what is the same for every cell of a row once a row
        (its data, its cursor and hover styles). ``DataTable`` works them out again for every cell (each a walk
        through component styles), most of a line's cost once its cells are kept. Row cursors, no fixed columns
        and no row labels (the app's tables); anything else takes ``DataTable``'s own path."""
        frame = self._frame_row
        row_index = self._row_locations.get(row_key)  # None for the header row
        data = self._data.get(row_key)
        if frame is None or line_no != 0 or row_index is None or data is None:
            return super()._render_line_in_row(row_key, line_no, base_style, cursor_location, hover_location)
        widths, spare, fixed_rows, zebra, row_styles, edges, column_keys = frame
        cursor = cursor_location.row == row_index
        hover = hover_location.row == row_index
        look = (row_index < fixed_rows, zebra and row_index % 2 == 1, base_style)
        row_style = row_styles.get(look)
        if row_style is None:
            row_style = row_styles[look] = self._get_row_style(row_index, base_style)
        constants = self._frame_cells or self._cell_constants()
        pre_style, post_style = self._cell_styles(constants, row_index < fixed_rows, hover, cursor, row_style)
        padding, console, options = constants[6], constants[8], constants[9]
        cells = []
        for column_index, (column_key, width) in enumerate(zip(column_keys, widths)):
            value = data.get(column_key)
            if isinstance(value, Text):
                cells.append(self._kept_cell((row_key, column_key, cursor, hover), value, pre_style, post_style,
                                             width, padding, console, options)[0])
            else:
                cells.append(super()._render_cell(row_index, column_index, row_style, width, cursor, hover)[0])
        edge = edges.get((hover, cursor, row_style))
        if edge is None:
            extend, _ = self._get_styles_to_render_cell(False, False, False, hover, cursor, self.show_cursor,
                                                        self._show_hover_cursor, False, False)
            edge = edges[hover, cursor, row_style] = row_style + extend
        cells.append([Segment(" " * spare, edge)])
        return [], cells

    def _draws_rows_itself(self) -> bool:
        """Whether the data rows are put together here (:meth:`_render_line_in_row`, without mouse metadata): row
        cursors, one-line rows, no fixed rows or columns, no row labels (the app's tables)."""
        return (self.cursor_type == "row" and self._uniform_rows and not self.fixed_rows and not self.fixed_columns
                and not (self._labelled_row_exists and self.show_row_labels))

    def _add_cell_meta(self, event: events.MouseEvent) -> None:
        """``DataTable`` reads the row and column under the mouse from the metadata of the segment there; the data
        rows drawn by :meth:`_render_line_in_row` carry none (a theme change drew each cell's segments again with
        their row and column added to every style: ~2 ms a frame, and as much again turning the styles into escape
        codes), so the event is given the metadata ``DataTable`` would have drawn: the row and column, or the row
        and ``out_of_bounds`` right of the last cell."""
        if "row" in event.style.meta or not self._draws_rows_itself():
            return  # (drawn by DataTable itself, metadata included)
        offset = event.get_content_offset(self)
        header = self.header_height if self.show_header else 0
        if offset is None or offset.y < header:
            return
        scroll_x, scroll_y = self.scroll_offset
        row = offset.y - header + scroll_y
        if not 0 <= row < self.row_count:
            return
        x = offset.x + scroll_x
        meta: dict[str, object] = {"row": row, "column": 0, "out_of_bounds": True}
        for column, width in enumerate(column.get_render_width(self) for column in self.ordered_columns):
            if x < width:
                meta = {"row": row, "column": column}
                break
            x -= width
        event.style = event.style + Style.from_meta(meta)

    def _on_mouse_move(self, event: events.MouseMove) -> None:
        self._add_cell_meta(event)  # then DataTable's own handler (Textual calls each class's, this one first)

    async def _on_click(self, event: events.Click) -> None:
        self._add_cell_meta(event)

    def render_line(self, y: int) -> Strip:
        """A line of the table; a data row's line is found from the row's index (rows one line high, no fixed
        rows: the app's tables), without ``DataTable``'s walk for each line (the fixed rows' heights, a list of
        every row's y offsets rebuilt after any change, a line cache keyed by the table-wide update counter);
        anything else (the header, other tables) takes ``DataTable``'s own path."""
        looks = self._frame_looks
        if looks is None or self._frame_row is None:
            return super().render_line(y)
        header = self.header_height if self.show_header else 0
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base_style = self.rich_style
        cursor_location = self.cursor_coordinate
        hover_location = self.hover_coordinate
        if y < header:
            # The header's line, kept while its labels, the table's looks and where the mouse is stay the same
            # (``DataTable`` keys it by the update counter: every changed cell drew the header again).
            labels = tuple(column.label for column in self.ordered_columns)
            header_state = (looks, base_style, scroll_x, header, hover_location, cursor_location)
            slot = (self._header_row_key, y, width)
            kept = self._kept_lines.get(slot)
            if (kept is not None and kept[0] == header_state and len(kept[1]) == len(labels)
                    and all(a is b for a, b in zip(kept[1], labels))):
                return kept[2]
            strip = super().render_line(y)
            _keep(self._kept_lines, slot, (header_state, labels, strip), KEPT_LINES)
            return strip
        row_index = y - header + scroll_y
        row_key = self._row_locations.get_key(row_index)
        data = self._data.get(row_key) if row_key is not None else None
        if row_key is None or data is None:
            return Strip.blank(width, base_style)
        values = tuple(data.values())
        state = (looks, base_style, scroll_x, scroll_x + width, row_index, cursor_location.row == row_index,
                 hover_location.row == row_index)
        slot = (row_key, 0, width)
        kept = self._kept_lines.get(slot)
        if (kept is not None and kept[0] == state and len(kept[1]) == len(values)
                and all(a is b for a, b in zip(kept[1], values))):
            return kept[2]
        _, cells = self._render_line_in_row(row_key, 0, base_style, cursor_location, hover_location)
        segments = [segment for cell in cells for segment in cell]
        if scroll_x:
            segments = line_crop(segments, scroll_x, scroll_x + width, width)
        strip = Strip(segments).adjust_cell_length(width, base_style).simplify()
        _keep(self._kept_lines, slot, (state, values, strip), KEPT_LINES)
        return strip

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        """A line of a row kept while the row's cells, its place, its cursor and hover state and the table's looks
        stay the same (``DataTable`` draws every line again after any change anywhere in the table)."""
        looks = self._frame_looks
        if looks is None or self.cursor_type not in ("row", "none"):
            return super()._render_line(y, x1, x2, base_style)
        try:
            row_key, line_no = self._get_offsets(y)
        except LookupError:
            return super()._render_line(y, x1, x2, base_style)
        data = self._data.get(row_key)
        row_index = self._row_locations.get(row_key)
        if data is None or row_index is None:
            return super()._render_line(y, x1, x2, base_style)
        values = tuple(data.values())
        state = (looks, base_style, x1, x2, row_index, self.cursor_coordinate.row == row_index,
                 self.hover_coordinate.row == row_index)
        # By width too: a maximised panel (m) and the same panel back in its place each keep their lines.
        kept = self._kept_lines.get((row_key, line_no, self.size.width))
        if (kept is not None and kept[0] == state and len(kept[1]) == len(values)
                and all(a is b for a, b in zip(kept[1], values))):
            return kept[2]
        strip = super()._render_line(y, x1, x2, base_style)
        _keep(self._kept_lines, (row_key, line_no, self.size.width), (state, values, strip), KEPT_LINES)
        return strip

    def _get_offsets(self, y: int) -> tuple[RowKey, int]:
        """The row at line ``y`` and the line within it; with rows one line high, from the row's index
        (``DataTable`` builds the list of every row's lines first, again after any change: 1-2 ms per frame on a
        1,600-row table, even for the header's line)."""
        if not self._uniform_rows:
            return super()._get_offsets(y)
        if self.show_header:
            if y < self.header_height:
                return self._header_row_key, y
            y -= self.header_height
        row_key = self._row_locations.get_key(y) if y >= 0 else None
        if row_key is None:
            raise LookupError(f"Y coord {y!r} is greater than total height")
        return row_key, 0

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """Measure new rows (``DataTable`` does it when idle) and draw anew if that widened a column: the render
        caches are keyed by the update counter, which ``add_row`` moved before the measuring, so lines drawn in
        between (a frame on a busy machine) would otherwise be kept with the old widths, the header's too."""
        widths = [column.content_width for column in self.ordered_columns]
        super()._update_dimensions(new_rows)
        if widths != [column.content_width for column in self.ordered_columns]:
            self._update_count += 1
            self.refresh()

    def notify_style_update(self) -> None:
        self._styles_version += 1
        self._kept_lines.clear()
        super().notify_style_update()

    def _render_cell(self, row_index: int, column_index: int, base_style: Style, width: int,
                     cursor: bool = False, hover: bool = False) -> _CellLines:
        if row_index < 0 or column_index < 0:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        row_key = self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        row = self.rows.get(row_key) if row_key is not None else None
        data = self._data.get(row_key) if row_key is not None else None
        if row is None or data is None or row.height != 1 or column_key is None:
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        value = data.get(column_key)
        if not isinstance(value, Text):
            return super()._render_cell(row_index, column_index, base_style, width, cursor, hover)
        constants = self._frame_cells or self._cell_constants()
        fixed = row_index < constants[0] or column_index < constants[1]
        pre_style, post_style = self._cell_styles(constants, fixed, hover, cursor, base_style)
        return self._placed_cell((row_key, column_key, cursor, hover), value, pre_style, post_style, width,
                                 constants[6], row_index, column_index, constants[8], constants[9])

    def _cell_styles(self, constants: _CellConstants, fixed: bool, hover: bool, cursor: bool,
                     base_style: Style) -> tuple[Style, Style]:
        """The styles a cell is drawn with (before and after its own), memoised for the frame."""
        styles = constants[7]
        pair = styles.get((fixed, hover, cursor, base_style))
        if pair is None:
            component_style, post_style = self._get_styles_to_render_cell(
                False, False, fixed, hover, cursor, constants[2], constants[3], constants[4], constants[5])
            pair = styles[fixed, hover, cursor, base_style] = (base_style + component_style, post_style)
        return pair

    def _kept_cell(self, slot: tuple[object, ...], value: Text, pre_style: Style, post_style: Style, width: int,
                   padding: int, console: Console, options: ConsoleOptions) -> _CellLines:
        """The cell's segments, kept while its value object and styles stay the same (a sort moves a kept
        rendering to its new place without drawing it again)."""
        looks = (pre_style, post_style, width, padding)
        kept = self._kept_cells.get(slot)
        if kept is not None and kept[0] is value and kept[1] == looks:
            return kept[2]
        plain = render_cell(console, options, value, width, padding, pre_style, post_style)
        _keep(self._kept_cells, slot, (value, looks, plain), KEPT_CELLS)
        return plain

    def _placed_cell(self, slot: tuple[object, ...], value: Text, pre_style: Style, post_style: Style, width: int,
                     padding: int, row_index: int, column_index: int, console: Console,
                     options: ConsoleOptions) -> _CellLines:
        """The kept cell with its row and column in its segments' mouse metadata, as ``DataTable`` draws a cell
        (its own path: the lines of tables whose rows :meth:`_draws_rows_itself` does not draw)."""
        meta = _meta_style(row_index, column_index)
        return [[Segment(text, style + meta if style is not None else meta, control) for text, style, control in line]
                for line in self._kept_cell(slot, value, pre_style, post_style, width, padding, console, options)]

    def _cell_constants(self) -> _CellConstants:
        """What every cell of a frame is drawn with (each is a reactive or a property: read once a frame, not once
        a cell), and the frame's memo of cell styles; the console and its options too (``App.console_options``
        makes new options each time it is read)."""
        app = self.app
        return (self.fixed_rows, self.fixed_columns, self.show_cursor, self._show_hover_cursor,
                self.cursor_foreground_priority == "css", self.cursor_background_priority == "css",
                self.cell_padding, {}, app.console, app.console_options)

    def add_row(self, *cells: Any, height: int | None = 1, key: str | None = None, label: Any = None) -> RowKey:
        if height != 1:
            self._uniform_rows = False  # a taller or auto-height row: its lines take DataTable's own path
        return super().add_row(*cells, height=height, key=key, label=label)

    def clear(self, columns: bool = False) -> Any:
        self._uniform_rows = True
        self._kept_cells.clear()
        self._kept_lines.clear()
        return super().clear(columns)

    def remove_row(self, row_key: RowKey | str) -> None:
        super().remove_row(row_key)
        key = row_key if isinstance(row_key, RowKey) else RowKey(row_key)
        for slot in [slot for slot in self._kept_cells if slot[0] == key]:
            del self._kept_cells[slot]
        for line in [line for line in self._kept_lines if line[0] == key]:
            del self._kept_lines[line]


def update_row(table: DataTable[Any], row_key: str, column_keys: Sequence[str], cells: Sequence[Text]) -> None:
    """Write ``cells`` into row ``row_key``; a column is widened only when a new cell is wider than it.

    One table update and one repaint request for the whole row (``update_cell`` makes one per cell: rewriting the
    50 pending rows of a paused queue was 300 of each). Relies on ``DataTable._data``, ``_update_count``,
    ``_updated_cells`` and ``_require_update_dimensions`` (Textual 8); without them, cell by cell.
    """
    data = getattr(table, "_data", None)
    row = data.get(RowKey(row_key)) if isinstance(data, dict) else None
    updated = getattr(table, "_updated_cells", None)
    if row is None or not isinstance(updated, set) or not isinstance(getattr(table, "_update_count", None), int):
        columns = table.columns
        for column_key, cell in zip(column_keys, cells):
            column = columns.get(ColumnKey(column_key))
            grow = column is not None and cell.cell_len > column.content_width
            table.update_cell(row_key, column_key, cell, update_width=grow)
        return
    columns = table.columns
    grow = False
    for column_key, cell in zip(column_keys, cells):
        key = ColumnKey(column_key)
        column = columns.get(key)
        if column is None:
            raise CellDoesNotExist(f"No cell exists for row_key={row_key!r}, column_key={column_key!r}.")
        row[key] = cell
        if cell.cell_len > column.content_width:
            updated.add(CellKey(RowKey(row_key), key))
            grow = True
    if grow:
        table._require_update_dimensions = True
    table._update_count += 1
    table.refresh()


def _write_off_screen(table: DataTable[Any], row_key: str, column_keys: Sequence[str], cells: Sequence[Text]) -> bool:
    """Put the cells of a row that is not on screen in place without asking for a repaint (a repaint per row of
    a 1,600-row table is what makes a restyle slow); False when that is not possible (the caller then writes
    them the ordinary way). Relies on ``DataTable._data`` and ``_update_count`` (Textual 8), checked here."""
    data = getattr(table, "_data", None)
    if not isinstance(data, dict) or not isinstance(getattr(table, "_update_count", None), int):
        return False
    row = data.get(RowKey(row_key))
    if row is None:
        return False
    columns = table.columns
    for column_key, cell in zip(column_keys, cells):
        key = ColumnKey(column_key)
        column = columns.get(key)
        if column is None or cell.cell_len > column.content_width:
            return False
    for column_key, cell in zip(column_keys, cells):
        row[ColumnKey(column_key)] = cell
    table._update_count += 1  # the render caches are keyed by it: the row is drawn anew when it scrolls in
    return True


SLICE_ROWS = 120
"""Rows rewritten per slice when a whole table is restyled (about 15 ms on a slow core)."""
SLICE_INTERVAL_S = 0.02
SLICES_DEFERRED_AT_MOST = 25
"""Slice turns a key's answer may put off (0.5 s): rows scrolled into view meanwhile would keep the old looks."""


class SlicedRestyle:
    """Rewrites every row of a big table in slices, the rows on screen first, so keys are answered in between.

    ``make_cells(row_key)`` returns the row's new cells (None: the row is gone, nothing to write). ``wait()``
    says how long a key's answer is still being drawn: the rows off screen wait for it (a restyle comes with the
    theme key, whose frame redraws the whole screen; a slice before that frame, 5-15 ms, was on the key's time).
    """

    def __init__(self, table: DataTable[Any], column_keys: Sequence[str],
                 make_cells: Callable[[str], Sequence[Text] | None],
                 wait: Callable[[], float] = lambda: 0.0) -> None:
        self.table = table
        self.column_keys = tuple(column_keys)
        self.make_cells = make_cells
        self.wait = wait
        self._backlog: list[str] | None = []
        """Rows still to be rewritten (None: every row but those written, worked out at the next slice)."""
        self._written: set[str] = set()
        self._timer: Timer | None = None
        self._deferred = 0

    @property
    def pending(self) -> int:
        """Rows still to be rewritten."""
        if self._backlog is None:
            return max(0, self.table.row_count - len(self._written))
        return len(self._backlog)

    def start(self) -> None:
        """Rewrite every row: those on screen now, the others a slice at a time (which those are is worked out at
        the first slice: ``DataTable.ordered_rows`` builds a list of every row on each read, 1-2 ms at 200 rows)."""
        table = self.table
        on_screen = self._keys_on_screen()
        self._written = set(on_screen)
        self._backlog = None
        self._rewrite(on_screen)
        self._deferred = 0
        if table.row_count > len(on_screen) and self._timer is None:
            self._timer = table.set_interval(SLICE_INTERVAL_S, self._slice)
        elif table.row_count <= len(on_screen):
            self._backlog = []
            self.stop()

    def _keys_on_screen(self) -> list[str]:
        """The keys of the rows on screen, found from their indices (``DataTable.ordered_rows`` would list them all)."""
        table = self.table
        top = max(0, int(table.scroll_y))
        locations = table._row_locations
        return [key.value for index in range(top, top + max(1, table.size.height))
                if (key := locations.get_key(index)) is not None and key.value is not None]

    def _rows_left(self) -> list[str]:
        if self._backlog is None:
            written = self._written
            self._backlog = [key for row in self.table.ordered_rows
                             if (key := row.key.value) is not None and key not in written]
        return self._backlog

    def _slice(self) -> None:
        if self.wait() > 0 and self._deferred < SLICES_DEFERRED_AT_MOST:
            self._deferred += 1
            return
        backlog = self._rows_left()
        chunk, self._backlog = backlog[:SLICE_ROWS], backlog[SLICE_ROWS:]
        shown = set(self._keys_on_screen())
        self._rewrite([k for k in chunk if k in shown])
        self._rewrite([k for k in chunk if k not in shown], on_screen=False)
        if not self._backlog:
            self.stop()

    def finish(self) -> None:
        """Rewrite whatever is left now (tests, and before a rebuild that needs current cells)."""
        chunk, self._backlog = self._rows_left(), []
        self._rewrite(chunk)
        self.stop()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def _rewrite(self, keys: Sequence[str], on_screen: bool = True) -> None:
        table = self.table
        for key in keys:
            cells = self.make_cells(key)
            if cells is None or key not in table.rows:
                continue
            if on_screen or not _write_off_screen(table, key, self.column_keys, cells):
                update_row(table, key, self.column_keys, cells)


# ---------------------------------------------------------------------------------------------------- themes

# A stylesheet that parses the app's CSS once per theme (``t`` cycles through three), and restyles a node for a
# new theme by translating the rules it has instead of matching every selector again.
#
# Textual substitutes CSS variables while it parses, so a theme change parses every CSS source of the app and its
# widgets again (``App.refresh_css`` calls ``Stylesheet.reparse``): 6-9 ms of ``t`` on 2 shared cores. The rules
# parsed for a set of variables and sources are kept and used again when the same theme comes back. Relies on
# ``Stylesheet.reparse``, ``_variables``, ``_rules``, ``_rules_map`` and ``_require_parse`` (Textual 8);
# tests/test_tui_themes.py fails if Textual stops calling ``reparse`` on a theme change or the kept rules differ
# from a fresh parse.
#
# Two parses of the same sources with other variables are the same rule sets in the same order, with other
# values: which rule sets match a node, and which of them wins each property, does not depend on the values. So a
# node styled from one parse is restyled for another by looking up, for each value it has, the value the same
# rule set gives that property in the other parse (a :class:`Translation`), where ``Stylesheet.apply`` matches
# every selector of the stylesheet against the node's path again and builds a virtual node per component class:
# 5-7 ms of ``t``'s ~40 on 2 shared cores. A node whose matching could depend on the theme (a rule with ``:dark``
# or ``:light``, or one naming the ``-theme-``, ``-dark-mode`` and ``-light-mode`` classes a theme sets on the
# app), a value not found, or a parse not kept takes Textual's own path. tests/test_tui_themes.py holds every node
# of a translated screen to the rules of a screen started in that theme. Relies on ``Styles._rules``,
# ``DOMNode._selector_names`` and ``_component_styles`` and on ``Stylesheet.apply`` handing a node's rules to
# ``replace_rules`` (Textual 8).
#
# It also asks for each node's repaint once per update instead of once per changed rule: applying a theme sets
# every colour rule of every node, and each setting asked the node to refresh (working out its region each time):
# ~500 requests per ``t``, 10-40 ms of CPU before the new theme's first frame. The requests are collected while
# the rules are applied, then made once per node with the strongest of what was asked (a relayout if any rule
# asked for one). Relies on rules asking through the node's ``refresh`` and on ``Widget._get_virtual_dom`` (a
# widget's scrollbars, styled with it) (Textual 8); tests/test_tui_themes.py checks that a theme change still
# repaints every panel.

KEPT_THEMES = 8
"""Parsed rule sets kept (one per theme seen; the oldest goes first)."""

THEME_SELECTORS = (":dark", ":light", "-theme-", "-dark-mode", "-light-mode")
"""What a selector names when whether it matches depends on the theme (the app's pseudo-classes and classes)."""

_CONFLICT = object()


def _distinct_values(rules: list[RuleSet]) -> None:
    """Give every rule set's value an object of its own: the parser shares one object between equal values (a
    colour parsed once), and two rule sets equal in one theme may part ways in another. Strings and numbers stay
    shared (a node holding one given by two rule sets that part ways is matched by Textual)."""
    seen: set[int] = set()
    for rule in rules:
        values = rule.styles._rules
        for key, value in values.items():
            if id(value) in seen:
                copied = (*value,) if type(value) is tuple else copy.copy(value)
                values[key] = copied  # type: ignore[literal-required]
                value = copied
            seen.add(id(value))


def theme_names(rules: list[RuleSet]) -> frozenset[str]:
    """The selector names of the rule sets whose matching depends on the theme (they name :data:`THEME_SELECTORS`;
    a rule set without declarations, as nesting makes, gives nothing): a node they may match is matched again."""
    names: set[str] = set()
    for rule in rules:
        if rule.styles._rules and any(word in rule.selectors for word in THEME_SELECTORS):
            names |= rule.selector_names
    return frozenset(names)


class Translation:
    """From the rules of one parse to those of another parse of the same sources with other variables: for each
    (property, value object) a rule set of the first gives, the value the same rule set gives in the second."""

    __slots__ = ("values", "theme_names", "_keep")

    def __init__(self, source: list[RuleSet], target: list[RuleSet], theme_names: frozenset[str]) -> None:
        values: dict[tuple[str, int], object] = {}
        for old, new in zip(source, target):
            old_rules, new_rules = old.styles._rules, new.styles._rules
            if old_rules.keys() != new_rules.keys():
                raise ValueError("the two parses differ in more than their values")
            for key, value in old_rules.items():
                slot = (key, id(value))
                new_value = new_rules[key]  # type: ignore[literal-required]
                if slot not in values:
                    values[slot] = new_value
                elif (seen := values[slot]) is not new_value and seen != new_value:
                    values[slot] = _CONFLICT  # one value object, two rule sets that part ways: not translated
        self.values = values
        self.theme_names = theme_names
        self._keep = source  # the ids above stay those of these values while the translation lives

    def rules(self, node: DOMNode, rules: RulesMap) -> RulesMap | None:
        """``rules`` (what ``node`` was given from the first parse) in the second parse; None where it cannot say."""
        if self.theme_names and not self.theme_names.isdisjoint(node._selector_names):
            return None
        values = self.values
        translated: dict[str, object] = {}
        for key, value in rules.items():
            # A value no rule set gave is Textual's default for a property set to ``initial``: the same in any theme.
            new_value = values.get((key, id(value)), value)
            if new_value is _CONFLICT:
                return None
            translated[key] = new_value
        return translated  # type: ignore[return-value]


STATE_PSEUDO_CLASSES = frozenset({"hover", "focus", "blur", "can-focus", "disabled", "enabled", "dark", "light",
                                  "inline", "ansi", "nocolor"})
"""The pseudo-classes a node has from its own state, not from its place among its siblings: rules that use no
other can be matched once for every node with the same path (:meth:`ThemeStylesheet.apply`)."""
MATCHED_KEPT = 4096
"""Paths whose matched rules :class:`ThemeStylesheet` keeps, per parse (all are dropped past it)."""


class ThemeStylesheet(Stylesheet):
    """A :class:`~textual.css.stylesheet.Stylesheet` that keeps the rules parsed for each set of variables,
    restyles a node for another parse by translating its rules, and keeps the rules matched for a node's path."""

    def __init__(self, *, variables: dict[str, str] | None = None) -> None:
        super().__init__(variables=variables)
        self._kept: dict[Hashable, tuple[int, list[RuleSet]]] = {}
        self._sources: dict[int, tuple[Hashable, frozenset[str]]] = {}
        """The sources each kept parse was made from (a translation is between parses of the same sources)."""
        self._parses = 0
        self._parse = 0
        """The serial number of the parse whose rules are in use (0: one not kept)."""
        self._given: weakref.WeakKeyDictionary[DOMNode, tuple[int, RulesMap]] = weakref.WeakKeyDictionary()
        """Each node's rules as the stylesheet last gave them, and from which parse."""
        self._translations: dict[tuple[int, int], Translation | None] = {}
        self._translating = False
        """Within :meth:`update` (a theme change): nodes may be translated."""
        self.sources_version = 0
        """Counts the sets of CSS sources parsed (a widget or screen seen for the first time adds its CSS): the
        themes parsed ahead for other sources are of no use to a theme change now."""
        self._last_sources: Hashable = None
        self.reused = 0
        """Reparses answered from the kept rules (tests read it)."""
        self._matched: dict[int, tuple[list[RuleSet], dict[Hashable, tuple[str, ...] | None],
                                       dict[Hashable, RulesMap | None]]] = {}
        """Per parse in use (the id of its rule list, kept with it): the pseudo-classes the rules that may apply
        to a node look at (None: one that depends on siblings), keyed by the node's type, id and classes; and
        the rules matched for a path (None: no rule), keyed by each node's type, id, classes and those
        pseudo-classes along the path."""
        self._capture: list[list[Any]] = []
        """The nodes being matched by Textual (innermost last), each with the rules it was given (None: none)."""
        self.paths_matched = 0
        self.paths_reused = 0
        """Nodes styled by Textual's matching, and from the rules matched for the same path (tests read them)."""
        self.translated = 0
        self.matched = 0
        """Nodes restyled by translation, and by Textual's matching, in theme changes (tests and benches read them)."""

    @classmethod
    def adopt(cls, stylesheet: Stylesheet) -> ThemeStylesheet:
        """A copy of ``stylesheet`` (its variables and sources) that keeps its parses."""
        adopted = cls(variables=dict(stylesheet._variables))
        adopted.source = stylesheet.source.copy()
        return adopted

    def _keep_parse(self, key: Hashable, rules: list[RuleSet]) -> int:
        _distinct_values(rules)
        if key[1] != self._last_sources:  # type: ignore[index]
            self._last_sources = key[1]  # type: ignore[index]
            self.sources_version += 1
        self._parses += 1
        self._kept.pop(key, None)
        self._kept[key] = (self._parses, rules)
        self._sources[self._parses] = (key[1], theme_names(rules))  # type: ignore[index]
        while len(self._kept) > KEPT_THEMES:
            serial, _ = self._kept.pop(next(iter(self._kept)))
            self._sources.pop(serial, None)
            for pair in [pair for pair in self._translations if serial in pair]:
                del self._translations[pair]
        return self._parses

    def prime(self, variables: dict[str, str]) -> None:
        """Parse the current sources with ``variables`` now (idle time) so that a change to that theme finds them,
        and work out the translation to them from the rules in use."""
        sheet = Stylesheet(variables=variables)
        sheet.source = self.source.copy()
        sheet.reparse()
        key = (tuple(sorted(variables.items())), tuple(sheet.source.items()))
        kept = self._kept.get(key)
        serial = kept[0] if kept is not None else self._keep_parse(key, sheet._rules)
        for other, _ in list(self._kept.values()):  # both ways, with every other theme of these sources
            if other != serial and self._sources[other][0] == self._sources[serial][0]:
                self._translation(other, serial)
                self._translation(serial, other)

    def _key(self) -> Hashable:
        return (tuple(sorted(self._variables.items())), tuple(self.source.items()))

    def parse(self) -> None:
        """Textual's parse (of sources added since the last, on first use of the rules), its rules kept."""
        self._parse = 0
        super().parse()
        self._parse = self._keep_parse(self._key(), self._rules)

    def reparse(self) -> None:
        key = self._key()
        kept = self._kept.get(key)
        if kept is None:
            self._parse = 0
            super().reparse()  # raises on invalid CSS, keeping nothing
            self._parse = self._keep_parse(self._key(), self._rules)
            return
        self.reused += 1
        self._parse, self._rules = kept
        self._rules_map = None
        self._require_parse = False

    def _translation(self, source: int, target: int) -> Translation | None:
        pair = (source, target)
        if pair not in self._translations:
            rules = dict(self._kept.values())
            translation = None
            if (source in rules and target in rules and self._sources[source][0] == self._sources[target][0]
                    and len(rules[source]) == len(rules[target])):
                try:
                    translation = Translation(rules[source], rules[target],
                                              self._sources[source][1] | self._sources[target][1])
                except ValueError:
                    translation = None
            self._translations[pair] = translation
        return self._translations[pair]

    def apply(self, node: DOMNode, *, animate: bool = False, cache: dict[tuple[Any, ...], RulesMap] | None = None,
              ) -> None:
        """Textual's ``apply``, with the rules matched for a path kept for the next node on the same path.

        Opening the command palette styles its ~80 nodes and the parts of each (an input's cursor, a list's
        highlighted option: each a node of its own) three or four times: when mounted, when its screen resumes,
        when its list shows and when it is ready, every node matched against every rule that may apply, and the
        next opening does it all again for new nodes on the same paths. The matched rules depend on nothing but
        the rules in use and, for each node from the app down, its type, id, classes and the pseudo-classes those
        rules look at: with those the same, the rules are those matched before, set as Textual sets them
        (``animate``: a class added or removed, through its transitions). A node whose rules look at its place
        among its siblings (``:first-child``, ``:odd``, ``:focus-within``…) takes Textual's path."""
        rules = self.rules
        kept = self._matched.get(id(rules))
        if kept is None or kept[0] is not rules:
            while len(self._matched) >= KEPT_THEMES:
                del self._matched[next(iter(self._matched))]
            kept = self._matched[id(rules)] = (rules, {}, {})
        _, looked_at, matched = kept
        own = (type(node), node._id, frozenset(node._classes))
        if own in looked_at:
            pseudo = looked_at[own]
        else:
            rules_map = self.rules_map
            used: set[str] = set()
            for name in rules_map.keys() & node._selector_names:
                for rule in rules_map[name]:
                    used |= rule.pseudo_classes
            pseudo = looked_at[own] = tuple(sorted(used)) if used <= STATE_PSEUDO_CLASSES else None
        if pseudo is None:
            self.paths_matched += 1
            super().apply(node, animate=animate, cache=cache)
            return
        path: list[Hashable] = [own]
        if pseudo:
            path.append(tuple([node.has_pseudo_class(name) for name in pseudo]))
        parent = node._parent
        while isinstance(parent, DOMNode):
            path.append((type(parent), parent._id, frozenset(parent._classes)))
            if pseudo:
                path.append(tuple([parent.has_pseudo_class(name) for name in pseudo]))
            parent = parent._parent
        key = tuple(path)
        if key not in matched:
            self.paths_matched += 1
            self._capture.append([node, None])
            try:
                super().apply(node, animate=animate, cache=cache)
            finally:
                _, found = self._capture.pop()
            if len(matched) >= MATCHED_KEPT:
                matched.clear()
            matched[key] = found
            return
        found = matched[key]
        self.paths_reused += 1
        node._has_hover_style = "hover" in pseudo
        node._has_focus_within = node._has_order_style = node._has_odd_or_even = False
        if found is not None:
            self.replace_rules(node, found, animate=animate)
        self._process_component_classes(node)

    def replace_rules(self, node: DOMNode, rules: RulesMap, animate: bool = False) -> None:  # type: ignore[override]
        """Set the rules of ``node`` that change, leave the others (``Stylesheet.replace_rules`` sets every rule the
        node has or gets, each through its property's checks: a theme changes a node's colours and nothing else).
        A rule equal to the one the node has would be set to no effect; with ``animate``, Textual's own path."""
        if self._capture and self._capture[-1][0] is node:
            self._capture[-1][1] = rules
        if self._parse:
            self._given[node] = (self._parse, rules)
        else:
            self._given.pop(node, None)
        base = node.styles.base
        if animate:
            if base._rules != rules:  # (equal: Textual's animated path sets nothing and tells no one either)
                super().replace_rules(node, rules, animate=True)
            return
        current = base._rules
        for key in current.keys() | rules.keys():
            value = rules.get(key)
            if key in current and current.get(key) == value:
                continue
            setattr(base, key, value)
        node.notify_style_update()

    def _translated(self, part: DOMNode) -> RulesMap | None:
        """The rules ``part`` was given from another parse, in the parse in use; None where they cannot be said so
        (a part given its rules from the parse in use was matched again since: a change to the part itself)."""
        given = self._given.get(part)
        if given is None or given[0] == self._parse:
            return None
        translation = self._translation(given[0], self._parse)
        return translation.rules(part, given[1]) if translation is not None else None

    def _translate(self, node: DOMNode) -> bool:
        """Restyle ``node`` for the parse in use by translating its rules, and its component styles each by
        translation or else by Textual's matching of that component alone; False (nothing changed) where the
        node's own rules cannot be translated."""
        if not self._parse:
            return False
        rules = self._translated(node)
        if rules is None:
            return False
        changed = False
        for styles in node._component_styles.values():  # first: the node's own update clears what it keeps of them
            part = styles.node
            if part is None:
                continue
            before = part.styles.base.get_rules()
            part_rules = self._translated(part)
            if part_rules is None:
                self.apply(part)
            else:
                self.replace_rules(part, part_rules)
            changed = changed or part.styles.base._rules != before
        self.replace_rules(node, rules)
        if changed:
            node.refresh()
        return True

    def update_nodes(self, nodes: Iterable[DOMNode], animate: bool = False) -> None:
        """Textual's update of ``nodes`` and their scrollbars, each restyled by translation where it can be."""
        if animate:
            super().update_nodes(nodes, animate=True)
            return
        cache: dict[tuple[object, ...], RulesMap] = {}
        for node in nodes:
            for part in (node, *(shown_scrollbars(node) if isinstance(node, Widget) else ())):
                if self._translating and self._translate(part):
                    self.translated += 1
                else:
                    self.matched += 1
                    self.apply(part, cache=cache)

    def update(self, root: DOMNode, animate: bool = False) -> None:
        """Apply the rules to ``root`` and every node under it, then ask each node that wanted it to refresh once."""
        nodes = list(root.walk_children(with_self=True))
        wanted: dict[DOMNode, bool] = {}  # node -> relayout asked

        def collector(node: DOMNode) -> Callable[..., DOMNode]:
            def refresh(*_regions: Any, layout: bool = False, **_options: Any) -> DOMNode:
                wanted[node] = wanted.get(node, False) or layout
                return node

            return refresh

        collected = []
        scrollbars = [bar for node in nodes if isinstance(node, Widget) for bar in node._get_virtual_dom()]
        for node in [*nodes, *scrollbars]:  # (update_nodes styles a widget's scrollbars with it)
            if "refresh" not in vars(node):  # a node with a refresh of its own instance is left alone
                node.refresh = collector(node)  # type: ignore[method-assign]
                collected.append(node)
        self._translating = True
        try:
            self.update_nodes(nodes, animate=animate)
        finally:
            self._translating = False
            for node in collected:
                del node.refresh
            for node, layout in wanted.items():
                node.refresh(layout=layout)


# ---------------------------------------------------------------------------------------------------- toasts


class CommandPaletteWithoutToasts(CommandPalette):
    """Textual's command palette, less the toast rack every screen is given (``Screen._extend_compose``): Textual
    mounts every toast that is up again on each screen it shows, ~3 ms each, before the palette's first frame
    (the toasts stay on the screen below and are there again when the palette closes)."""

    def _extend_compose(self, widgets: list[Widget]) -> None:
        super()._extend_compose(widgets)
        widgets[:] = [widget for widget in widgets if not isinstance(widget, ToastRack)]


def add_palette_css(stylesheet: Stylesheet) -> None:
    """Add the CSS of the command palette and of the widgets it is made of to ``stylesheet``, as its first opening
    does (``Widget._post_register``: each class's ``DEFAULT_CSS`` and its bases', in the order the palette mounts
    them), so that the first ``ctrl+p`` parses nothing: at idle time, with the themes parsed ahead for it."""
    from textual.command import CommandInput, CommandList, SearchIcon
    from textual.containers import Horizontal, Vertical
    from textual.widgets import LoadingIndicator

    for kind in (CommandPaletteWithoutToasts, Vertical, Horizontal, SearchIcon, CommandInput, CommandList,
                 LoadingIndicator):
        for read_from, css, tie_breaker, scope in DOMNode._get_default_css(kind.__new__(kind)):
            stylesheet.add_source(css, read_from=read_from, is_default_css=True, tie_breaker=tie_breaker, scope=scope)


def toast_notification(toast: Toast) -> Notification | None:
    """The notification a toast shows (``Toast._notification``)."""
    notification = getattr(toast, "_notification", None)
    return notification if isinstance(notification, Notification) else None


def toast_showing(app: App[Any], notification: Notification) -> Toast | None:
    """The toast on the current screen that shows ``notification`` (mounted or not yet), if any. Raises
    ``NoMatches`` or ``ScreenStackError`` when there is no screen or it has no toast rack (notifications off)."""
    rack = app.screen.get_child_by_type(ToastRack)
    return next((toast for toast in rack.query(Toast) if toast_notification(toast) is notification), None)


def retell(app: App[Any], notification: Notification, message: str, severity: str, timeout: float) -> bool:
    """Show ``message`` in the toast that shows ``notification``, in its place: the notification is rewritten
    (the same one stays among the app's), the toast drawn again (laid out again only when its height changes)
    and its time starts over (its timers, ``MessagePump._timers``, are stopped and ``Toast._expire`` set anew).
    False, and nothing changed, when that toast is not up on the current screen (gone, going, or on another
    screen): the caller puts a new one up. Mounting a toast lays out the whole screen (~3 ms) and draws it a
    frame after it is mounted; a key pressed again while its answer is up needs neither."""
    if notification not in app._notifications or notification.has_expired:
        return False
    try:
        toast = toast_showing(app, notification)
    except (NoMatches, ScreenStackError):
        return False
    if toast is None or not toast.is_mounted or not toast.size:
        return False

    def height() -> int:  # as Widget.get_content_height works it out (which keeps it for the width)
        return visualize(toast, toast.render()).get_height(toast.styles, width)  # type: ignore[arg-type]

    width = toast.content_size.width
    before = height()
    if severity != notification.severity:  # (its border's colour: a restyle)
        toast.remove_class(f"-{notification.severity}")
        toast.add_class(f"-{severity}")
    notification.message = message
    notification.severity = severity  # type: ignore[assignment]
    notification.timeout = timeout
    notification.raised_at = time.time()
    for timer in list(toast._timers):
        timer.stop()
    toast.set_timer(timeout, toast._expire)
    toast.refresh(layout=height() != before)
    return True


def show_notification(app: App[Any], notification: Notification) -> None:
    """Put ``notification`` up without ``App.notify`` (which would make a new one): the notifier keeps its own
    (``App._notifications``, ``App._refresh_notifications``)."""
    app._notifications.add(notification)
    app._refresh_notifications()


def is_shown(app: App[Any], notification: Notification) -> bool:
    """Whether ``notification`` is still among the app's (``App._notifications``)."""
    return notification in app._notifications


def take_down(app: App[Any], notification: Notification, refresh: bool = True) -> None:
    """Take ``notification`` off the screen (``App._unnotify``)."""
    if notification in app._notifications:
        app._unnotify(notification, refresh=refresh)


def notifications_of(app: App[Any]) -> list[Notification]:
    """The notifications up now, oldest first (``App._notifications``)."""
    return list(app._notifications)


def batch_depth(app: App[Any]) -> int:
    """How many batches of screen updates are open (``App._batch_count``; 0: frames are drawn)."""
    count: int = app._batch_count
    return count


DISPLAY_METHOD = "_display"
"""``App._display(screen, renderable)``: where a frame is written out (a test records frames by wrapping it)."""


def begin_batch(app: App[Any]) -> None:
    """Hold repaints until :func:`end_batch` (``App._begin_batch``; ``App.batch_update`` is a context manager
    and the theme key ends its batch in another task)."""
    app._begin_batch()


def end_batch(app: App[Any]) -> None:
    app._end_batch()


def rows_pending(table: DataTable[Any]) -> bool:
    """Whether ``table`` has rows it has not measured yet (``DataTable._new_rows``, ``_require_update_dimensions``)."""
    return bool(table._new_rows or table._require_update_dimensions)


def rows_not_measured(table: DataTable[Any]) -> bool:
    """Whether ``table`` has rows or cells it has not measured yet (``DataTable._new_rows``,
    ``_require_update_dimensions``, ``_updated_cells``)."""
    return bool(table._new_rows or table._require_update_dimensions or table._updated_cells)


def shown_scrollbars(widget: Widget) -> list[Widget]:
    """The scrollbars (and corner) ``widget`` shows: those Textual's ``Stylesheet.update_nodes`` styles with it."""
    if not widget.is_scrollable:
        return []
    vertical = widget.show_vertical_scrollbar and widget.scrollbar_size_vertical
    horizontal = widget.show_horizontal_scrollbar and widget.scrollbar_size_horizontal
    bars: list[Widget] = [widget.vertical_scrollbar] if vertical else []
    bars += [widget.horizontal_scrollbar] if horizontal else []
    bars += [widget.scrollbar_corner] if vertical and horizontal else []
    return bars


def scrollbars_of(widget: Widget) -> list[Widget]:
    """A widget's scrollbars and corner (``Widget._get_virtual_dom``): not among its children."""
    return list(widget._get_virtual_dom())


# ---------------------------------------------------------------------------------------------------- for tests


def pending_work(app: App[Any]) -> list[str]:
    """What Textual itself has yet to do before the current screen shows its state (tests wait for none):
    callbacks after refresh, rows not measured, updates due, refreshes not yet reported by a widget's message
    loop (``Screen._callbacks``, ``_dirty_widgets``, ``_layout_required``, ``_repaint_required``,
    ``_scroll_required``, ``Widget._message_queue``)."""
    waiting: list[str] = []
    for screen in app.screen_stack:
        if screen._callbacks:
            waiting.append(f"{screen!r}: callbacks after refresh")
        for table in screen.query(DataTable):
            if rows_not_measured(table):
                waiting.append(f"{table!r}: rows or cells not measured")
    screen = app.screen
    if screen._dirty_widgets or screen._layout_required or screen._repaint_required or screen._scroll_required:
        waiting.append(f"{screen!r}: update due")
    for widget in screen.walk_children(Widget, with_self=False):
        for node in (widget, *scrollbars_of(widget)):
            if (node._repaint_required or node._layout_required or node._scroll_required
                    or not node._message_queue.empty()):
                waiting.append(f"{node!r}: refresh not reported")
    return waiting


def repaint_everything(app: App[Any]) -> None:
    """Ask every widget of the current screen, scrollbars included, to be drawn again, and the screen to be laid
    out again."""
    for widget in app.screen.walk_children(Widget, with_self=False):
        for node in (widget, *scrollbars_of(widget)):
            node.refresh()
    app.screen.refresh(layout=True)


PRIVATE_NAMES: tuple[tuple[str, str], ...] = (
    # (where, name): every private Textual name this module uses; tests/test_tui_textual_private.py checks each.
    ("textual.widgets.DataTable", "_render_line"),
    ("textual.widgets.DataTable", "_render_cell"),
    ("textual.widgets.DataTable", "_update_dimensions"),
    ("textual.widgets.DataTable", "_get_offsets"),
    ("textual.widgets.DataTable", "_header_row_key"),
    ("textual.widgets.DataTable", "_get_styles_to_render_cell"),
    ("textual.widgets.DataTable", "_render_line_in_row"),
    ("textual.widgets.DataTable", "_get_row_style"),
    ("textual.widgets.DataTable", "_labelled_row_exists"),
    ("textual.widgets.DataTable", "_row_label_column_width"),
    ("textual.widgets.DataTable", "_data"),
    ("textual.widgets.DataTable", "_row_locations"),
    ("textual.widgets.DataTable", "_column_locations"),
    ("textual.widgets.DataTable", "_update_count"),
    ("textual.widgets.DataTable", "_updated_cells"),
    ("textual.widgets.DataTable", "_new_rows"),
    ("textual.widgets.DataTable", "_require_update_dimensions"),
    ("textual.widgets.DataTable", "_show_hover_cursor"),
    ("textual.widgets.DataTable", "_row_render_cache"),
    ("textual.widgets.DataTable", "_cell_render_cache"),
    ("textual.widgets.DataTable", "_row_renderable_cache"),
    ("textual.widgets.DataTable", "_line_cache"),
    ("textual.widgets.DataTable", "_on_mouse_move"),
    ("textual.widgets.DataTable", "_on_click"),
    ("textual.css.stylesheet.Stylesheet", "_variables"),
    ("textual.css.stylesheet.Stylesheet", "_rules"),
    ("textual.css.stylesheet.Stylesheet", "_rules_map"),
    ("textual.css.stylesheet.Stylesheet", "_require_parse"),
    ("textual.css.styles.Styles", "_rules"),
    ("textual.dom.DOMNode", "_selector_names"),
    ("textual.dom.DOMNode", "_component_styles"),
    ("textual.dom.DOMNode", "_id"),
    ("textual.dom.DOMNode", "_classes"),
    ("textual.dom.DOMNode", "_has_hover_style"),
    ("textual.dom.DOMNode", "_has_focus_within"),
    ("textual.dom.DOMNode", "_has_order_style"),
    ("textual.dom.DOMNode", "_has_odd_or_even"),
    ("textual.message_pump.MessagePump", "_parent"),
    ("textual.css.stylesheet.Stylesheet", "_process_component_classes"),
    ("textual.dom.DOMNode", "_get_default_css"),
    ("textual.widget.Widget", "_get_virtual_dom"),
    ("textual.widget.Widget", "_vertical_scrollbar"),
    ("textual.widget.Widget", "_horizontal_scrollbar"),
    ("textual.widget.Widget", "_scrollbar_corner"),
    ("textual.app.App", "_start_widget"),
    ("textual._segment_tools", "line_crop"),
    ("textual.widgets._toast", "Toast"),
    ("textual.widgets._toast", "ToastRack"),
    ("textual.widgets._toast.Toast", "_notification"),
    ("textual.widgets._toast.Toast", "_expire"),
    ("textual.screen.Screen", "_extend_compose"),
    ("textual.message_pump.MessagePump", "_timers"),
    ("textual.app.App", "_notifications"),
    ("textual.app.App", "_refresh_notifications"),
    ("textual.app.App", "_unnotify"),
    ("textual.app.App", "_begin_batch"),
    ("textual.app.App", "_batch_count"),
    ("textual.app.App", "_display"),
    ("textual.app.App", "_end_batch"),
    ("textual.screen.Screen", "_callbacks"),
    ("textual.screen.Screen", "_dirty_widgets"),
    ("textual.widget.Widget", "_layout_required"),
    ("textual.widget.Widget", "_repaint_required"),
    ("textual.widget.Widget", "_scroll_required"),
    ("textual.message_pump.MessagePump", "_message_queue"),
)
