"""A small HTTP/1.1 server on asyncio streams, answering like uvicorn (the stdlib has no async server).

It supports keep-alive, ``Content-Length`` and chunked request bodies, plain responses with
``content-length`` and streamed responses with ``transfer-encoding: chunked`` (SSE), uvicorn's header names
(``date``, ``server: uvicorn``) and uvicorn's access-log line at the start of each response. While a handler
runs, the connection is watched so that a client that goes away is noticed (``HttpRequest.disconnected``),
which is how SGLang aborts the requests of vanished clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from specbench_tui.sim.logs import _HTTP_REASONS, Logger

MAX_HEADER = 64 * 1024
MAX_BODY = 512 * 1024 * 1024


@dataclass
class HttpRequest:
    """A parsed request."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    client: tuple[str, int]
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    received: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the whole request (head and body) had been read: where SGLang's clock for the
    request starts (the tokenizer manager's ``created_time``) and the deterministic TTFT is counted from."""

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        return dict(parse_qsl(urlsplit(self.target).query))

    def json(self) -> Any:
        """The body as JSON (``{}`` when empty); raises ``ValueError`` on bad JSON."""
        return json.loads(self.body) if self.body.strip() else {}


@dataclass
class Response:
    """A complete response."""

    status: int = 200
    body: bytes = b""
    content_type: str | None = "application/json"

    @classmethod
    def json(cls, data: object, status: int = 200) -> Response:
        return cls(status, json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())


@dataclass
class StreamResponse:
    """A streamed (chunked) response; ``chunks`` yields already-encoded SSE events."""

    chunks: AsyncIterator[bytes]
    status: int = 200
    content_type: str = "text/event-stream; charset=utf-8"


Handler = Callable[[HttpRequest], Awaitable["Response | StreamResponse"]]


class _Connection:
    """Buffered reading of one client connection (the buffer survives a cancelled watcher)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self.reader = reader
        self.buf = bytearray()
        self.eof = False

    async def fill(self) -> bool:
        if self.eof:
            return False
        data = await self.reader.read(65536)
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    async def read_until(self, marker: bytes, limit: int) -> bytes | None:
        while marker not in self.buf:
            if len(self.buf) > limit or not await self.fill():
                return None
        index = self.buf.index(marker) + len(marker)
        data = bytes(self.buf[:index])
        del self.buf[:index]
        return data

    async def read_exactly(self, n: int) -> bytes | None:
        while len(self.buf) < n:
            if not await self.fill():
                return None
        data = bytes(self.buf[:n])
        del self.buf[:n]
        return data


class HttpServer:
    """Serve ``handler`` on a TCP socket; log access lines with ``logger``."""

    def __init__(self, handler: Handler, logger: Logger, wire_trace: str | None = None) -> None:
        self.handler = handler
        self.log = logger
        self.server: asyncio.base_events.Server | None = None
        self.wire_trace = wire_trace
        """``SPECBENCH_SIM_WIRE_TRACE``: a file that receives, per streamed response, when its request was read
        and when its first data chunk was about to be handed to the kernel (a bench's ground truth, docs/simulator.md)."""

    async def start(self, host: str, port: int) -> None:
        """Bind and listen (raises ``OSError`` like uvicorn's bind failure)."""
        self.server = await asyncio.start_server(self._serve, host, port, reuse_address=True, backlog=2048)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _read_request(self, conn: _Connection, client: tuple[str, int]) -> HttpRequest | None:
        head = await conn.read_until(b"\r\n\r\n", MAX_HEADER)
        if head is None:
            return None
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            return None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        body = b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size_line = await conn.read_until(b"\r\n", MAX_HEADER)
                if size_line is None:
                    return None
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                data = await conn.read_exactly(size + 2)
                if data is None:
                    return None
                if size == 0:
                    break
                chunks.append(data[:-2])
            body = b"".join(chunks)
        elif "content-length" in headers:
            length = int(headers["content-length"])
            if length > MAX_BODY:
                return None
            data = await conn.read_exactly(length)
            if data is None:
                return None
            body = data
        return HttpRequest(parts[0].upper(), parts[1], headers, body, client)

    @staticmethod
    def _head(status: int, extra: list[tuple[str, str]]) -> bytes:
        lines = [f"HTTP/1.1 {status} {_HTTP_REASONS.get(status, 'OK')}",
                 f"date: {email.utils.formatdate(usegmt=True)}", "server: uvicorn"]
        lines += [f"{k}: {v}" for k, v in extra]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("127.0.0.1", 0)
        client = (str(peer[0]), int(peer[1]))
        conn = _Connection(reader)
        try:
            while True:
                req = await self._read_request(conn, client)
                if req is None:
                    break
                watcher = asyncio.ensure_future(self._watch(conn, req))
                try:
                    resp = await self.handler(req)
                    keep = await self._respond(writer, req, resp)
                finally:
                    watcher.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await watcher
                if not keep or req.headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            try:
                writer.close()
            except Exception:  # noqa: BLE001 - the socket may already be gone, in any of several ways
                pass

    def _trace(self, req: HttpRequest, first_sent: float) -> None:
        """One line ``received_wall ttft path``: when the request had been read (``time.time()``), how many
        seconds later its first data chunk was handed to the kernel, and the path."""
        wall = time.time() - (time.monotonic() - req.received)
        if self.wire_trace is None:
            return
        try:
            with open(self.wire_trace, "a", encoding="utf-8") as out:
                out.write(f"{wall:.6f} {first_sent - req.received:.6f} {req.path}\n")
        except OSError:
            self.wire_trace = None

    @staticmethod
    async def _watch(conn: _Connection, req: HttpRequest) -> None:
        """Set ``req.disconnected`` if the client closes its end while the handler works."""
        try:
            while await conn.fill():
                pass
            req.disconnected.set()
        except (ConnectionError, OSError):
            req.disconnected.set()

    async def _respond(self, writer: asyncio.StreamWriter, req: HttpRequest, resp: Response | StreamResponse) -> bool:
        self.log.access(req.client, req.method, req.target, resp.status)
        if isinstance(resp, Response):
            extra = [("content-length", str(len(resp.body)))]
            if resp.content_type:
                extra.append(("content-type", resp.content_type))
            writer.write(self._head(resp.status, extra) + (resp.body if req.method != "HEAD" else b""))
            await writer.drain()
            return True
        writer.write(self._head(resp.status, [("content-type", resp.content_type), ("transfer-encoding", "chunked")]))
        first_sent: float | None = None
        try:
            async for chunk in resp.chunks:
                if req.disconnected.is_set():
                    return False
                if first_sent is None:
                    # Stamped before the write: the write's send() can wake the client, and the kernel may then
                    # run the client before us, so a stamp after it could land after the client read the token.
                    first_sent = time.monotonic()
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    if self.wire_trace:
                        self._trace(req, first_sent)
                else:
                    writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                await writer.drain()
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            return True
        finally:
            aclose = getattr(resp.chunks, "aclose", None)
            if aclose is not None:
                await aclose()
