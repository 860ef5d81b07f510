"""vLLM's ``vllm serve`` (V1 engine): flags, readiness and endpoints, acceptance, crash lines (ground truth
measured against the real server: ``docs/real-engines-vllm.md``).

Its flags come from the real ``vllm serve`` parser (``tools/dump_vllm_flags.py``, run in ``.venv-vllm``) in
``vllm_flags.tsv``, in llama.cpp's table format, with value types (``int``, ``float``, ``json``...) from the
parser.

Launched with ``launcher = "command"``. The HTTP port opens only once the engine core is up, so readiness is
``/health`` alone; requests go to ``/v1/completions`` with ``include_usage`` (and ``continuous_usage_stats`` in a
sweep whose chunks can carry several tokens: speculation, ``--stream-interval``); acceptance comes from the
per-request metrics (``--per-request-spec-decode-metrics summary``) or else from the ``vllm:spec_decode_*``
counters of ``/metrics``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence

from specbench_tui.core.engines.base import (
    STREAM_OPENAI,
    EngineFlags,
    EngineProfile,
    LogHints,
    UserError,
    argv_value,
    count,
    declared_speculation,
    draft_acceptance_meta,
    flag_table,
    openai_usage_meta,
    package_file,
    positive,
    table_release,
)
from specbench_tui.core.logparse import MAX_STATS_LINE, BatchLine, SpecCounterNames
from specbench_tui.core.signatures import CUDA_SIGNATURES, EXIT_SIGNATURES, NCCL_SIGNATURE, Signature, signature

# ------------------------------------------------------------------------------------------------ flags

FLAGS_FILE = "vllm_flags.tsv"
_POSITIVE_INT = frozenset({"tensor-parallel-size", "data-parallel-size", "pipeline-parallel-size",
                           "max-num-seqs", "max-num-batched-tokens", "block-size"})


@functools.cache
def vllm_flags() -> EngineFlags:
    """``vllm serve``'s flag facts."""
    text = package_file(__package__ or "specbench_tui.core.engines", FLAGS_FILE)
    shapes, aliases, removed = flag_table(text)
    version = table_release(text)
    return EngineFlags(
        name="vllm",
        known_flags=frozenset(shapes) - set(removed) - {"help"},
        removed=removed,
        release=f"vllm {version}".strip(),
        shapes=shapes,
        positive_int=_POSITIVE_INT,
        tp_flags=("tensor-parallel-size",),
        dp_flags=("data-parallel-size",),
        pp_flags=("pipeline-parallel-size",),
        default_port=8000,
        short_aliases=aliases,
        runs_on_cpu=True,
        model_flags=((("--model", "--tokenizer"), "model"),),
    )


# ------------------------------------------------------------------------------------------------ stats lines

_TIME = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? ")
_THROUGHPUT = re.compile(
    r"Avg prompt throughput: (?P<prompt>\d+(?:\.\d+)?) tokens/s, Avg generation throughput: "
    r"(?P<gen>\d+(?:\.\d+)?) tokens/s, Running: (?P<running>\d+) reqs, (?:Swapped: \d+ reqs, )?"
    r"Waiting: (?P<waiting>\d+) reqs(?:, \w* ?KV cache usage: (?P<kv>\d+(?:\.\d+)?)%)?")
_SPEC = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (?P<mean>\d+(?:\.\d+)?),.*?"
    r"Avg Draft acceptance rate: (?P<rate>\d+(?:\.\d+)?)%")

VLLM_SPEC_COUNTERS = SpecCounterNames(
    draft_tokens="vllm:spec_decode_num_draft_tokens_total",
    accepted_tokens="vllm:spec_decode_num_accepted_tokens_total",
    drafts="vllm:spec_decode_num_drafts_total",
    predicted_tokens="vllm:generation_tokens_total",
    accepted_per_position="vllm:spec_decode_num_accepted_tokens_per_pos_total",
)
"""vLLM's speculative-decoding counters (labelled ``{engine="0",model_name=...}``; summed over labels)."""


def parse_vllm_stats_line(line: str) -> BatchLine | None:
    """vLLM's two periodic lines (every ``VLLM_LOG_STATS_INTERVAL`` s, 10 by default, while it is busy) as decode
    :class:`BatchLine` s: ``Avg prompt throughput: ... Avg generation throughput: G tokens/s, Running: R reqs,
    Waiting: W reqs, ... KV cache usage: U%`` gives the throughput, ``SpecDecoding metrics: Mean acceptance
    length: L, ..., Avg Draft acceptance rate: P%`` the acceptance. An idle line (nothing running, nothing
    generated) is not a decode figure and gives None."""
    if len(line) > MAX_STATS_LINE:
        return None
    stamp = _TIME.search(line)
    when = stamp.group(1) if stamp else ""
    match = _SPEC.search(line)
    if match is not None:
        return BatchLine(kind="decode", time=when, tp_rank=None, dp_rank=None, running_req=None, queue_req=None,
                         num_token=None, token_usage=None, accept_length=float(match.group("mean")),
                         accept_rate=float(match.group("rate")) / 100.0, gen_throughput=None, new_tokens=None,
                         input_throughput=None)
    match = _THROUGHPUT.search(line)
    if match is None:
        return None
    gen, running = float(match.group("gen")), int(match.group("running"))
    if gen == 0.0 and running == 0:
        return None
    kv = match.group("kv")
    return BatchLine(kind="decode", time=when, tp_rank=None, dp_rank=None, running_req=running,
                     queue_req=int(match.group("waiting")), num_token=None,
                     token_usage=float(kv) / 100.0 if kv is not None else None, accept_length=None,
                     accept_rate=None, gen_throughput=gen, new_tokens=None,
                     input_throughput=float(match.group("prompt")))


# ------------------------------------------------------------------------------------------------ crashes

VLLM_SIGNATURES: tuple[Signature, ...] = (
    *CUDA_SIGNATURES,
    NCCL_SIGNATURE,
    signature("vllm_engine_core_fatal", r"EngineCore encountered a fatal error|EngineCore failed to start", 55),
    signature("vllm_init_failed", r"Engine core initialization failed", 58),
    signature("vllm_worker_died", r"Worker proc \S+ died unexpectedly|WorkerProc hit an exception|"
                                  r"WorkerProc failed to start", 52),
    signature("vllm_engine_dead", r"Engine core proc \S+ died unexpectedly|\bEngineDeadError\b", 45),
    signature("vllm_config_error", r"pydantic_core\._pydantic_core\.ValidationError: \d+ validation errors? for ",
              50),
)
"""vLLM (V1 engine) lines that mean the server is dying: the engine core's fatal error and its death as the API
server sees it, a failed start-up (engine core or worker), a rejected configuration, and the generic CUDA/NCCL
ones. A request vLLM refuses (``This model's maximum context length is ...``) is an HTTP 400, not a crash; a
bare traceback is not one either (vLLM logs one for a failed request and goes on serving), and a start-up that
dies with only a traceback is still seen, by its exit before ready.
Lines carry a ``(APIServer pid=N)`` or ``(EngineCore pid=N)`` prefix (``tests/data/vllm``)."""

# ------------------------------------------------------------------------------------------------ plan rules


def user_errors(args: Mapping[str, object]) -> list[UserError]:
    """Misconfigurations vLLM refuses at start-up, which no matrix point can make right: user errors."""
    out: list[UserError] = []
    metrics = args.get("per-request-spec-decode-metrics")
    if metrics not in (None, False, "none") and args.get("speculative-config") in (None, False):
        out.append(("per-request-spec-decode-metrics", "--per-request-spec-decode-metrics requires a "
                    "--speculative-config; vLLM refuses to start without one",
                    "put it in the speculative configurations' args only, not in [server.args]"))
    return out


def _speculative_config(argv: Sequence[str]) -> Mapping[str, object] | None:
    text = argv_value(argv, "--speculative-config")
    try:
        config = json.loads(text) if text else None
    except ValueError:
        return None
    return config if isinstance(config, Mapping) else None


def speculates(argv: Sequence[str], algorithm: str) -> bool:
    """A ``--speculative-config`` with a method or a model, or a declared speculative algorithm."""
    config = _speculative_config(argv)
    return bool(config and (config.get("method") or config.get("model"))) or declared_speculation(argv, algorithm)


def several_tokens_a_chunk(argv: Sequence[str], algorithm: str) -> bool:
    """A speculative configuration (an accepted draft streams in one chunk) or ``--stream-interval`` over one."""
    interval = argv_value(argv, "--stream-interval")
    return speculates(argv, algorithm) or bool(interval and interval.isdigit() and int(interval) > 1)


def draft_budget(argv: Sequence[str]) -> int | None:
    """``num_speculative_tokens`` of the ``--speculative-config`` (a number, or a number written as a string)."""
    config = _speculative_config(argv)
    value = config.get("num_speculative_tokens") if config else None
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return positive(value)


# ------------------------------------------------------------------------------------------------ the wire


def _context_length(models: Mapping[str, object]) -> int | None:
    """``/v1/models``: ``data[0].max_model_len`` (the resolved ``--max-model-len``)."""
    data = models.get("data")
    first = data[0] if isinstance(data, list) and data and isinstance(data[0], Mapping) else {}
    return positive(first.get("max_model_len"))


def vllm_final_meta(payload: Mapping[str, object]) -> dict[str, object]:
    """The last chunk of a vLLM stream (``usage``) → ``meta_info``.

    Per-request acceptance exists only when the server runs with ``--per-request-spec-decode-metrics summary``
    (vLLM 0.32): the usage chunk then carries ``metrics.speculative_decoding`` with the request's accepted and
    drafted tokens, mapped as llama.cpp's are (:func:`draft_acceptance_meta`). Without it no request claims an
    acceptance: the ``vllm:spec_decode_*`` counters over each workload stand in (``WorkloadFinished.server_log``)."""
    meta = openai_usage_meta(payload)
    metrics = payload.get("metrics")
    spec = metrics.get("speculative_decoding") if isinstance(metrics, Mapping) else None
    completion = count(meta.get("completion_tokens"))
    if isinstance(spec, Mapping) and completion:
        accepted = count(spec.get("num_accepted_draft_tokens"))
        drafted = count(spec.get("num_draft_tokens")) or 0
        if accepted is not None and accepted < completion:
            meta.update(draft_acceptance_meta(completion, accepted, drafted))
            if drafted:  # the draft acceptance rate's two counts (accepted / proposed), as SGLang names them
                meta.update(spec_num_correct_drafts=accepted, spec_num_proposed_drafts=drafted)
    return meta


VLLM = EngineProfile(
    name="vllm",
    load_flags=vllm_flags,
    ready_line=None,  # the HTTP port opens only once the engine core is up: refused, then /health 200
    health_path="/health",
    info_path="/v1/models",
    generate_path="/v1/completions",
    tokenize_path="/tokenize",
    abort_path=None,  # closing the stream aborts the request
    flush_cache_path=None,  # /reset_prefix_cache exists only with VLLM_SERVER_DEV_MODE=1
    parse_stats_line=parse_vllm_stats_line,
    context_length=_context_length,
    health_timeout_s=5.0,
    health_poll_s=0.25,
    stream_format=STREAM_OPENAI,
    tokenize_key="prompt",
    crash_signatures=VLLM_SIGNATURES,
    exit_signatures=EXIT_SIGNATURES,
    metrics_path="/metrics",
    ttft_histogram="vllm:time_to_first_token_seconds",
    spec_counters=VLLM_SPEC_COUNTERS,
    final_meta=vllm_final_meta,
    # vLLM streams several tokens in one chunk when a draft is accepted: continuous_usage_stats gives the
    # running token count on every chunk. The API server builds a usage object per chunk for it (6-12 % of its
    # tok/s at c = 64 on 2 cores), so only a sweep that has such chunks asks it (EngineProfile.sweep_stream_options).
    stream_options={"include_usage": True},
    counted_stream_options={"include_usage": True, "continuous_usage_stats": True},
    several_tokens_a_chunk=several_tokens_a_chunk,
    # In-flight streams get {"error": {"message": "EngineCore encountered an issue. ...", "code": 500}} + [DONE].
    fatal_stream_error=re.compile(r"EngineCore encountered an issue|EngineDeadError"),
    python_packages=("vllm", "torch", "triton", "transformers", "xgrammar"),
    user_errors=user_errors,
    speculative=speculates,
    budget_of=draft_budget,
    log=LogHints(fatal=(r"EngineCore encountered a fatal error",), keywords=(b"EngineCore encountered a fatal",)),
    cache_flush_note=("vllm serve offers POST /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1 (a development "
                      "endpoint, not served by default): run warm"),
)
"""``vllm serve``'s profile."""
