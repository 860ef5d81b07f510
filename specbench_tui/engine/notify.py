"""Notification URLs through Apprise (ntfy, Slack, Discord, email, a JSON webhook…): the engine's side of the
alerts of :mod:`specbench_tui.core.alerts`.

Sending never blocks or slows the sweep: the event subscriber only puts an alert on a bounded queue (a full queue
drops it and counts it); one worker thread rate-limits and groups them (:class:`~specbench_tui.core.alerts.AlertGate`)
and sends each to every URL with Apprise's connect and read timeouts and a few retries. A URL that fails is a
notice ("notification to json://… failed after 3 tries; the sweep goes on"), never an exception in the engine.

Secrets: a URL is written in the sweep (or on the command line) with ``${NAME}`` references, expanded here, in the
engine, only to be handed to Apprise. Every message names a URL by its scheme and its place in the list, never by
its text; Apprise's own log (which can print a host or a path) is kept out of the engine's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from specbench_tui.core.alerts import Alert, AlertGate, AlertWatch
from specbench_tui.core.events import Event, Notice, SweepFinished
from specbench_tui.core.sweep.env import expand_env_refs
from specbench_tui.core.sweep.notify_table import NotifySpec

QUEUE_SIZE = 256
"""Alerts waiting for the worker; past it new ones are dropped (and counted in the next notice)."""
TIMEOUT_S = 5.0
"""Apprise's connect and read timeouts (``cto`` / ``rto``) unless the URL sets its own."""
RETRIES = 3
"""Tries per alert and URL."""
BACKOFF_S = 1.0
"""The wait before the second try; doubled before each next one."""
CLOSE_WAIT_S = 20.0
"""After the sweep, how long the engine waits for the last alerts (the end's) to be sent before it leaves."""

Report = Callable[[str, str], None]
"""(level, text): a notice for the user, callable from any thread."""


@dataclass(frozen=True)
class Target:
    """One notification URL: ``url`` as Apprise gets it (secrets expanded), ``shown`` what messages call it."""

    url: str
    shown: str


def targets(written: Iterable[str], environ: Mapping[str, str] | None = None) -> tuple[list[Target], list[str]]:
    """The URLs as written (``${NAME}`` references expanded from ``environ``) that Apprise can send to, and why each
    other one cannot be used (without its text: it may hold a secret)."""
    import apprise  # a second or so of imports, only when a sweep asks for notifications

    found: list[Target] = []
    problems: list[str] = []
    for number, text in enumerate(written, start=1):
        scheme = text.split("://", 1)[0] if "://" in text else "?"
        shown = f"{scheme}://… (notification URL {number})"
        url, missing = expand_env_refs(text, environ)
        if missing:
            problems.append(f"{shown}: ${{{missing[0]}}} is not set in the engine's environment; export "
                            f"{missing[0]}=... before specbench run (the URL is not used)")
            continue
        if apprise.Apprise.instantiate(_with_timeouts(url)) is None:
            problems.append(f"{shown}: not a URL Apprise can send to (a scheme it knows, a host, a token); check it "
                            "with apprise -vv -t test -b test URL (the URL is not used)")
            continue
        found.append(Target(_with_timeouts(url), shown))
    return found, problems


def _with_timeouts(url: str) -> str:
    """``url`` with Apprise's connect and read timeouts set to :data:`TIMEOUT_S` where it sets none."""
    extra = [f"{name}={TIMEOUT_S:g}" for name in ("cto", "rto") if f"{name}=" not in url]
    if not extra:
        return url
    return url + ("&" if "?" in url else "?") + "&".join(extra)


def quiet_apprise_log() -> None:
    """Apprise's log stays out of the engine's (it can name a host, a path, a response body)."""
    log = logging.getLogger("apprise")
    log.propagate = False
    if not any(isinstance(h, logging.NullHandler) for h in log.handlers):
        log.addHandler(logging.NullHandler())


_STOP = object()


class NotificationSender:
    """An event subscriber that sends the sweep's alerts to ``urls`` from a worker thread of its own (one sender
    per URL: a URL that hangs delays no other)."""

    def __init__(self, urls: list[Target], report: Report, *, kinds: Iterable[str], interval_s: float,
                 sweep: str = "sweep", retries: int = RETRIES, backoff_s: float = BACKOFF_S, queue_size: int = QUEUE_SIZE,
                 clock: Callable[[], float] = time.monotonic, send: Callable[[Target, Alert], bool] | None = None
                 ) -> None:
        self.urls = urls
        self.report = report
        self.kinds = frozenset(kinds)
        self.watch = AlertWatch(sweep=sweep)
        self.gate = AlertGate(interval_s)
        self.retries = max(1, retries)
        self.backoff_s = backoff_s
        self.clock = clock
        self.dropped = 0
        """Alerts dropped because the queue was full."""
        self.ended = False
        """The sweep's end was seen (no more events may be published: notices go to the log)."""
        self.sent: list[Alert] = []
        """What was handed to the URLs (sent or given up on), in order."""
        self._send = send or _apprise_send
        self._queue: queue.Queue[Alert | object] = queue.Queue(maxsize=queue_size)
        """Alerts, then :data:`_STOP`."""
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="specbench-notify", daemon=True)

    def start(self) -> NotificationSender:
        quiet_apprise_log()
        self._thread.start()
        return self

    def __call__(self, event: Event) -> None:
        """The subscriber: alerts of ``event`` queued, never waited for."""
        if isinstance(event, SweepFinished):
            self.ended = True
        for alert in self.watch(event):
            if alert.kind in self.kinds:
                try:
                    self._queue.put_nowait(alert)
                except queue.Full:
                    self.dropped += 1

    def close(self, timeout_s: float | None = None) -> bool:
        """Send what is held, then stop; waits at most ``timeout_s`` (default :data:`CLOSE_WAIT_S`; True: everything
        was handed over)."""
        self.stop_soon()
        return self.join(time.monotonic() + (CLOSE_WAIT_S if timeout_s is None else timeout_s))

    def stop_soon(self) -> None:
        """Ask the worker to send what is held and stop (without waiting)."""
        try:
            self._queue.put_nowait(_STOP)
        except queue.Full:
            self._stopping.set()

    def join(self, deadline: float) -> bool:
        """Wait for the worker until ``deadline`` (monotonic); past it the retries left are given up."""
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            self._stopping.set()  # the retries left are given up; the thread is a daemon
            return False
        return True

    def _run(self) -> None:
        while True:
            due = self.gate.next_due()
            wait = None if due is None else max(0.0, due - self.clock())
            try:
                item = self._queue.get(timeout=wait)
            except queue.Empty:
                item = None
            if item is _STOP:
                self._deliver(self.gate.flush())
                return
            now = self.clock()
            out = self.gate.offer(item, now) if isinstance(item, Alert) else []
            self._deliver([*out, *self.gate.due(now)])

    def _deliver(self, alerts: list[Alert]) -> None:
        if self.dropped and alerts:
            self.report("warning", f"{self.dropped} notifications were dropped: alerts came faster than they could "
                        "be sent")
            self.dropped = 0
        for alert in alerts:
            self.sent.append(alert)
            for target in self.urls:
                self._one(target, alert)

    def _one(self, target: Target, alert: Alert) -> None:
        for attempt in range(self.retries):
            if self._stopping.is_set():
                return
            try:
                if self._send(target, alert):
                    return
            except Exception:  # noqa: BLE001 - a plugin's bug is a failed send, never the engine's end
                pass
            if attempt + 1 < self.retries:
                self._stopping.wait(self.backoff_s * 2 ** attempt)
        self.report("warning", f"{target.shown} failed after {self.retries} tries "
                    f"({alert.title}); the sweep goes on")


def _apprise_send(target: Target, alert: Alert) -> bool:
    import apprise

    kind = {"error": apprise.NotifyType.FAILURE, "warning": apprise.NotifyType.WARNING}.get(
        alert.level, apprise.NotifyType.INFO)
    sender = apprise.Apprise()
    if not sender.add(target.url):
        return False
    return bool(sender.notify(body=alert.body, title=alert.title, notify_type=kind))


def open_notifications(spec: NotifySpec, extra_urls: Iterable[str], publish: Callable[[Event], None],
                       subscribe: Callable[[Callable[[Event], None]], object], sweep: str = "sweep"
                       ) -> Senders | None:
    """The sweep's sender, started and subscribed to the orchestrator's events (None: no URL asked for, or none
    usable; each unusable one said in a notice). Call from the engine's event loop: the sender's notices are
    published on it; once the sweep ended they go to standard error (the engine's log)."""
    written = [*spec.urls, *extra_urls]
    if not written:
        return None
    found, problems = targets(written)
    for problem in problems:
        publish(Notice(level="warning", text=f"notifications: {problem}"))
    if not found:
        return None
    loop = asyncio.get_running_loop()

    def report(level: str, text: str) -> None:
        if loop.is_running() and not senders.ended:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(publish, Notice(level=level, text=f"notifications: {text}"))
                return
        print(f"specbench: notifications: {text}", file=sys.stderr, flush=True)

    senders = Senders([NotificationSender([target], report, kinds=spec.on, interval_s=spec.min_interval_s,
                                          sweep=sweep).start()
                       for target in found])
    subscribe(senders)
    return senders


class Senders:
    """One :class:`NotificationSender` per URL behind one subscriber."""

    def __init__(self, senders: list[NotificationSender]) -> None:
        self.senders = senders

    @property
    def ended(self) -> bool:
        return all(sender.ended for sender in self.senders)

    def __call__(self, event: Event) -> None:
        for sender in self.senders:
            sender(event)

    def close(self, timeout_s: float | None = None) -> bool:
        """Every sender's last alerts, within one shared ``timeout_s`` (default :data:`CLOSE_WAIT_S`)."""
        deadline = time.monotonic() + (CLOSE_WAIT_S if timeout_s is None else timeout_s)
        for sender in self.senders:
            sender.stop_soon()
        joined = [sender.join(deadline) for sender in self.senders]  # each waited for, none skipped
        return all(joined)
