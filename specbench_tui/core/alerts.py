"""Alerts: the few events of a sweep that should call a person who is not looking at the screen, and the rule
that keeps them few.

:class:`AlertWatch` reads the event stream and says an :class:`Alert` on a crash, a stall, a configuration that
produced no output, a pre-flight stop, a paused queue with nothing left running (it waits for a person) and the
sweep's end. :class:`AlertGate` rate-limits them per kind: the first of a kind goes at once, the next ones within
``interval_s`` are held and then sent as one ("3 more crashes: a, b, c"); the pre-flight stop and the end go at
once, after whatever was held. Both are pure (the clock is passed in): the engine's notification sender
(:mod:`specbench_tui.engine.notify`) and every attached terminal (bell and desktop notification) use them alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from specbench_tui.core.safetext import printable
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    Event,
    QueuePaused,
    QueueResumed,
    SweepFinished,
    SweepStarted,
    WorkloadFinished,
)

CRASH: Final = "crash"
STALL: Final = "stall"
ZERO_OUTPUT: Final = "zero_output"
PREFLIGHT: Final = "preflight"
PAUSED: Final = "paused"
END: Final = "end"
KINDS: Final = (CRASH, STALL, ZERO_OUTPUT, PREFLIGHT, PAUSED, END)
"""Every kind of alert, in the order the documentation lists them (``[notify] on`` picks among them)."""
UNGATED: Final = (PREFLIGHT, END)
"""Kinds that are never held: each happens once per sweep."""
DEFAULT_INTERVAL_S: Final = 300.0
"""``[notify] min_interval_s``: after an alert of a kind, how long the next ones of that kind are held."""
_PLURAL: Final = {CRASH: "crashes or failures", STALL: "stalls", ZERO_OUTPUT: "zero-output configurations",
                  PAUSED: "pauses"}
_SINGULAR: Final = {CRASH: "crash or failure", STALL: "stall", ZERO_OUTPUT: "zero-output configuration",
                    PAUSED: "pause"}
NAMES_SHOWN: Final = 5
"""A grouped alert names this many configurations, then counts the rest."""


@dataclass(frozen=True)
class Alert:
    """One thing to tell a person: a short title and a one-line body (no secrets, no log excerpt)."""

    kind: str
    title: str
    body: str
    level: str = "warning"
    """``error``, ``warning`` or ``info`` (how urgent; Apprise's notification type follows it)."""
    subject: str | None = None
    """The configuration it is about, if any (a grouped alert names its subjects)."""


@dataclass
class AlertWatch:
    """Turns events into alerts; one per configuration and reason, never one per request."""

    sweep: str = "sweep"
    active: set[str] = field(default_factory=set)
    zero: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per configuration, (requests with zero output, requests measured) over its workloads so far."""
    paused: bool = False
    paused_said: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    """Final states seen this sweep, by state name (for the end's line)."""

    def __call__(self, event: Event) -> list[Alert]:
        if isinstance(event, SweepStarted):
            self.sweep = event.sweep
        elif isinstance(event, ConfigStateChanged):
            self._state(event)
        elif isinstance(event, WorkloadFinished):
            zero, measured = self.zero.get(event.config_id, (0, 0))
            self.zero[event.config_id] = (zero + event.zero_output, measured + event.measured)
        elif isinstance(event, ConfigFinished):
            self.active.discard(event.config_id)
            return [*self._finished(event), *self._waiting()]
        elif isinstance(event, QueuePaused | QueueResumed):
            self.paused = isinstance(event, QueuePaused)
            self.paused_said = False
            return self._waiting()
        elif isinstance(event, SweepFinished):
            return [self._end(event)]
        return []

    def _state(self, event: ConfigStateChanged) -> None:
        if event.state.active:
            self.active.add(event.config_id)
        else:
            self.active.discard(event.config_id)

    def _finished(self, event: ConfigFinished) -> list[Alert]:
        self.counts[event.state.value] = self.counts.get(event.state.value, 0) + 1
        reason = _one_line(event.reason or "")
        if event.state == ConfigState.FAILED and reason.startswith("stalled"):
            return [Alert(STALL, f"specbench: {event.name} stalled", f"{self.sweep}: {event.name} {reason}",
                          "error", event.name)]
        if event.state in (ConfigState.CRASHED, ConfigState.FAILED):
            verb = event.state.value
            return [Alert(CRASH, f"specbench: {event.name} {verb}",
                          f"{self.sweep}: {event.name} {verb}" + (f": {reason}" if reason else ""), "error",
                          event.name)]
        zero, measured = self.zero.pop(event.config_id, (0, 0))
        if event.state == ConfigState.DONE and zero:
            return [Alert(ZERO_OUTPUT, f"specbench: {event.name} returned no tokens",
                          f"{self.sweep}: {event.name}: zero output on {zero} of {measured} requests", "warning",
                          event.name)]
        return []

    def _waiting(self) -> list[Alert]:
        """The queue is paused and nothing runs any more: the sweep waits for a person (said once per pause)."""
        if not self.paused or self.active or self.paused_said:
            return []
        self.paused_said = True
        return [Alert(PAUSED, "specbench: queue paused", f"{self.sweep}: the queue is paused and nothing runs: "
                      "it waits for you (specbench attach, then p to resume)", "warning")]

    def _end(self, event: SweepFinished) -> Alert:
        reason = _one_line(event.reason or "")
        if event.state == "failed" and reason.startswith("pre-flight"):
            return Alert(PREFLIGHT, "specbench: pre-flight stopped the sweep", f"{self.sweep}: {reason}", "error")
        done = ", ".join(f"{n} {state}" for state, n in sorted(self.counts.items())) or "nothing ran"
        level = "info" if event.state == "completed" and not self.counts.get("crashed") else "warning"
        return Alert(END, f"specbench: sweep {event.state}",
                     f"{self.sweep}: sweep {event.state} ({done})" + (f": {reason}" if reason else ""), level)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


@dataclass
class AlertGate:
    """Per-kind rate limit with grouping. :meth:`offer` says what goes now; :meth:`due` what a closed window
    releases (call it now and then: :meth:`next_due` says when); :meth:`flush` everything held."""

    interval_s: float = DEFAULT_INTERVAL_S
    last_sent: dict[str, float] = field(default_factory=dict)
    held: dict[str, list[Alert]] = field(default_factory=dict)

    def offer(self, alert: Alert, now: float) -> list[Alert]:
        if alert.kind in UNGATED:
            return [*self.flush(), alert]
        last = self.last_sent.get(alert.kind)
        if last is None or (now - last >= self.interval_s and not self.held.get(alert.kind)):
            self.last_sent[alert.kind] = now
            return [alert]
        self.held.setdefault(alert.kind, []).append(alert)
        return self.due(now)

    def due(self, now: float) -> list[Alert]:
        out: list[Alert] = []
        for kind in [k for k, held in self.held.items() if held]:
            if now - self.last_sent.get(kind, now) >= self.interval_s:
                self.last_sent[kind] = now
                out.append(grouped(self.held.pop(kind)))
        return out

    def next_due(self) -> float | None:
        """When the earliest held group may go (None: nothing held)."""
        times = [self.last_sent.get(k, 0.0) + self.interval_s for k, held in self.held.items() if held]
        return min(times) if times else None

    def flush(self) -> list[Alert]:
        out = [grouped(held) for held in self.held.values() if held]
        self.held.clear()
        return out


def grouped(alerts: Iterable[Alert]) -> Alert:
    """Held alerts of one kind as one: "3 more crashes or failures: a, b, c" (one alone is sent as itself)."""
    items = list(alerts)
    if len(items) == 1:
        return items[0]
    kind = items[0].kind
    names = [a.subject for a in items if a.subject]
    shown = ", ".join(dict.fromkeys(names[:NAMES_SHOWN])) + (f" and {len(names) - NAMES_SHOWN} more"
                                                            if len(names) > NAMES_SHOWN else "")
    what = _PLURAL.get(kind, kind) if len(items) > 1 else _SINGULAR.get(kind, kind)
    title = f"specbench: {len(items)} more {what}"
    body = f"{len(items)} more {what}" + (f": {shown}" if shown else "") + " (the notices screen, key n, has each)"
    level = "error" if any(a.level == "error" for a in items) else items[0].level
    return Alert(kind, title, body, level)


TERMINAL_LIMIT: Final = 200
"""The most characters of a title or body put in a terminal's desktop notification."""


def terminal_sequences(alert: Alert, *, tmux: bool = False) -> str:
    """What a terminal is sent for ``alert``: the bell, then a desktop notification as OSC 9 (iTerm2, WezTerm,
    Windows Terminal, kitty, Ghostty) and OSC 777 (rxvt's notify: foot, WezTerm, Ghostty, VTE terminals). Both
    travel over SSH to the user's own terminal; terminals that know neither ignore them. Control characters of the
    text are escaped (a crash reason is a server's log line) and ``;`` in the title becomes ``,`` (OSC 777 splits on
    it). Inside tmux (``tmux``) each notification is wrapped for tmux's passthrough (``allow-passthrough on``)."""
    title = printable(alert.title, TERMINAL_LIMIT).replace(";", ",")
    body = printable(alert.body, TERMINAL_LIMIT)
    notifications = [f"\x1b]9;{title}: {body}\x07", f"\x1b]777;notify;{title};{body}\x07"]
    if tmux:
        notifications = ["\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\" for seq in notifications]
    return "\x07" + "".join(notifications)
