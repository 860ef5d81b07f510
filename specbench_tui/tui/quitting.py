"""Quitting: ask while servers run, Ctrl-C twice aborts, an attached client detaches or stops the sweep."""

from __future__ import annotations

from typing import Any

from textual.events import Resize
from textual.screen import Screen

from specbench_tui.tui.app_base import AppBase
from specbench_tui.tui.confirm_quit import ConfirmQuitScreen
from specbench_tui.tui.detach_screen import DETACH, STOP, DetachOrStopScreen


class QuitActions(AppBase):
    """Quit keys of :class:`~specbench_tui.tui.app.SpecbenchApp`."""

    def action_request_quit(self) -> None:
        """Quit; while servers run, ask first, then stop the sweep and tear them down."""
        if self._quitting:
            self._hint("Still stopping the servers…", "information")
            return
        if self.attached:
            self._ask_detach()
            return
        running = [v.name for v in self.state.active()]
        if running and self.state.outcome is None:
            if any(isinstance(s, ConfirmQuitScreen) for s in self.screen_stack):
                return
            self.push_screen(ConfirmQuitScreen(running), callback=self._quit_answered)
        else:
            self.shut_down()

    def action_interrupt(self) -> None:
        """Ctrl-C: the first asks (as q does) while servers run; a second one, in that dialog, quits."""
        confirm = next((s for s in self.screen_stack if isinstance(s, ConfirmQuitScreen)), None)
        if confirm is not None:
            confirm.dismiss(True)
            return
        detach = next((s for s in self.screen_stack if isinstance(s, DetachOrStopScreen)), None)
        if detach is not None:  # a client's second Ctrl-C leaves; it never stops a sweep others may watch
            detach.dismiss(DETACH)
            return
        self.action_request_quit()

    def get_system_commands(self, screen: Screen[Any]) -> Any:
        """No Textual system commands: the palette holds the app's own (quit asks first, themes are ours)."""
        return iter(())

    def on_resize(self, event: Resize) -> None:
        """A maximised panel is restored when the terminal changes size (the layout it was chosen for is gone)."""
        size = (event.size.width, event.size.height)
        if self._screen_size is not None and size != self._screen_size:
            try:
                screen = self.sweep_screen
            except LookupError:
                screen = None
            if screen is not None and screen.maximized_panel is not None:
                screen.restore_panels()
        self._screen_size = size

    def _ask_detach(self) -> None:
        """An attached client: once the sweep has ended it just leaves; before, it asks detach or stop."""
        if self.state.outcome is not None:
            self.leave()
            return
        if not any(isinstance(s, DetachOrStopScreen) for s in self.screen_stack):
            self.push_screen(DetachOrStopScreen(len(self.state.active()), self.engine.engine_pid,
                                                read_only=self.engine.read_only),
                             callback=self._detach_answered)

    def _detach_answered(self, answer: object) -> None:
        if answer == DETACH:
            self.leave()
        elif answer == STOP:
            self.shut_down()

    def leave(self) -> None:
        """Detach from the engine process (the sweep goes on) and exit."""
        self.detached = self.state.outcome is None
        self.engine.detach()
        self.engine_stopped = True
        self.exit(0)

    def _quit_answered(self, confirmed: object) -> None:
        if confirmed:
            self.shut_down()

    def shut_down(self) -> None:
        """Stop the engine in a worker (the screen keeps drawing) and exit when it is done."""
        if self._quitting:
            return
        self._quitting = True
        if self.state.active():
            self.notifier.post("Stopping the sweep and tearing the servers down…", title="Quitting", timeout=60,
                               topic=("quit",))
        self._stop_engine(self.state.outcome is None)

