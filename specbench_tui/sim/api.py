"""SGLang's HTTP API (``http_server.py`` plus the tokenizer manager's request handling) over ``engine.Engine``.

Bodies, field names, status codes and error texts follow the reference (§2): health and readiness, model
and server info, native ``/generate`` (cumulative streaming text, ``meta_info`` with the ``spec_*`` fields
on the finished chunk), the OpenAI-compatible completions and chat endpoints (usage only on request,
``sglext.spec_tokens_details``), tokenize/detokenize, ``/flush_cache``, ``/metrics`` and ``--api-key``.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from specbench_tui.sim import SGLANG_VERSION, tokenizer
from specbench_tui.sim.engine import Engine, FinishReason, Request
from specbench_tui.sim.httpd import HttpRequest, Response, StreamResponse
from specbench_tui.sim.logs import Logger
from specbench_tui.sim.metrics import Metrics
from specbench_tui.sim.spec_hook import reserved_tokens

if TYPE_CHECKING:
    from specbench_tui.sim.args import Resolved
    from specbench_tui.sim.procs import MemoryPlan

FLUSH_OK = ("Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
            "requests, the operation will not be performed.)\n")
FLUSH_FAILED = "Flush cache failed.\n"
FLUSH_BUSY = "Another flush_cache is already in progress."
FLUSH_TIMED_OUT = "Timed out waiting for idle state."
"""``/flush_cache``'s bodies: ``http_server.py`` (done, failed) and ``SchedulerFlushWrapper`` (deferred)."""
_ALWAYS_ALLOWED = ("/health", "/ready", "/metrics")


class _Received(TypedDict, total=False):
    """When the HTTP server read a request (left out: the request's own creation time is used)."""

    created_mono: float


class RequestError(Exception):
    """A request SGLang rejects with HTTP 400 (the tokenizer manager's ``ValueError``)."""


@dataclass
class ServerState:
    """What the handlers need from the server."""

    args: Resolved
    engine: Engine
    metrics: Metrics
    log: Logger
    profile: dict[str, Any]
    memory: MemoryPlan
    context_len: int
    startup_time: float = 0.0
    captured_bs: list[int] = field(default_factory=list)
    status: str = "Starting"  # Starting -> Up, or UnHealthy after a failed health check
    gracefully_exit: bool = False
    first_request_hook: Callable[[], None] | None = None
    created: int = field(default_factory=lambda: int(time.time()))


def _sse(data: object) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return f"data: {payload}\n\n".encode()


def _openai_error(message: str, status: int = 400) -> Response:
    return Response.json({"object": "error", "message": message, "type": "BadRequestError", "param": None,
                          "code": status}, status)


class Api:
    """Route table and handlers."""

    def __init__(self, state: ServerState) -> None:
        self.s = state
        self._flush_pending = False
        get, post = ("GET", "HEAD"), ("POST",)
        self.routes: dict[str, tuple[tuple[str, ...], Callable[[HttpRequest], Awaitable[Response | StreamResponse]]]] = {
            "/health": (get, self.health),
            "/health_generate": (get, self.health),
            "/ready": (get, self.ready),
            "/model_info": (get, self.model_info),
            "/get_model_info": (get, self.model_info),
            "/server_info": (get, self.server_info),
            "/get_server_info": (get, self.server_info),
            "/v1/models": (get, self.models),
            "/generate": (("POST", "PUT"), self.generate),
            "/v1/completions": (post, self.completions),
            "/v1/chat/completions": (post, self.chat),
            "/v1/tokenize": (post, self.tokenize),
            "/tokenize": (post, self.tokenize),
            "/v1/detokenize": (post, self.detokenize),
            "/detokenize": (post, self.detokenize),
            "/flush_cache": (("GET", "POST"), self.flush_cache),
            "/metrics": (get, self.metrics),
            "/abort_request": (post, self.abort_request),
            "/freeze_gc": (("GET", "POST"), self.freeze_gc),
            "/start_profile": (("GET", "POST"), self.noop),
            "/stop_profile": (("GET", "POST"), self.noop),
            "/pause_generation": (post, self.noop),
            "/continue_generation": (post, self.noop),
        }

    # -- dispatch -----------------------------------------------------------------------------------------
    async def handle(self, req: HttpRequest) -> Response | StreamResponse:
        if self.s.engine.server_frozen:
            await asyncio.Event().wait()  # a hung server: nothing answers any more
        path = req.path
        key = self.s.args.api_key
        if key and not path.startswith(_ALWAYS_ALLOWED):
            if req.headers.get("authorization", "") != f"Bearer {key}":
                return Response.json({"error": "Unauthorized"}, 401)
        route = self.routes.get(path)
        if route is None or (path == "/metrics" and not self.s.args.enable_metrics):
            return Response.json({"detail": "Not Found"}, 404)
        if req.method not in route[0]:
            return Response.json({"detail": "Method Not Allowed"}, 405)
        return await route[1](req)

    async def noop(self, req: HttpRequest) -> Response:
        return Response(200, b"", None)

    # -- health and info ------------------------------------------------------------------------------------
    async def health(self, req: HttpRequest) -> Response:
        s = self.s
        if s.gracefully_exit or s.status == "Starting":
            return Response(503, b"", None)
        if req.path == "/health" and os.environ.get("SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION", "true").lower() in (
                "0", "false", "no"):
            return Response(200, b"", None)
        timeout = s.profile["health"]["timeout_s"]
        if timeout is None:
            timeout = float(os.environ.get("SGLANG_HEALTH_CHECK_TIMEOUT", "20"))
        tic = time.monotonic()
        hreq = Request(rid=f"HEALTH_CHECK_{uuid.uuid4().hex}", input_ids=[0], prompt_text="", kind="chat",
                       max_new_tokens=1, internal=True)
        s.engine.submit(hreq)
        poll = float(s.profile["health"]["poll_s"])
        while time.monotonic() < tic + timeout:
            await asyncio.sleep(poll)
            if s.engine.last_receive > tic:
                return Response(200, b"", None)
        s.engine.abort(hreq.rid)
        s.log.error(f"Health check failed. Server couldn't get a response from detokenizer for last {int(timeout)} "
                    f"seconds. tic start time: {time.time() - timeout:.2f}. last_heartbeat time: "
                    f"{time.time() - (time.monotonic() - s.engine.last_receive):.2f}")
        s.status = "UnHealthy"
        return Response(503, b"", None)

    async def ready(self, req: HttpRequest) -> Response:
        ok = self.s.status == "Up" and not self.s.gracefully_exit
        return Response(200 if ok else 503, b"", None)

    def model_info_dict(self) -> dict[str, object]:
        a, model = self.s.args, self.s.profile["model"]
        return {
            "model_path": a.model_path, "tokenizer_path": a.tokenizer_path, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default", "load_format": a.load_format,
            "reasoning_parser": a.reasoning_parser, "tool_call_parser": a.tool_call_parser,
            "disaggregation_mode": "null", "served_model_name": a.served_model_name,
            "has_image_understanding": False, "has_audio_understanding": False,
            "model_type": model["model_type"], "architectures": [model["architecture"]],
        }

    async def model_info(self, req: HttpRequest) -> Response:
        if req.path == "/get_model_info":
            self.s.log.warning("Endpoint '/get_model_info' is deprecated and will be removed in a future version. "
                               "Please use '/model_info' instead.")
        return Response.json(self.model_info_dict())

    async def server_info(self, req: HttpRequest) -> Response:
        s, e = self.s, self.s.engine
        if req.path == "/get_server_info":
            s.log.warning("Endpoint '/get_server_info' is deprecated and will be removed in a future version. "
                          "Please use '/server_info' instead.")
        values = dict(s.args.values.items())
        # build_server_info: the resolved ServerArgs (context_length stays None unless --context-length was
        # passed; the model's limit is on /v1/models) merged with the scheduler's start-up info.
        config = {phase: dict(phase_config) for phase, phase_config in values["cuda_graph_config"].items()}
        config["decode"]["bs"] = list(s.captured_bs) or None
        values["cuda_graph_config"] = config
        values["max_total_num_tokens"] = s.engine.max_total_num_tokens
        values["max_req_input_len"] = s.engine.max_req_input_len
        states = []
        for _ in range(s.args.dp_size):
            state: dict[str, object] = {
                "world_size": s.args.tp_size * s.args.pp_size,
                "startup_time": s.startup_time,
                "effective_max_running_requests_per_dp": e.max_running,
                "disaggregation_mode": "null", "decode_cuda_graph_bs": list(s.captured_bs),  # what was captured
                "last_gen_throughput": e.last_gen_throughput,
                "memory_usage": {"weight": round(s.memory.weights_gb + s.memory.draft_gb, 2),
                                 "kvcache": round(max(s.memory.pool_gb, 0.0), 2),
                                 "token_capacity": s.memory.max_total_num_tokens,
                                 "graph": s.memory.graph_gb},
            }
            if s.args.spec_on and e.has_spec_accept_length:
                state["avg_spec_accept_length"] = e.avg_spec_accept_length
            if e.record_step_time:
                state["step_time_dict"] = e.step_time_dict
            states.append(state)
        values.update({"startup_time": s.startup_time, "version": SGLANG_VERSION, "frontend": "python",
                       "internal_states": states})
        return Response.json(values)

    async def models(self, req: HttpRequest) -> Response:
        name = self.s.args.served_model_name
        return Response.json({"object": "list", "data": [{
            "id": name, "object": "model", "created": self.s.created, "owned_by": "sglang", "root": name,
            "parent": None, "max_model_len": self.s.context_len}]})

    async def metrics(self, req: HttpRequest) -> Response:
        return Response(200, self.s.metrics.render().encode(), "text/plain; version=0.0.4; charset=utf-8")

    async def flush_cache(self, req: HttpRequest) -> Response:
        """``/flush_cache[?timeout=S]``: refused (400) while requests run or wait; with a timeout the scheduler
        defers the flush until idle (``SchedulerFlushWrapper``), one deferred flush at a time."""
        try:
            timeout = float(req.query.get("timeout", "0") or 0)
        except ValueError:
            timeout = -1.0
        if timeout < 0:
            return Response.json({"detail": [{"type": "greater_than_equal", "loc": ["query", "timeout"],
                                              "msg": "Input should be greater than or equal to 0",
                                              "input": req.query.get("timeout"), "ctx": {"ge": 0.0}}]}, 422)
        engine = self.s.engine
        if timeout > 0 and engine.in_flight:
            if self._flush_pending:
                return Response(400, FLUSH_BUSY.encode(), None)
            self._flush_pending = True
            try:
                try:
                    await asyncio.wait_for(engine.idle.wait(), timeout)
                except asyncio.TimeoutError:
                    pass
                if engine.in_flight:
                    engine.log.warning("Deferred flush_cache timed out while waiting for idle state.")
                    return Response(400, FLUSH_TIMED_OUT.encode(), None)
            finally:
                self._flush_pending = False
        if engine.flush_cache():
            return Response(200, FLUSH_OK.encode(), None)
        return Response(400, FLUSH_FAILED.encode(), None)

    async def freeze_gc(self, req: HttpRequest) -> Response:
        """Freezes the garbage collector in SGLang; called by the server itself after the warm-up."""
        return Response(200, b"Garbage collection frozen.\n", None)

    async def abort_request(self, req: HttpRequest) -> Response:
        body = self._json(req) or {}
        if body.get("abort_all"):
            self.s.engine.abort(None, "Abort all requests")
        elif body.get("rid"):
            self.s.engine.abort(str(body["rid"]), "Abort before prefill")
        return Response(200, b"", None)

    # -- tokenization -----------------------------------------------------------------------------------------
    async def tokenize(self, req: HttpRequest) -> Response:
        body = self._json(req)
        if not isinstance(body, dict):
            return _openai_error("Invalid JSON body")
        if "messages" in body:
            ids = tokenizer.apply_chat_template(body["messages"])[1]
            return Response.json({"tokens": ids, "count": len(ids), "max_model_len": self._tokenizer_max()})
        prompt = body.get("prompt", "")
        if isinstance(prompt, list):
            lists = [tokenizer.encode(str(p)) for p in prompt]
            return Response.json({"tokens": lists, "count": [len(x) for x in lists], "max_model_len": self._tokenizer_max()})
        ids = tokenizer.encode(str(prompt))
        return Response.json({"tokens": ids, "count": len(ids), "max_model_len": self._tokenizer_max()})

    def _tokenizer_max(self) -> int:
        """``serving_tokenize.py``: the tokenizer's ``model_max_length``, not the server's context length."""
        return int(self.s.profile["model"]["tokenizer_max_length"])

    async def detokenize(self, req: HttpRequest) -> Response:
        body = self._json(req) or {}
        return Response.json({"text": tokenizer.decode(body.get("tokens", []))})

    # -- request construction -------------------------------------------------------------------------------------
    @staticmethod
    def _json(req: HttpRequest) -> Any:
        try:
            return req.json()
        except ValueError:
            return None

    def _validate(self, n_input: int, max_new: int | None) -> tuple[int, int | None]:
        """SGLang's context-length check (``TokenizerManager._validate_one_request``): the tokens reserved for
        speculative decoding count as input; returns (input length kept, max_new_tokens) or raises RequestError."""
        ctx = self.s.context_len
        auto = self.s.args.allow_auto_truncate
        counted = n_input + reserved_tokens(self.s.args)
        if counted >= ctx:
            if not auto:
                raise RequestError(f"The input ({counted} tokens) is longer than the model's context length "
                                   f"({ctx} tokens).")
            self.s.log.warning(f"The input ({counted} tokens) is longer than the model's context length ({ctx} "
                               f"tokens). Truncating the input.")
            n_input = min(n_input, ctx)
            counted = n_input
        if max_new is not None and max_new + counted > ctx:
            if not auto:
                raise RequestError(
                    f"Requested token count exceeds the model's maximum context length of {ctx} tokens. You "
                    f"requested a total of {max_new + counted} tokens: {counted} tokens from the input messages and "
                    f"{max_new} tokens for the completion. Please reduce the number of tokens in the input messages "
                    f"or the completion to fit within the limit.")
            self.s.log.warning(f"Requested token count ({counted} input + {max_new} new) exceeds the model's context "
                               f"length ({ctx} tokens). Truncating max_new_tokens.")
            max_new = max(0, ctx - counted)
        return n_input, max_new

    def _make_request(self, text: str | None, input_ids: list[int] | None, params: dict[str, Any],
                      rid: str | None, default_max: int | None = 128, *, received: float | None = None) -> Request:
        if self.s.first_request_hook is not None:
            self.s.first_request_hook()
            self.s.first_request_hook = None
        if input_ids is None:
            input_ids = tokenizer.encode(text or "")
        if not input_ids:
            raise RequestError("The input is empty.")
        max_new = params.get("max_new_tokens", default_max)
        max_new = None if max_new is None else int(max_new)
        n_input, max_new = self._validate(len(input_ids), max_new)
        input_ids = list(input_ids[:n_input])
        prompt_text = text if text is not None else tokenizer.decode(input_ids)
        kind = tokenizer.classify(prompt_text, len(input_ids))
        temperature = float(params.get("temperature", 1.0) if params.get("temperature") is not None else 1.0)
        seed = tokenizer.prompt_seed(input_ids)
        if temperature > 0:
            seed ^= int(params.get("sampling_seed", 0) or 0) * 7919
        ignore_eos = bool(params.get("ignore_eos", False))
        natural = None
        out = self.s.profile["output"]
        if out["eos"] and not ignore_eos:
            lo, hi = out["length"].get(kind, out["length"]["chat"])
            natural = lo + seed % max(1, hi - lo + 1)
        received_at: _Received = {"created_mono": received} if received is not None else {}
        return Request(
            rid=rid or uuid.uuid4().hex, input_ids=input_ids, prompt_text=prompt_text, kind=kind,
            max_new_tokens=max_new if max_new is not None else self.s.context_len - len(input_ids),
            temperature=temperature, ignore_eos=ignore_eos, natural_len=natural, seed=seed,
            reproducible=temperature <= 0 or params.get("sampling_seed") is not None,
            **received_at,
        )

    async def _wait(self, reqs: list[Request], http: HttpRequest) -> bool:
        """Wait until every request finished; abort them and return False if the client went away."""
        while not all(r.finished for r in reqs):
            pending = [asyncio.ensure_future(r.event.wait()) for r in reqs if not r.finished]
            gone = asyncio.ensure_future(http.disconnected.wait())
            await asyncio.wait([*pending, gone], return_when=asyncio.FIRST_COMPLETED)
            for fut in (*pending, gone):
                fut.cancel()
            for r in reqs:
                r.event.clear()
            if http.disconnected.is_set():
                for r in reqs:
                    if not r.finished:
                        self.s.engine.abort(r.rid)
                return False
        return True

    async def _updates(self, reqs: list[Request]) -> AsyncIterator[list[Request]]:
        """Yield the requests that have new output, until all finished; abort leftovers when closed early."""
        try:
            remaining = list(reqs)
            while remaining:
                waits = {asyncio.ensure_future(r.event.wait()): r for r in remaining}
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for fut in waits:
                    fut.cancel()
                ready = [r for r in remaining if r.event.is_set()]
                for r in ready:
                    r.event.clear()
                yield ready
                remaining = [r for r in remaining if not r.finished]
        finally:
            for r in reqs:
                if not r.finished:
                    self.s.engine.abort(r.rid)

    # -- /generate ----------------------------------------------------------------------------------------------
    def meta_info(self, req: Request) -> dict[str, object]:
        m: dict[str, object] = {
            "id": req.rid, "finish_reason": req.finish_reason, "prompt_tokens": len(req.input_ids),
            "weight_version": "default", "completion_tokens": req.completion_tokens,
            "cached_tokens": req.cached_tokens, "reasoning_tokens": 0, "num_retractions": req.retractions,
        }
        if req.finished:
            m["e2e_latency"] = (req.finished_mono or time.monotonic()) - req.created_mono
            m.update(self.spec_details(req) or {})
        return m

    def spec_details(self, req: Request) -> dict[str, object] | None:
        """The ``spec_*`` fields of a finished request (None without speculative decoding)."""
        if not self.s.args.spec_on:
            return None
        d: dict[str, object] = {}
        proposed = req.verify_ct * ((self.s.args.speculative_num_draft_tokens or 1) - 1)
        if req.verify_ct > 0 and proposed > 0:  # _calculate_spec_decoding_metrics: nothing without a verify
            d.update({
                "spec_verify_ct": req.verify_ct,
                "spec_accept_rate": req.correct_drafts / proposed,
                "spec_accept_length": req.completion_tokens / req.verify_ct,
                "spec_num_correct_drafts": req.correct_drafts,
                "spec_num_proposed_drafts": proposed,
                "spec_correct_drafts_histogram": list(req.histogram),
            })
        return d

    async def generate(self, http: HttpRequest) -> Response | StreamResponse:
        body = self._json(http)
        if not isinstance(body, dict):
            return Response.json({"error": {"message": "Invalid JSON body"}}, 400)
        stream = bool(body.get("stream", False))
        texts, ids_list, batch = self._inputs(body)
        try:
            reqs = self._native_requests(body, texts, ids_list, batch, http.received)
        except RequestError as exc:
            if stream:
                return StreamResponse(self._error_stream(str(exc)))
            return Response.json({"error": {"message": str(exc)}}, 400)
        for r in reqs:
            self.s.engine.submit(r)
        if stream:
            return StreamResponse(self._generate_stream(reqs, batch))
        if not await self._wait(reqs, http):
            return Response.json({"error": {"message": "Client disconnected"}}, 400)
        refused = self._refused(reqs)
        if refused is not None:  # _handle_abort_finish_reason: a non-stream 400 abort is the ValueError's 400
            return Response.json({"error": {"message": refused["message"]}}, 400)
        results = [{"text": r.text, "output_ids": r.output_ids, "meta_info": self.meta_info(r)} for r in reqs]
        return Response.json(results if batch else results[0])

    def _native_requests(self, body: dict[str, Any], texts: list[str | None], ids_list: list[list[int] | None],
                         batch: bool, received: float | None) -> list[Request]:
        """One request per input of a ``/generate`` body, each with its own sampling params and rid when the body
        lists them (raises :class:`RequestError` for a bad one)."""
        params_list = body.get("sampling_params") or {}
        rids = body.get("rid")
        reqs: list[Request] = []
        for i in range(len(texts)):
            params = params_list[i] if isinstance(params_list, list) else params_list
            rid = rids[i] if isinstance(rids, list) else (rids if not batch else None)
            reqs.append(self._make_request(texts[i], ids_list[i], params or {}, rid, received=received))
        return reqs

    @staticmethod
    def _refused(reqs: list[Request]) -> FinishReason | None:
        """The finish reason of the first request aborted with a 400 (a request the server refused), if any."""
        for r in reqs:
            reason = r.finish_reason
            if reason is not None and reason.get("type") == "abort" and reason.get("status_code") == 400:
                return reason
        return None

    @staticmethod
    def _inputs(body: dict[str, Any]) -> tuple[list[str | None], list[list[int] | None], bool]:
        text, ids = body.get("text"), body.get("input_ids")
        if ids is not None:
            if ids and isinstance(ids[0], list):
                return [None] * len(ids), list(ids), True
            return [None], [list(ids)], False
        if isinstance(text, list):
            return list(text), [None] * len(text), True
        return [text if text is not None else ""], [None], False

    async def _error_stream(self, message: str) -> AsyncIterator[bytes]:
        yield _sse({"error": {"message": message, "type": "invalid_request_error", "code": 400, "retryable": False}})
        yield _sse("[DONE]")

    async def _generate_stream(self, reqs: list[Request], batch: bool) -> AsyncIterator[bytes]:
        incremental = self.s.args.incremental_streaming_output
        interval = max(1, self.s.args.stream_interval)
        sent = {id(r): 0 for r in reqs}
        sent_text = {id(r): 0 for r in reqs}
        async for ready in self._updates(reqs):
            for r in ready:
                n = r.completion_tokens
                if not r.finished and (n == sent[id(r)] or (sent[id(r)] and n - sent[id(r)] < interval)):
                    continue  # --stream-interval: stream every N tokens (the first one at once)
                text = r.text
                chunk: dict[str, object] = {
                    "text": text[sent_text[id(r)]:] if incremental else text,
                    "output_ids": r.output_ids[sent[id(r)]:] if incremental else list(r.output_ids),
                    "meta_info": self.meta_info(r),
                }
                if batch:
                    chunk["index"] = reqs.index(r)
                sent[id(r)], sent_text[id(r)] = n, len(text)
                yield _sse(chunk)
        yield _sse("[DONE]")

    # -- OpenAI-compatible ----------------------------------------------------------------------------------------
    def _usage(self, reqs: list[Request]) -> dict[str, object]:
        prompt = sum(len(r.input_ids) for r in reqs)
        completion = sum(r.completion_tokens for r in reqs)
        details = {"cached_tokens": sum(r.cached_tokens for r in reqs)} if self.s.args.enable_cache_report else None
        return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion,
                "prompt_tokens_details": details, "reasoning_tokens": 0}

    @staticmethod
    def _finish(r: Request) -> tuple[str | None, object]:
        if not r.finish_reason:
            return None, None
        kind = r.finish_reason["type"]
        return kind, r.finish_reason.get("matched") if kind == "stop" else None

    def _sglext(self, body: Mapping[str, object], r: Request) -> dict[str, object] | None:
        if not body.get("return_spec_tokens_details"):
            return None
        details = self.spec_details(r)
        if details is not None:
            details = {"spec_cap_length": None, "spec_block_accept_length": None, "spec_cap_lens_histogram": None,
                       **details}
        return {"spec_tokens_details": details}

    async def completions(self, http: HttpRequest) -> Response | StreamResponse:
        return await self._openai(http, chat=False)

    async def chat(self, http: HttpRequest) -> Response | StreamResponse:
        return await self._openai(http, chat=True)

    async def _openai(self, http: HttpRequest, chat: bool) -> Response | StreamResponse:
        body = self._json(http)
        if not isinstance(body, dict):
            return _openai_error("Invalid JSON body")
        try:
            req = self._openai_request(body, chat, http.received)
        except RequestError as exc:
            return _openai_error(str(exc))
        self.s.engine.submit(req)
        model = body.get("model") or self.s.args.served_model_name
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage")) or \
                self.s.args.stream_response_default_include_usage
            return StreamResponse(self._openai_stream(req, body, model, chat, include_usage))
        if not await self._wait([req], http):
            return _openai_error("Client disconnected")
        return Response.json(self._openai_answer(req, body, model, chat))

    def _openai_request(self, body: dict[str, Any], chat: bool, received: float | None) -> Request:
        """The request of a chat or text completions body (raises :class:`RequestError` for a bad one)."""
        params: dict[str, Any] = {k: body[k] for k in ("temperature", "ignore_eos", "sampling_seed") if k in body}
        if "seed" in body:
            params["sampling_seed"] = body["seed"]
        text: str | None
        ids: list[int] | None
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise RequestError("messages must be a non-empty list")
            text, ids = tokenizer.apply_chat_template(messages)
            max_new = body.get("max_completion_tokens", body.get("max_tokens"))
            return self._make_request(text, ids, {**params, "max_new_tokens": max_new}, None, None,
                                      received=received)
        prompt = body.get("prompt", "")
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], int):
            text, ids = None, list(prompt)
        else:
            text, ids = (prompt[0] if isinstance(prompt, list) else str(prompt)), None
        max_new = body.get("max_tokens", 16)
        return self._make_request(text, ids, {**params, "max_new_tokens": max_new}, None, 16, received=received)

    def _openai_answer(self, req: Request, body: Mapping[str, object], model: str, chat: bool) -> dict[str, object]:
        """The non-streamed answer of a finished chat or text completion."""
        reason, matched = self._finish(req)
        choice: dict[str, object] = {"index": 0}
        if chat:
            choice["message"] = {"role": "assistant", "content": req.text, "reasoning_content": None,
                                 "tool_calls": None}
        else:
            choice["text"] = req.text
        choice.update({"logprobs": None, "finish_reason": reason, "matched_stop": matched})
        out: dict[str, object] = {
            "id": req.rid, "object": "chat.completion" if chat else "text_completion", "created": int(req.created),
            "model": model, "choices": [choice], "usage": self._usage([req]),
            "metadata": {"weight_version": "default"},
        }
        sglext = self._sglext(body, req)
        if sglext is not None:
            out["sglext"] = sglext
        return out

    async def _openai_stream(self, req: Request, body: Mapping[str, object], model: str, chat: bool,
                             include_usage: bool) -> AsyncIterator[bytes]:
        obj = "chat.completion.chunk" if chat else "text_completion"
        created = int(req.created)

        def chunk(choices: list[dict[str, object]], **extra: object) -> bytes:
            return _sse({"id": req.rid, "object": obj, "created": created, "model": model, "choices": choices,
                         "usage": None, **extra})

        sent = sent_tokens = 0
        interval = max(1, self.s.args.stream_interval)
        if chat:
            yield chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                          "finish_reason": None, "matched_stop": None}])
        async for _ in self._updates([req]):
            if not req.finished and sent_tokens and req.completion_tokens - sent_tokens < interval:
                continue
            sent_tokens = req.completion_tokens
            text = req.text
            if len(text) > sent or (not chat and req.finished):
                delta = text[sent:]
                sent = len(text)
                piece = {"delta": {"content": delta}} if chat else {"text": delta}
                reason, matched = self._finish(req) if not chat else (None, None)
                yield chunk([{"index": 0, **piece, "logprobs": None, "finish_reason": reason,
                              "matched_stop": matched}])
        reason, matched = self._finish(req)
        sglext = self._sglext(body, req)
        extra = {"sglext": sglext} if sglext is not None else {}
        if chat:
            yield chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason,
                          "matched_stop": matched}], **extra)
        elif extra:
            yield chunk([{"index": 0, "text": "", "logprobs": None, "finish_reason": reason,
                          "matched_stop": matched}], **extra)
        if include_usage:
            yield _sse({"id": req.rid, "object": obj, "created": created, "model": model, "choices": [],
                        "usage": self._usage([req])})
        yield _sse("[DONE]")
