"""The full-log screen on its own: long logs stay fast, follow mode, filter, crash jump."""

from __future__ import annotations

import time
from pathlib import Path

from textual.app import App
from tui_fakes import SETTLE_TIMEOUT_S, until

from repo_paths import REPO
from specbench_tui.tui.log_file_view import LogFileView
from specbench_tui.tui.log_screen import FullLogScreen


class LogApp(App):
    """Just the full-log screen."""

    CSS_PATH = str(REPO / "specbench_tui" / "tui" / "app.tcss")

    def __init__(self, screen: FullLogScreen) -> None:
        super().__init__()
        self.log_screen = screen

    def on_mount(self) -> None:
        self.push_screen(self.log_screen)


async def wait_indexed(view: LogFileView, pilot, lines: int, timeout: float = SETTLE_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while view.line_count != lines and time.monotonic() < deadline:
        await pilot.pause(0.05)
    assert view.line_count == lines


async def test_long_log_renders_only_visible_lines(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    count = 200_000
    with path.open("w") as handle:
        for i in range(count):
            handle.write(f"[2026-01-01 10:00:00] Decode batch, #running-req: 1, gen throughput (token/s): {i}.00\n")
        handle.write("RuntimeError: CUDA error: an illegal instruction was encountered\n")
        handle.write("tail line without newline")
    # The engine recorded the crash line's text but no line number: c finds it from the end.
    screen = FullLogScreen("big", path,
                           crash_line="RuntimeError: CUDA error: an illegal instruction was encountered")
    app = LogApp(screen)
    async with app.run_test(size=(100, 30)) as pilot:
        view = screen.view
        started = time.process_time()
        await wait_indexed(view, pilot, count + 2)
        # Indexing 200,002 lines is quick: CPU seconds of this process (the UI and the index worker), which a
        # loaded machine does not inflate as it does wall time (wait_indexed bounds the wall time).
        assert time.process_time() - started < 8
        assert len(view._line_cache) < 200  # only what was shown was read
        await pilot.press("c")  # no line number known: the engine's crash text, found from the end
        await pilot.pause()
        assert view.cursor_line == count
        await pilot.press("G")
        await pilot.pause()
        assert view.line_text(count + 1) == "tail line without newline"
        await pilot.press("e")
        await pilot.pause()
        assert view.visible_count == 1
        await pilot.press("slash", *"199999", "enter")
        await pilot.pause()
        # Search and filter compose: the hit is no error line, so it is not found among what is shown.
        assert view.problems_only and view.cursor_line == count
        assert "not among the errors & warnings (1 match in the whole log" in screen.status
        await pilot.press("e")  # every line again: the same search finds it
        await pilot.pause()
        assert not view.problems_only
        await pilot.press("n")
        await pilot.pause()
        assert view.cursor_line == count - 1
        assert len(view._line_cache) < 400


async def test_follow_mode_reads_appended_lines(tmp_path: Path) -> None:
    path = tmp_path / "live.log"
    path.write_text("first\n")
    screen = FullLogScreen("live", path, follow=True)
    app = LogApp(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        view = screen.view
        await wait_indexed(view, pilot, 1)
        with path.open("a") as handle:
            handle.write("".join(f"line {i}\n" for i in range(100)))
        await wait_indexed(view, pilot, 101)
        deadline = time.monotonic() + SETTLE_TIMEOUT_S  # the scroll follows on the next refresh (later when busy)
        while not view.is_vertical_scroll_end and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert view.is_vertical_scroll_end
        await pilot.press("f")
        assert not view.follow
        await app.workers.wait_for_complete()  # a read that the poll started before "f" ends before the write
        with path.open("a") as handle:
            handle.write("not read while not following\n")
        await pilot.pause(0.7)
        assert view.line_count == 101


async def test_a_followed_log_catches_up_with_an_end_that_moved_unless_the_user_scrolled_away(
        tmp_path: Path) -> None:
    """The scroll to the end was taken before the layout caught up with new lines (CI once saw the view stay short
    of its end for good): the next poll catches up; a user who scrolled elsewhere since is left there."""
    path = tmp_path / "live.log"
    path.write_text("".join(f"line {i}\n" for i in range(200)))
    screen = FullLogScreen("live", path, follow=True)
    app = LogApp(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        view = screen.view
        await wait_indexed(view, pilot, 200)
        view.scroll_to(y=view.max_scroll_y - 5, animate=False, immediate=True)
        view._end_y = view.scroll_y  # as if the last scroll to the end had landed short of it
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while not view.is_vertical_scroll_end and time.monotonic() < deadline:
            await pilot.pause(0.05)
        assert view.is_vertical_scroll_end and view.follow
        view.scroll_to(y=10, animate=False, immediate=True)  # the user scrolls up, follow still on
        await pilot.pause(1.2)  # two polls
        assert view.scroll_y == 10


async def test_truncated_file_is_reindexed_and_missing_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "rotating.log"
    path.write_text("a\nb\nc\n")
    screen = FullLogScreen("rotating", path, follow=True)
    app = LogApp(screen)
    async with app.run_test(size=(80, 24)) as pilot:
        view = screen.view
        await wait_indexed(view, pilot, 3)
        path.write_text("new\n")
        await wait_indexed(view, pilot, 1)
        assert view.line_text(0) == "new"
        path.unlink()
        await until(pilot, lambda: view.missing is not None, "the next poll finds the file gone")
        assert view.missing is not None
        assert app.is_running
