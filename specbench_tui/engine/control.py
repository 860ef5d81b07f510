"""The control side of a running sweep: a small command interface used by the TUI, tests and Ctrl-C.

Commands are plain methods on an object implementing :class:`SweepControl`. Each is answered with an
:class:`Outcome`: what the command did (``changed``) and one sentence that says so ("paused the queue",
"already done"). The rule for that answer is :func:`outcome_of`, written once here and applied by the engine
(the orchestrator, on its loop) for every client: a local TUI, an attached one over the control socket, a
browser tab. A command that changes nothing (a skip of a finished configuration, a second ``pause``) is
acknowledged as such: views show the answer instead of guessing, and no notice is added for it.

``pause`` and ``resume`` are two commands, never a toggle: two views pressing ``p`` at once both ask to pause,
and the queue ends paused (the second is answered "already paused").
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from specbench_tui.core.events import ConfigState

COMMANDS = ("pause", "resume", "skip", "retry", "abort")
"""Every command a client may send (the control socket's vocabulary too)."""

RETRYABLE = (ConfigState.CRASHED, ConfigState.FAILED, ConfigState.SKIPPED)


@dataclass(frozen=True)
class Outcome:
    """What a command did: ``changed`` is False for a command that found nothing to do (its ``text`` says why)."""

    command: str
    changed: bool
    text: str
    config_id: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"changed": self.changed, "outcome": self.text}

    @classmethod
    def from_ack(cls, command: str, ack: dict[str, object], config_id: str | None = None) -> Outcome:
        """The outcome an acknowledgement carries (a refused command is one that changed nothing)."""
        if not ack.get("ok"):
            return cls(command, False, f"refused: {ack.get('error') or 'no reason given'}", config_id)
        changed = ack.get("changed")
        text = ack.get("outcome")
        return cls(command, True if changed is None else bool(changed), str(text or command), config_id)


def outcome_of(command: str, *, paused: bool = False, state: ConfigState | None = None, queued: bool = False,
               excluded: str | None = None, name: str = "", config_id: str | None = None) -> Outcome:
    """What ``command`` does now, given the queue (``paused``) and, for ``skip``/``retry``, the configuration's
    ``state``, whether it is ``queued`` to run and whether the sweep file ``excluded`` it (the reason)."""
    if command == "pause":
        return Outcome(command, not paused, "already paused" if paused else "paused the queue")
    if command == "resume":
        return Outcome(command, paused, "resumed the queue" if paused else "not paused")
    if command == "abort":
        return Outcome(command, True, "stopped the sweep")
    who = f"{name} " if name else ""
    if state is None:
        return Outcome(command, False, f"{who}is not in this sweep", config_id)
    if command == "skip":
        if state.final:
            return Outcome(command, False, f"{who}is already {state.value}", config_id)
        return Outcome(command, True, f"skipped {name}".rstrip(), config_id)
    if command == "retry":
        if excluded is not None:
            return Outcome(command, False, f"{who}is excluded by the sweep file ({excluded})", config_id)
        if queued or state not in RETRYABLE:
            return Outcome(command, False, f"{who}is {'queued already' if queued else state.value}", config_id)
        return Outcome(command, True, f"queued {name} again".replace("  ", " "), config_id)
    return Outcome(command, False, f"unknown command {command!r}", config_id)


def answered(outcome: Outcome | None) -> Future[Outcome | None]:
    """A future that already holds ``outcome`` (an engine that answers at once)."""
    future: Future[Outcome | None] = Future()
    future.set_result(outcome)
    return future


Answer = Future["Outcome | None"]
"""What a command returns: the engine's :class:`Outcome`, once it has acted (None: the sweep is over, no answer)."""
OnOutcome = Callable[[Outcome], None]


@runtime_checkable
class SweepControl(Protocol):
    """Requests a user can make of a running sweep; each returns the engine's answer as a future (None: this
    engine sends no answer, and its events alone say what became of the request)."""

    def pause(self) -> Answer | None:
        """Finish the request in flight, then launch nothing new until :meth:`resume` (a no-op when paused)."""

    def resume(self) -> Answer | None:
        """Continue after :meth:`pause` (a no-op when not paused)."""

    def skip(self, config_id: str) -> Answer | None:
        """Skip a pending configuration, or stop the running one and mark it skipped."""

    def retry(self, config_id: str) -> Answer | None:
        """Queue a crashed, failed or skipped configuration again (its completed measurements are kept)."""

    def abort(self, now: bool = False) -> Answer | None:
        """Stop the sweep: after the request in flight (``now=False``) or at once; servers are torn down."""

    @property
    def paused(self) -> bool:
        """Whether the queue is paused."""
