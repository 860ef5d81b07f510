"""The engine's control socket: how attached clients watch and steer a sweep that runs in its own process.

A Unix domain socket in the run directory (``engine.sock``, mode 0600) speaks newline-delimited JSON:

1. The client says hello: ``{"hello": "specbench-control", "protocol": 1, "version": ..., "role": ...,
   "name": ...}``. ``role`` is ``control`` (may send commands), ``view`` (watch only) or ``status`` (one answer,
   then the engine closes the connection: what ``specbench ps`` asks).
2. The engine checks the peer's credentials (``SO_PEERCRED``: the same uid as the engine's, else refused) and
   the protocol version, and answers ``{"welcome": ..., "events_bytes": E, "results_bytes": R, ...}``, or
   ``{"refused": "why"}`` and closes. ``E`` and ``R`` are the sizes of the run's event and result records
   at the moment the client joined the stream: the client replays exactly those bytes from the run directory
   (the ledger's fold), then applies the streamed events, so nothing is missed and nothing is counted twice.
3. The engine streams ``{"event": {...}}`` for every event published after the welcome (log lines and GPU
   samples included), and answers each command ``{"cmd": "pause"|"resume"|"skip"|"retry"|"abort", "id": n,
   ...}`` with ``{"ack": n, "ok": bool, "error": ...}``. Each accepted command is also published as a
   :class:`~specbench_tui.core.events.Notice` naming the client, so every client sees every control action.

A client too slow to keep up (more than :data:`MAX_CLIENT_BUFFER` bytes waiting) is disconnected; it can attach
again. This module holds the wire format and the server; :mod:`specbench_tui.engine.attached` is the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import struct
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from specbench_tui import __version__
from specbench_tui.core.events import Event, Notice
from specbench_tui.engine.control import COMMANDS, Outcome
from specbench_tui.rundir import ENGINE_SOCKET, EVENTS, RESULTS, file_size

PROTOCOL = 1
"""The control protocol's version; a client and an engine that differ refuse each other with a clear message."""
HELLO = "specbench-control"
SOCKET_NAME = ENGINE_SOCKET
ROLES = ("control", "view", "status")
MAX_LINE = 1 << 20
"""The longest line a client may send (commands are tiny; anything longer is a broken or hostile client)."""
MAX_CLIENT_BUFFER = 64 << 20
"""Bytes queued for one client before it is disconnected as too slow."""
SUN_PATH_MAX = 107


def socket_path(run_dir: Path) -> Path:
    return Path(run_dir) / SOCKET_NAME


@contextlib.contextmanager
def short_path(path: Path) -> Iterator[str]:
    """``path`` as a string a Unix socket accepts: long paths go through ``/proc/self/fd`` of their folder."""
    text = str(path)
    if len(text.encode()) <= SUN_PATH_MAX:
        yield text
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def encode(message: Mapping[str, object]) -> bytes:
    return (json.dumps(message, separators=(",", ":"), ensure_ascii=False, default=str) + "\n").encode("utf-8")


def peer_uid(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a connected Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", raw)
    return pid, uid


def hello(role: str, name: str) -> dict[str, object]:
    return {"hello": HELLO, "protocol": PROTOCOL, "version": __version__, "role": role, "name": name}


def version_mismatch(their_protocol: object, their_version: object, *, we_are: str) -> str:
    """The refusal when the two sides speak different protocols."""
    return (f"protocol mismatch: this {we_are} speaks control protocol {PROTOCOL} (specbench {__version__}), "
            f"the other side speaks {their_protocol} (specbench {their_version}). Attach with the same specbench "
            "that started the run (or stop it with `specbench stop`, then resume it with this one).")


@dataclass
class _Client:
    number: int
    role: str
    name: str
    pid: int
    writer: asyncio.StreamWriter
    since: float = field(default_factory=time.time)


class ControlServer:
    """Serves one engine's socket; runs on the engine's asyncio loop (the one its orchestrator runs on).

    ``control`` is the orchestrator (or anything with its control methods); ``status`` returns what ``ps``
    shows; ``publish`` sends an event through the engine (persisted, then to every subscriber, this server
    included: it is how control actions reach every client).
    """

    def __init__(self, run_dir: Path, control: object, *, status: Callable[[], Mapping[str, object]],
                 publish: Callable[[Event], None], names: dict[str, str] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.path = socket_path(self.run_dir)
        self.control = control
        self.status = status
        self.publish = publish
        self.names = dict(names or {})
        self.clients: dict[int, _Client] = {}
        self._numbers = 0
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a crashed engine's socket: nobody listens on it any more (we hold the lock)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        old = os.umask(0o177)
        try:
            with short_path(self.path) as where:
                sock.bind(where)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=MAX_LINE)

    async def close(self) -> None:
        for client in list(self.clients.values()):
            with contextlib.suppress(Exception):
                client.writer.write(encode({"bye": "the engine has ended"}))
                client.writer.close()
        self.clients.clear()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        with contextlib.suppress(OSError):
            self.path.unlink()

    # -- the event stream ---------------------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        """Subscriber: every event goes to every attached client (called on the engine's loop)."""
        if not self.clients:
            return
        line = encode({"event": event.to_json()})
        for client in list(self.clients.values()):
            self._send(client, line)

    def _send(self, client: _Client, line: bytes) -> None:
        transport = client.writer.transport
        if transport.is_closing():
            self.clients.pop(client.number, None)
            return
        if transport.get_write_buffer_size() > MAX_CLIENT_BUFFER:
            self.clients.pop(client.number, None)
            transport.abort()
            return
        client.writer.write(line)

    # -- one connection -----------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        client: _Client | None = None
        try:
            client = await self._handshake(reader, writer)
            if client is None:
                return
            while True:
                try:
                    raw = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    return
                if not raw:
                    return
                self._command(client, raw)
        except (ConnectionError, OSError, asyncio.IncompleteReadError):
            return
        finally:
            if client is not None:
                self.clients.pop(client.number, None)
            with contextlib.suppress(Exception):
                writer.close()

    async def _handshake(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> _Client | None:
        sock = writer.get_extra_info("socket")
        pid, uid = peer_uid(sock)
        if uid != os.getuid():
            # Said before reading anything: another user learns nothing about the run.
            writer.write(encode({"refused": f"permission denied: this engine belongs to uid {os.getuid()}; "
                                            f"uid {uid} may not attach"}))
            await writer.drain()
            return None
        try:
            raw = await asyncio.wait_for(reader.readline(), 10)
            message = json.loads(raw.decode("utf-8", errors="replace")) if raw else None
        except (ValueError, asyncio.TimeoutError, asyncio.LimitOverrunError):
            message = None
        if not isinstance(message, dict) or message.get("hello") != HELLO:
            writer.write(encode({"refused": "not a specbench control client (no hello)"}))
            await writer.drain()
            return None
        if message.get("protocol") != PROTOCOL:
            writer.write(encode({"refused": version_mismatch(message.get("protocol"), message.get("version"),
                                                             we_are="engine"),
                                 "protocol": PROTOCOL, "version": __version__}))
            await writer.drain()
            return None
        role = str(message["role"]) if message.get("role") in ROLES else "view"
        name = str(message.get("name") or f"pid {pid}")[:100]
        # From here to registering the client nothing awaits: no event can fall between the sizes and the stream.
        welcome = {"welcome": HELLO, "protocol": PROTOCOL, "version": __version__, "pid": os.getpid(),
                   "events_bytes": file_size(self.run_dir, EVENTS),
                   "results_bytes": file_size(self.run_dir, RESULTS),
                   "status": {**self.status(), "clients": self._described()}}
        if role == "status":
            writer.write(encode(welcome))
            await writer.drain()
            return None
        self._numbers += 1
        client = _Client(self._numbers, role, name, pid, writer)
        welcome["client"] = client.number
        writer.write(encode(welcome))
        self.clients[client.number] = client
        return client

    def _described(self) -> list[dict[str, object]]:
        return [{"number": c.number, "role": c.role, "name": c.name, "pid": c.pid, "since": c.since}
                for c in self.clients.values()]

    def _command(self, client: _Client, raw: bytes) -> None:
        try:
            message = json.loads(raw.decode("utf-8", errors="replace"))
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        ident = message.get("id")
        command = message.get("cmd")

        def answer(ok: bool, error: str | None = None, outcome: Outcome | None = None) -> None:
            self._send(client, encode({"ack": ident, "cmd": command, "ok": ok, "error": error,
                                       **(outcome.to_json() if outcome is not None else {})}))

        if command not in COMMANDS:
            answer(False, f"unknown command {command!r}")
            return
        if client.role != "control":
            answer(False, "this view is read-only (it was opened without control)")
            return
        config_id = message.get("config_id")
        now = bool(message.get("now"))
        if command in ("skip", "retry") and not isinstance(config_id, str):
            answer(False, f"{command} needs a configuration id")
            return
        try:
            if command in ("skip", "retry"):
                outcome = getattr(self.control, command)(config_id)
            elif command == "abort":
                outcome = getattr(self.control, command)(now)
            else:
                outcome = getattr(self.control, command)()
        except Exception as exc:  # noqa: BLE001 - a refused request is answered, never fatal to the engine
            answer(False, str(exc))
            return
        outcome = outcome if isinstance(outcome, Outcome) else None
        answer(True, outcome=outcome)
        if outcome is not None and not outcome.changed:
            return  # a command that found nothing to do is answered, and no notice is added for it
        name = self.names.get(config_id, config_id) if isinstance(config_id, str) else ""
        what = {"pause": "paused the queue", "resume": "resumed the queue",
                "skip": f"skipped {name}", "retry": f"queued {name} again",
                "abort": "stopped the sweep" + (" at once" if now else " after the request in flight")}[command]
        self.publish(Notice(level="info", text=f"{client.name} {what}", config_id=config_id
                            if command in ("skip", "retry") else None))
