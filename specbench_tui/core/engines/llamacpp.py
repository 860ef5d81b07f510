"""llama.cpp's ``llama-server``: flags, readiness and endpoints, acceptance, crash lines (ground truth measured
against the real server: ``docs/real-engines.md``).

Its flags come from a real ``llama-server --help`` (``tools/dump_llamacpp_flags.py``) in ``llamacpp_flags.tsv``:
every long name, its short forms (``-md``, ``-c``, ``-np``: a sweep must use the long names, and a short one is
refused with the long name to write), the value shapes the help text shows, and the flags it removed.

Launched with ``launcher = "command"`` (the binary). Readiness is ``/health`` alone (connection refused, then 503
``Loading model``, then 200); requests go to the OpenAI-compatible ``/v1/completions``; acceptance comes from each
request's final ``timings`` and from the ``llamacpp:*`` counters of ``/metrics`` (``--metrics`` is always added).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specbench_tui.core.engines.base import (
    STREAM_OPENAI,
    EngineFlags,
    EngineProfile,
    LogHints,
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
from specbench_tui.core.signatures import CUDA_SIGNATURES, EXIT_SIGNATURES, Signature, signature

# ------------------------------------------------------------------------------------------------ flags

FLAGS_FILE = "llamacpp_flags.tsv"
_POSITIVE_INT = frozenset(
    {"spec-draft-n-max", "parallel", "spec-ngram-simple-size-n", "spec-ngram-simple-size-m",
     "spec-ngram-mod-n-max", "spec-ngram-map-k-size-n", "spec-ngram-map-k-size-m", "batch-size", "ubatch-size"}
)


def _gpus(args: Mapping[str, object]) -> int:
    """One GPU per server, unless the configuration declares its devices (``device``/``tensor-split``)."""
    device = args.get("device")
    if isinstance(device, str):
        if device.strip().lower() == "none":
            return 0
        return max(1, len([d for d in device.split(",") if d.strip()]))
    split = args.get("tensor-split")
    if isinstance(split, str) and str(args.get("split-mode", "layer")) != "none":
        return max(1, len([s for s in split.split(",") if s.strip()]))
    return 1


@functools.cache
def llamacpp_flags() -> EngineFlags:
    """``llama-server``'s flag facts."""
    text = package_file(__package__ or "specbench_tui.core.engines", FLAGS_FILE)
    shapes, aliases, removed = flag_table(text)
    version = table_release(text)
    return EngineFlags(
        name="llamacpp",
        known_flags=frozenset(shapes) - set(removed) - {"help", "usage", "version", "completion-bash",
                                                        "cache-list"},
        removed=removed,
        release=f"llama-server {version}".strip(),
        shapes=shapes,
        positive_int=_POSITIVE_INT,
        default_port=8080,
        short_aliases=aliases,
        runs_on_cpu=True,
        launch_args=("--metrics",),
        model_flags=((("--model", "--model-draft", "--spec-draft-model"), "model"),),
        gpu_count=_gpus,
    )


# ------------------------------------------------------------------------------------------------ stats lines

_ACCEPT = re.compile(
    r"slot print_timing: id +(?P<slot>\d+) \| task (?P<task>-?\d+) \| draft acceptance = (?P<rate>\d+(?:\.\d+)?)"
    r" \( *(?P<accepted>\d+) accepted / *(?P<generated>\d+) generated\), mean len = +(?P<mean>\d+(?:\.\d+)?)\s*$"
)
_TIME = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) ")


@dataclass(frozen=True)
class DraftAcceptanceLine:
    """llama.cpp's per-request ``draft acceptance`` line (logged only when the request drafted something)."""

    slot: int
    task: int
    rate: float
    """accepted ÷ generated (drafted) tokens."""
    accepted: int
    generated: int
    """Draft tokens generated (proposed)."""
    mean_len: float
    """1 + accepted ÷ verification steps: llama.cpp's acceptance length."""
    time: str
    """``M.SS.mmm.uuu`` since the server started, as printed."""


def parse_draft_acceptance_line(line: str) -> DraftAcceptanceLine | None:
    """``slot print_timing: id  1 | task 1 | draft acceptance = 0.48780 (   40 accepted /    82 generated),
    mean len =  2.82`` → its figures; None for any other line."""
    if len(line) > MAX_STATS_LINE:
        return None
    match = _ACCEPT.search(line)
    if match is None:
        return None
    stamp = _TIME.match(line)
    return DraftAcceptanceLine(
        slot=int(match.group("slot")), task=int(match.group("task")), rate=float(match.group("rate")),
        accepted=int(match.group("accepted")), generated=int(match.group("generated")),
        mean_len=float(match.group("mean")), time=stamp.group(0).strip() if stamp else "",
    )


def parse_llamacpp_stats_line(line: str) -> BatchLine | None:
    """A ``draft acceptance`` line as a decode :class:`BatchLine` (accept len = mean len, accept rate = rate),
    so it reaches the log panel's figures and ``summarize_decode`` like SGLang's ``Decode batch`` lines."""
    parsed = parse_draft_acceptance_line(line)
    if parsed is None:
        return None
    return BatchLine(kind="decode", time=parsed.time, tp_rank=None, dp_rank=None, running_req=None,
                     queue_req=None, num_token=None, token_usage=None, accept_length=parsed.mean_len,
                     accept_rate=parsed.rate, gen_throughput=None, new_tokens=None, input_throughput=None)


LLAMACPP_SPEC_COUNTERS = SpecCounterNames(
    draft_tokens="llamacpp:spec_decode_num_draft_tokens_total",
    accepted_tokens="llamacpp:spec_decode_num_accepted_tokens_total",
    drafts="llamacpp:spec_decode_num_drafts_total",
    predicted_tokens="llamacpp:tokens_predicted_total",
    accepted_per_position="llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
)

# ------------------------------------------------------------------------------------------------ crashes

LLAMACPP_SIGNATURES: tuple[Signature, ...] = (
    *CUDA_SIGNATURES,
    signature("llamacpp_ggml_assert", r"GGML_ASSERT\(.{0,500}?\) failed", 92),
    signature("llamacpp_ggml_abort", r"^(?:\S+\.(?:c|cpp|cu|h|m):\d+: (?:fatal error|GGML_ABORT)|.*\bggml_abort\b)",
              88),
    signature("llamacpp_cpp_exception", r"terminate called after throwing an instance of", 75),
    signature("llamacpp_gguf_open_failed", r"failed to open GGUF file", 65),
    signature("llamacpp_model_load_failed", r"error loading model|exiting due to model loading error|"
                                            r"\bload_model: failed to load model", 60),
    signature("llamacpp_fatal_error", r"^(?:\d+\.\d{2}\.\d{3}\.\d{3} [EW] )?(?:error|Error): ", 40),
)
"""``llama-server``'s own fatal lines (ggml's assert/abort, an uncaught C++ exception, a model that cannot load,
``error: invalid argument: ...`` at start-up) plus the generic CUDA ones. Deliberately *not* every ``E`` line:
``send_error: ... error: request exceeds the available context size`` is a failed request, not a crash. A
SIGSEGV/SIGABRT/SIGBUS exit, which prints nothing, is named by the exit signatures."""

# ------------------------------------------------------------------------------------------------ the wire


def _context_length(props: Mapping[str, object]) -> int | None:
    """``/props``: ``default_generation_settings.n_ctx`` is the context of ONE slot (``-c`` ÷ ``-np``), which is
    what one request may use."""
    settings = props.get("default_generation_settings")
    value = positive(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    return value if value is not None else positive(props.get("n_ctx"))


def llamacpp_final_meta(payload: Mapping[str, object]) -> dict[str, object]:
    """The last chunk of a llama.cpp stream → ``meta_info``: :func:`openai_usage_meta` (with ``timings`` as the
    fallback for the counts), and acceptance from ``timings.draft_n``/``draft_n_accepted`` (absent, not 0, when
    nothing was drafted: the baseline, an n-gram request without a match)."""
    raw_timings = payload.get("timings")
    timings: Mapping[str, object] = raw_timings if isinstance(raw_timings, Mapping) else {}
    meta = openai_usage_meta(payload)
    for key, fallback in (("completion_tokens", "predicted_n"), ("cached_tokens", "cache_n")):
        value = count(timings.get(fallback))
        if key not in meta and value is not None:
            meta[key] = value
    drafted = count(timings.get("draft_n")) or 0
    accepted = count(timings.get("draft_n_accepted")) or 0
    completion = count(meta.get("completion_tokens"))
    if completion:
        meta.update(draft_acceptance_meta(completion, accepted, drafted))
    else:
        meta.update(draft_tokens=drafted, accepted_tokens=accepted)
        if drafted:
            meta["spec_accept_rate"] = accepted / drafted
    if drafted:  # the draft acceptance rate's two counts (accepted / proposed), as SGLang names them
        meta.update(spec_num_correct_drafts=accepted, spec_num_proposed_drafts=drafted)
    return meta


def speculates(argv: Sequence[str], algorithm: str) -> bool:
    """``--spec-type`` other than ``none`` (a draft model alone, ``--model-draft``, loads and never drafts), or a
    declared speculative algorithm."""
    spec_type = argv_value(argv, "--spec-type")
    return (spec_type is not None and spec_type not in ("", "none")) or declared_speculation(argv, algorithm)


LLAMACPP = EngineProfile(
    name="llamacpp",
    load_flags=llamacpp_flags,
    ready_line=None,  # /health: connection refused, then 503 "Loading model", then 200 {"status":"ok"}
    health_path="/health",
    info_path="/props",
    generate_path="/v1/completions",
    tokenize_path="/tokenize",
    abort_path=None,
    flush_cache_path=None,
    # SIGTERM: exits 0 in ~10 ms; a second SIGTERM would exit 1 at once (the teardown never sends one).
    parse_stats_line=parse_llamacpp_stats_line,
    context_length=_context_length,
    health_timeout_s=5.0,
    health_poll_s=0.05,
    stream_format=STREAM_OPENAI,
    tokenize_key="content",
    crash_signatures=LLAMACPP_SIGNATURES,
    exit_signatures=EXIT_SIGNATURES,
    metrics_path="/metrics",
    spec_counters=LLAMACPP_SPEC_COUNTERS,
    final_meta=llamacpp_final_meta,
    speculative=speculates,
    budget_flags=("--spec-draft-n-max",),
    log=LogHints(fatal=(r"GGML_ASSERT\(.{0,500}?\) failed",), keywords=(b"GGML_ASSERT",)),
    cache_flush_note=("llama-server has no server-wide flush: POST /slots/{id}?action=erase empties one slot's KV "
                      "cache only, and its ngram-cache speculative types keep their own tables; run warm, or one "
                      "configuration per measurement"),
)
"""``llama-server``'s profile."""
