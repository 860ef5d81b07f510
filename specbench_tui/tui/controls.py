"""The keys that steer the sweep: pause, skip and retry, shown at once and confirmed by the engine."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

from specbench_tui.core.events import ConfigState
from specbench_tui.tui.announcements import QUEUE_PAUSED, QUEUE_RESUMED
from specbench_tui.tui.app_base import AppBase
from specbench_tui.tui.safe_text import clean


class ControlActions(AppBase):
    """Control keys of :class:`~specbench_tui.tui.app.SpecbenchApp` (optimistic: the row changes before the
    engine answers)."""

    def _control(self, request: Callable[[], None]) -> None:
        """Send a control request now, or as soon as the sweep has started (earlier ones would be lost)."""
        if self.state.started_at is None:
            self._pending_controls.append(request)
            self._hint("The sweep is still starting: the request is sent once it runs.", "information")
        else:
            request()

    def _show_asked(self, config_id: str, shown_state: str, note: str) -> None:
        """Show at once what a key asked of ``config_id`` (the engine confirms it with its own event)."""
        self.optimistic[config_id] = (shown_state, note, time.monotonic())
        if self._panels_attached():
            self._queue_panel().sync(self.state, False, self.optimistic, self.pause_requested, self.partial_ids)
            self._header().refresh()

    @property
    def paused_shown(self) -> bool:
        """Whether the header shows the queue paused (what ``p`` asked for, until the engine answers)."""
        return self.state.paused if self.pause_requested is None else self.pause_requested

    def _refuse_read_only(self) -> bool:
        """A view opened without control says so instead of acting."""
        if getattr(self.engine, "read_only", False):
            self._hint("This view is read-only (serve it with --control to steer the sweep).")
            return True
        return False

    def action_toggle_pause(self) -> None:
        """Pause or resume: the header and a toast say so at once; the engine confirms with its event."""
        if self._refuse_read_only():
            return
        if self.state.outcome is not None:
            self._hint("The sweep has ended: there is no queue to pause.")
            return
        pause = not self.paused_shown
        self.pause_requested = pause
        self._control(self.engine.pause if pause else self.engine.resume)
        self.notifier.post(QUEUE_PAUSED if pause else QUEUE_RESUMED, timeout=4, topic=("queue",), record=False)
        if self._panels_attached():
            self._queue_panel().sync(self.state, False, self.optimistic, self.pause_requested, self.partial_ids)
            self._header().refresh()

    def skip_config(self, config_id: str) -> None:
        """Skip ``config_id``: a pending one is dropped, a running one stopped; the row says so at once."""
        view = self.state.configs.get(config_id)
        if view is None or self._refuse_read_only():
            return
        asked = self.optimistic.get(config_id)
        if asked is not None and asked[0] == ConfigState.SKIPPED.value:
            self._hint(f"{clean(view.name, 80)} is being skipped already.", "information")
            return
        if view.state.final:
            self._hint(f"{clean(view.name, 80)} is already {view.state.value}.")
            return
        self._control(partial(self.engine.skip, config_id))
        note = "skipped by you: stopping its server…" if view.state.active else "skipped by you"
        self._show_asked(config_id, ConfigState.SKIPPED.value, note)

    def retry_config(self, config_id: str) -> None:
        """Queue a crashed, failed or skipped configuration again (not one the sweep file excludes)."""
        view = self.state.configs.get(config_id)
        if view is None or self._refuse_read_only():
            return
        planned = next((c for c in self.engine.plan.configs if c.id == config_id), None)
        if planned is not None and planned.skip_reason:
            self.notifier.post(f"{clean(view.name, 80)} cannot run: the sweep file excludes it "
                               f"({clean(planned.skip_reason, 200)}). Remove or narrow that exclude rule in "
                               f"{clean(self.engine.plan.sweep.shown_path, 200)} and start a new run.",
                               title="Excluded by the sweep", severity="warning", timeout=10,
                               topic=("control", config_id))
            return
        asked = self.optimistic.get(config_id)
        if asked is not None and asked[0] == ConfigState.PENDING.value:
            self._hint(f"{clean(view.name, 80)} is queued again already.", "information")
            return
        if view.state not in (ConfigState.CRASHED, ConfigState.FAILED, ConfigState.SKIPPED):
            self._hint(f"{clean(view.name, 80)} is {view.state.value}: only crashed, failed or skipped "
                       "configurations can be retried.")
            return
        self._control(partial(self.engine.retry, config_id))
        self._show_asked(config_id, ConfigState.PENDING.value, "queued again")

    def action_skip_selected(self) -> None:
        view = self.selected_config()
        if view is None:
            self._hint("Select a configuration in the queue first.")
            return
        self.skip_config(view.config_id)

    def action_skip_running(self) -> None:
        active = [v for v in self.state.active()
                  if self.optimistic.get(v.config_id, ("",))[0] != ConfigState.SKIPPED.value]
        if not active:
            self._hint("No configuration is running.")
            return
        selected = self.selected_config()
        target = selected if selected is not None and selected in active else active[0]
        self.skip_config(target.config_id)

    def action_retry_selected(self) -> None:
        view = self.selected_config()
        if view is None:
            self._hint("Select a configuration in the queue first.")
            return
        self.retry_config(view.config_id)
