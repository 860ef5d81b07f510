"""A theme change takes the theme's stylesheet parsed once (``tui/theme_sheets.py``) and the screen's containers keep
fixed scrollbar colours (``app.tcss``): both must leave every colour where Textual's own restyle puts it.

The reference is Textual itself: an app whose ``refresh_css`` is Textual's (``App.refresh_css``: new variables, a
full parse) started on each theme, against the app that cycled through every theme twice with ``t``; every node's
styles and every component class's, as CSS text, must be the same.
"""

from __future__ import annotations

import re
from pathlib import Path

from repo_paths import REPO
from textual.app import App
from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode
from tui_fakes import T0, FakeEngine, until

import specbench_tui.tui.app as app_module
from specbench_tui.tui.app import SpecbenchApp
from specbench_tui.tui.theme_sheets import ThemeSheets

SHIPPED = ("specbench-dark", "specbench-high-contrast", "specbench-light")


class TextualRestyle(SpecbenchApp):
    """The app with Textual's own restyle: every theme change parses every source with the new variables."""

    CSS_PATH = str(Path(app_module.__file__).with_name("app.tcss"))
    refresh_css = App.refresh_css


def looks(app: SpecbenchApp) -> dict[str, str]:
    """Every node of the sweep screen (toasts aside: which are up differs) and its component classes, as CSS."""
    found: dict[str, str] = {}
    for node in app.sweep_screen.walk_children(with_self=True):
        if type(node).__name__.startswith("Toast"):
            continue
        name = f"{type(node).__name__}#{node.id}"
        found[name] = node.styles.css
        for component in sorted(node.COMPONENT_CLASSES):
            found[f"{name} .{component}"] = node.get_component_styles(component).css
    return found


async def settled_looks(app: SpecbenchApp, size: tuple[int, int], cycle: int = 0) -> dict[str, str]:
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.panels_ready, "the panels")
        await until(pilot, lambda: len(app.theme_sheets) >= len(SHIPPED), "the themes primed")
        for _ in range(cycle):
            await pilot.press("t")
            await pilot.pause()
        await pilot.pause()
        if cycle:
            assert app.theme_sheets.parsed == len(SHIPPED)  # each theme once: the start's, the others primed ahead
        return looks(app)


async def test_every_theme_after_two_rounds_of_t_looks_as_textuals_own_restyle_draws_it(tmp_path: Path) -> None:
    start = "specbench-light"
    cycled: dict[str, dict[str, str]] = {}
    for rounds in range(1, 2 * len(SHIPPED) + 1):
        app = SpecbenchApp(FakeEngine(tmp_path / f"run{rounds}"), theme=start, clock=lambda: T0)
        app.animation_level = "none"
        got = await settled_looks(app, (100, 30), cycle=rounds)
        cycled.setdefault(app.theme, got)
        if rounds > len(SHIPPED):  # the second round: the kept sheets serve again
            assert got == cycled[app.theme], app.theme
    assert set(cycled) == set(SHIPPED)
    for theme in SHIPPED:
        reference = TextualRestyle(FakeEngine(tmp_path / f"ref-{theme}"), theme=theme, clock=lambda: T0)
        reference.animation_level = "none"
        wanted = await settled_looks(reference, (100, 30))
        differ = sorted(name for name in wanted if wanted[name] != cycled[theme].get(name))
        assert not differ, f"{theme}: {differ[:5]} differ from Textual's own restyle"


def sheet(css: str, where: str) -> Stylesheet:
    stylesheet = Stylesheet(variables={"accent": "#ff0000"})
    stylesheet.add_source(css, read_from=(where, ""))
    return stylesheet


def colour_of(stylesheet: Stylesheet, selector: str) -> str:
    return next(rule.styles.css for rule in stylesheet.rules if rule.selectors == selector)


def test_a_kept_sheet_takes_the_sources_registered_since_and_parses_nothing_else() -> None:
    current = sheet("Label { color: $accent; }", "a.tcss")
    sheets = ThemeSheets()
    red = sheets.sheet_for({"accent": "#ff0000"}, current)
    blue = sheets.sheet_for({"accent": "#0000ff"}, red)
    assert sheets.parsed == 2 and red is not blue
    assert "#0000FF" in colour_of(blue, "Label") and "#FF0000" in colour_of(red, "Label")
    blue.add_source("Button { background: $accent; }", read_from=("b.tcss", ""))  # a widget class mounted later
    again = sheets.sheet_for({"accent": "#ff0000"}, blue)
    assert again is red and sheets.parsed == 2
    assert "#FF0000" in colour_of(again, "Button")  # with this sheet's variables, not the one it came from


def test_other_variables_are_another_sheet_and_the_least_recently_used_goes() -> None:
    current = sheet("Label { color: $accent; }", "a.tcss")
    sheets = ThemeSheets(kept=2)
    first = sheets.sheet_for({"accent": "#ff0000"}, current)
    sheets.sheet_for({"accent": "#00ff00"}, current)
    sheets.prime({"accent": "#ff0000"}, current)  # kept: not parsed again, only kept longer
    sheets.sheet_for({"accent": "#0000ff"}, current)
    assert len(sheets) == 2 and sheets.parsed == 3
    assert sheets.sheet_for({"accent": "#ff0000"}, current) is first
    sheets.sheet_for({"accent": "#00ff00"}, current)
    assert sheets.parsed == 4  # it had gone


def pinned_selectors() -> list[str]:
    """The selectors of app.tcss's rule that fixes scrollbar colours."""
    css = (REPO / "specbench_tui" / "tui" / "app.tcss").read_text(encoding="utf-8")
    match = re.search(r"\*/\s*([^{}]+)\{\s*scrollbar-background: #404040;", css)
    assert match, "app.tcss: the rule fixing scrollbar colours is gone; drop this test with it"
    return [selector.strip() for selector in match.group(1).split(",")]


async def test_what_keeps_fixed_scrollbar_colours_never_shows_a_scrollbar(tmp_path: Path) -> None:
    selectors = pinned_selectors()
    assert "SweepScreen" in selectors
    for size in ((60, 16), (80, 24), (100, 30), (160, 48), (240, 70)):
        app = SpecbenchApp(FakeEngine(tmp_path / f"run{size[0]}"), clock=lambda: T0)
        async with app.run_test(size=size) as pilot:
            await until(pilot, lambda app=app: app.panels_ready, "the panels")  # type: ignore[misc]
            await pilot.pause()
            nodes: list[DOMNode] = [app.sweep_screen]
            for selector in selectors:
                nodes += list(app.sweep_screen.query(selector))
            assert len(nodes) >= len(selectors)
            shown = [f"{type(node).__name__}#{node.id}" for node in nodes
                     if node.show_vertical_scrollbar or node.show_horizontal_scrollbar]  # type: ignore[attr-defined]
            assert not shown, f"{size}: {shown} show a scrollbar in fixed colours"
