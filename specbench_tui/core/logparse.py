"""SGLang's own figures from its log: ``Decode batch`` and ``Prefill batch`` lines.

Both forms are accepted: ``Decode batch, #running-req: ...`` (0.5.10 and later) and ``Decode batch.
#running-req: ...`` (older), with or without a ``DPn``/``TPn``/``PPn``/``EPn`` prefix, with or without
milliseconds in the timestamp, with or without a trailing comma, with or without the speculative
``accept len`` / ``accept rate`` fields, with a full-attention pool's ``#token``/``token usage`` or a hybrid
model's ``#full token``/``full token usage`` plus ``swa token usage`` or ``mamba usage`` (the fullest pool is
the usage), and with 0.5.23's ``ATTN_CPn``/``MOE_DPn`` prefixes (not ranks). Fields are read by name, so new fields in between do not break it.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

_HEAD = re.compile(
    r"^\[(?P<time>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d{1,6})?)(?P<prefix>(?:\s+[A-Z_]+\d+)*)\]\s+"
    r"(?P<kind>Decode|Prefill) batch(?: \[\d+\])?[.,]\s+(?P<body>.*)$"
)
_FIELD = re.compile(r"(?P<key>#?[A-Za-z][A-Za-z0-9 \-/()]{0,40}?):\s*(?P<value>-?[0-9]+(?:\.[0-9]+)?|True|False)")
"""A ``key: value`` field; the key is bounded (the longest, ``input throughput (token/s)``, has 26 characters)
so that a line without colons is scanned in linear time, not from every position to its end."""
MAX_STATS_LINE = 4096
"""Longer lines are not stats lines (a ``Decode batch`` line has < 400 characters): not parsed at all, since
every log line is parsed on the engine's event loop."""
_RANK = re.compile(r"(?:^|\s)(DP|TP|PP|EP)(\d+)\b")
"""Rank prefixes as whole words: 0.5.23 also prints ``ATTN_CPn`` and ``MOE_DPn`` (``MOE_DP1`` is no DP rank)."""
_TIMESTAMP = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:[.,](\d{1,6}))?")


@dataclass(frozen=True)
class BatchLine:
    """One parsed ``Decode batch`` or ``Prefill batch`` line."""

    kind: str
    """``decode`` or ``prefill``."""
    time: str
    tp_rank: int | None
    dp_rank: int | None
    running_req: int | None
    queue_req: int | None
    num_token: int | None
    token_usage: float | None
    accept_length: float | None
    accept_rate: float | None
    gen_throughput: float | None
    """Tokens generated per second since the previous decode line (decode only)."""
    new_tokens: int | None
    """Prompt tokens of the batch (prefill only)."""
    input_throughput: float | None


def _number(fields: dict[str, str], key: str, cast: type = float) -> float | int | None:
    value = fields.get(key)
    if value is None or value in ("True", "False"):
        return None
    try:
        return cast(float(value)) if cast is int else cast(value)
    except ValueError:
        return None


def _whole(value: float | int | None) -> int | None:
    """A count read with ``cast=int`` (already an int; typed as one)."""
    return None if value is None else int(value)


def _first(fields: dict[str, str], keys: tuple[str, ...], cast: type = float) -> float | int | None:
    for key in keys:
        value = _number(fields, key, cast)
        if value is not None:
            return value
    return None


_USAGE_KEYS = ("token usage", "full token usage", "swa token usage", "mamba usage")
"""The KV pool's usage fields: ``token usage``, or a hybrid model's ``full``/``swa``/``mamba`` ones."""


def _pool_usage(fields: dict[str, str]) -> float | None:
    """The fullest pool, as SGLang's own ``get_max_pool_usage`` takes it (hybrid models have two)."""
    values = [v for v in (_number(fields, key) for key in _USAGE_KEYS) if v is not None]
    return max(values) if values else None


def parse_batch_line(line: str) -> BatchLine | None:
    """A ``Decode batch`` / ``Prefill batch`` line's figures, or None for any other line."""
    if len(line) > MAX_STATS_LINE:
        return None
    match = _HEAD.match(line.strip())
    if match is None:
        return None
    fields = {m.group("key").strip(): m.group("value") for m in _FIELD.finditer(match.group("body"))}
    ranks = dict(_RANK.findall(match.group("prefix")))
    return BatchLine(
        kind=match.group("kind").lower(),
        time=match.group("time"),
        tp_rank=int(ranks["TP"]) if "TP" in ranks else None,
        dp_rank=int(ranks["DP"]) if "DP" in ranks else None,
        running_req=_whole(_number(fields, "#running-req", int)),
        queue_req=_whole(_number(fields, "#queue-req", int)),
        num_token=_whole(_first(fields, ("#token", "#full token"), int)),
        token_usage=_pool_usage(fields),
        accept_length=_number(fields, "accept len"),
        accept_rate=_number(fields, "accept rate"),
        gen_throughput=_number(fields, "gen throughput (token/s)"),
        new_tokens=_whole(_number(fields, "#new-token", int)),
        input_throughput=_number(fields, "input throughput (token/s)"),
    )


def line_timestamp(line: str) -> float | None:
    """The epoch seconds of an SGLang log line's ``[YYYY-mm-dd HH:MM:SS(.ms)]`` prefix (local time), or None."""
    match = _TIMESTAMP.match(line)
    if match is None:
        return None
    try:
        stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
    except ValueError:
        return None
    fraction = match.group(2)
    return stamp + (int(fraction) / 10 ** len(fraction) if fraction else 0.0)


@dataclass(frozen=True)
class DecodeSummary:
    """The server's own decode figures over a window (one workload of one configuration)."""

    lines: int
    accept_length: float | None
    """Mean of the ``accept len`` values (None without speculative decoding)."""
    accept_rate: float | None
    gen_throughput: float | None
    """Mean ``gen throughput (token/s)``."""
    gen_throughput_max: float | None

    def to_json(self) -> dict[str, float | int | None]:
        return {"lines": self.lines, "accept_length": self.accept_length, "accept_rate": self.accept_rate,
                "gen_throughput": self.gen_throughput, "gen_throughput_max": self.gen_throughput_max}


def summarize_decode(lines: Iterable[BatchLine]) -> DecodeSummary:
    """Mean accept length and throughput over the decode lines; rank 0 only, so TP>1 is not counted n times."""
    decode = [b for b in lines if b.kind == "decode" and (b.tp_rank in (None, 0))]

    def mean(values: list[float]) -> float | None:
        return statistics.fmean(values) if values else None

    accepts = [b.accept_length for b in decode if b.accept_length is not None]
    rates = [b.accept_rate for b in decode if b.accept_rate is not None]
    gens = [b.gen_throughput for b in decode if b.gen_throughput is not None]
    return DecodeSummary(lines=len(decode), accept_length=mean(accepts), accept_rate=mean(rates),
                         gen_throughput=mean(gens), gen_throughput_max=max(gens) if gens else None)


# ------------------------------------------------------------------------------------------------ llama.cpp

_LLAMACPP_ACCEPT = re.compile(
    r"slot print_timing: id +(?P<slot>\d+) \| task (?P<task>-?\d+) \| draft acceptance = (?P<rate>\d+(?:\.\d+)?)"
    r" \( *(?P<accepted>\d+) accepted / *(?P<generated>\d+) generated\), mean len = +(?P<mean>\d+(?:\.\d+)?)\s*$"
)
_LLAMACPP_TIME = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) ")


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
    match = _LLAMACPP_ACCEPT.search(line)
    if match is None:
        return None
    stamp = _LLAMACPP_TIME.match(line)
    return DraftAcceptanceLine(
        slot=int(match.group("slot")), task=int(match.group("task")), rate=float(match.group("rate")),
        accepted=int(match.group("accepted")), generated=int(match.group("generated")),
        mean_len=float(match.group("mean")), time=stamp.group(0).strip() if stamp else "",
    )


def parse_llamacpp_stats_line(line: str) -> BatchLine | None:
    """A ``draft acceptance`` line as a decode :class:`BatchLine` (accept len = mean len, accept rate = rate),
    so it reaches the log panel's figures and :func:`summarize_decode` like SGLang's ``Decode batch`` lines."""
    parsed = parse_draft_acceptance_line(line)
    if parsed is None:
        return None
    return BatchLine(kind="decode", time=parsed.time, tp_rank=None, dp_rank=None, running_req=None,
                     queue_req=None, num_token=None, token_usage=None, accept_length=parsed.mean_len,
                     accept_rate=parsed.rate, gen_throughput=None, new_tokens=None, input_throughput=None)


# --------------------------------------------------------------------------------- Prometheus /metrics text

_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?P<labels>\{[^}]*\})?\s+(?P<value>\S+)")


def parse_prometheus(text: str) -> dict[str, float]:
    """Sample name (with its ``{labels}`` as written) → value, from Prometheus text exposition; comments and
    unreadable lines are skipped."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line.strip())
        if match is None:
            continue
        try:
            value = float(match.group("value"))
        except ValueError:
            continue
        out[match.group("name") + (match.group("labels") or "")] = value
    return out


@dataclass(frozen=True)
class SpecCounterNames:
    """Which ``/metrics`` counters carry an engine's speculative-decoding totals."""

    draft_tokens: str
    accepted_tokens: str
    drafts: str
    """Verification steps that had a draft."""
    predicted_tokens: str | None = None


LLAMACPP_SPEC_COUNTERS = SpecCounterNames(
    draft_tokens="llamacpp:spec_decode_num_draft_tokens_total",
    accepted_tokens="llamacpp:spec_decode_num_accepted_tokens_total",
    drafts="llamacpp:spec_decode_num_drafts_total",
    predicted_tokens="llamacpp:tokens_predicted_total",
)


def _counter(samples: dict[str, float], name: str | None) -> float | None:
    if name is None:
        return None
    if name in samples:
        return samples[name]
    labelled = [v for k, v in samples.items() if k.startswith(name + "{")]
    return sum(labelled) if labelled else None


def spec_counter_figures(before: dict[str, float], after: dict[str, float],
                         names: SpecCounterNames) -> dict[str, float | int | str | None] | None:
    """Acceptance from the counters' difference over a window: ``accept_length`` = 1 + Δaccepted ÷ Δdrafts
    (1.0 when tokens were generated and nothing was drafted, including a server that has no draft counters at
    all but counts its generated tokens), ``accept_rate`` = Δaccepted ÷ Δdraft tokens. None when the counters
    are missing (``--metrics`` off) or went backwards (the server restarted)."""
    deltas: dict[str, float] = {}
    for key in ("predicted_tokens", "draft_tokens", "accepted_tokens", "drafts"):
        a, b = _counter(before, getattr(names, key)), _counter(after, getattr(names, key))
        if a is None and b is None and key != "predicted_tokens" and "predicted_tokens" in deltas:
            # vLLM exports its spec_decode counters only when speculation is configured: a server that counts
            # its generated tokens and has none of them drafted nothing (the baseline).
            deltas[key] = 0.0
            continue
        if a is None or b is None:
            if key == "predicted_tokens":
                continue
            return None
        if b < a:
            return None
        deltas[key] = b - a
    drafts, accepted, drafted = deltas["drafts"], deltas["accepted_tokens"], deltas["draft_tokens"]
    predicted = deltas.get("predicted_tokens")
    if drafts > 0:
        length: float | None = 1.0 + accepted / drafts
    else:
        length = 1.0 if predicted is None or predicted > 0 else None
    return {"source": "metrics", "accept_length": length, "accept_rate": accepted / drafted if drafted else None,
            "drafts": int(drafts), "draft_tokens": int(drafted), "accepted_tokens": int(accepted),
            "predicted_tokens": int(predicted) if predicted is not None else None}


# ------------------------------------------------------------------------------------------------ vLLM

_VLLM_TIME = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR) (\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? ")
_VLLM_THROUGHPUT = re.compile(
    r"Avg prompt throughput: (?P<prompt>\d+(?:\.\d+)?) tokens/s, Avg generation throughput: "
    r"(?P<gen>\d+(?:\.\d+)?) tokens/s, Running: (?P<running>\d+) reqs, (?:Swapped: \d+ reqs, )?"
    r"Waiting: (?P<waiting>\d+) reqs(?:, \w* ?KV cache usage: (?P<kv>\d+(?:\.\d+)?)%)?")
_VLLM_SPEC = re.compile(
    r"SpecDecoding metrics: Mean acceptance length: (?P<mean>\d+(?:\.\d+)?),.*?"
    r"Avg Draft acceptance rate: (?P<rate>\d+(?:\.\d+)?)%")

VLLM_SPEC_COUNTERS = SpecCounterNames(
    draft_tokens="vllm:spec_decode_num_draft_tokens_total",
    accepted_tokens="vllm:spec_decode_num_accepted_tokens_total",
    drafts="vllm:spec_decode_num_drafts_total",
    predicted_tokens="vllm:generation_tokens_total",
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
    stamp = _VLLM_TIME.search(line)
    when = stamp.group(1) if stamp else ""
    match = _VLLM_SPEC.search(line)
    if match is not None:
        return BatchLine(kind="decode", time=when, tp_rank=None, dp_rank=None, running_req=None, queue_req=None,
                         num_token=None, token_usage=None, accept_length=float(match.group("mean")),
                         accept_rate=float(match.group("rate")) / 100.0, gen_throughput=None, new_tokens=None,
                         input_throughput=None)
    match = _VLLM_THROUGHPUT.search(line)
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
