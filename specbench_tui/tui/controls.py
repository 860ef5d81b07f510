"""The keys that steer the sweep: pause, skip and retry, shown at once and answered by the engine.

Every command returns the engine's :class:`~specbench_tui.engine.control.Outcome` (a future): a command that
found nothing to do ("already done", "already paused") takes back what the row showed at once and says the
engine's answer, instead of showing "skipped" until a timeout. Whether a key can do anything is decided by the
engine's own rule (:func:`~specbench_tui.engine.control.outcome_of`), here applied to what the screen shows so
that a key that cannot act is answered at once without a round trip.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial

from specbench_tui.application.viewmodel import excluded_hint
from specbench_tui.core.events import ConfigState
from specbench_tui.engine.control import Outcome, outcome_of
from specbench_tui.tui.announcements import QUEUE_PAUSED, QUEUE_RESUMED
from specbench_tui.tui.app_base import AppBase
from specbench_tui.tui.safe_text import clean

Request = Callable[[], object]


class ControlActions(AppBase):
    """Control keys of :class:`~specbench_tui.tui.app.SpecbenchApp` (optimistic: the row changes before the
    engine answers)."""

    def _control(self, request: Request) -> None:
        """Send a control request now, or as soon as the sweep has started (earlier ones would be lost)."""
        if self.state.started_at is None:
            self._pending_controls.append(partial(self._send, request))
            self._hint("The sweep is still starting: the request is sent once it runs.", "information")
        else:
            self._send(request)

    def _send(self, request: Request) -> None:
        """Send ``request``; the engine's answer comes back through :meth:`outcome_arrived` (any thread)."""
        answer = request()
        if isinstance(answer, Future):
            answer.add_done_callback(self._answer_done)

    def _answer_done(self, answer: Future[Outcome | None]) -> None:
        """Called in whichever thread completed ``answer``: only enqueue (drained with the events)."""
        if answer.cancelled():
            return
        error = answer.exception()
        if error is not None:
            self._answers.put(Outcome("command", False, f"refused: {error}"))
            return
        outcome = answer.result()
        if isinstance(outcome, Outcome):
            self._answers.put(outcome)

    def answered(self, outcome: Outcome) -> bool:
        """The engine's answer to a command (on the UI thread): one that changed nothing takes back what the
        screen showed at once and says the engine's reason; returns whether the queue panel needs a sync."""
        if outcome.changed:
            return False
        if outcome.command in ("pause", "resume"):
            self.pause_requested = None
        elif outcome.config_id is not None:
            self.optimistic.pop(outcome.config_id, None)
        self._hint(f"Nothing to do: {clean(outcome.text, 300)}.", "information")
        return True

    def _show_asked(self, config_id: str, shown_state: str, note: str) -> None:
        """Show at once what a key asked of ``config_id`` (the engine confirms it with its own event)."""
        self.optimistic[config_id] = (shown_state, note, time.monotonic())
        if self._panels_attached():
            self._show_view()

    @property
    def paused_shown(self) -> bool:
        """Whether the header shows the queue paused (what ``p`` asked for, until the engine answers)."""
        return self.view.paused

    @property
    def can_steer(self) -> bool:
        """Whether pause, skip and retry can act: a view with control on a sweep that has not ended (else the key
        bar and the palette leave them out; pressed anyway, they say why)."""
        return not self.engine.read_only and self.state.outcome is None

    def _refuse_read_only(self) -> bool:
        """A view opened without control says so instead of acting."""
        if self.engine.read_only:
            self._hint("This view is read-only (serve it with --control to steer the sweep).")
            return True
        return False

    def action_toggle_pause(self) -> None:
        """Pause or resume: the header and a toast say so at once; the engine confirms with its event. The key
        sends ``pause`` or ``resume`` (never a toggle), so two views pressing it at once end paused."""
        if self._refuse_read_only():
            return
        if self.state.outcome is not None:
            self._hint("The sweep has ended: there is no queue to pause.")
            return
        pause = not self.paused_shown
        self.pause_requested = pause
        self._control(self.engine.pause if pause else self.engine.resume)
        self.notifier.answer(QUEUE_PAUSED if pause else QUEUE_RESUMED, timeout=4, topic=("queue",))
        if self._panels_attached():
            self._show_view()

    def _local_outcome(self, command: str, config_id: str) -> Outcome:
        """What the engine would answer ``command`` of ``config_id``, from what this view knows now."""
        view = self.state.configs.get(config_id)
        planned = next((c for c in self.engine.plan.configs if c.id == config_id), None)
        return outcome_of(command, state=view.state if view else None, name=clean(view.name if view else config_id,
                                                                                     80),
                          excluded=planned.skip_reason if planned is not None else None, config_id=config_id)

    def acts(self, command: str, config_id: str) -> bool:
        """Whether ``command`` (skip, retry) of ``config_id`` would change anything now: what the palette offers."""
        return self._local_outcome(command, config_id).changed

    def skip_config(self, config_id: str) -> None:
        """Skip ``config_id``: a pending one is dropped, a running one stopped; the row says so at once."""
        view = self.state.configs.get(config_id)
        if view is None or self._refuse_read_only():
            return
        asked = self.optimistic.get(config_id)
        if asked is not None and asked[0] == ConfigState.SKIPPED.value:
            self._hint(f"{clean(view.name, 80)} is being skipped already.", "information")
            return
        outcome = self._local_outcome("skip", config_id)
        if not outcome.changed:
            self._hint(f"{clean(outcome.text, 200)}.")
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
            self.notifier.post(excluded_hint(self.engine.plan, planned), title="Excluded by the sweep",
                               severity="warning", timeout=10, topic=("control", config_id))
            return
        asked = self.optimistic.get(config_id)
        if asked is not None and asked[0] == ConfigState.PENDING.value:
            self._hint(f"{clean(view.name, 80)} is queued again already.", "information")
            return
        outcome = self._local_outcome("retry", config_id)
        if not outcome.changed:
            self._hint(f"{clean(outcome.text, 200)}: only crashed, failed or skipped configurations can be retried.")
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
