"""The server's own figures, whatever the engine: stats lines parsed into :class:`BatchLine` s, summarised over a
window, and speculative-decoding counters read from Prometheus ``/metrics`` text.

Each engine module (``core/engines``) parses its own log lines into :class:`BatchLine` s
(``EngineProfile.parse_stats_line``) and names its counters (:class:`SpecCounterNames`); this module only knows
the common shape.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypedDict

MAX_STATS_LINE = 4096
"""Longer lines are not stats lines (a ``Decode batch`` line has < 400 characters): not parsed at all, since
every log line is parsed on the engine's event loop."""


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
    graph: bool | None = None
    """``cuda graph: True|False`` (``cpu graph:`` on CPU): whether the batch ran a captured graph (None: not said)."""


@dataclass(frozen=True)
class DecodeSummary:
    """The server's own decode figures over a window (one workload of one configuration)."""

    lines: int
    accept_length: float | None
    """Mean of the ``accept len`` values (None without speculative decoding)."""
    accept_rate: float | None
    gen_throughput: float | None
    """Mean ``gen throughput (token/s)`` (summed over DP ranks that log their own lines)."""
    gen_throughput_max: float | None
    retract_warnings: int = 0
    """Retraction warnings logged in the window (SGLang's "KV cache pool is full. Retract requests.")."""
    retracted_requests: int = 0
    """Requests those warnings retracted."""
    dp_ranks: int = 1
    """DP ranks whose decode lines were read (DP attention logs one line per DP group leader)."""
    graph_lines: int = 0
    """Decode lines that said whether they ran a graph (``cuda graph:``/``cpu graph:``)."""
    graph_true: int = 0
    """Of those, the lines that ran one."""
    eager_batches: tuple[int, ...] = ()
    """The batch sizes (``#running-req``) of the decode lines that ran eager."""

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "lines": self.lines, "accept_length": self.accept_length, "accept_rate": self.accept_rate,
            "gen_throughput": self.gen_throughput, "gen_throughput_max": self.gen_throughput_max}
        if self.retract_warnings:
            data["retract_warnings"] = self.retract_warnings
            data["retracted_requests"] = self.retracted_requests
        if self.dp_ranks > 1:
            data["dp_ranks"] = self.dp_ranks
        if self.graph_lines:
            data["graph_share"] = self.graph_true / self.graph_lines
            data["graph_lines"] = self.graph_lines
            data["eager_batches"] = list(self.eager_batches)
        return data


RETRACT = "retract"
"""The kind of a retraction warning parsed as a :class:`BatchLine` (``num_token``: requests retracted)."""
STEPS = "spec_steps"
"""The kind of an adaptive server's step switch (or start) parsed as a :class:`BatchLine` (``num_token``: the
speculative steps it runs from then on; 0: no speculation)."""


def leader_lines(lines: Iterable[BatchLine], kind: str = "decode") -> list[BatchLine]:
    """The lines of ``kind`` logged by one rank of each DP group (its lowest TP rank: ``TP0`` without DP
    attention, ``DP1 TP4`` for the second group of DP attention over 8 GPUs), so TP>1 is not counted n times
    and no DP group is dropped."""
    chosen = [b for b in lines if b.kind == kind]
    lowest: dict[int | None, int] = {}
    for b in chosen:
        if b.tp_rank is not None:
            lowest[b.dp_rank] = min(lowest.get(b.dp_rank, b.tp_rank), b.tp_rank)
    return [b for b in chosen if b.tp_rank is None or b.tp_rank == lowest.get(b.dp_rank)]


def summarize_decode(lines: Iterable[BatchLine]) -> DecodeSummary:
    """Mean accept length and throughput over the decode lines of each DP group's leader; throughput is summed
    over DP groups (each logs its own share)."""
    every = list(lines)
    decode = leader_lines(every)

    def mean(values: list[float]) -> float | None:
        return statistics.fmean(values) if values else None

    accepts = [b.accept_length for b in decode if b.accept_length is not None]
    rates = [b.accept_rate for b in decode if b.accept_rate is not None]
    ranks = sorted({b.dp_rank for b in decode}, key=lambda r: -1 if r is None else r)
    per_rank = [[b.gen_throughput for b in decode if b.dp_rank == r and b.gen_throughput is not None] for r in ranks]
    means = [statistics.fmean(g) for g in per_rank if g]
    gens = [b.gen_throughput for b in decode if b.gen_throughput is not None]
    retracts = leader_lines(every, RETRACT)
    return DecodeSummary(lines=len(decode), accept_length=mean(accepts), accept_rate=mean(rates),
                         gen_throughput=sum(means) if means else None, gen_throughput_max=max(gens) if gens else None,
                         retract_warnings=len(retracts), retracted_requests=sum(b.num_token or 0 for b in retracts),
                         dp_ranks=max(1, len(ranks)), **_graph_counts(decode))


class _GraphCounts(TypedDict):
    """:class:`DecodeSummary`'s graph fields (:func:`_graph_counts`)."""

    graph_lines: int
    graph_true: int
    eager_batches: tuple[int, ...]


def _graph_counts(decode: list[BatchLine]) -> _GraphCounts:
    """The decode lines that said whether they ran a graph, those that did, and the batch sizes that ran eager (a
    line of an idle server, no request running, runs no batch)."""
    graphed = [b for b in decode if b.graph is not None and b.running_req != 0]
    eager = sorted({b.running_req for b in graphed if b.graph is False and b.running_req is not None})
    return {"graph_lines": len(graphed), "graph_true": sum(1 for b in graphed if b.graph),
            "eager_batches": tuple(eager)}


def adaptive_figures(lines: Iterable[BatchLine], steps_at: Callable[[int], tuple[int, ...]],
                     start_steps: int | None = None) -> dict[str, object]:
    """What an adaptive server (SGLang's ``--speculative-adaptive``) ran over a window. From its own log when it
    says (``start_steps``, the steps in force when the window opened, and every :data:`STEPS` switch in it:
    ``steps_source = "log"``), else the candidate steps of the tiers its decode lines' batch sizes fall in
    (``steps_at``: ``"tiers"``). ``speculation``: ``off`` (every step 0), ``on`` (none 0) or ``mixed``."""
    every = list(lines)
    switched = [b.num_token for b in leader_lines(every, STEPS) if b.num_token is not None]
    batches = sorted({b.running_req for b in leader_lines(every) if b.running_req})
    figures: dict[str, object] = {"adaptive": True, "spec_steps": None, "speculation": None}
    if batches:
        figures["running_batch"] = [batches[0], batches[-1]]
    if start_steps is not None or switched:
        steps = sorted({*([start_steps] if start_steps is not None else []), *switched})
        figures["steps_source"] = "log"
    elif batches:
        steps = sorted({step for batch in batches for step in steps_at(batch)})
        figures["steps_source"] = "tiers"
    else:
        return figures
    figures["spec_steps"] = steps
    figures["speculation"] = "off" if steps == [0] else "mixed" if 0 in steps else "on"
    return figures


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
    accepted_per_position: str | None = None
    """Accepted tokens per draft position, labelled ``position="0"``, ``"1"``, … (vLLM's and llama.cpp's
    ``..._spec_decode_num_accepted_tokens_per_pos_total``): conditional acceptance per position
    (:func:`specbench_tui.core.acceptance.conditional_from_positions`)."""


_POSITION = re.compile(r'[{,]position="(\d+)"')


def _per_position(samples: dict[str, float], name: str) -> dict[int, float]:
    """Per ``position`` label, the sum of ``name``'s samples over its other labels."""
    out: dict[int, float] = {}
    for key, value in samples.items():
        if key.startswith(name + "{"):
            match = _POSITION.search(key)
            if match:
                out[int(match.group(1))] = out.get(int(match.group(1)), 0.0) + value
    return out


def position_deltas(before: dict[str, float], after: dict[str, float], name: str | None) -> list[int] | None:
    """Δ accepted tokens per draft position (position 0 first) over a window; None without the counter, with a
    gap in the positions, or when one went backwards."""
    if name is None:
        return None
    a, b = _per_position(before, name), _per_position(after, name)
    if not b or sorted(b) != list(range(len(b))):
        return None
    deltas = [b[k] - a.get(k, 0.0) for k in range(len(b))]
    return [int(d) for d in deltas] if all(d >= 0 for d in deltas) else None


def _counter(samples: dict[str, float], name: str | None) -> float | None:
    if name is None:
        return None
    if name in samples:
        return samples[name]
    labelled = [v for k, v in samples.items() if k.startswith(name + "{")]
    return sum(labelled) if labelled else None


def spec_counter_figures(before: dict[str, float], after: dict[str, float],
                         names: SpecCounterNames) -> dict[str, float | int | str | list[int] | None] | None:
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
    out: dict[str, float | int | str | list[int] | None] = {
        "source": "metrics", "accept_length": length, "accept_rate": accepted / drafted if drafted else None,
        "drafts": int(drafts), "draft_tokens": int(drafted), "accepted_tokens": int(accepted),
        "predicted_tokens": int(predicted) if predicted is not None else None}
    positions = position_deltas(before, after, names.accepted_per_position)
    if positions is not None and drafts > 0:
        out["accepted_per_position"] = positions
    return out
