"""``specbench serve RUN``: the TUI of a running sweep in a browser tab, through textual-serve.

textual-serve starts one app process per websocket and has no authentication of its own, so this server
adds what a GPU box needs:

- each tab runs ``specbench attach RUN`` (a client of the running engine, never a sweep of its own),
  ``--read-only`` unless the server was started with ``--control`` (the engine refuses a view's commands too);
- a random token, printed once in the URL, is required on every request, HTTP and websocket alike (the page
  passes it on to its websocket; a cookie scoped to the page's origin carries it to the static files). The
  token is in no log: the access log names paths without their query, and every log line is scrubbed of it;
- a request whose ``Origin`` is not the page's own is refused (another site open in the same browser cannot
  drive the view);
- it binds 127.0.0.1 unless told otherwise (reach it with ``ssh -L``); another address still requires the token
  and says so;
- it is bounded: the terminal size a page asks for is clamped (:data:`MAX_COLUMNS` x :data:`MAX_ROWS`), at most
  ``--max-tabs`` tabs run at once (one more is told so in its page), a tab's process is ended within a few
  seconds of its websocket closing, and dies with ``serve`` however ``serve`` ends (``PR_SET_PDEATHSIG``, armed by
  the tab itself: :func:`specbench_tui.tui.attach_main.die_with_serve`); each tab's interpreter is isolated
  (``python -I`` with this process's import path less the working directory: nothing from the working directory
  or the user's site is imported).

The page's websocket URL: textual-serve 1.1.3's ``textual.js`` appends ``"?width=W&height=H"`` to the URL the page
gives it, which carries ``?token=T`` already, so the query arrives as ``token=T?width=W`` and ``height=H``;
:func:`page_query` reads that shape (and the well-formed ``&width=`` one) as the page meant it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp_jinja2
from aiohttp import WSMsgType, web
from aiohttp.abc import AbstractAccessLogger
from textual_serve.app_service import AppService

from specbench_tui.paths import isolated_python
from specbench_tui.tui.attach_main import TAB_PARENT_VAR
from specbench_tui.tui.textual_private import ServedApp, ServedServer

COOKIE = "specbench_token"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_PORT = 8765
PORTS_TRIED = 20
"""Without ``--port``, the ports after :data:`DEFAULT_PORT` tried when it is taken (said on the banner)."""
MAX_COLUMNS, MAX_ROWS = 500, 200
"""The largest terminal a tab gets (a 4K screen at a small font is about 480 x 130); a larger ask is clamped."""
MIN_COLUMNS, MIN_ROWS = 10, 5
DEFAULT_MAX_TABS = 4
QUIT_GRACE_S = 2.0
"""How long a closed tab's app has to quit by itself before it is sent SIGTERM."""
TERM_GRACE_S = 1.5
"""How long it then has before SIGKILL: a closed tab's process is gone within about 4 s, whatever it does."""
REFUSED_TAB_HOLD_S = 60.0
"""How long a refused tab's page keeps the refusal on screen before its websocket is closed."""
REFUSED_HELD_MAX = 16
"""Refused websockets held open at once; past it a refusal is sent and the socket closed at once (a page
reloading in a loop, or a script, cannot pile up sockets for a minute each)."""
STDERR_KEPT = 4096
PAGE_LINES = 30
"""Lines of a tab's standard error its page shows when its view could not start (an ended sweep's summary fits)."""
INPUT_STALL_S = 10.0
"""A tab whose app takes no input for this long (its input pipe full: typing never fills it) is ended."""
EXIT_FAILED = 1

log = logging.getLogger("specbench.serve")


def attach_argv(run_dir: Path, *, control: bool) -> list[str]:
    """The command each browser tab runs: an isolated interpreter (:func:`specbench_tui.paths.isolated_python`:
    nothing imported from the working directory or the user site)."""
    return isolated_python("specbench_tui", "attach", str(run_dir), *([] if control else ["--read-only"]))


def page_query(query: Mapping[str, str]) -> dict[str, str]:
    """The query as the page meant it: ``token=T?width=W`` (``textual.js`` appending ``?`` to a URL that has a
    query) is read as ``token=T`` and ``width=W``."""
    meant = dict(query)
    token, mark, rest = meant.get("token", "").partition("?")
    if mark:
        meant["token"] = token
        for key, value in parse_qsl(rest):
            meant.setdefault(key, value)
    return meant


def clamp_size(width: object, height: object) -> tuple[int, int]:
    """A terminal size from what a page sent (anything JSON can carry), within the sane limits."""
    return _clamp(width, 80, MIN_COLUMNS, MAX_COLUMNS), _clamp(height, 24, MIN_ROWS, MAX_ROWS)


def _clamp(value: object, default: int, low: int, high: int) -> int:
    number = default
    if isinstance(value, (int, float, str)):
        with contextlib.suppress(ValueError, OverflowError):
            number = int(value)
    return max(low, min(high, number))


class KeptStderr:
    """The tab's stderr as textual-serve reads it, its last :data:`STDERR_KEPT` bytes kept for the page."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.data = bytearray()

    async def read(self, n: int = -1) -> bytes:
        chunk = await self.reader.read(n)
        self.data += chunk
        del self.data[:-STDERR_KEPT]
        return chunk

    def text(self) -> str:
        """What the tab said, one printable line after another (no escape sequence reaches the page)."""
        lines = self.data.decode("utf-8", errors="replace").splitlines()
        return "\r\n".join("  " + "".join(c if c.isprintable() else " " for c in line)
                           for line in lines[-PAGE_LINES:])


class TabService(ServedApp):
    """textual-serve's per-tab app, started without a shell as an isolated interpreter that dies with serve, and
    ended for sure when its tab closes. An app that ended before drawing anything has its error shown in the page."""

    def __init__(self, argv: list[str], **kwargs: Any) -> None:
        super().__init__(" ".join(argv), **kwargs)
        self.argv = argv
        self.drew = False
        self.stderr: KeptStderr | None = None

    async def on_data(self, payload: bytes) -> None:
        self.drew = True
        await super().on_data(payload)

    async def run(self) -> None:
        await super().run()
        if self.drew or self.stderr is None:
            return
        said = self.stderr.text()
        text = (f"\r\n  specbench serve: this tab's view could not start{':' if said else '.'}\r\n{said}\r\n"
                "  Reload the page to try again.\r\n")
        with contextlib.suppress(Exception):  # the tab may be closed already
            await self.remote_write_bytes(text.encode())

    def environment(self, environment: dict[str, str]) -> dict[str, str]:
        environment[TAB_PARENT_VAR] = str(os.getpid())
        return environment

    async def open_process(self, environment: dict[str, str]) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=environment)
        assert process.stdin is not None and process.stderr is not None
        self.stderr = KeptStderr(process.stderr)
        setattr(process, "stderr", self.stderr)  # noqa: B010 - read by textual-serve's run() as the stream it was
        return process

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    async def stop(self) -> None:
        """Ask the app to quit; SIGTERM when it has not ended after :data:`QUIT_GRACE_S`, SIGKILL after
        :data:`TERM_GRACE_S` more (an app busy drawing, or not reading its input, still ends). Its process is
        waited for, not the reading of its output: that ends early when the page closed first."""
        task = self.take_task()
        if task is None:
            return
        await self.cancel_downloads()
        with contextlib.suppress(Exception):  # an app that reads no input gets no quit: its pipe is full
            await asyncio.wait_for(self.send_meta({"type": "quit"}), 0.5)
        process = self.process
        if process is not None:
            for sig, grace in ((signal.SIGTERM, QUIT_GRACE_S), (signal.SIGKILL, TERM_GRACE_S), (None, 1.0)):
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(process.wait(), grace)
                    break
                if sig is not None:
                    with contextlib.suppress(ProcessLookupError):
                        process.send_signal(sig)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 1.0)


class PathOnlyAccessLogger(AbstractAccessLogger):
    """The access log without queries (the token is one)."""

    def log(self, request: Any, response: Any, time: float) -> None:
        self.logger.info("%s %s %s", request.method, request.path, response.status)


class Scrubbed(logging.Formatter):
    """Every log line with the token replaced (a traceback or a library's message may quote a URL)."""

    def __init__(self, token: str) -> None:
        super().__init__("specbench serve: %(message)s")
        self.token = token

    def format(self, record: logging.LogRecord) -> str:
        return super().format(record).replace(self.token, "[token]")


FOCUS_ON_LOAD = """<script>
  // specbench serve: keys reach the app without a click first. textual.js draws the app in xterm.js and marks the
  // body -first-byte when its first output arrives; xterm takes keys through its helper textarea, focused here then.
  (function () {
    var tries = 0;
    var timer = setInterval(function () {
      var input = document.querySelector("#terminal .xterm-helper-textarea");
      if (input && document.body.classList.contains("-first-byte")) {
        input.focus();
        clearInterval(timer);
      } else if (++tries > 1200) {
        clearInterval(timer);
      }
    }, 50);
  })();
</script>
"""
"""textual-serve's page focuses nothing: its terminal took keys only after a click into it (issue 46)."""


class GuardedServer(ServedServer):
    """textual-serve's server, every request checked for the token and a same-origin ``Origin``, every tab bounded."""

    def __init__(self, argv: list[str], *, host: str, port: int, token: str, title: str,
                 max_tabs: int = DEFAULT_MAX_TABS) -> None:
        super().__init__(" ".join(argv), host=host, port=port, title=title)
        self.argv = argv
        self.token = token
        self.max_tabs = max_tabs
        self.tabs: dict[TabService, web.WebSocketResponse] = {}
        self.refused: set[web.WebSocketResponse] = set()

    def initialize_logging(self) -> None:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(Scrubbed(self.token))
        logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)

    def extend_app(self, app: web.Application) -> None:
        app.middlewares.append(self._guard)

    @web.middleware
    async def _guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        given = page_query(request.query).get("token")
        supplied = given or request.cookies.get(COOKIE) or ""
        if not hmac.compare_digest(supplied.encode(), self.token.encode()):
            return web.Response(status=403, text="specbench serve: this address needs the token in the URL that "
                                                 "`specbench serve` printed when it started\n")
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != request.host:
            return web.Response(status=403, text=f"specbench serve: requests from {origin} are refused "
                                                 "(only the page this server serves may connect)\n")
        response: web.StreamResponse = await handler(request)
        if not response.prepared:
            response.headers["Referrer-Policy"] = "no-referrer"  # the page's URL (the token) goes nowhere else
            if given:
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict", path="/")
        return response

    async def handle_index(self, request: web.Request) -> web.Response:
        """The page, its URLs built from the address the browser used (``ssh -L`` may rename the host), the
        websocket's carrying the token; the terminal takes the keyboard once the app's first bytes are drawn
        (:data:`FOCUS_ON_LOAD`)."""
        base = f"{request.scheme}://{request.host}"
        socket_url = f"{'wss' if request.secure else 'ws'}://{request.host}/ws?token={self.token}"
        context = {"font_size": 16, "app_websocket_url": socket_url,
                   "config": {"static": {"url": f"{base}/static/"}}, "application": {"name": self.title}}
        response = aiohttp_jinja2.render_template("app_index.html", request, context)
        response.text = (response.text or "").replace("</body>", FOCUS_ON_LOAD + "</body>", 1)
        return response

    async def on_startup(self, app: web.Application) -> None:
        print(f"  serving; at most {self.max_tabs} tabs at once (--max-tabs); Ctrl-C ends serve and every tab",
              flush=True)

    async def on_shutdown(self, app: web.Application) -> None:
        """Every tab's app ended and its websocket closed before the server goes."""
        tabs = list(self.tabs.items())
        await asyncio.gather(*(service.stop() for service, _ in tabs), return_exceptions=True)
        await asyncio.gather(*(websocket.close() for _, websocket in tabs), *(ws.close() for ws in self.refused),
                             return_exceptions=True)

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """One tab: its app started at the size the page asked for (clamped), unless :attr:`max_tabs` run."""
        websocket = web.WebSocketResponse(heartbeat=15)
        await websocket.prepare(request)
        if len(self.tabs) >= self.max_tabs:
            await self._refuse(websocket)
            return websocket
        query = page_query(request.query)
        service = TabService(self.argv, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                             close=websocket.close, download_manager=self.download_manager)
        self.tabs[service] = websocket
        try:
            await service.start(*clamp_size(query.get("width"), query.get("height")))
            log.info("a tab opened (pid %s; %d of at most %d)", service.pid, len(self.tabs), self.max_tabs)
            await self.process_messages(websocket, service)
        except asyncio.CancelledError:
            pass
        except Exception as error:  # noqa: BLE001 - a tab's failure is said, without the locals (the request holds the token)
            log.error("a tab failed: %s: %s", type(error).__name__, error)
        finally:
            await service.stop()
            self.tabs.pop(service, None)
            log.info("a tab closed (pid %s)", service.pid)
            await websocket.close()
        return websocket

    async def _refuse(self, websocket: web.WebSocketResponse) -> None:
        log.info("a tab was refused: %d are open, the most --max-tabs allows", len(self.tabs))
        text = (f"\r\n  specbench serve: {len(self.tabs)} browser tabs are open on this sweep already, the most this "
                f"serve allows (--max-tabs {self.max_tabs}).\r\n  Close one and reload this page, or restart "
                "specbench serve with a larger --max-tabs.\r\n")
        hold = len(self.refused) < REFUSED_HELD_MAX
        self.refused.add(websocket)
        try:
            with contextlib.suppress(Exception):
                await websocket.send_bytes(text.encode())
                with contextlib.suppress(asyncio.TimeoutError):
                    if hold:
                        await asyncio.wait_for(self._drain(websocket), REFUSED_TAB_HOLD_S)
                await websocket.close()
        finally:
            self.refused.discard(websocket)

    @staticmethod
    async def _drain(websocket: web.WebSocketResponse) -> None:
        async for _ in websocket:
            pass

    async def process_messages(self, websocket: web.WebSocketResponse, app_service: AppService) -> None:
        """The page's messages, as textual-serve handles them, sizes clamped and malformed ones ignored."""
        async for message in websocket:
            if message.type != WSMsgType.TEXT:
                continue
            try:
                envelope = json.loads(message.data)
            except ValueError:
                continue
            if isinstance(envelope, list) and envelope and isinstance(envelope[0], str):
                data = envelope[1] if len(envelope) > 1 else None
                # an app that stopped reading its input ends its tab (else the page's close would never be read)
                await asyncio.wait_for(self._handle(websocket, app_service, envelope[0], data), INPUT_STALL_S)

    @staticmethod
    async def _handle(websocket: web.WebSocketResponse, app_service: AppService, kind: str, data: object) -> None:
        if kind == "stdin" and isinstance(data, str):
            await app_service.send_bytes(data.encode("utf-8"))
        elif kind == "resize" and isinstance(data, dict):
            await app_service.set_terminal_size(*clamp_size(data.get("width"), data.get("height")))
        elif kind == "ping":
            await websocket.send_json(["pong", data])
        elif kind == "blur":
            await app_service.blur()
        elif kind == "focus":
            await app_service.focus()

    def serve_on(self, listener: socket.socket) -> None:
        """Serve on a bound socket until SIGINT or SIGTERM."""
        self.initialize_logging()
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_exit)
        web.run_app(self.make_app(), sock=listener, handle_signals=False, loop=loop, print=lambda *args: None,
                    access_log_class=PathOnlyAccessLogger, shutdown_timeout=3 * QUIT_GRACE_S)


def free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def listen(host: str, port: int | None) -> tuple[socket.socket, str]:
    """A listening socket on ``port`` (0: any free one; None: :data:`DEFAULT_PORT` or the next free one after it)
    and a note for the banner when it is not the port asked for; OSError when ``port`` is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    candidates = [port] if port is not None else [DEFAULT_PORT + i for i in range(PORTS_TRIED)]
    error: OSError | None = None
    for candidate in candidates:
        listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((host, candidate))
            listener.listen(128)
        except OSError as exc:
            listener.close()
            error = error or exc
            continue
        chosen = int(listener.getsockname()[1])
        note = "" if port is not None or chosen == DEFAULT_PORT else \
            f"  port {DEFAULT_PORT} is in use (another server); serving on {chosen} instead"
        return listener, note
    assert error is not None
    raise error


def serve(run_dir: Path, *, host: str = "127.0.0.1", port: int | None = None, control: bool = False,
          token: str | None = None, max_tabs: int = DEFAULT_MAX_TABS) -> int:
    """Serve ``run_dir``'s TUI until Ctrl-C; the exit code."""
    from specbench_tui.engine.attached import CONNECT_TIMEOUT_S, AttachError, engine_status
    from specbench_tui.application.runstatus import report_unattachable

    try:
        status = engine_status(run_dir, timeout=CONNECT_TIMEOUT_S)  # a loaded box answers slowly
    except AttachError as exc:
        return report_unattachable(run_dir, str(exc))
    if max_tabs < 1:
        print(f"specbench serve: --max-tabs {max_tabs}: give at least 1", file=sys.stderr)
        return 2
    try:
        listener, note = listen(host, port)
    except OSError as exc:
        wanted = f"port {port}" if port is not None else f"ports {DEFAULT_PORT}-{DEFAULT_PORT + PORTS_TRIED - 1}"
        print(f"specbench serve: cannot listen on {host}, {wanted}: {exc.strerror or exc} (another server has "
              f"it?); choose another with --port N, or --port 0 for any free one", file=sys.stderr)
        return EXIT_FAILED
    with listener:
        _banner(status, run_dir, host, int(listener.getsockname()[1]), note, control,
                token := token or secrets.token_urlsafe(24))
        server = GuardedServer(attach_argv(run_dir, control=control), host=host, port=port or 0, token=token,
                               title=f"specbench {status.get('sweep', '')}", max_tabs=max_tabs)
        try:
            server.serve_on(listener)
        except KeyboardInterrupt:  # before the loop's own handler was in place
            pass
    return 0


def _banner(status: dict[str, Any], run_dir: Path, host: str, port: int, note: str, control: bool,
            token: str) -> None:
    shown = f"[{host}]" if ":" in host else host
    mode = "with control (pause, skip, retry, stop)" if control else "read-only (start with --control to steer)"
    lines = [f"specbench serve: {status.get('sweep', run_dir.name)} (engine pid {status.get('pid')}), {mode}",
             *([note] if note else []),
             f"  open: http://{shown}:{port}/?token={token}",
             "  the token in that URL is required for every connection; it is printed only here"]
    if host in LOOPBACK:
        lines.append(f"  from your machine: ssh -L {port}:127.0.0.1:{port} THIS_HOST, then open the URL above")
    else:
        lines.append(f"  listening on {host}: anyone who can reach it still needs the token (prefer 127.0.0.1 "
                     "and ssh -L)")
    print("\n".join(lines), flush=True)
