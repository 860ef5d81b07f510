"""``specbench serve RUN``: the TUI of a running sweep in a browser tab, through textual-serve.

textual-serve starts one app process per websocket and has no authentication of its own, so this server
adds what a GPU box needs:

- each tab runs ``specbench attach RUN`` (a client of the running engine, never a sweep of its own),
  ``--read-only`` unless the server was started with ``--control`` (the engine refuses a view's commands too);
- a random token, printed once in the URL, is required on every request, HTTP and websocket alike (the page
  passes it on to its websocket; a cookie scoped to the page's origin carries it to the static files);
- a request whose ``Origin`` is not the page's own is refused (another site open in the same browser cannot
  drive the view);
- it binds 127.0.0.1 unless told otherwise (reach it with ``ssh -L``); another address still requires the token
  and says so.
"""

from __future__ import annotations

import hmac
import secrets
import shlex
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import web
from textual_serve.server import Server

COOKIE = "specbench_token"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def attach_command(run_dir: Path, *, control: bool) -> str:
    """The shell command each browser tab runs."""
    return " ".join([shlex.quote(sys.executable), "-m", "specbench_tui", "attach", shlex.quote(str(run_dir)),
                     *([] if control else ["--read-only"])])


class GuardedServer(Server):
    """textual-serve's server, every request checked for the token and a same-origin ``Origin``."""

    def __init__(self, command: str, *, host: str, port: int, token: str, title: str) -> None:
        super().__init__(command, host=host, port=port, title=title)
        self.token = token

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._guard)
        return app

    @web.middleware
    async def _guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
        supplied = request.query.get("token") or request.cookies.get(COOKIE) or ""
        if not hmac.compare_digest(supplied.encode(), self.token.encode()):
            return web.Response(status=403, text="specbench serve: this address needs the token in the URL that "
                                                 "`specbench serve` printed when it started\n")
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != request.host:
            return web.Response(status=403, text=f"specbench serve: requests from {origin} are refused "
                                                 "(only the page this server serves may connect)\n")
        response: web.StreamResponse = await handler(request)
        if not response.prepared and request.query.get("token"):
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict", path="/")
        return response

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        """The page, its URLs built from the address the browser used (``ssh -L`` may rename the host), the
        websocket's carrying the token."""
        base = f"{request.scheme}://{request.host}"
        socket_url = f"ws://{request.host}/ws?token={self.token}"
        return {"font_size": 16, "app_websocket_url": socket_url,
                "config": {"static": {"url": f"{base}/static/"}}, "application": {"name": self.title}}


def free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def serve(run_dir: Path, *, host: str = "127.0.0.1", port: int = 8765, control: bool = False,
          token: str | None = None) -> int:
    """Serve ``run_dir``'s TUI until Ctrl-C; the exit code."""
    from specbench_tui.engine.attached import AttachError, engine_status

    try:
        status = engine_status(run_dir)
    except AttachError as exc:
        from specbench_tui.application.runstatus import report_unattachable

        return report_unattachable(run_dir, str(exc))
    port = port or free_port(host)
    token = token or secrets.token_urlsafe(24)
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/?token={token}"
    mode = "with control (pause, skip, retry, stop)" if control else "read-only (start with --control to steer)"
    lines = [f"specbench serve: {status.get('sweep', run_dir.name)} (engine pid {status.get('pid')}), {mode}",
             f"  open: {url}",
             "  the token in that URL is required for every connection; it is printed only here"]
    if host in LOOPBACK:
        lines.append(f"  from your machine: ssh -L {port}:127.0.0.1:{port} THIS_HOST, then open the URL above")
    else:
        lines.append(f"  listening on {host}: anyone who can reach it still needs the token (prefer 127.0.0.1 "
                     "and ssh -L)")
    print("\n".join(lines), flush=True)
    server = GuardedServer(attach_command(run_dir, control=control), host=host, port=port, token=token,
                           title=f"specbench {status.get('sweep', '')}")
    server.serve()
    return 0
