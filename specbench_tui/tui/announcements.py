"""What must not go unnoticed, whichever panel has focus: one toast per event burst (the app's announcements)."""

from __future__ import annotations

from functools import partial
from typing import Any

from specbench_tui.application.viewmodel import end_summary
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    CrashDetected,
    Event,
    MeasurementRecorded,
    Notice,
    QueuePaused,
    QueueResumed,
    SweepFinished,
)
from specbench_tui.core.records import STATUS_ZERO_OUTPUT
from specbench_tui.tui.app_base import AppBase
from specbench_tui.tui.notifier import Entry, Severity
from specbench_tui.tui.preflight_screen import PreflightFailedScreen
from specbench_tui.tui.safe_text import clean

QUEUE_PAUSED = "Queue paused: the request in flight finishes, nothing new is launched (p resumes)."
QUEUE_RESUMED = "Queue resumed."



def _zero_output_text(name: str, workloads: list[str]) -> str:
    """``dflash-b32: zero output on 4 workloads (code, …)``: one sentence for a burst."""
    count = len(workloads)
    shown = ", ".join(workloads[:4]) + (" …" if count > 4 else "")
    noun = "workload" if count == 1 else "workloads"
    return (f"{name}: zero output tokens on {count} {noun} ({shown}). Such requests are flagged and kept out of "
            "the averages.")



class Announcements(AppBase):
    """The app's toasts for engine events (a part of :class:`~specbench_tui.tui.app.SpecbenchApp`)."""

    def _announce(self, event: Event) -> None:
        """Notifications for what must not go unnoticed, whichever panel has focus: one toast per burst."""
        state = self.state
        notifier = self.notifier
        if isinstance(event, CrashDetected):
            view = state.configs.get(event.config_id)
            key: tuple[object, ...] = ("crash", event.config_id, view.attempt if view else 0)
            if key not in self._announced:
                self._announced.add(key)
                name = view.name if view else event.config_id
                notifier.post(f"{clean(name, 80)} crashed: {clean(event.signature, 80)}\n{clean(event.line, 300)}",
                              title="✖ Server crashed", severity="error", timeout=15,
                              topic=("config", event.config_id))
        elif isinstance(event, ConfigFinished) and event.state in (ConfigState.CRASHED, ConfigState.FAILED):
            view = state.configs.get(event.config_id)
            key = ("crash", event.config_id, view.attempt if view else 0)
            if key not in self._announced:
                self._announced.add(key)
                detail = event.signature or event.reason or event.state.value
                notifier.post(f"{clean(event.name, 80)} {event.state.value}: {clean(detail, 300)}",
                              title=f"✖ Configuration {event.state.value}", severity="error", timeout=15,
                              topic=("config", event.config_id))
        elif isinstance(event, MeasurementRecorded):
            measurement = event.measurement
            if measurement is not None and measurement.status == STATUS_ZERO_OUTPUT:
                workload = clean(measurement.workload, 60)
                key = ("zero", event.config_id, workload)
                if key not in self._announced:
                    self._announced.add(key)
                    view = state.configs.get(event.config_id)
                    name = clean(view.name if view else event.config_id, 80)
                    notifier.burst(("zero", event.config_id), workload, partial(_zero_output_text, name),
                                   title="▲ Zero output", severity="warning")
        elif isinstance(event, Notice):
            key = ("notice", event.level, event.text)
            if key not in self._announced:
                self._announced.add(key)
                severities: dict[str, Severity] = {"error": "error", "warning": "warning"}
                severity = severities.get(event.level, "information")
                if event.level == "error" and event.text.startswith("pre-flight: "):
                    self.preflight_problems.append(event.text.removeprefix("pre-flight: "))
                    notifier.burst(("preflight",), event.text.removeprefix("pre-flight: "),
                                   lambda items: "\n".join(clean(i, 300) for i in items),
                                   title="✖ Pre-flight failed", severity="error", timeout=30)
                    return
                notifier.post(clean(event.text, 500), severity=severity, timeout=10,
                              topic=("notice", event.config_id, event.level))
        elif isinstance(event, (QueuePaused, QueueResumed)):
            text = QUEUE_PAUSED if isinstance(event, QueuePaused) else QUEUE_RESUMED
            if notifier.is_up(("queue",)):  # the key already said so on screen: only the history takes it
                notifier.record(Entry(notifier.clock(), "information", "", text, ("queue",)))
            else:
                notifier.post(text, timeout=4, topic=("queue",))
        elif isinstance(event, SweepFinished):
            if self.preflight_problems:
                notifier.dismiss(("preflight",))
                self.push_screen(PreflightFailedScreen(self.preflight_problems), callback=self._preflight_closed)
                return
            summary = end_summary(state, self.partial_ids)
            notifier.post(f"Sweep {clean(event.state, 40)}: {summary}; {state.measurements} measurements. "
                          "Press q to quit.", title="Sweep finished",
                          severity="information" if event.state == "completed" else "warning", timeout=30,
                          topic=("sweep",))

    def _preflight_closed(self, quit_now: Any) -> None:
        if quit_now:
            self.action_request_quit()
