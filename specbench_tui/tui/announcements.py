"""What must not go unnoticed, whichever panel has focus: one toast per event burst (the app's announcements)."""

from __future__ import annotations

from functools import partial

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
NOTICE_SEVERITIES: dict[str, Severity] = {"error": "error", "warning": "warning"}
"""The toast's severity of a notice's level (any other level is information)."""


def is_quiet(notice: Notice) -> bool:
    """Whether ``notice`` goes to the notice history only: information about one configuration (the engine says
    it for every configuration it launches: caches cold, the server's batch limit, waiting for GPUs)."""
    return notice.level == "info" and notice.config_id is not None



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
        if isinstance(event, CrashDetected):
            self._announce_crash(event)
        elif isinstance(event, ConfigFinished) and event.state in (ConfigState.CRASHED, ConfigState.FAILED):
            self._announce_failed(event)
        elif isinstance(event, MeasurementRecorded):
            self._announce_zero_output(event)
        elif isinstance(event, Notice):
            self._announce_notice(event)
        elif isinstance(event, (QueuePaused, QueueResumed)):
            self._announce_queue(event)
        elif isinstance(event, SweepFinished):
            self._announce_end(event)

    def _crash_key(self, config_id: str) -> tuple[object, ...]:
        view = self.state.configs.get(config_id)
        return ("crash", config_id, view.attempt if view else 0)

    def _announce_crash(self, event: CrashDetected) -> None:
        """One toast per crash, once its excerpt is complete: the most specific signature and the crash's one
        cause, as the queue, the results and the report say them (the first, incomplete event is often a
        generic ``scheduler_exception`` that the trailing lines make specific)."""
        if not event.complete:  # the row reads crashed at once; the toast waits for the final signature
            return
        key = self._crash_key(event.config_id)
        if key in self._announced:
            return
        self._announced.add(key)
        view = self.state.configs.get(event.config_id)
        name = view.name if view else event.config_id
        self.notifier.post(f"{clean(name, 80)} crashed: {clean(event.signature, 80)}\n{clean(event.shown_cause, 300)}",
                           title="✖ Server crashed", severity="error", timeout=15, topic=("config", event.config_id))

    def _announce_failed(self, event: ConfigFinished) -> None:
        """A configuration that ended crashed or failed without a complete crash event announced first: its final
        reason (a crash's is ``signature: cause``, as the queue shows it)."""
        key = self._crash_key(event.config_id)
        if key in self._announced:
            return
        self._announced.add(key)
        detail = event.reason or event.signature or event.state.value
        self.notifier.post(f"{clean(event.name, 80)} {event.state.value}: {clean(detail, 300)}",
                           title=f"✖ Configuration {event.state.value}", severity="error", timeout=15,
                           topic=("config", event.config_id))

    def _announce_zero_output(self, event: MeasurementRecorded) -> None:
        measurement = event.measurement
        if measurement is None or measurement.status != STATUS_ZERO_OUTPUT:
            return
        workload = clean(measurement.workload, 60)
        key = ("zero", event.config_id, workload)
        if key in self._announced:
            return
        self._announced.add(key)
        view = self.state.configs.get(event.config_id)
        name = clean(view.name if view else event.config_id, 80)
        self.notifier.burst(("zero", event.config_id), workload, partial(_zero_output_text, name),
                            title="▲ Zero output", severity="warning")

    def _announce_notice(self, event: Notice) -> None:
        """A warning or an error is a toast; a configuration's own information (its caches' policy, how many
        requests its server runs at once, a port it moved to) is said for every configuration alike and changes
        no decision: it goes to the notice history (``n``) without a toast."""
        key = ("notice", event.level, event.text)
        if key in self._announced:
            return
        self._announced.add(key)
        if event.level == "error" and event.text.startswith("pre-flight: "):
            problem = event.text.removeprefix("pre-flight: ")
            self.preflight_problems.append(problem)
            self.notifier.burst(("preflight",), problem, lambda items: "\n".join(clean(i, 300) for i in items),
                                title="✖ Pre-flight failed", severity="error", timeout=30)
            return
        topic = ("notice", event.config_id, event.level)
        if is_quiet(event):
            self.notifier.record(Entry(self.notifier.clock(), "information", "", clean(event.text, 500), topic))
            return
        self.notifier.post(clean(event.text, 500), severity=NOTICE_SEVERITIES.get(event.level, "information"),
                           timeout=10, topic=topic)

    def record_past_notices(self) -> None:
        """The notices of the sweep's past (an attached or resumed run's history: its start-up notices among them)
        into the notice history, without toasts: ``n`` lists what was said before this screen opened."""
        for event in self.state.notices:
            key = ("notice", event.level, event.text)
            if key in self._announced:
                continue
            self._announced.add(key)
            severity = NOTICE_SEVERITIES.get(event.level, "information")
            self.notifier.record(Entry(event.ts, severity, "", clean(event.text, 500),
                                       ("notice", event.config_id, event.level)))

    def _announce_queue(self, event: QueuePaused | QueueResumed) -> None:
        text = QUEUE_PAUSED if isinstance(event, QueuePaused) else QUEUE_RESUMED
        if self.notifier.is_up(("queue",)):  # the key already said so on screen: only the history takes it
            self.notifier.record(Entry(self.notifier.clock(), "information", "", text, ("queue",)))
        else:
            self.notifier.post(text, timeout=4, topic=("queue",))

    def _announce_end(self, event: SweepFinished) -> None:
        if self.preflight_problems:
            self.notifier.dismiss(("preflight",))
            self.push_screen(PreflightFailedScreen(self.preflight_problems), callback=self._preflight_closed)
            return
        summary = end_summary(self.state, self.partial_ids)
        self.notifier.post(f"Sweep {clean(event.state, 40)}: {summary}; {self.state.measurements} measurements. "
                           "Press q to quit.", title="Sweep finished",
                           severity="information" if event.state == "completed" else "warning", timeout=30,
                           topic=("sweep",))

    def _preflight_closed(self, quit_now: object) -> None:
        if quit_now:
            self.action_request_quit()
