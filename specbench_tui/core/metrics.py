"""Per-request measurement math, and the statistics over repeats.

A streamed request is a list of chunks, each stamped on arrival and carrying the server's *cumulative*
completion-token count. With speculative decoding one chunk carries several tokens, so:

- **TTFT** is the arrival of the first chunk that carries a token, from the request's start;
- **ITL** spreads each chunk's gap evenly over the tokens it carries (SGLang ``bench_serving`` does the
  same); a chunk is never counted as one token;
- **decode tok/s** is the tokens that arrived after the first token-bearing chunk, divided by the time
  from that chunk to the last token-bearing chunk. Tokens that rode in the first chunk were paid for by
  TTFT, and the ``[DONE]`` tail is not decoding, so both are left out. With one token in the first chunk
  this equals ``(completion_tokens - 1) / (t_last - t_first)``, SGLang's TPOT inverted, except that the
  window ends at the last token instead of at ``[DONE]``;
- **acceptance length** is the server's ``spec_accept_length``, else ``completion_tokens / spec_verify_ct``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple


class Chunk(NamedTuple):
    """One streamed payload: when it arrived (monotonic seconds) and the cumulative completion tokens. A named
    tuple: one is made per server-sent event, and a tuple is made in a third of a frozen dataclass's time."""

    at: float
    completion_tokens: int


@dataclass(frozen=True)
class RequestTiming:
    """The figures of one streamed request."""

    ttft_s: float | None
    e2e_s: float
    decode_tps: float | None
    itls_s: tuple[float, ...]
    completion_tokens: int
    first_chunk_tokens: int
    chunks: int
    """Token-bearing chunks."""


def request_timing(start: float, end: float, chunks: Sequence[Chunk],
                   completion_tokens: int | None = None) -> RequestTiming:
    """Figures of one request from its start, its end (``[DONE]``) and its chunks in arrival order.

    ``completion_tokens`` is the server's final count when known; it wins over the last chunk's count.
    """
    bearing: list[tuple[float, int]] = []
    previous = 0
    for chunk in chunks:
        if chunk.completion_tokens > previous:
            bearing.append((chunk.at, chunk.completion_tokens - previous))
            previous = chunk.completion_tokens
    total = completion_tokens if completion_tokens is not None else previous
    if not bearing:
        return RequestTiming(None, end - start, None, (), total, 0, 0)
    first_at, first_tokens = bearing[0]
    itls: list[float] = []
    for (prev_at, _), (at, tokens) in zip(bearing, bearing[1:]):
        itls.extend([(at - prev_at) / tokens] * tokens)
    after_first = sum(tokens for _, tokens in bearing[1:])
    window = bearing[-1][0] - first_at
    decode_tps = after_first / window if after_first > 0 and window > 0 else None
    return RequestTiming(first_at - start, end - start, decode_tps, tuple(itls), total, first_tokens, len(bearing))


def acceptance_length(spec_accept_length: float | None, completion_tokens: int | None,
                      verify_ct: int | None) -> float | None:
    """The request's acceptance length: the server's own figure, else tokens per verify step."""
    if spec_accept_length is not None and math.isfinite(spec_accept_length):
        return float(spec_accept_length)
    if completion_tokens and verify_ct:
        return completion_tokens / verify_ct
    return None


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0–100) with linear interpolation between ranks (numpy's default)."""
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class RepeatSpread:
    """Median and spread of one figure over repeats."""

    n: int
    median: float
    mean: float
    stdev: float
    minimum: float
    maximum: float
    mad: float
    """Median absolute deviation: robust to one odd repeat."""

    def to_json(self) -> dict[str, float | int]:
        return {"n": self.n, "median": self.median, "mean": self.mean, "stdev": self.stdev, "min": self.minimum,
                "max": self.maximum, "mad": self.mad}


def spread(values: Iterable[float | None]) -> RepeatSpread | None:
    """Median, mean, stdev, range and MAD of the values that are not None (None when there are none)."""
    kept = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not kept:
        return None
    median = statistics.median(kept)
    return RepeatSpread(n=len(kept), median=median, mean=statistics.fmean(kept),
                  stdev=statistics.stdev(kept) if len(kept) > 1 else 0.0, minimum=min(kept), maximum=max(kept),
                  mad=statistics.median(abs(v - median) for v in kept))


@dataclass(frozen=True)
class ConversationTiming:
    """Figures of a multi-turn conversation, combined from its turns."""

    ttft_s: float | None
    """Mean TTFT over the turns (each turn re-reads a growing context)."""
    e2e_s: float
    decode_tps: float | None
    """Tokens after each turn's first chunk ÷ the summed decode windows."""
    itls_s: tuple[float, ...]
    completion_tokens: int
    chunks: int


def combine_turns(turns: Sequence[RequestTiming]) -> ConversationTiming:
    """One figure set for a conversation: token-weighted decode rate, mean TTFT, all ITLs pooled."""
    ttfts = [t.ttft_s for t in turns if t.ttft_s is not None]
    tokens = 0
    window = 0.0
    for turn in turns:
        if turn.decode_tps and turn.completion_tokens > turn.first_chunk_tokens:
            after = turn.completion_tokens - turn.first_chunk_tokens
            tokens += after
            window += after / turn.decode_tps
    return ConversationTiming(
        ttft_s=statistics.fmean(ttfts) if ttfts else None,
        e2e_s=sum(t.e2e_s for t in turns),
        decode_tps=tokens / window if window > 0 else None,
        itls_s=tuple(x for t in turns for x in t.itls_s),
        completion_tokens=sum(t.completion_tokens for t in turns),
        chunks=sum(t.chunks for t in turns),
    )
