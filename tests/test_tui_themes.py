"""Theme files: the shipped ones load, a broken one is reported once and never fatal."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from narrowing import present
from tui_fakes import DEMO_SWEEP, T0, FakeEngine, until

from specbench_tui.core.plan import Plan, build_plan
from specbench_tui.core.sweep.loader import parse_sweep

from specbench_tui.tui.app import SpecbenchApp
from specbench_tui.tui.palette import Palette
from specbench_tui.tui.results_panel import ResultsPanel
from specbench_tui.tui.textual_private import notifications_of
from specbench_tui.tui.themes import DEFAULT_THEME, load_themes


def near(triplet, expected: tuple[int, int, int]) -> bool:
    return all(abs(a - b) <= 2 for a, b in zip(tuple(triplet), expected))


SHIPPED = {"specbench-dark", "specbench-light", "specbench-high-contrast"}


def test_shipped_themes_load_without_problems() -> None:
    themes, problems = load_themes()
    assert problems == []
    assert {t.name for t in themes} >= SHIPPED
    light = next(t for t in themes if t.name == "specbench-light")
    assert light.dark is False


def test_broken_files_are_reported_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "good.toml").write_text('name = "good"\nprimary = "#123456"\n')
    (tmp_path / "syntax.toml").write_text('name = "oops\n')
    (tmp_path / "colour.toml").write_text('name = "c"\nprimary = "not-a-colour"\n')
    (tmp_path / "unknown.toml").write_text('name = "u"\nprimary = "#fff"\nprimray = "#000"\n')
    (tmp_path / "noname.toml").write_text('primary = "#fff"\n')
    (tmp_path / "dup.toml").write_text('name = "good"\nprimary = "#000"\n')
    (tmp_path / "binary.toml").write_bytes(b"\xff\xfe\x00")
    themes, problems = load_themes(tmp_path)
    assert [t.name for t in themes] == ["good"]
    assert len(problems) == 6
    joined = "\n".join(problems)
    for fragment in ("syntax.toml", "not a colour", "primray", "'name'", "already used", "binary.toml"):
        assert fragment in joined


def test_missing_folder_is_not_fatal(tmp_path: Path) -> None:
    themes, problems = load_themes(tmp_path / "nope")
    assert themes == [] and problems == []


async def test_app_reports_bad_theme_once_and_falls_back(tmp_path: Path) -> None:
    themes_dir = tmp_path / "themes"
    themes_dir.mkdir()
    (themes_dir / "broken.toml").write_text("name = [")
    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, theme="no-such-theme", themes_dir=themes_dir, clock=lambda: T0)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await pilot.pause()
        errors = [n for n in notifications_of(app) if n.severity == "error"]
        assert len(errors) == 1
        assert "broken.toml" in errors[0].message and "no-such-theme" in errors[0].message
        assert app.theme == "textual-dark"
        await pilot.press("t")  # nothing loaded: stays usable
        assert app.is_running


async def test_theme_choice_and_palette_follow_theme(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.theme == "specbench-light"
        light = app.palette
        assert light == Palette.from_variables(app.get_css_variables())
        assert near(present(light.crash.color).triplet, (0xC4, 0x16, 0x1C))
        app.set_theme(DEFAULT_THEME)
        await pilot.pause()
        assert app.palette.crash != light.crash
        assert near(present(app.palette.zero_output.color).triplet, (0xFF, 0xC4, 0x4D))


async def test_textual_ansi_theme_keeps_the_app_up_with_the_terminals_own_colours(tmp_path: Path) -> None:
    """Textual's ANSI themes (offered by the palette's theme picker) name colours ``ansi_red``, which Rich does not
    parse: the app died on them. Crashes now take the terminal's own red (Rich's ``color(1)``)."""
    from rich.color import Color as RichColor

    app = SpecbenchApp(FakeEngine(tmp_path / "run"), theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 30)) as pilot:
        app.set_theme("ansi-dark")
        await pilot.pause(0.1)
        assert app.is_running and app.theme == "ansi-dark"
        assert app.get_css_variables()["error"].startswith("ansi_")
        crash = present(app.palette.crash.color)
        assert crash.name == "color(1)" and crash.number == 1
    assert Palette.from_variables({"error": "ansi_bright_red"}).crash.color == RichColor.parse("color(9)")


def twelve_configurations() -> Plan:
    """The demo's plan with ten DDTree budgets: twelve queue rows, half of them off screen at 100x24."""
    budgets = "budget = [8, 12, 15, 16, 24, 32, 48, 64, 96, 128], tp = [1]"
    return build_plan(parse_sweep(DEMO_SWEEP.replace("budget = [8, 16, 32], tp = [1]", budgets), Path("demo.toml")))


async def test_a_theme_change_recolours_every_queue_row_on_screen_and_off(tmp_path: Path) -> None:
    from specbench_tui.tui.queue_panel import QueuePanel, state_style

    engine = FakeEngine(tmp_path / "run", plan=twelve_configurations())
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 24)) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        await pilot.pause()
        queue = app.sweep_screen.query_one(QueuePanel)
        assert queue.row_count > queue.size.height + 2  # rows off screen
        app.set_theme(DEFAULT_THEME)
        await until(pilot, lambda: queue._restyle.pending == 0, "the off-screen rows are restyled")
        for row in queue.ordered_rows:
            state_cell = queue.get_cell(row.key, "state")
            assert state_cell.style == state_style(state_cell.plain, app.palette), row.key.value


async def test_the_rows_off_screen_are_restyled_after_the_theme_keys_frame(tmp_path: Path, monkeypatch) -> None:
    """A slice of the restyle (rows off screen, 5-15 ms each on a slow core) waits for the key's answer: with
    slices every millisecond, the new theme's first frame still comes before any of them, and they all follow."""
    import specbench_tui.tui.textual_private as private
    from specbench_tui.tui.queue_panel import QueuePanel

    monkeypatch.setattr(private, "SLICE_INTERVAL_S", 0.001)
    events: list[object] = []
    original = private.SlicedRestyle._slice

    def recorded(restyle: private.SlicedRestyle) -> None:
        before = restyle.pending
        original(restyle)
        if restyle.pending < before:
            events.append("slice")

    monkeypatch.setattr(private.SlicedRestyle, "_slice", recorded)
    engine = FakeEngine(tmp_path / "run", plan=twelve_configurations())
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 24), notifications=True) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        await pilot.pause(0.4)
        queue = app.sweep_screen.query_one(QueuePanel)
        assert queue.row_count > queue.size.height + 2  # rows off screen
        record_frames(app, monkeypatch, lambda _: events.append(("frame", app.theme)))
        await pilot.press("t")
        await until(pilot, lambda: "slice" in events and queue._restyle.pending == 0, "the off-screen rows restyled")
        assert events.index("slice") > events.index(("frame", app.theme)), events[:8]


def record_frames(app: SpecbenchApp, monkeypatch, describe: Callable[[set[str]], Any]) -> list[Any]:  # noqa: ANN001
    """From now on, ``describe(toast messages up)`` of every frame the app writes outside a batch."""
    from specbench_tui.tui.textual_private import DISPLAY_METHOD, Toast, batch_depth, toast_notification

    frames: list[Any] = []
    display = getattr(app, DISPLAY_METHOD)

    def recorded(screen, renderable) -> None:  # noqa: ANN001
        if renderable is not None and not batch_depth(app):
            messages = {n.message for t in app.query(Toast) if t.is_mounted and (n := toast_notification(t))}
            frames.append(describe(messages))
        display(screen, renderable)

    monkeypatch.setattr(app, DISPLAY_METHOD, recorded)
    return frames


async def test_t_draws_the_new_theme_and_its_toast_in_one_frame(tmp_path: Path, monkeypatch) -> None:
    """``t``: no frame is drawn in the new theme without its toast (the toast used to come a full frame later)."""
    from specbench_tui.tui.textual_private import batch_depth

    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)

    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        await pilot.pause(0.1)
        frames = record_frames(app, monkeypatch, lambda messages: (app.theme, f"Theme: {app.theme}" in messages))
        for _ in range(3):
            frames.clear()
            await pilot.press("t")
            # the new theme's first frame (its CSS parsed and the screen drawn: late on a loaded box), then a few more
            await until(pilot, lambda: any(theme == app.theme for theme, _ in frames), "a frame in the new theme")
            await pilot.pause(0.2)
            themed = [shown for theme, shown in frames if theme == app.theme]
            assert themed and all(themed), (app.theme, frames)
            assert batch_depth(app) == 0


async def test_p_and_o_draw_their_change_and_its_toast_in_one_frame(tmp_path: Path, monkeypatch) -> None:
    """``p`` and ``o``: the frame that first shows the paused header (or the new sort) carries the key's toast
    (it came one or two frames, 16-50 ms, later while Textual mounted it). The toast's mount is made to take
    20 ms here, as it does beside a log flood on a busy box, so that a frame can come before it."""
    from specbench_tui.tui.textual_private import ToastRack, batch_depth

    show = ToastRack.show

    def slow_show(self, notifications) -> None:  # noqa: ANN001
        self.set_timer(0.02, lambda: show(self, notifications))

    monkeypatch.setattr(ToastRack, "show", slow_show)

    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)

    def describe(messages: set[str]) -> tuple[bool, str, bool]:
        sort = app.sweep_screen.query_one(ResultsPanel).sort_label()
        answer = any(m.startswith(("Queue paused", f"Results sorted by {sort}")) for m in messages)
        return app.paused_shown, sort, answer

    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        engine.play_until_running()
        while not app.panels_ready:
            await pilot.pause(0.02)
        await pilot.pause(0.1)
        frames = record_frames(app, monkeypatch, describe)
        await pilot.press("p")
        await until(pilot, lambda: any(paused for paused, _, _ in frames), "a frame with the queue paused")
        assert next(answer for paused, _, answer in frames if paused), frames
        await pilot.pause(0.2)
        sort = frames[-1][1]
        frames.clear()
        await pilot.press("o")
        await until(pilot, lambda: any(label != sort for _, label, _ in frames), "a frame in the new sort")
        assert next(answer for _, label, answer in frames if label != sort), frames
        assert batch_depth(app) == 0


def answer_toasts(app: SpecbenchApp) -> list[Any]:
    from specbench_tui.tui.textual_private import Toast

    return [toast for toast in app.screen.query(Toast) if toast.is_mounted]


async def test_keys_answers_share_one_toast_written_in_place_whose_time_starts_over(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """While a key's answer is up, the next key's answer is written into the same toast: no toast is mounted and
    the screen is not laid out again (a mount lays out the whole screen and draws the toast a frame later), and
    the toast stays for its own time from the new answer on."""
    import time

    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        first = time.monotonic()
        await pilot.press("t")  # its answer stays 3 s
        await until(pilot, lambda: len(answer_toasts(app)) == 1, "the theme's toast")
        toast = answer_toasts(app)[0]
        await pilot.pause(0.2)
        layouts: list[bool] = []
        refresh = toast.refresh

        def counted(*args: Any, layout: bool = False, **kwargs: Any) -> Any:
            layouts.append(layout)
            return refresh(*args, layout=layout, **kwargs)

        monkeypatch.setattr(toast, "refresh", counted)
        for key, said in (("t", "Theme: specbench-high-contrast"), ("o", "Results sorted by"), ("p", "Queue paused")):
            layouts.clear()
            await pilot.press(key)
            await pilot.pause(0.05)
            assert answer_toasts(app) == [toast], key
            assert str(toast.render()).startswith(said), key
            if key == "o":  # (a theme's new borders lay every widget out again; p's answer takes two lines)
                assert layouts and not any(layouts), key  # drawn again, not laid out: the same height
        last = time.monotonic()  # "Queue paused" stays 4 s from now
        await pilot.pause(max(0.0, first + 3.3 - time.monotonic()))
        assert answer_toasts(app) == [toast]  # past the first answer's 3 s
        await until(pilot, lambda: not answer_toasts(app), "the answer's toast gone", timeout=8)
        assert time.monotonic() - last >= 3.7  # (4 s from the answer, just before "last")
        await pilot.press("t")
        await until(pilot, lambda: len(answer_toasts(app)) == 1, "a new toast once the last one is gone")
        assert answer_toasts(app)[0] is not toast


async def test_an_answer_longer_than_the_toast_lays_it_out_again(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        app.notifier.answer("short", topic=("one",))
        await until(pilot, lambda: len(answer_toasts(app)) == 1, "the first answer's toast")
        await pilot.pause(0.1)
        toast = answer_toasts(app)[0]
        height = toast.size.height
        app.notifier.answer(" ".join(["a long answer"] * 12), topic=("two",))
        await pilot.pause(0.2)
        assert answer_toasts(app) == [toast]
        assert toast.size.height > height
        app.notifier.answer("short again", topic=("one",))
        await pilot.pause(0.2)
        assert answer_toasts(app) == [toast] and toast.size.height == height


async def test_a_theme_seen_before_reuses_its_parsed_css_which_equals_a_fresh_parse(tmp_path: Path) -> None:
    from textual.css.stylesheet import Stylesheet

    from specbench_tui.tui.textual_private import ThemeStylesheet

    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 30)) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        sheet = app.stylesheet
        assert isinstance(sheet, ThemeStylesheet)
        cycle = ("specbench-dark", "specbench-high-contrast", "specbench-light")
        for name in cycle:  # the first round parses each theme (and any widget CSS that came with a screen)
            app.set_theme(name)
            await pilot.pause(0.05)
        reused = sheet.reused
        for name in cycle:
            app.set_theme(name)
            await pilot.pause(0.05)
            fresh = Stylesheet(variables=app.get_css_variables())
            fresh.source = sheet.source.copy()
            fresh.reparse()
            assert [(r.selectors, repr(sorted(r.styles.get_rules().items()))) for r in sheet.rules] == [
                (r.selectors, repr(sorted(r.styles.get_rules().items()))) for r in fresh.rules], name
        assert sheet.reused == reused + 3  # Textual still parses through reparse() on a theme change, and the cache answers
        light = app.screen.styles.background  # the kept rules are applied, not just kept
        app.set_theme("specbench-dark")
        await pilot.pause(0.05)
        assert app.screen.styles.background != light
        app.set_theme("specbench-light")
        await pilot.pause(0.05)
        assert app.screen.styles.background == light


async def test_every_theme_is_parsed_ahead_so_the_first_t_to_it_reuses_its_css(tmp_path: Path, monkeypatch) -> None:
    import specbench_tui.tui.app as app_module

    monkeypatch.setattr(app_module, "PRIME_THEMES_AFTER_S", 0.01)
    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 30)) as pilot:
        while len(app._primed_themes) < len(app.specbench_themes):
            await pilot.pause(0.05)
        await pilot.pause(0.05)
        sheet = app.stylesheet
        reused = sheet.reused  # type: ignore[attr-defined]
        for name in ("specbench-dark", "specbench-high-contrast"):
            app.set_theme(name)
            await pilot.pause(0.05)
        assert sheet.reused == reused + 2  # type: ignore[attr-defined]


async def test_a_node_restyled_by_a_theme_change_has_the_rules_of_a_node_started_in_that_theme(tmp_path: Path) -> None:
    """The stylesheet translates each node's rules into the new theme's and sets only those that change: after
    light -> dark -> high contrast every node of the sweep screen, its scrollbars and its component styles hold
    exactly the rules of an app started in high contrast (a rule left behind, one not set, or one translated from
    the wrong rule set would differ). Nearly every node is translated, not matched again."""
    from textual.dom import DOMNode
    from textual.widget import Widget

    from specbench_tui.tui.textual_private import ThemeStylesheet, shown_scrollbars

    def rules_of(app: SpecbenchApp) -> dict[str, str]:
        found: dict[str, str] = {}
        nodes: list[DOMNode] = list(app.sweep_screen.walk_children(with_self=True))
        for node in list(nodes):  # the scrollbars shown (Textual styles a hidden one when it comes)
            if isinstance(node, Widget):
                nodes += shown_scrollbars(node)
        for index, node in enumerate(nodes):
            name = f"{index}:{type(node).__name__}#{node.id}"
            found[name] = repr(sorted(node.styles.base.get_rules().items()))
            for component, styles in sorted(node._component_styles.items()):
                found[f"{name}.{component}"] = repr(sorted(styles.get_rules().items()))
        return found

    seen = []
    for start, changes in (("specbench-light", ("specbench-dark", "specbench-high-contrast")),
                           ("specbench-high-contrast", ())):
        app = SpecbenchApp(FakeEngine(tmp_path / start), theme=start, clock=lambda: T0)
        async with app.run_test(size=(100, 30)) as pilot:
            while not app.panels_ready:
                await pilot.pause(0.02)
            app.set_focus(None)
            sheet = app.stylesheet
            assert isinstance(sheet, ThemeStylesheet)
            for name in changes:
                translated, matched = sheet.translated, sheet.matched
                app.set_theme(name)
                await pilot.pause(0.05)
                assert sheet.translated - translated >= 15 and sheet.matched - matched <= 3
            await pilot.pause(0.05)
            seen.append(rules_of(app))
    changed, started = seen
    assert len(changed) > 20 and changed.keys() == started.keys()
    assert [name for name in changed if changed[name] != started[name]] == []


async def test_the_themes_are_parsed_again_ahead_once_the_css_sources_change(tmp_path: Path) -> None:
    """Opening the chart screen adds its CSS: the themes parsed ahead before are for other sources. They are
    parsed again once keys pause (not between keys pressed in a row), so the next ``t`` still reuses a parse and
    translates the nodes."""
    from specbench_tui.tui.textual_private import ThemeStylesheet

    app = SpecbenchApp(FakeEngine(tmp_path / "run"), theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 30)) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        sheet = app.stylesheet
        assert isinstance(sheet, ThemeStylesheet)
        await until(pilot, lambda: len(app._primed_themes) >= len(app.specbench_themes), "the themes parsed ahead")
        before = sheet.sources_version
        await pilot.press("c")
        await pilot.pause(0.2)
        await pilot.press("escape")
        await until(pilot, lambda: sheet.sources_version > before, "the chart screen's CSS added")
        version = sheet.sources_version
        for _ in range(4):  # keys in a row, 1 s apart: the parse waits (10-30 ms a theme in one piece)
            await pilot.press("o")
            await pilot.pause(1.0)
            assert not any(primed == version for _, primed in app._primed_themes)
        await until(pilot, lambda: {(name, version) for name in app.specbench_themes} <= app._primed_themes
                    and app._restyled_for_sources == version, "the themes parsed again ahead", timeout=6.0)
        reused, translated, matched = sheet.reused, sheet.translated, sheet.matched
        app.set_theme("specbench-dark")
        await pilot.pause(0.1)
        assert sheet.reused > reused
        assert sheet.translated - translated >= 15 and sheet.matched - matched <= 3


async def test_the_palettes_css_is_added_at_idle_time_as_its_first_opening_adds_it(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    """The palette's CSS is added to the stylesheet ahead, at idle time, as Textual's own first opening of it adds
    it (the same sources in the same order), and the themes are parsed ahead for it: the first ``ctrl+p``
    parses nothing and changes no source."""
    import specbench_tui.tui.app as app_module
    from specbench_tui.tui.textual_private import ThemeStylesheet

    def sources_after(app: SpecbenchApp) -> list[object]:
        return list(app.stylesheet.source)

    monkeypatch.setattr(app_module, "PRIME_THEMES_AFTER_S", 3600.0)  # Textual's own: nothing added ahead
    textual = SpecbenchApp(FakeEngine(tmp_path / "textual"), theme="specbench-light", clock=lambda: T0)
    async with textual.run_test(size=(100, 30)) as pilot:
        while not textual.panels_ready:
            await pilot.pause(0.02)
        before = sources_after(textual)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: textual.screen.has_class("-ready"), "the palette open")
        opened = sources_after(textual)
    assert len(opened) > len(before)

    monkeypatch.setattr(app_module, "PRIME_THEMES_AFTER_S", 0.01)
    app = SpecbenchApp(FakeEngine(tmp_path / "ahead"), theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 30)) as pilot:
        sheet = app.stylesheet
        assert isinstance(sheet, ThemeStylesheet)
        await until(pilot, lambda: app._restyled_for_sources == sheet.sources_version
                    and len(app._primed_themes) >= len(app.specbench_themes), "the themes parsed ahead")
        assert sources_after(app) == opened
        version, parsed = sheet.sources_version, sheet.reused
        await pilot.press("ctrl+p")
        await until(pilot, lambda: app.screen.has_class("-ready"), "the palette open")
        assert sources_after(app) == opened and sheet.sources_version == version and sheet.reused == parsed


async def test_a_themes_css_variables_are_generated_once(tmp_path: Path, monkeypatch) -> None:
    """Textual generates a theme's colour system on every read of the CSS variables (twice per ``t``); the app
    keeps each theme's: a second round of the themes generates none, and each round gives the same variables."""
    from textual.design import ColorSystem

    generated: list[object] = []
    generate = ColorSystem.generate

    def counted(system: ColorSystem) -> dict[str, str]:
        generated.append(system)
        return generate(system)

    app = SpecbenchApp(FakeEngine(tmp_path / "run"), theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 30)) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        monkeypatch.setattr(ColorSystem, "generate", counted)
        rounds, counts = [], []
        for _ in range(2):
            seen = {}
            for name in sorted(SHIPPED):
                app.set_theme(name)
                await pilot.pause(0.05)
                seen[name] = app.get_css_variables()
            rounds.append(seen)
            counts.append(len(generated))
            generated.clear()
        assert counts[0] <= len(SHIPPED) and counts[1] == 0, counts
        assert rounds[0] == rounds[1] and rounds[0]["specbench-light"] != rounds[0]["specbench-dark"]


def test_two_rules_equal_in_one_theme_and_not_in_another_translate_each_to_its_own() -> None:
    """The parser gives two rule sets one colour object when their values are equal (a colour parsed once); a
    kept parse gives each its own, so that a rule set's value in one theme is translated to that same rule set's
    value in another, not to whichever rule set shared the object. Where an object is still shared by rule sets
    that part ways, nothing is translated (Textual matches the node again)."""
    from textual.color import Color
    from textual.dom import DOMNode

    from specbench_tui.tui.textual_private import ThemeStylesheet, Translation

    css = "Foo { background: $one; color: $one; } Bar { background: $two; }"
    same = {"one": "#102030", "two": "#102030"}
    apart = {"one": "#102030", "two": "#405060"}
    sheet = ThemeStylesheet(variables=same)
    sheet.add_source(css, read_from=("test", "css"))
    sheet.parse()
    sheet.prime(apart)
    (first, rules), (second, _) = sheet._kept.values()
    foo, bar = rules
    translation = sheet._translation(first, second)
    assert translation is not None
    node = DOMNode()
    assert translation.rules(node, {"background": foo.styles._rules["background"]}) == {
        "background": Color.parse("#102030")}
    assert translation.rules(node, {"background": bar.styles._rules["background"]}) == {
        "background": Color.parse("#405060")}

    shared = foo.styles._rules["background"]  # one object for both rule sets, as the parser leaves it
    bar.styles._rules["background"] = shared
    second_rules = next(kept for serial, kept in sheet._kept.values() if serial == second)
    assert Translation(rules, second_rules, frozenset()).rules(node, {"background": shared}) is None


async def test_applying_a_theme_asks_every_node_to_refresh_once_and_repaints_every_panel(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    """Applying a theme sets every colour rule of every node, and each rule asked its node to refresh: ~500
    requests per ``t``. The stylesheet collects them and asks each node once, with a relayout if any rule wanted
    one; every panel is still repainted with the new theme."""
    from collections import Counter

    from textual.widget import Widget

    from specbench_tui.tui.textual_private import ThemeStylesheet

    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)
    asked: Counter[Widget] = Counter()
    applying = [False]
    update, refresh = ThemeStylesheet.update, Widget.refresh

    def tracked_update(self: ThemeStylesheet, root, animate: bool = False) -> None:  # noqa: ANN001
        applying[0] = True
        try:
            update(self, root, animate)
        finally:
            applying[0] = False

    def counted_refresh(self: Widget, *regions, **options) -> Widget:
        if applying[0]:
            asked[self] += 1
        return refresh(self, *regions, **options)

    async with app.run_test(size=(100, 24)) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        await pilot.pause()
        monkeypatch.setattr(ThemeStylesheet, "update", tracked_update)
        monkeypatch.setattr(Widget, "refresh", counted_refresh)
        app.set_theme(DEFAULT_THEME)
        await pilot.pause()
        panels = [widget for widget in app.sweep_screen.walk_children(Widget) if widget.id and "panel" in widget.id]
        # every panel is asked to repaint, once
        assert panels and all(asked[panel] == 1 for panel in panels), {w.id: asked[w] for w in panels}
        screen = app.sweep_screen
        assert max(count for widget, count in asked.items() if widget is not screen) == 1
        assert asked[screen] <= 2  # its own request, and the app's (the app repaints through its screen)


async def test_the_palette_and_the_dialogs_hide_the_sweep_screen_instead_of_tinting_it(tmp_path: Path) -> None:
    """A translucent screen renders and tints the whole sweep screen under it on every frame (the log flood makes
    four a second): 0.15 core of the UI thread with the quit dialog open, 0.03 opaque. Opaque in every theme."""
    from textual.command import CommandPalette

    from specbench_tui.tui.confirm_quit import ConfirmQuitScreen
    from specbench_tui.tui.detach_screen import DetachOrStopScreen
    from specbench_tui.tui.preflight_screen import PreflightFailedScreen

    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 30)) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        for theme in ("specbench-light", "specbench-dark", "specbench-high-contrast"):
            app.set_theme(theme)
            for screen in (ConfirmQuitScreen(["ar"]), DetachOrStopScreen(1, None), PreflightFailedScreen(["x"]),
                           CommandPalette()):
                await app.push_screen(screen)
                await pilot.pause()
                assert app.screen is screen and screen.styles.background.a == 1, (theme, screen)
                app.pop_screen()
                await pilot.pause()
