"""Theme files: the shipped ones load, a broken one is reported once and never fatal."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from narrowing import present
from tui_fakes import DEMO_SWEEP, T0, FakeEngine, same_look, until

from specbench_tui.core.plan import Plan, build_plan
from specbench_tui.core.sweep.loader import parse_sweep

from specbench_tui.tui.app import SpecbenchApp
from specbench_tui.tui.palette import Palette
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
        errors = [n for n in app.notifier.on_screen() if n.severity == "error"]
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
        if "ansi-dark" not in app.available_themes:
            pytest.skip("this Textual has no ANSI themes (8.2 has)")
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
    """The rows are records of text and meaning: a theme change rebuilds none of them, and every row, on screen or
    off, is drawn in the new theme's colours (each mark resolved from the theme when drawn)."""
    from specbench_tui.application.rows import Mark
    from specbench_tui.tui.queue_panel import QueuePanel

    engine = FakeEngine(tmp_path / "run", plan=twelve_configurations())
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 24)) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        engine.play_until_running()
        app.drain_events()
        await pilot.pause()
        queue = app.sweep_screen.query_one(QueuePanel)
        assert queue.row_count > queue.size.height + 2  # rows off screen
        rows = queue.rows
        looks = {Mark.CRASHED: "crash", Mark.ZERO_OUT: "zero_output", Mark.ACTIVE: "accent", Mark.DONE: "success"}
        marks = {row.key: row.cells[2].mark for row in rows}
        assert {Mark.CRASHED, Mark.ACTIVE} <= set(marks.values())
        for theme in (DEFAULT_THEME, "specbench-high-contrast"):
            app.set_theme(theme)
            await pilot.pause()
            assert all(new is old for new, old in zip(queue.rows, rows, strict=True))
            for key, mark in marks.items():
                if mark in looks and key != queue.cursor_key:  # (the cursor row is drawn in the cursor's looks)
                    wanted = getattr(app.palette, looks[mark])
                    assert same_look(queue.drawn_style(key, "state"), wanted), (theme, key, mark)


def answer_toasts(app: SpecbenchApp) -> list[Any]:
    """The mounted toasts of the current screen (Textual's own, found by their type's name)."""
    return [toast for toast in app.screen.query("Toast") if toast.is_mounted]


async def test_keys_answers_share_one_toast(tmp_path: Path) -> None:
    """A key's answer takes the place of the last key's answer: keys pressed in a row leave one answer up, the
    newest, and the history keeps none of them (each key's effect is on screen)."""
    engine = FakeEngine(tmp_path / "run")
    app = SpecbenchApp(engine, theme="specbench-light", clock=lambda: T0)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        history = len(app.notifier.history)
        for key, said in (("t", "Theme: "), ("o", "Results sorted by"), ("p", "Queue paused")):
            await pilot.press(key)
            def alone(said: str = said) -> bool:
                shown = [n.message for n in app.notifier.on_screen()]
                return len(shown) == 1 and shown[0].startswith(said) and len(answer_toasts(app)) == 1

            await until(pilot, alone, f"{key}'s answer alone on screen")
        assert len(app.notifier.history) == history


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
