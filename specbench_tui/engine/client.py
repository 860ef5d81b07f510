"""An httpx client for one server: a streamed request with per-chunk timing, and the small calls.

Two wire formats, chosen by the profile's ``stream_format``: SGLang's native ``/generate`` (cumulative
``meta_info.completion_tokens`` on every chunk) and the OpenAI-compatible ``/v1/completions`` with
``stream_options.include_usage`` (llama.cpp: one chunk per token, then a last chunk with ``finish_reason``,
``usage`` and the engine's extras such as ``timings``, then ``[DONE]``). In the OpenAI format a stream that
ends without ``[DONE]`` is an error: that is all a client sees when the server is killed mid-answer (HTTP
200 was already sent; no exception, no usage chunk). In the native format a stream that ends before ``[DONE]``
and before a chunk with its ``finish_reason`` is a protocol error (a cut answer is not a measurement).

The stream is read as bytes and split on SSE's own line ends (``\\r\\n``, ``\\r``, ``\\n``) only: JSON leaves
U+2028, U+2029 and U+0085 unescaped in generated text. What a hostile server can make us hold is bounded:
a line without end stops at :data:`MAX_SSE_LINE` (a protocol error), and of a non-200 answer's body only
the first :data:`MAX_ERROR_BODY` bytes are read.

Every failure becomes a result with a reason, never an exception and never a zero: an HTTP error keeps
its status and body, an SSE ``{"error": ...}`` payload (how SGLang reports a context overflow on a stream
that has already answered 200) keeps its message, a final chunk whose ``finish_reason`` is
``{"type": "abort", "message": ..., "status_code": ..., "err_type": ...}`` (how SGLang's scheduler refuses an
input over ``max_req_input_len`` or the KV budget on a stream) keeps SGLang's message and status, and
connection resets and timeouts say which.
Cancellation (a crash, a skip, an abort) propagates, and httpx closes the connection, which is how SGLang
learns to abort the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import httpx
import orjson

from specbench_tui.core.engines.base import STREAM_OPENAI, EngineProfile
from specbench_tui.core.logparse import parse_prometheus
from specbench_tui.core.metrics import Chunk
from specbench_tui.engine import stream

ERROR_HTTP = "http"
ERROR_SSE = "sse"
ERROR_CONNECTION = "connection"
ERROR_TIMEOUT = "timeout"
ERROR_PROTOCOL = "protocol"
ERROR_ABORT = "abort"


@dataclass
class GenerateResult:
    """One streamed ``/generate`` request as it was observed."""

    rid: str
    started_at: float
    """Wall-clock start (epoch seconds)."""
    start: float
    """Monotonic start."""
    end: float = 0.0
    chunks: list[Chunk] = field(default_factory=list)
    text: str = ""
    meta_info: dict[str, object] = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None
    http_status: int | None = None
    done: bool = False
    """The stream's own end marker (``[DONE]``) arrived."""

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def completion_tokens(self) -> int | None:
        value = self.meta_info.get("completion_tokens")
        return value if isinstance(value, int) else None

    @property
    def prompt_tokens(self) -> int | None:
        value = self.meta_info.get("prompt_tokens")
        return value if isinstance(value, int) else None


def _error_text(payload: object) -> str:
    """The message of an SSE or JSON error payload."""
    error = payload.get("error") if isinstance(payload, Mapping) else payload
    if isinstance(error, Mapping):
        return str(error.get("message") or error)
    return str(error)


def _decode_payload(data: bytes, result: GenerateResult) -> dict[str, object] | None:
    """One SSE payload as a JSON object (both wire formats). None when there is nothing to take: JSON that is
    not an object (skipped), or an unreadable or ``{"error": ...}`` payload, recorded in ``result`` (then
    ``result.error`` is set and the stream is over for us). orjson parses the bytes as they came (a third of the
    standard library's time per event); what it refuses and Python's JSON takes (NaN, integers past 64 bits,
    invalid UTF-8 read as U+FFFD) is parsed again by the standard library."""
    try:
        payload = orjson.loads(data)
    except orjson.JSONDecodeError:
        text = data.decode("utf-8", errors="replace")
        try:
            payload = json.loads(text)
        except ValueError:
            result.error_kind = ERROR_PROTOCOL
            result.error = f"unreadable stream payload: {text[:200]!r}"
            return None
    if not isinstance(payload, dict):
        return None
    if "error" in payload:
        result.error_kind = ERROR_SSE
        code = payload["error"].get("code") if isinstance(payload["error"], Mapping) else None
        result.error = f"stream error{f' {code}' if code else ''}: {_error_text(payload)}"[:2000]
        return None
    return payload


def _take_abort(result: GenerateResult) -> None:
    """A request the server aborted (``finish_reason`` type ``abort``) is an error with the server's message and
    status, not an answer of zero tokens."""
    reason = result.meta_info.get("finish_reason")
    if isinstance(reason, Mapping) and reason.get("type") == "abort":
        status = reason.get("status_code")
        status = status if isinstance(status, int) and not isinstance(status, bool) else None
        err_type = reason.get("err_type")
        what = ", ".join(str(x) for x in (f"status {status}" if status else None, err_type) if x)
        message = reason.get("message") or "Aborted"
        result.error = f"the server aborted the request{f' ({what})' if what else ''}: {message}"[:2000]
        result.error_kind = ERROR_ABORT
        if status is not None:
            result.http_status = status
    elif reason == "abort":
        result.error = "the server aborted the request (finish_reason \"abort\")"
        result.error_kind = ERROR_ABORT


MAX_ERROR_BODY = 4096
"""Bytes of a non-200 answer's body that are read (for its message); the rest is never read."""
MAX_SSE_LINE = 16 << 20
"""The longest stream line accepted; a longer one (a line without end) is a protocol error."""
_EOL = re.compile(rb"\r\n|\r|\n")


class _LineTooLong(Exception):
    """A stream line passed :data:`MAX_SSE_LINE` without a line end."""


async def _sse_lines(response: httpx.Response, max_line: int = MAX_SSE_LINE) -> AsyncIterator[str]:
    """The response body's lines, split on ``\\r\\n``, ``\\r`` or ``\\n`` only (SSE's line ends), each decoded
    as UTF-8. Not httpx's ``aiter_lines``: it splits on every ``str.splitlines`` separator, and JSON leaves
    U+2028, U+2029 and U+0085 unescaped inside generated text. A line longer than ``max_line`` bytes raises
    :class:`_LineTooLong` instead of growing in memory until the request times out."""
    pending = bytearray()
    after_cr = False  # the last chunk ended with \r: a \n at the start of the next one ends nothing more
    async for chunk in response.aiter_bytes():
        if after_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        after_cr = chunk[-1:] == b"\r"
        start = 0
        for end in _EOL.finditer(chunk):
            pending += chunk[start:end.start()]
            line = pending.decode("utf-8", errors="replace")
            pending.clear()
            start = end.end()
            yield line
        pending += chunk[start:]
        if len(pending) > max_line:
            raise _LineTooLong(len(pending))
    if pending:
        yield pending.decode("utf-8", errors="replace")


async def _read_head(response: httpx.Response, limit: int = MAX_ERROR_BODY) -> bytes:
    """At most ``limit`` bytes of the body (a 2 GB error page is not read into memory); the caller closes."""
    head = bytearray()
    chunks = response.aiter_bytes()
    try:
        async for chunk in chunks:
            head += chunk
            if len(head) >= limit:
                break
    finally:
        if isinstance(chunks, AsyncGenerator):  # httpx declares an iterator; it is a generator to close
            await chunks.aclose()
    return bytes(head[:limit])


MAX_CONNECTIONS = 4096 + 16
"""Connections one client may hold: the sweep's MAX_CONCURRENCY plus the engine's own side requests."""


class ServerClient:
    """Talks to one server at ``base_url`` using the endpoints of ``profile``."""

    def __init__(self, base_url: str, profile: EngineProfile, *, api_key: str | None = None,
                 request_timeout_s: float = 900.0, connect_timeout_s: float = 10.0,
                 transport: httpx.AsyncBaseTransport | None = None,
                 stream_options: Mapping[str, object] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.profile = profile
        self.stream_options = profile.stream_options if stream_options is None else stream_options
        """OpenAI format: what every streamed request asks (the sweep's choice: EngineProfile.sweep_stream_options)."""
        self.request_timeout_s = request_timeout_s
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        limits = httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS)
        plain = self.base_url.startswith("http://")
        # The small calls (health, info, flush, metrics): httpx; no CA bundle is loaded for plain HTTP (tens of ms
        # on the event loop).
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, verify=not plain, transport=transport,
            timeout=httpx.Timeout(request_timeout_s, connect=connect_timeout_s), limits=limits,
        )
        # The measured stream: our own kept-alive connections with kernel receive stamps (engine.stream), for plain
        # HTTP on Linux with no proxy in the way; else httpx (TLS, proxies, another OS, a test's transport).
        url = urllib.parse.urlsplit(self.base_url)
        direct = plain and transport is None and stream.supported() and url.hostname is not None \
            and not _proxied(url.hostname)
        self._pool = stream.StreamPool(url.hostname or "", url.port or 80, headers=headers,
                                       connect_timeout_s=connect_timeout_s) if direct else None
        self._path_prefix = url.path.rstrip("/")

    @property
    def stream_pool(self) -> stream.StreamPool | None:
        """The measured stream's connections (None where httpx carries the stream)."""
        return self._pool

    async def reserve(self, count: int) -> None:
        """Open connections for ``count`` requests in flight ahead of a load point, so that none of its requests
        times a connect (best effort: a failure shows on the requests themselves)."""
        if self._pool is not None:
            with contextlib.suppress(stream.StreamError, OSError):
                await self._pool.reserve(count)

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.close()
        await self._http.aclose()

    async def get_json(self, path: str, timeout_s: float = 10.0) -> dict[str, object] | None:
        """``GET path`` as JSON, or None on any failure."""
        try:
            response = await self._http.get(path, timeout=timeout_s)
            if response.status_code != 200:
                return None
            data = response.json()
            return data if isinstance(data, dict) else None
        except (httpx.HTTPError, ValueError):
            return None

    async def healthy(self, timeout_s: float | None = None) -> bool:
        """Whether the health endpoint answers 200 (SGLang's runs a one-token generate)."""
        try:
            response = await self._http.get(self.profile.health_path,
                                            timeout=timeout_s or self.profile.health_timeout_s)
            return response.status_code == 200
        except httpx.HTTPError:
            return False

    async def server_info(self) -> dict[str, object] | None:
        return await self.get_json(self.profile.info_path)

    async def context_length(self, info: Mapping[str, object]) -> int | None:
        """The served context length: the profile's model list (``data[0].max_model_len``) when it has one, else
        what the info endpoint's JSON (``info``) says; None when neither says."""
        if self.profile.models_path is not None:
            models = await self.get_json(self.profile.models_path)
            data = models.get("data") if models else None
            first = data[0] if isinstance(data, list) and data and isinstance(data[0], Mapping) else {}
            value = first.get("max_model_len")
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return self.profile.context_length(info)

    async def tokenize(self, text: str) -> tuple[int, int | None]:
        """The server's own token count of ``text`` and its ``max_model_len`` (raises on failure)."""
        response = await self._http.post(self.profile.tokenize_path, json={self.profile.tokenize_key: text},
                                         timeout=60.0)
        response.raise_for_status()
        data = response.json()
        count = data.get("count")
        if not isinstance(count, int):
            tokens = data.get("tokens")
            if not isinstance(tokens, list):
                raise ValueError(f"{self.profile.tokenize_path} answered without a token count")
            count = len(tokens)
        max_len = data.get("max_model_len")
        return count, max_len if isinstance(max_len, int) else None

    async def abort(self, rid: str) -> None:
        """Ask the server to drop request ``rid`` (best effort; closing the stream does it too)."""
        if self.profile.abort_path is None:
            return
        try:
            await self._http.post(self.profile.abort_path, json={"rid": rid}, timeout=2.0)
        except httpx.HTTPError:
            pass

    async def flush_cache(self, *, deadline_s: float = 10.0, pause_s: float = 0.25, try_timeout_s: float = 5.0,
                          attempts: int | None = None, on_wait: Callable[[], None] | None = None) -> bool:
        """Empty the server's caches (``POST`` the profile's flush endpoint) and say whether it did. SGLang answers
        400 "Cache not flushed because there are pending requests" while any request runs or waits (an aborted
        stream's request leaves a moment later), so a refusal is retried ``pause_s`` apart, for at most
        ``deadline_s`` in all (and at most ``attempts`` tries when given; each try within ``try_timeout_s`` and the
        time left; ``on_wait`` is told of each refusal, which is no progress); False when the engine cannot flush or
        did not accept in time."""
        path = self.profile.flush_cache_path
        if path is None:
            return False
        deadline = time.monotonic() + max(0.0, deadline_s)
        tries = 0
        while True:
            tries += 1
            try:
                response = await self._http.post(path, timeout=max(0.05, min(try_timeout_s,
                                                                             deadline - time.monotonic())))
                if response.status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            if deadline - time.monotonic() <= pause_s or (attempts is not None and tries >= attempts):
                return False
            if on_wait is not None:
                on_wait()
            await asyncio.sleep(pause_s)

    async def counters(self) -> dict[str, float] | None:
        """The profile's Prometheus counters now (``/metrics``), or None when it has none or they cannot be read."""
        if self.profile.metrics_path is None:
            return None
        try:
            response = await self._http.get(self.profile.metrics_path, timeout=10.0)
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        return parse_prometheus(response.text)

    def _body(self, text: str, sampling_params: Mapping[str, object], rid: str) -> dict[str, object]:
        if self.profile.stream_format == STREAM_OPENAI:
            params = dict(sampling_params)
            body: dict[str, object] = {"prompt": text, "stream": True, "stream_options": dict(self.stream_options)}
            if "max_new_tokens" in params:
                body["max_tokens"] = params.pop("max_new_tokens")
            body.update(params)
            return body
        return {"text": text, "sampling_params": dict(sampling_params), "stream": True, "rid": rid}

    async def generate(self, text: str, sampling_params: Mapping[str, object], *,
                       on_progress: Callable[[], None] | None = None, rid: str | None = None) -> GenerateResult:
        """Stream one ``/generate`` request and time every chunk; errors are recorded, never raised."""
        rid = rid or uuid.uuid4().hex
        result = GenerateResult(rid=rid, started_at=time.time(), start=time.monotonic())
        body = self._body(text, sampling_params, rid)
        reader = _Reader(result, self.profile.stream_format == STREAM_OPENAI, on_progress, self.profile)
        try:
            if self._pool is not None:
                payload = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
                await _within(self._pool.post(self._path_prefix + self.profile.generate_path, payload, reader),
                              self.request_timeout_s)
            else:
                await _within(self._stream(body, reader), self.request_timeout_s)
            reader.ended()
        except asyncio.TimeoutError:
            result.error_kind = ERROR_TIMEOUT
            result.error = f"no complete answer within request_timeout_s = {self.request_timeout_s:g} s"
        except (_LineTooLong, stream.StreamLineTooLong) as exc:
            result.error_kind = ERROR_PROTOCOL
            result.error = (f"a stream line passed {MAX_SSE_LINE >> 20} MB without a line end ({exc.args[0]} bytes "
                            f"after {len(result.chunks)} chunks): not a server-sent event stream")
        except stream.StreamConnectTimeout as exc:
            result.error_kind = ERROR_TIMEOUT
            result.error = f"timed out: ConnectTimeout: {exc}"
        except (stream.StreamConnectError, stream.StreamReset) as exc:
            result.error_kind = ERROR_CONNECTION
            result.error = str(exc)[:500]
        except stream.StreamProtocolError as exc:
            result.error_kind = ERROR_PROTOCOL
            result.error = f"not an HTTP answer: {exc}"[:500]
        except httpx.TimeoutException as exc:
            result.error_kind = ERROR_TIMEOUT
            result.error = f"timed out: {type(exc).__name__}"
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.ConnectError,
                httpx.CloseError) as exc:
            result.error_kind = ERROR_CONNECTION
            result.error = f"connection {'refused' if isinstance(exc, httpx.ConnectError) else 'reset'}: " \
                           f"{type(exc).__name__}: {exc}"[:500]
        except httpx.HTTPError as exc:
            result.error_kind = ERROR_CONNECTION
            result.error = f"{type(exc).__name__}: {exc}"[:500]
        except OSError as exc:  # a send on a connection the server reset
            result.error_kind = ERROR_CONNECTION
            result.error = f"connection reset: {exc}"[:500]
        result.end = result.end or time.monotonic()
        if result.error is None:
            _take_abort(result)
        return result

    async def _stream(self, body: Mapping[str, object], reader: _Reader) -> None:
        """The stream through httpx (TLS, proxies, another OS, a test's transport): read-time stamps."""
        async def on_wire(event: str, info: Mapping[str, object]) -> None:
            # The clock starts when the request starts leaving for the server, not when we began building it:
            # httpx's request building and pool checkout (1-2 ms on 2 cores) are not the server's latency.
            if event == "http11.send_request_headers.started":
                reader.started(time.monotonic())

        async with self._http.stream("POST", self.profile.generate_path, json=body,
                                     extensions={"trace": on_wire}) as response:
            reader.status(response.status_code)
            if response.status_code != 200:
                reader.error_body(await _read_head(response))
                return
            async for line in _sse_lines(response):
                if reader.line(line.encode("utf-8", errors="surrogateescape"), time.monotonic()):
                    return
                reader.progress()


async def _within(work: Awaitable[None], timeout_s: float) -> None:
    """Await ``work`` for at most ``timeout_s`` (``asyncio.TimeoutError`` past it). Python 3.11's ``asyncio.timeout``
    runs it in this task; ``wait_for`` would wrap every request in a task of its own."""
    limit = getattr(asyncio, "timeout", None)
    if limit is None:  # Python 3.10
        await asyncio.wait_for(work, timeout_s)
        return
    async with limit(timeout_s):
        await work


def _proxied(host: str) -> bool:
    """Whether the environment routes plain HTTP to ``host`` through a proxy (then httpx, which honours it, carries
    the stream)."""
    return "http" in urllib.request.getproxies() and not urllib.request.proxy_bypass(host)


class _Reader:
    """One request's answer, line by line, into its :class:`GenerateResult`: the :class:`stream.Consumer` of the
    measured stream (called from the connection's reader callback) and of the httpx fallback alike."""

    max_line = MAX_SSE_LINE
    max_error_body = MAX_ERROR_BODY

    def __init__(self, result: GenerateResult, openai: bool, on_progress: Callable[[], None] | None,
                 profile: EngineProfile) -> None:
        self.result = result
        self.openai = openai
        self.profile = profile
        self._on_progress = on_progress
        self._last = result.start
        self._answered = False

    def started(self, at: float) -> None:
        result = self.result
        result.started_at += at - result.start
        result.start = self._last = at

    def status(self, code: int) -> None:
        self.result.http_status = code

    def progress(self) -> None:
        if self._on_progress is not None:
            self._on_progress()

    def error_body(self, head: bytes) -> None:
        result = self.result
        raw = head.decode("utf-8", errors="replace")
        result.error_kind = ERROR_HTTP
        try:
            message = _error_text(json.loads(raw))
        except ValueError:
            message = raw.strip()
        result.error = f"HTTP {result.http_status}: {message}"[:2000]
        self._answered = True

    def line(self, line: bytes, at: float) -> bool:
        # When the line's last bytes reached the socket (kernel stamp), else when we read them; never before an
        # earlier line of the same answer (an answer's times stay in order: its end never before its first token).
        if not line.startswith(b"data:"):
            return False
        result = self.result
        now = self._last = max(self._last, at)
        data = line[5:].strip()
        if data == b"[DONE]":
            result.end = now
            result.done = self._answered = True
            return True
        payload = _decode_payload(data, result)
        if result.error is not None:
            result.end = now
            self._answered = True
            return True
        if payload is not None:
            if self.openai:
                _absorb_openai(self.profile, payload, now, result)
            else:
                _absorb(payload, now, result)
        return False

    def ended(self) -> None:
        """The answer is over: a stream that stopped short of its end marker is an error, not a measurement."""
        result = self.result
        if self._answered or result.error is not None:
            return
        if self.openai:
            result.error_kind = ERROR_CONNECTION
            result.error = ("the stream ended without [DONE] and without its final usage chunk: the server stopped "
                            f"answering mid-request (after {len(result.chunks)} chunks)")
        elif not result.chunks:
            result.error_kind = ERROR_PROTOCOL
            result.error = "the stream ended without data or [DONE]"
        elif result.meta_info.get("finish_reason") is None:
            # A complete HTTP body that stops before [DONE] and before a chunk with its finish_reason: the
            # answer was cut, so its timings and token count are not those of a whole answer.
            result.error_kind = ERROR_PROTOCOL
            result.error = (f"the stream ended before [DONE] (after {len(result.chunks)} chunks, without a "
                            "finish_reason)")


def _first_choice(payload: Mapping[str, object]) -> Mapping[str, object] | None:
    """The chunk's first choice, when it has one that is an object."""
    choices = payload.get("choices")
    return choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else None


def _choice_text(choice: Mapping[str, object]) -> str | None:
    """A completion's ``text`` or a chat completion's ``delta.content``; None when neither is a string."""
    piece = choice.get("text")
    if isinstance(piece, str):
        return piece
    delta = choice.get("delta")
    content = delta.get("content") if isinstance(delta, Mapping) else None
    return content if isinstance(content, str) else None


def _absorb_choice(choice: Mapping[str, object], usage_tokens: object, counted: int, now: float,
                   result: GenerateResult) -> int:
    """Take one choice's text into ``result`` (a chunk per token, unless usage counts them); the tokens counted."""
    piece = _choice_text(choice)
    finished = choice.get("finish_reason") is not None
    if piece is not None and not finished:
        result.text += piece
        counted = usage_tokens if isinstance(usage_tokens, int) else counted + 1
        result.chunks.append(Chunk(now, counted))
    elif piece:
        result.text += piece
    if finished:
        # vLLM: the finish_reason rides on the last token's chunk; usage comes after, with no choices.
        result.meta_info["finish_reason"] = choice["finish_reason"]
    return counted


def _absorb_openai(profile: EngineProfile, payload: Mapping[str, object], now: float, result: GenerateResult) -> None:
    """One OpenAI completions chunk (decoded by :func:`_decode_payload`): text per chunk (one token each,
    unless the chunk carries usage), and the final chunk's usage and extras mapped by the profile onto
    ``meta_info``."""
    counted = result.chunks[-1].completion_tokens if result.chunks else 0
    usage = payload.get("usage")
    usage_tokens = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    choice = _first_choice(payload)
    if choice is not None:
        counted = _absorb_choice(choice, usage_tokens, counted, now, result)
    if isinstance(usage, Mapping) and (choice is None or choice.get("finish_reason") is not None):
        meta = profile.final_meta(payload) if profile.final_meta else dict(usage)
        result.meta_info = {**result.meta_info, **meta}
        tokens = meta.get("completion_tokens")
        if isinstance(tokens, int) and tokens > counted:
            result.chunks.append(Chunk(now, tokens))


def _absorb(payload: Mapping[str, object], now: float, result: GenerateResult) -> None:
    """Take one native ``/generate`` payload (decoded by :func:`_decode_payload`) into ``result``."""
    meta = payload.get("meta_info")
    if isinstance(meta, dict):
        result.meta_info = meta
        tokens = meta.get("completion_tokens")
        if isinstance(tokens, int):
            result.chunks.append(Chunk(now, tokens))
    text = payload.get("text")
    if isinstance(text, str):
        # Cumulative by default; with --incremental-streaming-output each payload is a delta.
        result.text = text if text.startswith(result.text) else result.text + text
