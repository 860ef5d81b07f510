"""What the app draws without Textual's pipeline line by line, every line the same as Textual's own drawing of it:
scrollbars (:class:`~specbench_tui.tui.textual_private.QuickScrollBar`) wherever the thumb is, hovered or grabbed,
in every theme, cropped or not; their corners; a screen's background (``QuickBackground``). A theme change draws
each of them again."""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.geometry import Offset, Region
from textual.screen import Screen
from textual.scrollbar import ScrollBar
from textual.widget import Widget

from specbench_tui.tui.log_panel import ServerLogPanel
from specbench_tui.tui.textual_private import CachedCellsTable, QuickBackground, QuickScrollBar, QuickScrollBarCorner
from specbench_tui.tui.themes import load_themes


class Plain(QuickBackground, Screen[None]):
    def compose(self) -> ComposeResult:
        yield CachedCellsTable(id="table", cursor_type="row")
        yield ServerLogPanel(id="log")

    def on_mount(self) -> None:
        table = self.query_one(CachedCellsTable)
        for column in ("configuration", "workload", "tok/s", "TTFT", "acceptance"):
            table.add_column(column, key=column)
        for i in range(57):
            table.add_row(*(Text(f"{column}-{i}-{'x' * (i % 9)}") for column in "abcde"), key=f"r{i}")
        self.query_one(ServerLogPanel).write_lines(
            [f"[sglang] line {i} {'=' * (i % 50)}" for i in range(301)])


class Bars(App[None]):
    CSS = """
    CachedCellsTable { height: 12; width: 40; scrollbar-size-vertical: 2; }
    ServerLogPanel { height: 9; width: 30; scrollbar-color: ansi_bright_magenta; scrollbar-background: ansi_blue; }
    """
    """The log panel's bars in ANSI colours: Textual's filter turns them into the theme's truecolor ones."""

    def get_default_screen(self) -> Screen[Any]:
        return Plain()

    def on_mount(self) -> None:
        for theme in load_themes(None)[0]:
            self.register_theme(theme)


def drawn(strips: list[Any]) -> list[list[tuple[str, object]]]:
    return [[(segment.text, segment.style) for segment in strip] for strip in strips]


def bars_of(app: App[Any]) -> list[Widget]:
    bars: list[Widget] = []
    for widget in (app.query_one(CachedCellsTable), app.query_one(ServerLogPanel)):
        bars += [widget.vertical_scrollbar, widget.horizontal_scrollbar, widget.scrollbar_corner]
    return bars


def check_every_bar(app: App[Any]) -> int:
    """Each bar's lines, whole and cropped (as a screen crops a bar partly covered), against Textual's own
    (``Widget.render_lines`` on the same bar); the number of bars compared."""
    compared = 0
    for bar in bars_of(app):
        if not bar.display or not bar.size:
            continue
        width, height = bar.size
        regions = [Region(0, 0, width, height)]
        regions += [Region(0, 1, width, height - 2)] if height > 2 else []
        regions += [Region(1, 0, width - 1, height), Region(0, 0, 1, height)] if width > 1 else []
        for crop in regions:
            ours = bar.render_lines(crop)
            assert drawn(ours) == drawn(Widget.render_lines(bar, crop)), (bar, crop)
        compared += 1
    return compared


async def test_every_bar_draws_the_lines_textual_draws() -> None:
    app = Bars()
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.pause()
        table, log = app.query_one(CachedCellsTable), app.query_one(ServerLogPanel)
        assert all(type(bar) in (QuickScrollBar, QuickScrollBarCorner) for bar in bars_of(app))
        assert check_every_bar(app) == 6  # two bars and a corner each
        for theme in ("specbench-light", "specbench-high-contrast", "ansi-dark", "specbench-dark"):
            app.theme = theme
            for y, x in ((0, 0), (3, 7), (25, 40), (44, 200), (10**6, 10**6)):  # thumb ends at every eighth
                table.scroll_to(x, y, animate=False)
                log.scroll_to(x / 3, y * 5.3, animate=False)
                await pilot.pause()
                assert check_every_bar(app) == 6, (theme, x, y)
        table.vertical_scrollbar.mouse_over = True
        log.horizontal_scrollbar.grabbed = Offset(1, 0)
        await pilot.pause()
        assert check_every_bar(app) == 6


async def test_a_bar_is_drawn_without_textuals_styles_cache() -> None:
    app = Bars()
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.pause()
        bar = app.query_one(CachedCellsTable).vertical_scrollbar
        assert isinstance(bar, ScrollBar)
        cached: list[Region] = []
        original = bar._styles_cache.render_widget

        def render_widget(widget: Widget, crop: Region) -> Any:
            cached.append(crop)
            return original(widget, crop)

        bar._styles_cache.render_widget = render_widget  # type: ignore[method-assign]
        lines = bar.render_lines(Region(0, 0, *bar.size))
        assert cached == [] and len(lines) == bar.size.height
        # Lines showing the same part of the bar share one strip: the back above the thumb, the thumb...
        assert len({id(line) for line in lines}) <= 5


@pytest.mark.parametrize("thickness", [1, 3])
async def test_a_bar_of_any_thickness(thickness: int) -> None:
    app = Bars()
    async with app.run_test(size=(80, 30)) as pilot:
        log = app.query_one(ServerLogPanel)
        log.styles.scrollbar_size_vertical = thickness
        log.styles.scrollbar_size_horizontal = thickness
        await pilot.pause()
        log.scroll_to(17, 101, animate=False)
        await pilot.pause()
        assert {bar.size.width for bar in (log.vertical_scrollbar,)} == {thickness}
        assert check_every_bar(app) == 6


async def test_a_tinted_bar_takes_textuals_path() -> None:
    app = Bars()
    async with app.run_test(size=(80, 30)) as pilot:
        table = app.query_one(CachedCellsTable)
        bar = table.horizontal_scrollbar
        bar.styles.tint = "red 40%"  # what Textual's styles cache adds: drawn by Textual itself
        table.scroll_to(9, 0, animate=False)
        await pilot.pause()
        assert check_every_bar(app) == 6


async def test_a_screens_background_is_drawn_as_textual_draws_it() -> None:
    app = Bars()
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, Plain)
        for theme in ("specbench-light", "ansi-dark", "specbench-dark"):
            app.theme = theme
            await pilot.pause()
            for crop in (Region(0, 0, 80, 30), Region(3, 2, 40, 7)):
                assert drawn(screen.render_lines(crop)) == drawn(Widget.render_lines(screen, crop)), (theme, crop)
