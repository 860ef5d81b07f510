"""The stylesheet keeps the rules it matched for a node's path (``ThemeStylesheet.apply``): every node styled from
them holds exactly what Textual's own matching gives it, whatever the state of the node and of its ancestors.

The counterpart is Textual's own ``Stylesheet``, parsed from the same sources and variables, applied to the same
nodes after the app styled them: the rules must not change."""

from __future__ import annotations

from typing import Any

from tui_fakes import T0, FakeEngine

from textual.app import App, ComposeResult
from textual.color import Color
from textual.containers import Container
from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode
from textual.widget import Widget
from textual.widgets import Input, Label

from specbench_tui.tui.app import SpecbenchApp
from specbench_tui.tui.textual_private import ThemeStylesheet, shown_scrollbars


def styled_nodes(root: DOMNode) -> list[DOMNode]:
    """``root``, every node under it and the scrollbars shown and styled (Textual styles a scrollbar with its
    widget's next restyle after it shows: the palette's list shows one with no rules until then)."""
    nodes: list[DOMNode] = list(root.walk_children(with_self=True))
    for node in list(nodes):
        if isinstance(node, Widget):
            nodes += [bar for bar in shown_scrollbars(node) if bar.styles.base.get_rules()]
    return nodes


def rules_of(node: DOMNode) -> dict[str, str]:
    found = {"": repr(sorted(node.styles.base.get_rules().items()))}
    for component, styles in sorted(node._component_styles.items()):
        found[component] = repr(sorted(styles.get_rules().items()))
    return found


def not_as_textual_would(app: App[Any], *roots: DOMNode) -> list[str]:
    """Each node under ``roots`` whose rules (or a component's) differ from what Textual's own stylesheet gives it.
    Textual's answer is set on the nodes: call this last in a test's app."""
    textual = Stylesheet(variables=app.get_css_variables())
    textual.source = app.stylesheet.source.copy()
    textual.reparse()
    differ = []
    for root in roots:
        for index, node in enumerate(styled_nodes(root)):
            ours = rules_of(node)
            textual.apply(node)
            theirs = rules_of(node)
            differ += [f"{index}:{type(node).__name__}#{node.id}.{part}: {ours.get(part)} != {theirs.get(part)}"
                       for part in ours.keys() | theirs.keys() if ours.get(part) != theirs.get(part)]
    return differ


async def open_palette(pilot: Any, app: SpecbenchApp) -> None:
    await pilot.press("ctrl+p")
    for _ in range(100):
        if app.screen.has_class("-ready"):
            break
        await pilot.pause(0.02)
    assert app.screen.has_class("-ready"), f"the palette did not open: {app.screen}"
    await pilot.pause(0.05)


async def close_to_sweep(pilot: Any, app: SpecbenchApp) -> None:
    for _ in range(5):
        if app.screen is app.sweep_screen:
            return
        await pilot.press("escape")
        await pilot.pause(0.05)
    assert app.screen is app.sweep_screen, f"still on {app.screen}"


async def test_a_palette_opened_again_is_styled_from_the_kept_matches_as_textual_would(tmp_path) -> None:  # noqa: ANN001
    """The palette opened again matches no node again (every one of its ~80 nodes and parts is styled from what
    an opening before matched) and each holds Textual's answer, typed into, with the focus and hover where they
    are, as does the sweep screen under it."""
    app = SpecbenchApp(FakeEngine(tmp_path / "run"), theme="specbench-dark", clock=lambda: T0)
    async with app.run_test(size=(120, 36)) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        sheet = app.stylesheet
        assert isinstance(sheet, ThemeStylesheet)
        for _ in range(2):  # (the palette's CSS may come with the first opening: the rules in use change within it)
            await open_palette(pilot, app)
            await close_to_sweep(pilot, app)
        matched, reused = sheet.paths_matched, sheet.paths_reused
        await open_palette(pilot, app)
        assert sheet.paths_matched == matched, "a node of the palette opened again was matched again"
        assert sheet.paths_reused - reused >= 60
        await pilot.press("t", "h")
        await pilot.hover("CommandList")
        await pilot.pause(0.1)
        assert not_as_textual_would(app, app.screen, app.sweep_screen) == []


async def test_the_sweep_screen_and_its_screens_in_every_state_are_styled_as_textual_would(tmp_path) -> None:  # noqa: ANN001
    """Focus moved between the panels, a panel maximised and back, the log and chart screens opened twice, the
    ANSI theme (its own pseudo-class) and a light one: each node, its scrollbars and its parts as Textual styles
    them."""
    app = SpecbenchApp(FakeEngine(tmp_path / "run"), theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(120, 36)) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        for key in ("tab", "tab", "2", "m", "m", "1"):
            await pilot.press(key)
            await pilot.pause(0.05)
        for key in ("l", "c", "l"):
            await pilot.press(key)
            await pilot.pause(0.2)
            await close_to_sweep(pilot, app)
        app.set_theme("ansi-dark")
        await pilot.pause(0.1)
        await open_palette(pilot, app)
        await close_to_sweep(pilot, app)
        await open_palette(pilot, app)
        await pilot.hover("CommandInput")
        await pilot.pause(0.1)
        assert not_as_textual_would(app, app.screen, app.sweep_screen) == []


class Box(Container):
    can_focus = True


class Boxes(App[None]):
    """Two labels and two inputs on the same paths, under boxes whose class, focus and disabled state change."""

    AUTO_FOCUS = None

    CSS = """
    Label { color: red; }
    .warm Label { color: orange; }
    Box:disabled Label { color: grey; }
    Box:focus Label { text-style: bold; }
    App:light Label { background: white; }
    Box:focus Input > .input--placeholder { color: blue; }
    """

    def compose(self) -> ComposeResult:
        for index in range(2):
            with Box(id=f"box{index}"):
                yield Label("label")
                yield Input(placeholder="type")


def boxes_app() -> Boxes:
    app = Boxes()
    app.stylesheet = ThemeStylesheet.adopt(app.stylesheet)
    return app


async def test_a_change_above_a_node_restyles_it_as_textual_would() -> None:
    """The second box's label and input are styled from the first's matches; then a class added to one box, the
    other disabled, focus on a box, a light theme: each change above the nodes (their own rules look at the
    boxes, not at themselves) gives them Textual's answer, never the one kept for the path before it."""
    app = boxes_app()
    async with app.run_test() as pilot:
        sheet = app.stylesheet
        assert isinstance(sheet, ThemeStylesheet)
        assert sheet.paths_reused > 0
        box0, box1 = app.query_one("#box0"), app.query_one("#box1")
        label0, label1 = box0.query_one(Label), box1.query_one(Label)
        placeholder0 = box0.query_one(Input).get_component_styles

        async def settle() -> None:
            await pilot.pause(0.05)
            assert not_as_textual_would(app, app.screen) == []

        await settle()
        assert label0.styles.color == label1.styles.color == Color.parse("red")
        assert not label0.styles.text_style.bold and not label1.styles.text_style.bold
        box0.add_class("warm")
        await settle()
        assert (label0.styles.color, label1.styles.color) == (Color.parse("orange"), Color.parse("red"))
        box0.focus()
        await settle()
        assert label0.styles.text_style.bold and not label1.styles.text_style.bold
        assert placeholder0("input--placeholder").color == Color.parse("blue")
        box1.focus()
        await settle()
        assert label1.styles.text_style.bold and not label0.styles.text_style.bold
        assert placeholder0("input--placeholder").color != Color.parse("blue")
        box1.disabled = True
        await settle()
        assert label1.styles.color == Color.parse("grey")
        app.theme = "textual-light"
        await settle()
        assert label0.styles.background == label1.styles.background == Color.parse("white")
