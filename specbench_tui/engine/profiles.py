"""Engine profiles: everything about talking to one server engine, so the orchestrator never asks its name.

A profile says how readiness shows (a log line, then a health endpoint), which endpoints and JSON fields
carry tokens and acceptance, how the context length is learned, which log lines carry the server's own
figures, which environment makes shutdown prompt, and which signal stops it (once: the teardown then waits
``shutdown_grace_s`` and SIGKILLs, and never sends a second SIGTERM), which crash signatures apply, and where
``/metrics``-style counters carry acceptance. SGLang is the primary profile; the simulator speaks SGLang and is
reached through it. llama.cpp's ``llama-server`` and vLLM's ``vllm serve`` are the others (ground truth, measured
against the real servers: ``docs/real-engines.md``).

The request itself has two wire formats (``stream_format``), implemented once each in ``engine.client``:
SGLang's native streaming ``/generate`` (``meta_info`` with ``completion_tokens``, ``spec_accept_length``,
``spec_verify_ct``), and the OpenAI-compatible streaming ``/v1/completions`` with
``stream_options.include_usage`` (usage, and the engine's extra fields, on the last chunk). Each profile maps
its final figures onto the same ``meta_info`` keys, so workloads and records never know which engine answered.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specbench_tui.core.budget import reserved_speculative_tokens
from specbench_tui.core.logparse import (
    LLAMACPP_SPEC_COUNTERS,
    VLLM_SPEC_COUNTERS,
    BatchLine,
    SpecCounterNames,
    parse_batch_line,
    parse_llamacpp_stats_line,
    parse_vllm_stats_line,
)
from specbench_tui.core.signatures import (
    BUILTIN_SIGNATURES,
    EXIT_SIGNATURES,
    LLAMACPP_SIGNATURES,
    VLLM_SIGNATURES,
    Signature,
)

STREAM_SGLANG = "sglang"
STREAM_OPENAI = "openai"


@dataclass(frozen=True)
class EngineProfile:
    """How to launch-watch-measure-stop one engine."""

    name: str
    ready_line: re.Pattern[str] | None
    """Printed once the server has warmed up and serves requests (None: readiness is the health check alone)."""
    health_path: str
    """Answers 200 when the server can generate."""
    info_path: str
    generate_path: str
    tokenize_path: str
    abort_path: str | None
    """Drops a request by id (None: closing the stream is the only way, as in llama.cpp)."""
    flush_cache_path: str | None
    shutdown_env: Mapping[str, str]
    """Set at launch so that SIGTERM does not wait forever on in-flight requests."""
    stop_signal: int
    parse_stats_line: Callable[[str], BatchLine | None]
    """The server's own decode/prefill figures from one log line."""
    context_length: Callable[[Mapping[str, Any]], int | None]
    """The context length from the info endpoint's JSON."""
    health_timeout_s: float = 30.0
    api_key_header: str = "Authorization"
    extra_env: Mapping[str, str] = field(default_factory=dict)
    health_poll_s: float = 0.25
    """Pause between health checks while the server loads."""
    stream_format: str = STREAM_SGLANG
    stats_hint: str | None = None
    """A substring every stats line contains, so that lines without it skip ``parse_stats_line`` (None: try
    every line)."""
    """``sglang`` (native ``/generate``) or ``openai`` (``/v1/completions`` with usage in the stream)."""
    tokenize_key: str = "prompt"
    """JSON key of the text in a tokenize request."""
    crash_signatures: tuple[Signature, ...] = BUILTIN_SIGNATURES
    exit_signatures: Mapping[int, str] = field(default_factory=dict)
    """Exit codes that name a crash although nothing was logged (SIGSEGV: ``segfault``)."""
    metrics_path: str | None = None
    """Prometheus counters read before and after each workload (None: the engine has none we use)."""
    spec_counters: SpecCounterNames | None = None
    final_meta: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    """OpenAI format: the last stream chunk (usage + engine extras) → ``meta_info`` keys."""
    fatal_stream_error: re.Pattern[str] | None = None
    """An error a stream carries when the server itself is dying (the request is then the crash's, not a
    measurement, once the process exits)."""
    stream_options: Mapping[str, Any] = field(default_factory=lambda: {"include_usage": True})
    """OpenAI format: the request's ``stream_options``. vLLM streams several tokens in one chunk when a draft is
    accepted, so it is asked for ``continuous_usage_stats`` (the running token count on every chunk)."""
    models_path: str | None = None
    """An OpenAI model list whose ``data[0].max_model_len`` is the served context length, asked before the info
    endpoint (SGLang: ``/v1/models`` carries ``model_config.context_len``, the limit its tokenizer manager
    enforces, while ``/server_info``'s ``context_length`` is null unless ``--context-length`` was passed)."""
    reserved_tokens: Callable[[Mapping[str, Any]], int] = lambda info: 0
    """Context tokens the server reserves per request for speculative decoding, from the info endpoint's JSON
    (:func:`specbench_tui.core.budget.reserved_speculative_tokens`)."""
    input_limit: Callable[[Mapping[str, Any]], int | None] = lambda info: None
    """The scheduler's own input limit from the info endpoint's JSON (SGLang: ``max_req_input_len``)."""
    tokenize_reports_context: bool = True
    """Whether the tokenize endpoint's ``max_model_len`` is the server's context (SGLang's is the tokenizer's
    ``model_max_length``: never used as the limit)."""


def _sglang_context_length(info: Mapping[str, Any]) -> int | None:
    """``/server_info`` carries the resolved ServerArgs; ``context_length`` may be None when not passed."""
    for key in ("context_length", "max_model_len", "context_len"):
        value = info.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    for state in info.get("internal_states") or ():
        if isinstance(state, Mapping):
            value = state.get("context_len") or state.get("context_length")
            if isinstance(value, int) and value > 0:
                return value
    return None


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _sglang_reserved_tokens(info: Mapping[str, Any]) -> int:
    """The resolved speculative arguments of ``/server_info`` through SGLang's rule."""
    algorithm = info.get("speculative_algorithm")
    return reserved_speculative_tokens(
        "sglang", algorithm if isinstance(algorithm, str) else None,
        topk=_positive(info.get("speculative_eagle_topk")), steps=_positive(info.get("speculative_num_steps")),
        draft_tokens=_positive(info.get("speculative_num_draft_tokens")))


def _sglang_input_limit(info: Mapping[str, Any]) -> int | None:
    """``/server_info`` merges the scheduler's start-up info: ``max_req_input_len`` (inputs of that many tokens
    or more are aborted)."""
    return _positive(info.get("max_req_input_len"))


SGLANG = EngineProfile(
    name="sglang",
    ready_line=re.compile(r"The server is fired up and ready to roll!"),
    health_path="/health_generate",
    info_path="/server_info",
    generate_path="/generate",
    tokenize_path="/v1/tokenize",
    abort_path="/abort_request",
    flush_cache_path="/flush_cache",
    shutdown_env={"SGL_FORCE_SHUTDOWN": "1", "SGLANG_FORCE_SHUTDOWN": "1"},
    stop_signal=signal.SIGTERM,
    parse_stats_line=parse_batch_line,
    stats_hint=" batch",
    context_length=_sglang_context_length,
    models_path="/v1/models",
    reserved_tokens=_sglang_reserved_tokens,
    input_limit=_sglang_input_limit,
    tokenize_reports_context=False,
)



def _llamacpp_context_length(props: Mapping[str, Any]) -> int | None:
    """``/props``: ``default_generation_settings.n_ctx`` is the context of ONE slot (``-c`` ÷ ``-np``), which is
    what one request may use."""
    settings = props.get("default_generation_settings")
    value = settings.get("n_ctx") if isinstance(settings, Mapping) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    value = props.get("n_ctx")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def openai_usage_meta(payload: Mapping[str, Any]) -> dict[str, Any]:
    """What every OpenAI-compatible final chunk carries → ``meta_info``: ``usage`` token counts (cached prompt
    tokens from ``prompt_tokens_details``) and the first choice's ``finish_reason``."""
    raw_usage = payload.get("usage")
    usage: Mapping[str, Any] = raw_usage if isinstance(raw_usage, Mapping) else {}
    meta: dict[str, Any] = {}
    for key in ("completion_tokens", "prompt_tokens"):
        value = _count(usage.get(key))
        if value is not None:
            meta[key] = value
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    if cached is not None:
        meta["cached_tokens"] = cached
    choices = payload.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) \
            and choices[0].get("finish_reason") is not None:
        meta["finish_reason"] = choices[0]["finish_reason"]
    return meta


def draft_acceptance_meta(completion: int, accepted: int, drafted: int) -> dict[str, Any]:
    """One request's drafted and accepted tokens → ``meta_info``. Every generated token comes from one target
    step that also accepted some drafted ones, so the target steps are ``completion - accepted`` and the
    acceptance length is ``completion / steps`` (tokens per target forward pass, what SGLang's
    ``spec_accept_length`` means too); 1.0 when nothing was accepted."""
    steps = max(1, completion - accepted)
    meta: dict[str, Any] = {"draft_tokens": drafted, "accepted_tokens": accepted, "spec_verify_ct": steps,
                            "spec_accept_length": completion / steps}
    if drafted:
        meta["spec_accept_rate"] = accepted / drafted
    return meta


def llamacpp_final_meta(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The last chunk of a llama.cpp stream → ``meta_info``: :func:`openai_usage_meta` (with ``timings`` as the
    fallback for the counts), and acceptance from ``timings.draft_n``/``draft_n_accepted`` (absent, not 0, when
    nothing was drafted: the baseline, an n-gram request without a match)."""
    raw_timings = payload.get("timings")
    timings: Mapping[str, Any] = raw_timings if isinstance(raw_timings, Mapping) else {}
    meta = openai_usage_meta(payload)
    for key, fallback in (("completion_tokens", "predicted_n"), ("cached_tokens", "cache_n")):
        value = _count(timings.get(fallback))
        if key not in meta and value is not None:
            meta[key] = value
    drafted = _count(timings.get("draft_n")) or 0
    accepted = _count(timings.get("draft_n_accepted")) or 0
    completion = meta.get("completion_tokens")
    if completion:
        meta.update(draft_acceptance_meta(completion, accepted, drafted))
    else:
        meta.update(draft_tokens=drafted, accepted_tokens=accepted)
        if drafted:
            meta["spec_accept_rate"] = accepted / drafted
    return meta


LLAMACPP = EngineProfile(
    name="llamacpp",
    ready_line=None,  # /health: connection refused, then 503 "Loading model", then 200 {"status":"ok"}
    health_path="/health",
    info_path="/props",
    generate_path="/v1/completions",
    tokenize_path="/tokenize",
    abort_path=None,
    flush_cache_path=None,
    shutdown_env={},
    stop_signal=signal.SIGTERM,  # exits 0 in ~10 ms; a second SIGTERM would exit 1 at once
    parse_stats_line=parse_llamacpp_stats_line,
    context_length=_llamacpp_context_length,
    health_timeout_s=5.0,
    health_poll_s=0.05,
    stream_format=STREAM_OPENAI,
    tokenize_key="content",
    crash_signatures=LLAMACPP_SIGNATURES,
    exit_signatures=EXIT_SIGNATURES,
    metrics_path="/metrics",
    spec_counters=LLAMACPP_SPEC_COUNTERS,
    final_meta=llamacpp_final_meta,
)

def _vllm_context_length(models: Mapping[str, Any]) -> int | None:
    """``/v1/models``: ``data[0].max_model_len`` (the resolved ``--max-model-len``)."""
    data = models.get("data")
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], Mapping) else {}
    value = first.get("max_model_len")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def vllm_final_meta(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The last chunk of a vLLM stream (``usage``) → ``meta_info``.

    Per-request acceptance exists only when the server runs with ``--per-request-spec-decode-metrics summary``
    (vLLM 0.32): the usage chunk then carries ``metrics.speculative_decoding`` with the request's accepted and
    drafted tokens, mapped as llama.cpp's are (:func:`draft_acceptance_meta`). Without it no request claims an
    acceptance: the ``vllm:spec_decode_*`` counters over each workload stand in (``WorkloadFinished.server_log``)."""
    meta = openai_usage_meta(payload)
    metrics = payload.get("metrics")
    spec = metrics.get("speculative_decoding") if isinstance(metrics, Mapping) else None
    completion = meta.get("completion_tokens")
    if isinstance(spec, Mapping) and completion:
        accepted = _count(spec.get("num_accepted_draft_tokens"))
        if accepted is not None and accepted < completion:
            meta.update(draft_acceptance_meta(completion, accepted, _count(spec.get("num_draft_tokens")) or 0))
    return meta


VLLM = EngineProfile(
    name="vllm",
    ready_line=None,  # the HTTP port opens only once the engine core is up: refused, then /health 200
    health_path="/health",
    info_path="/v1/models",
    generate_path="/v1/completions",
    tokenize_path="/tokenize",
    abort_path=None,  # closing the stream aborts the request
    flush_cache_path=None,  # /reset_prefix_cache exists only with VLLM_SERVER_DEV_MODE=1
    shutdown_env={},
    stop_signal=signal.SIGTERM,
    parse_stats_line=parse_vllm_stats_line,
    context_length=_vllm_context_length,
    health_timeout_s=5.0,
    health_poll_s=0.25,
    stream_format=STREAM_OPENAI,
    tokenize_key="prompt",
    crash_signatures=VLLM_SIGNATURES,
    exit_signatures=EXIT_SIGNATURES,
    metrics_path="/metrics",
    spec_counters=VLLM_SPEC_COUNTERS,
    final_meta=vllm_final_meta,
    stream_options={"include_usage": True, "continuous_usage_stats": True},
    # In-flight streams get {"error": {"message": "EngineCore encountered an issue. ...", "code": 500}} + [DONE].
    fatal_stream_error=re.compile(r"EngineCore encountered an issue|EngineDeadError"),
)

PROFILES: dict[str, EngineProfile] = {SGLANG.name: SGLANG, LLAMACPP.name: LLAMACPP, VLLM.name: VLLM}


def get_profile(name: str) -> EngineProfile:
    """The profile named by ``engine.profile`` (the sweep loader has already checked the name)."""
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"no engine profile {name!r}; known: {', '.join(PROFILES)}") from None
