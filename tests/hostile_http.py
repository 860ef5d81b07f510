"""A scripted hostile HTTP server for tests (stdlib asyncio only).

Every request to ``POST /generate`` (any path, in fact) is answered by the *behaviour* named by the path's
last segment after ``/b/`` (``/b/reset/generate``) or, when absent, by :attr:`HostileServer.behaviour`.
Bodies are produced lazily, so a "2 GB" body is never held in memory: the server writes it piece by piece
and stops at :attr:`HostileServer.safety_cap` bytes (so that a client that does not cut it off cannot fill
the test machine's memory); :attr:`HostileServer.sent` tells how much the client took.

Behaviours: ``ok``, ``malformed_json``, ``truncated_sse`` (connection dropped inside a chunked body),
``truncated_clean`` (a well-formed body that ends before ``[DONE]``), ``sse_error``, ``http_400``,
``http_500``, ``http_503``, ``reset`` (RST before any answer), ``reset_mid_stream``, ``stall_after_first``,
``no_answer``, ``redirect``, ``huge_sse_line`` (one line that never ends), ``huge_error_body`` (HTTP 500 with
a 2 GB body), ``unicode_separators`` (a valid stream whose text holds U+2028, U+2029 and U+0085), ``paced`` (16
tokens, 3 ms apart) and ``held`` (the same 16 tokens written in one piece after 48 ms: what a client that gets no
CPU while the server streams reads).

Run it stand-alone (``python tests/hostile_http.py --port N [--behaviour NAME]``) to point a real client at
it; it prints SGLang's ready line so that it can also stand in for a server launched by the engine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import struct

GB = 1 << 30
TOKENS = ["Hello", " wor", "ld", "!"]


def _sse(payload: object) -> bytes:
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n".encode()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _token_payload(upto: int, finished: bool = False) -> dict:
    meta = {"id": "x", "completion_tokens": upto, "prompt_tokens": 5,
            "finish_reason": {"type": "length", "length": upto} if finished else None}
    return {"text": "".join(TOKENS[:upto]), "meta_info": meta}


PACED_TOKENS = 16
PACED_GAP_S = 0.003


def _paced_payload(upto: int) -> dict:
    meta = {"id": "x", "completion_tokens": upto, "prompt_tokens": 5,
            "finish_reason": {"type": "length", "length": upto} if upto == PACED_TOKENS else None}
    return {"text": "t" * upto, "meta_info": meta}


class HostileServer:
    """``async with HostileServer("reset") as server: ... server.url``"""

    def __init__(self, behaviour: str = "ok", *, host: str = "127.0.0.1", port: int = 0,
                 safety_cap: int = 96 << 20) -> None:
        self.behaviour = behaviour
        self.host = host
        self.port = port
        self.safety_cap = safety_cap
        self.sent = 0
        """Body bytes written to the last client (a lower bound of what it read)."""
        self.requests: list[tuple[str, str]] = []
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def __aenter__(self) -> HostileServer:  # noqa: PYI034
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:] if x)}
                length = int(headers.get("content-length", "0") or 0)
                if length:
                    await reader.readexactly(length)
                self.requests.append((method, path))
                keep = await self._answer(path, writer)
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            if task is not None:
                self._tasks.discard(task)

    def _behaviour_for(self, path: str) -> str:
        parts = path.split("/")
        if "b" in parts and parts.index("b") + 1 < len(parts):
            return parts[parts.index("b") + 1]
        return self.behaviour

    async def _head(self, writer, status: str, headers: dict[str, str]) -> None:
        text = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        writer.write(text.encode())
        await writer.drain()

    async def _sse_head(self, writer) -> None:
        await self._head(writer, "200 OK", {"content-type": "text/event-stream", "transfer-encoding": "chunked"})

    async def _send(self, writer, data: bytes) -> None:
        self.sent += len(data)
        writer.write(data)
        await writer.drain()

    @staticmethod
    def _reset(writer) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    _SCRIPTED = frozenset({
        "unicode_separators", "malformed_json", "truncated_sse", "truncated_clean", "sse_error", "reset",
        "reset_mid_stream", "stall_after_first", "no_answer", "redirect", "huge_sse_line", "huge_error_body",
        "paced", "held",
    })
    """The scripted behaviours other than ok, http_<code> and the health probes: each one's answer is the method
``_scripted_<behaviour>``."""

    async def _answer(self, path: str, writer) -> bool:
        behaviour = self._behaviour_for(path)
        self.sent = 0
        if path.startswith(("/health", "/ready")):
            await self._head(writer, "200 OK", {"content-length": "0"})
            return True
        if behaviour == "ok" or (behaviour == "redirect" and path.endswith("/target")):
            await self._sse_head(writer)
            for i in range(1, len(TOKENS) + 1):
                await self._send(writer, _chunk(_sse(_token_payload(i, i == len(TOKENS)))))
            await self._send(writer, _chunk(_sse("[DONE]")) + b"0\r\n\r\n")
            return True
        if behaviour.startswith("http_"):
            code = int(behaviour[5:])
            reason = {400: "Bad Request", 500: "Internal Server Error", 503: "Service Unavailable"}.get(code, "X")
            body = json.dumps({"error": {"message": f"scripted failure {code}"}}).encode() if code != 503 else \
                b"<html>503 Service Unavailable: overloaded</html>"
            await self._head(writer, f"{code} {reason}", {"content-type": "application/json",
                                                           "content-length": str(len(body))})
            await self._send(writer, body)
            return True
        if behaviour in self._SCRIPTED:
            answered: bool = await getattr(self, f"_scripted_{behaviour}")(writer)
            return answered
        await self._head(writer, "404 Not Found", {"content-length": "0"})
        return True

    async def _scripted_unicode_separators(self, writer) -> bool:
        await self._sse_head(writer)
        text = "line\u2028sep\u2029para\u0085nel"
        payload = {"text": text, "meta_info": {"completion_tokens": 3, "prompt_tokens": 5,
                                               "finish_reason": {"type": "length", "length": 3}}}
        await self._send(writer, _chunk(_sse(payload)) + _chunk(_sse("[DONE]")) + b"0\r\n\r\n")
        return True

    async def _scripted_malformed_json(self, writer) -> bool:
        await self._sse_head(writer)
        await self._send(writer, _chunk(b'data: {"text": "Hel", "meta_info": {"completion_tok\n\n'))
        await self._send(writer, _chunk(_sse("[DONE]")) + b"0\r\n\r\n")
        return True

    async def _scripted_truncated_sse(self, writer) -> bool:
        await self._sse_head(writer)
        await self._send(writer, _chunk(_sse(_token_payload(1))))
        await self._send(writer, b"40\r\ndata: {\"text\": \"Hello wo")  # a chunk cut short, then gone
        writer.transport.abort()
        return False

    async def _scripted_truncated_clean(self, writer) -> bool:
        await self._sse_head(writer)
        await self._send(writer, _chunk(_sse(_token_payload(1))) + _chunk(_sse(_token_payload(2))))
        await self._send(writer, b"0\r\n\r\n")  # a complete HTTP body, but no [DONE] and no finish_reason
        return True

    async def _scripted_sse_error(self, writer) -> bool:
        await self._sse_head(writer)
        error = {"error": {"message": "The input (9000 tokens) is longer than the model's context length "
                                      "(8192 tokens).", "type": "invalid_request_error", "code": 400}}
        await self._send(writer, _chunk(_sse(error)) + _chunk(_sse("[DONE]")) + b"0\r\n\r\n")
        return True

    async def _scripted_paced(self, writer) -> bool:
        await self._sse_head(writer)
        for i in range(1, PACED_TOKENS + 1):
            await asyncio.sleep(PACED_GAP_S)
            await self._send(writer, _chunk(_sse(_paced_payload(i))))
        await self._send(writer, _chunk(_sse("[DONE]")) + b"0\r\n\r\n")
        return True

    async def _scripted_held(self, writer) -> bool:
        await self._sse_head(writer)
        await asyncio.sleep(PACED_GAP_S * PACED_TOKENS)
        body = b"".join(_chunk(_sse(_paced_payload(i))) for i in range(1, PACED_TOKENS + 1))
        await self._send(writer, body + _chunk(_sse("[DONE]")) + b"0\r\n\r\n")
        return True

    async def _scripted_reset(self, writer) -> bool:
        self._reset(writer)
        return False

    async def _scripted_reset_mid_stream(self, writer) -> bool:
        await self._sse_head(writer)
        await self._send(writer, _chunk(_sse(_token_payload(1))))
        await asyncio.sleep(0.05)
        self._reset(writer)
        return False

    async def _scripted_stall_after_first(self, writer) -> bool:
        await self._sse_head(writer)
        await self._send(writer, _chunk(_sse(_token_payload(1))))
        await asyncio.sleep(3600)
        return False

    async def _scripted_no_answer(self, writer) -> bool:
        await asyncio.sleep(3600)
        return False

    async def _scripted_redirect(self, writer) -> bool:
        await self._head(writer, "307 Temporary Redirect", {"location": "/b/redirect/target",
                                                            "content-length": "0"})
        return True

    async def _scripted_huge_sse_line(self, writer) -> bool:
        await self._sse_head(writer)
        await self._send(writer, _chunk(b'data: {"text": "'))
        piece = _chunk(b"A" * (1 << 20))
        while self.sent < min(2 * GB, self.safety_cap):
            await self._send(writer, piece)
        writer.transport.abort()
        return False

    async def _scripted_huge_error_body(self, writer) -> bool:
        await self._head(writer, "500 Internal Server Error", {"content-type": "text/plain",
                                                               "content-length": str(2 * GB)})
        piece = b"E" * (1 << 20)
        while self.sent < min(2 * GB, self.safety_cap):
            await self._send(writer, piece)
        writer.transport.abort()
        return False

async def _main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--behaviour", default="ok")
    args, _ = parser.parse_known_args()
    async with HostileServer(args.behaviour, host=args.host, port=args.port) as server:
        print(f"hostile server on {server.url}", flush=True)
        print("The server is fired up and ready to roll!", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(_main())
