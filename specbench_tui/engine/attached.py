"""A client attached to an engine process: the run's past from its run directory, then the live stream.

:class:`AttachedEngine` is what the TUI, ``specbench logs --follow`` and ``specbench stop`` hold instead of an
engine of their own. It connects to the run directory's control socket
(:mod:`specbench_tui.engine.control_socket`), reads exactly the bytes of the run's event and result records
the engine had written when the client joined (:meth:`history`, the ledger's fold), then hands every streamed
event to its subscribers from a reader thread. Control requests are sent at once and acknowledged by the
engine; a refusal comes back as a warning notice. It has the TUI's ``EngineAdapter`` surface, so the app
neither knows nor cares whether the engine runs in its own process.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future
import getpass
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from specbench_tui.core.events import Event, Notice, QueuePaused, QueueResumed, SweepFinished, \
    event_from_json
from specbench_tui.core.records import Measurement
from specbench_tui.rundir import load_plan
from specbench_tui.rundir.checkpoint import attach_fold
from specbench_tui.engine.control import Answer, Outcome
from specbench_tui.engine.control_socket import PROTOCOL, encode, hello, short_path, socket_path, version_mismatch

if TYPE_CHECKING:
    from specbench_tui.core.plan import Plan

CONNECT_TIMEOUT_S = 10.0


class AttachError(Exception):
    """No engine to attach to (none listening, or it refused us); the message says why and what to do."""


def client_name(kind: str = "terminal") -> str:
    """How other clients see this one in their notices: ``alice on pts/3 (pid 4242)``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid {os.getuid()}"
    where = kind
    with contextlib.suppress(OSError):
        if os.isatty(0):
            where = os.ttyname(0).removeprefix("/dev/")
    return f"{user} on {where} (pid {os.getpid()})"


def history_of(run_dir: Path, events_bytes: int | None, results_bytes: int | None) \
        -> tuple[list[Measurement], list[Event]]:
    """What the run directory held up to those byte counts (None: all): measurements (the last per key) from
    the results file, the measurements' truth, and the other events (their copies in the events file, most of
    its bytes in older run directories, are passed over unparsed). Folded in one pass, in large reads
    (:class:`~specbench_tui.rundir.history.RunFold`); a line cut at the byte count is left out."""
    fold = attach_fold(run_dir, events_bytes, results_bytes)
    return fold.measurements(), fold.events


def connect(run_dir: Path, role: str, name: str,
            timeout: float = CONNECT_TIMEOUT_S) -> tuple[socket.socket, BinaryIO, dict[str, object]]:
    """A connected, welcomed socket (with its line reader and the welcome), or :class:`AttachError`."""
    path = socket_path(run_dir)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        with short_path(path) as where:
            sock.connect(where)
    except FileNotFoundError:
        sock.close()
        raise AttachError(f"no engine is running in {run_dir} (no {path.name})") from None
    except ConnectionRefusedError:
        sock.close()
        raise AttachError(f"no engine is listening in {run_dir} ({path.name} is left from an engine that is gone)") \
            from None
    except PermissionError:
        sock.close()
        raise AttachError(f"permission denied: {path} belongs to another user") from None
    except OSError as exc:
        sock.close()
        raise AttachError(f"cannot reach the engine of {run_dir}: {exc.strerror or exc}") from None
    reader = sock.makefile("rb")
    try:
        sock.sendall(encode(hello(role, name)))
        line = reader.readline(1 << 20)
    except OSError as exc:
        sock.close()
        raise AttachError(f"the engine of {run_dir} did not answer: {exc}") from None
    try:
        welcome = json.loads(line) if line else {}
    except ValueError:
        welcome = {}
    if not isinstance(welcome, dict) or "welcome" not in welcome:
        sock.close()
        reason = welcome.get("refused") if isinstance(welcome, dict) else None
        raise AttachError(f"the engine of {run_dir} refused this client: {reason or 'no answer'}")
    if welcome.get("protocol") != PROTOCOL:
        sock.close()
        raise AttachError(version_mismatch(welcome.get("protocol"), welcome.get("version"), we_are="client"))
    sock.settimeout(None)
    return sock, reader, welcome


def engine_status(run_dir: Path, timeout: float = 3.0) -> dict[str, Any]:
    """What a live engine says of itself (``ps``); :class:`AttachError` when none answers."""
    sock, reader, welcome = connect(run_dir, "status", client_name("ps"), timeout)
    with contextlib.closing(sock), contextlib.closing(reader):
        return dict(_status(welcome), pid=welcome.get("pid"))


def _status(welcome: Mapping[str, object]) -> dict[str, object]:
    """The welcome's ``status`` object (empty when it has none)."""
    status = welcome.get("status")
    return status if isinstance(status, dict) else {}


def _count(value: object) -> int:
    """A byte count of the welcome (0 when it has none)."""
    return int(value) if isinstance(value, int | float) else 0


class AttachedEngine:
    """The TUI's engine adapter for an engine in another process (see the module's docstring)."""

    def __init__(self, run_dir: Path, *, role: str = "control", name: str | None = None,
                 with_plan: bool = True) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.live = True
        """The engine that writes the run directory runs (the app keeps the running configurations' GPUs)."""
        self._waiting: dict[int, tuple[Answer, str, str | None]] = {}
        """Commands sent and not yet acknowledged: their futures, by id."""
        self.read_only = role != "control"
        """Whether control requests are refused (a browser view opened without ``--control``)."""
        if with_plan:  # the sweep's plan, rebuilt from the run directory's sweep file: its engine must load here
            self.plan: Plan = load_plan(self.run_dir)  # (specbench stop needs none: a plugin's sweep stops without it)
        self._sock, self._reader, self.welcome = connect(self.run_dir, role, name or client_name())
        pid = self.welcome.get("pid")
        self.engine_pid: int | None = pid if isinstance(pid, int) else None
        self._paused = bool(_status(self.welcome).get("paused"))
        self.events_bytes = _count(self.welcome.get("events_bytes"))
        """Bytes of the events file written before this client joined the stream (the rest comes streamed)."""
        self._results_bytes = _count(self.welcome.get("results_bytes"))
        self._subscribers: list[Callable[[Event], None]] = []
        self._send_lock = threading.Lock()
        self._ids = 0
        self._thread = threading.Thread(target=self._read, name="specbench-attached", daemon=True)
        self.closed = threading.Event()
        """Set when the engine closed the connection (it ended) or the client detached."""
        self.finished = False
        """Whether the engine said the sweep finished."""
        self.detached = False
        self.acks: list[dict[str, object]] = []
        """Every acknowledgement received (tests and ``specbench stop`` read them)."""

    # -- the past ---------------------------------------------------------------------------------------------

    def history(self) -> tuple[list[Measurement], list[Event]]:
        """What the run directory held when this client joined the stream (no more, no less)."""
        return history_of(self.run_dir, self.events_bytes, self._results_bytes)

    # -- the live stream ---------------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[Event], None]) -> None:
        self._subscribers.append(callback)

    def start(self) -> None:
        if not self._thread.is_alive() and not self.closed.is_set():
            self._thread.start()

    def _publish(self, event: Event) -> None:
        for subscriber in list(self._subscribers):
            with contextlib.suppress(Exception):
                subscriber(event)

    def _read(self) -> None:
        try:
            while True:
                line = self._reader.readline(1 << 24)
                if not line:
                    break
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(message, dict):
                    continue
                if "event" in message:
                    try:
                        event = event_from_json(message["event"])
                    except (ValueError, TypeError):
                        continue
                    if isinstance(event, QueuePaused):
                        self._paused = True
                    elif isinstance(event, QueueResumed):
                        self._paused = False
                    elif isinstance(event, SweepFinished):
                        self.finished = True
                    self._publish(event)
                elif "ack" in message:
                    self.acks.append(message)
                    self._acknowledged(message)
                    if not message.get("ok"):
                        self._publish(Notice(level="warning", text=f"the engine refused {message.get('cmd')}: "
                                                                   f"{message.get('error')}"))
        except (OSError, ValueError):
            pass
        finally:
            if not self.detached and not self.finished:
                self._publish(Notice(level="error", text=f"the engine (pid {self.engine_pid}) stopped without "
                                                         f"finishing the sweep; continue with: specbench run --resume "
                                                         f"{self.run_dir}"))
                self._publish(SweepFinished(state="failed", reason="the engine process is gone"))
            self.closed.set()
            self._answer_all()

    # -- control ---------------------------------------------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self._paused

    def _send(self, command: str, **extra: object) -> int:
        with self._send_lock:
            self._ids += 1
            ident = self._ids
            try:
                self._sock.sendall(encode({"cmd": command, "id": ident, **extra}))
            except OSError:
                pass
        return ident

    def _command(self, command: str, config_id: str | None = None, **extra: object) -> Answer:
        """Send ``command``; the future gets the engine's :class:`Outcome` from its acknowledgement (None when
        the engine goes before it answers)."""
        future: Answer = Future()
        with self._send_lock:
            self._ids += 1
            ident = self._ids
            self._waiting[ident] = (future, command, config_id)
            message = {"cmd": command, "id": ident, **extra, **({"config_id": config_id} if config_id else {})}
            try:
                self._sock.sendall(encode(message))
            except OSError:
                self._waiting.pop(ident, None)
                future.set_result(None)
        if self.closed.is_set():
            self._answer_all()
        return future

    def _acknowledged(self, ack: dict[str, object]) -> None:
        with self._send_lock:
            ident = ack.get("ack")
            waiting = self._waiting.pop(ident, None) if isinstance(ident, int) else None
        if waiting is not None:
            future, command, config_id = waiting
            future.set_result(Outcome.from_ack(command, ack, config_id))

    def _answer_all(self) -> None:
        """The engine is gone: every command still waiting is answered with None."""
        with self._send_lock:
            waiting, self._waiting = self._waiting, {}
        for future, _, _ in waiting.values():
            future.set_result(None)

    def pause(self) -> Answer:
        return self._command("pause")

    def resume(self) -> Answer:
        return self._command("resume")

    def skip(self, config_id: str) -> Answer:
        return self._command("skip", config_id)

    def retry(self, config_id: str) -> Answer:
        return self._command("retry", config_id)

    def abort(self, now: bool = False) -> Answer:
        return self._command("abort", now=now)

    def wait_ack(self, ident: int, timeout: float = 10.0) -> dict[str, object] | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ack in self.acks:
                if ack.get("ack") == ident:
                    return ack
            if self.closed.is_set():
                return None
            time.sleep(0.02)
        return None

    def stop(self, timeout: float) -> bool:
        """Wait until the engine has ended (after :meth:`abort`); True when it did within ``timeout``."""
        self.start()
        ended = self.closed.wait(timeout)
        self._close()
        return ended

    def detach(self) -> None:
        """Leave the engine running; this client goes."""
        self.detached = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._close()

    def _close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
