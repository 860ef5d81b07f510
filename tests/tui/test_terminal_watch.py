"""The app's watch on its terminal: a hung-up terminal is seen even where SIGHUP is ignored (``nohup``)."""

from __future__ import annotations

import os
import pty

from specbench_tui.tui.terminal_watch import HangupWatch, hung_up


def test_a_terminal_is_hung_up_once_its_other_side_is_gone() -> None:
    master, slave = pty.openpty()
    try:
        assert not hung_up(slave)
        os.write(master, b"x")  # pending input is not a hang-up
        assert not hung_up(slave)
        os.close(master)
        master = -1
        assert hung_up(slave)
    finally:
        if master >= 0:
            os.close(master)
        os.close(slave)


def test_a_closed_descriptor_counts_as_gone() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    os.close(write_end)
    assert hung_up(read_end)


async def test_an_app_not_drawing_on_a_terminal_is_not_watched() -> None:
    from textual.app import App

    calls: list[str] = []
    app: App[None] = App()
    async with app.run_test():
        watch = HangupWatch(app, on_hangup=lambda: calls.append("hung up"))
        assert watch.start() is False  # headless (tests) and the browser have no terminal to lose
        assert watch.fd is None
    assert calls == []
