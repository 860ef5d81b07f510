"""Acceptance you can act on: one glossary of named definitions, and the per-position and draft-cost math.

Every view names the figure it shows by one of these definitions (never a bare "accept"):

- **acceptance length** (``tokens/step``): tokens committed per verify step, the bonus token included;
  SGLang's ``spec_accept_length`` = completion tokens ÷ ``spec_verify_ct``. 1.0 without speculation.
- **draft acceptance rate** (``accepted/proposed``): accepted draft tokens ÷ proposed draft tokens; SGLang's
  ``spec_accept_rate`` = ``spec_num_correct_drafts`` ÷ ``spec_num_proposed_drafts`` (proposed = verify steps ×
  (draft tokens − 1)). It scales with the number of drafted tokens: a longer draft lowers it.
- **accepted per verified**: accepted draft tokens per verify step (acceptance length − 1 on a chain).
- **conditional acceptance at position k**: P(draft k accepted | drafts 1..k−1 accepted), from SGLang's
  ``spec_correct_drafts_histogram`` (h[j] = verify steps that accepted exactly j drafts):
  ``c_k = Σ_{j≥k} h[j] ÷ Σ_{j≥k−1} h[j]``; from vLLM's per-position counters ``a_k`` (accepted at position k,
  0-based on the wire) over ``d`` drafts: ``c_1 = a_0 ÷ d``, ``c_k = a_{k−1} ÷ a_{k−2}``. It does not scale with the
  number of drafted tokens: a drafter that stops paying shows where.
- **tokens per target forward**: completion tokens ÷ target forward passes, every forward counted, drafting or
  not: on llama.cpp and vLLM the client's completion ÷ (completion − accepted). Their servers' "mean
  acceptance length" (llama.cpp's ``mean len``, vLLM's ``Mean acceptance length``) is 1 + accepted ÷ drafting
  steps: an acceptance length over the steps that drafted, so it reads higher (2.49 beside 1.11 on llama.cpp).
- **step cost ×**: the mean verify-step time of a configuration ÷ its baseline's step time at the same load
  (each from the inter-token latency × tokens per step), so **speedup ≈ acceptance length ÷ step cost ×**.

Pure functions, no I/O; the report tables are :mod:`specbench_tui.report.acceptance_view`.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from specbench_tui.core.records import STATUS_OK, Measurement


@dataclass(frozen=True)
class Definition:
    """One named figure: its name as every view prints it, a column label, how it is computed, and the short
    name a narrow view (the TUI's results table, the live log's decode line) prints it under."""

    name: str
    label: str
    formula: str
    short: str
    """At most 8 characters, never the bare word "accept" (:data:`BARE_ACCEPT`)."""


ACCEPTANCE_LENGTH = Definition("acceptance length", "accept len (tok/step)",
                               "completion tokens / verify steps (bonus token included)", "acc.len")
DRAFT_ACCEPTANCE_RATE = Definition("draft acceptance rate", "draft accept rate",
                                   "accepted draft tokens / proposed draft tokens", "acc.rate")
ACCEPTED_PER_VERIFIED = Definition("accepted per verified", "accepted/verify",
                                   "accepted draft tokens / verify steps", "acc/step")
CONDITIONAL_ACCEPTANCE = Definition("conditional acceptance at position k", "conditional acceptance",
                                    "steps accepting >= k drafts / steps accepting >= k-1 drafts", "acc@k")
TOKENS_PER_TARGET_FORWARD = Definition("tokens per target forward", "tok/target fwd",
                                       "completion tokens / target forward passes", "tok/fwd")
STEP_COST = Definition("step cost ×", "step cost ×",
                       "mean verify-step time / the baseline's step time at the same load", "cost×")

GLOSSARY: tuple[Definition, ...] = (ACCEPTANCE_LENGTH, DRAFT_ACCEPTANCE_RATE, ACCEPTED_PER_VERIFIED,
                                    CONDITIONAL_ACCEPTANCE, TOKENS_PER_TARGET_FORWARD, STEP_COST)
"""Every definition a view may show, in the order the docs list them (docs/acceptance.md)."""

BARE_ACCEPT = re.compile(r"\baccept\b(?! len\b| rate\b)", re.IGNORECASE)
"""The word "accept" standing for a figure without its definition: what no view may print. SGLang's own
``accept len`` and ``accept rate`` (its log's and the glossary's names for its figures, :data:`SERVER_FIGURES`)
are not bare."""

SERVER_FIGURES: dict[str, tuple[tuple[str, Definition], ...]] = {
    "sglang": (  # srt/managers/tokenizer_manager.py _calculate_spec_decoding_metrics; the decode log lines
        ("meta_info.spec_accept_length", ACCEPTANCE_LENGTH),
        ("meta_info.spec_accept_rate", DRAFT_ACCEPTANCE_RATE),
        ("meta_info.spec_correct_drafts_histogram", CONDITIONAL_ACCEPTANCE),
        ("log 'accept len'", ACCEPTANCE_LENGTH),
        ("log 'accept rate'", DRAFT_ACCEPTANCE_RATE),
    ),
    "llamacpp": (  # tools/server: slot print_timing 'draft acceptance = r (a accepted / g generated), mean len = m'
        ("log 'draft acceptance'", DRAFT_ACCEPTANCE_RATE),
        ("log 'mean len'", ACCEPTANCE_LENGTH),  # 1 + accepted / drafting steps: per verify step with a draft
        ("client: completion / (completion - accepted)", TOKENS_PER_TARGET_FORWARD),
        ("timings.draft_n_accepted / draft_n", DRAFT_ACCEPTANCE_RATE),
        ("llamacpp:spec_decode_num_accepted_tokens_per_pos_total", CONDITIONAL_ACCEPTANCE),
        ("1 + llamacpp:spec_decode_num_accepted_tokens_total / llamacpp:spec_decode_num_drafts_total",
         ACCEPTANCE_LENGTH),  # /metrics over the workload: the log's 'mean len' over all its requests
        ("llamacpp:spec_decode_num_accepted_tokens_total / llamacpp:spec_decode_num_draft_tokens_total",
         DRAFT_ACCEPTANCE_RATE),
    ),
    "vllm": (  # v1/spec_decode/metrics.py: SpecDecoding metrics line and the vllm:spec_decode_* counters
        ("log 'Mean acceptance length'", ACCEPTANCE_LENGTH),  # 1 + accepted / num_drafts (steps that drafted)
        ("client: completion / (completion - accepted)", TOKENS_PER_TARGET_FORWARD),
        ("log 'Avg Draft acceptance rate'", DRAFT_ACCEPTANCE_RATE),
        ("vllm:spec_decode_num_accepted_tokens_per_pos_total", CONDITIONAL_ACCEPTANCE),
        ("1 + vllm:spec_decode_num_accepted_tokens_total / vllm:spec_decode_num_drafts_total",
         ACCEPTANCE_LENGTH),  # /metrics over the workload: the log's 'Mean acceptance length'
        ("vllm:spec_decode_num_accepted_tokens_total / vllm:spec_decode_num_draft_tokens_total",
         DRAFT_ACCEPTANCE_RATE),  # the log's 'Avg Draft acceptance rate'
        ("metrics.speculative_decoding.draft_acceptance_rate", DRAFT_ACCEPTANCE_RATE),  # per request (0.32)
    ),
}
"""Engine → what its server reports, mapped to the glossary (each from the engine's own source)."""


def client_definition(engine: str) -> Definition:
    """What the client's per-request figure measures on ``engine``: SGLang counts verify steps
    (``spec_verify_ct``): acceptance length; llama.cpp and vLLM give accepted and drafted tokens, so every target
    forward is counted: tokens per target forward."""
    return TOKENS_PER_TARGET_FORWARD if engine in ("llamacpp", "vllm") else ACCEPTANCE_LENGTH


def server_definition(engine: str, figure: str) -> Definition | None:
    """The definition an engine's reported ``figure`` measures (None when it is not mapped)."""
    return next((d for name, d in SERVER_FIGURES.get(engine, ()) if name == figure), None)


def server_length_figure(engine: str) -> str | None:
    """The name (from the engine's own counters) of the acceptance length its server reports over a workload,
    where the engine has one beside the client's figure (llama.cpp, vLLM); None for SGLang."""
    return next((name for name, d in SERVER_FIGURES.get(engine, ()) if d is ACCEPTANCE_LENGTH
                 and name.startswith("1 + ")), None)


@dataclass(frozen=True)
class AcceptColumns:
    """How a results table heads its two acceptance columns on an engine, and what its legend adds."""

    client: str
    server: str
    legend: str | None = None


SGLANG_COLUMNS = AcceptColumns("accept len", "log accept len")


def accept_columns(engine: str) -> AcceptColumns:
    """The results tables' acceptance columns: SGLang's client and log figures are both acceptance length; on
    llama.cpp and vLLM the client's is tokens per target forward and the server's an acceptance length per
    drafting step (its counters), so each column carries its own definition."""
    source = server_length_figure(engine)
    if source is None:
        return SGLANG_COLUMNS
    client, server = client_definition(engine).label, "server accept len/draft step"
    return AcceptColumns(client, server, (
        f"{client}: {client_definition(engine).name}, completion tokens / (completion - accepted draft tokens), "
        f"every target forward counted (ours, per request; ^: the server's counters); {server}: the server's own "
        f"{ACCEPTANCE_LENGTH.name} per drafting step over the workload, {source} (llama.cpp's 'mean len', vLLM's "
        f"'Mean acceptance length'): only steps that drafted count, so it reads higher"))


def run_engine(figures: object) -> str:
    """The engine of a run's acceptance figures (``RunAnalysis.acceptance``); SGLang when there are none."""
    return figures.engine if isinstance(figures, AcceptanceAnalysis) else "sglang"


# ---------------------------------------------------------------------------------------------- the math


def conditional_from_histogram(histogram: Sequence[int | float]) -> tuple[float | None, ...]:
    """Conditional acceptance at positions 1..len−1 from a histogram of accepted drafts per verify step;
    None where no step reached the position."""
    out: list[float | None] = []
    for k in range(1, len(histogram)):
        reached = sum(histogram[k - 1:])
        out.append(sum(histogram[k:]) / reached if reached > 0 else None)
    return tuple(out)


def conditional_from_positions(accepted_per_position: Sequence[float], drafts: float) -> tuple[float | None, ...]:
    """Conditional acceptance from per-position accepted counts (vLLM's and llama.cpp's
    ``..._accepted_tokens_per_pos_total``, position 0 first) over ``drafts`` drafting steps."""
    out: list[float | None] = []
    previous = float(drafts)
    for count in accepted_per_position:
        out.append(float(count) / previous if previous > 0 else None)
        previous = float(count)
    return tuple(out)


def histogram_accept_length(histogram: Sequence[int | float]) -> float | None:
    """Acceptance length (bonus included) of a histogram: 1 + mean accepted drafts per verify step."""
    steps = sum(histogram)
    return 1.0 + sum(k * h for k, h in enumerate(histogram)) / steps if steps > 0 else None


def _is_count(value: object) -> TypeGuard[int]:
    """A count read from a server: an int (not a bool) ≥ 0."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def add_histograms(histograms: Iterable[Sequence[int]]) -> tuple[int, ...]:
    """Element-wise sum (shorter histograms padded with zeros)."""
    total: list[int] = []
    for h in histograms:
        if len(h) > len(total):
            total += [0] * (len(h) - len(total))
        for k, count in enumerate(h):
            if _is_count(count):
                total[k] += count
    return tuple(total)


SPARK = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float | None]) -> str:
    """One character per value in [0, 1] (``·`` for None): per-position acceptance at a glance."""
    out = []
    for v in values:
        if v is None or not math.isfinite(v):
            out.append("·")
        else:
            out.append(SPARK[min(len(SPARK) - 1, max(0, int(round(v * (len(SPARK) - 1)))))])
    return "".join(out)


def fmt_positions(values: Sequence[float | None], digits: int = 2) -> str:
    """``0.78 0.76 0.74`` (``-`` where a position was never reached)."""
    return " ".join("-" if v is None else f"{v:.{digits}f}" for v in values)


# ---------------------------------------------------------------------------------------------- per cell


@dataclass(frozen=True)
class CellAcceptance:
    """The acceptance figures of one configuration × workload, each under its definition."""

    config_id: str
    workload: str
    histogram: tuple[int, ...] = ()
    """Verify steps that accepted exactly 0, 1, … drafts, summed over the cell's ok measurements."""
    conditional: tuple[float | None, ...] = ()
    """Conditional acceptance at positions 1..depth (from the histogram)."""
    acceptance_length: float | None = None
    """Client side: Σ completion tokens ÷ Σ verify steps."""
    server_acceptance_length: float | None = None
    """Server side: SGLang's per-request ``spec_accept_length``, weighted by verify steps."""
    histogram_acceptance_length: float | None = None
    """1 + mean accepted drafts per step of the histogram (it leaves out the prefill's first token)."""
    draft_acceptance_rate: float | None = None
    accepted_per_verified: float | None = None
    tokens_per_chunk: float | None = None
    """Client side: completion tokens ÷ stream chunks (tokens per target forward when each forward streams)."""
    step_ms: float | None = None
    """Mean verify-step time: inter-token latency × tokens per step, weighted by verify steps."""
    step_cost: float | None = None
    """``step_ms`` ÷ the baseline's step time on the same workload (None without a baseline)."""
    predicted_speedup: float | None = None
    """Acceptance length ÷ step cost ×."""
    limit: str | None = None
    """``acceptance`` or ``step cost``: which of the two loses more of the ideal (draft width at cost 1)."""
    server_conditional: tuple[float | None, ...] = ()
    """Conditional acceptance by position from the server's per-position counters over the workload (vLLM,
    llama.cpp), when it exports them."""
    client_definition: str = ACCEPTANCE_LENGTH.name
    """What ``acceptance_length`` measures: acceptance length on SGLang, tokens per target forward on
    llama.cpp and vLLM (:func:`client_definition`)."""
    server_source: str | None = None
    """Where ``server_acceptance_length`` comes from when it is the engine's own counters over the workload
    (:func:`server_length_figure`, llama.cpp and vLLM): an acceptance length per drafting step."""
    server_draft_acceptance_rate: float | None = None
    """The server's counters: Δaccepted ÷ Δdrafted tokens over the workload."""
    server_tokens_per_target_forward: float | None = None
    """The server's counters: Δgenerated ÷ (Δgenerated − Δaccepted) over the workload, the client's definition."""

    @property
    def agree(self) -> bool:
        """Client- and server-side figures of the same definition agree within 1 % (or one side is missing):
        the acceptance lengths on SGLang; on llama.cpp and vLLM, whose client figure is tokens per target
        forward and whose server's is per drafting step, tokens per target forward and draft acceptance rate."""
        if self.client_definition == ACCEPTANCE_LENGTH.name:
            return _close(self.acceptance_length, self.server_acceptance_length)
        return (_close(self.acceptance_length, self.server_tokens_per_target_forward)
                and _close(self.draft_acceptance_rate, self.server_draft_acceptance_rate))

    def to_json(self) -> dict[str, object]:
        engine = {} if self.server_source is None else {
            "client_definition": self.client_definition, "server_definition": ACCEPTANCE_LENGTH.name,
            "server_source": self.server_source, "server_draft_acceptance_rate": self.server_draft_acceptance_rate,
            "server_tokens_per_target_forward": self.server_tokens_per_target_forward}
        return {"config_id": self.config_id, "workload": self.workload, "histogram": list(self.histogram),
                "conditional_acceptance": list(self.conditional), "acceptance_length": self.acceptance_length,
                "server_acceptance_length": self.server_acceptance_length,
                "histogram_acceptance_length": self.histogram_acceptance_length,
                "draft_acceptance_rate": self.draft_acceptance_rate,
                "accepted_per_verified": self.accepted_per_verified, "tokens_per_chunk": self.tokens_per_chunk,
                "step_ms": self.step_ms, "step_cost": self.step_cost, "predicted_speedup": self.predicted_speedup,
                "limit": self.limit, "client_server_agree": self.agree,
                "server_conditional_acceptance": list(self.server_conditional), **engine}


def _close(a: float | None, b: float | None) -> bool:
    return a is None or b is None or abs(a - b) <= 0.01 * max(abs(b), 1e-9)


def _ok(ms: Iterable[Measurement]) -> list[Measurement]:
    return [m for m in ms if m.status == STATUS_OK and m.load is None]


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def step_seconds(ms: Sequence[Measurement]) -> float | None:
    """Mean decode-step time of a cell: each request's mean inter-token latency × its tokens per step
    (completion ÷ verify steps; 1 without speculation), weighted by its steps."""
    total = steps = 0.0
    for m in ms:
        if m.itl_mean_s is None or not m.completion_tokens:
            continue
        n = float(m.verify_ct) if m.verify_ct else float(m.completion_tokens)
        total += m.itl_mean_s * (m.completion_tokens / n) * n
        steps += n
    return total / steps if steps > 0 else None


def _rates(ok: Sequence[Measurement]) -> tuple[float | None, float | None, float | None, float | None]:
    """(client acceptance length, server acceptance length, draft acceptance rate, accepted per verified)."""
    counted = [m for m in ok if m.verify_ct and m.completion_tokens]
    verify = float(sum(m.verify_ct or 0 for m in counted))
    client = _ratio(float(sum(m.completion_tokens or 0 for m in counted)), verify)
    return (client, _server_length(counted), *_draft_rates(counted))


def _server_length(counted: Sequence[Measurement]) -> float | None:
    """The server's acceptance length over the requests, weighted by their verify steps."""
    served = [(m.accept_length, m.verify_ct or 0) for m in counted if m.accept_length is not None]
    return _ratio(sum(a * v for a, v in served), float(sum(v for _, v in served))) if served else None


def _draft_rates(counted: Sequence[Measurement]) -> tuple[float | None, float | None]:
    """Drafts accepted per draft proposed, and per verify step, over the requests that count their drafts."""
    drafts = [m for m in counted if m.correct_drafts is not None and m.proposed_drafts]
    correct = float(sum(m.correct_drafts or 0 for m in drafts))
    rate = _ratio(correct, float(sum(m.proposed_drafts or 0 for m in drafts)))
    per_verified = _ratio(correct, float(sum(m.verify_ct or 0 for m in drafts))) if drafts else None
    return rate, per_verified


def cell_acceptance(config_id: str, workload: str, ms: Sequence[Measurement],
                    baseline_ms: Sequence[Measurement] = ()) -> CellAcceptance:
    """A cell's figures; ``baseline_ms`` (its baseline's measurements of the same workload) gives the step cost."""
    ok = _ok(ms)
    histogram = add_histograms(m.accept_histogram for m in ok if m.accept_histogram)
    client, server, rate, per_verified = _rates(ok)
    chunks = [m for m in ok if m.chunks and m.completion_tokens]
    per_chunk = _ratio(float(sum(m.completion_tokens or 0 for m in chunks)), float(sum(m.chunks or 0 for m in chunks)))
    step = step_seconds(ok)
    base_step = step_seconds(_ok(baseline_ms)) if baseline_ms else None
    cost = step / base_step if step is not None and base_step else None
    length = client if client is not None else (1.0 if ok and not any(m.verify_ct for m in ok) else None)
    return CellAcceptance(
        config_id=config_id, workload=workload, histogram=histogram,
        conditional=conditional_from_histogram(histogram), acceptance_length=client,
        server_acceptance_length=server, histogram_acceptance_length=histogram_accept_length(histogram),
        draft_acceptance_rate=rate, accepted_per_verified=per_verified, tokens_per_chunk=per_chunk,
        step_ms=step * 1000.0 if step is not None else None, step_cost=cost,
        predicted_speedup=length / cost if length is not None and cost else None,
        limit=_limit(length, cost, histogram))


def _limit(length: float | None, cost: float | None, histogram: Sequence[int]) -> str | None:
    """What holds the speedup back: ``acceptance`` when more is lost to what the drafts miss (against the most a
    step can commit: every draft and the bonus) than to the step's cost, else ``step cost``."""
    if cost is None or length is None or len(histogram) <= 1:
        return None
    width = float(len(histogram))
    return "acceptance" if math.log(width / length) >= math.log(max(cost, 1e-9)) else "step cost"


# ---------------------------------------------------------------------------------------------- by category


@dataclass(frozen=True)
class CategoryMatrix:
    """Per workload with categories: rows = categories, columns = configurations."""

    workload: str
    categories: tuple[str, ...]
    configs: tuple[tuple[str, str], ...]
    """(config id, name) in plan order."""
    speedup: dict[tuple[str, str], float] = field(default_factory=dict)
    """(category, config id) → paired median speedup over its baseline on that category's items."""
    acceptance_length: dict[tuple[str, str], float] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        def by_category(values: dict[tuple[str, str], float]) -> dict[str, dict[str, float | None]]:
            return {c: {n: values.get((c, i)) for i, n in self.configs} for c in self.categories}

        return {"workload": self.workload, "categories": list(self.categories),
                "configs": [n for _, n in self.configs],
                "speedup": by_category(self.speedup), "acceptance_length": by_category(self.acceptance_length)}


def _paired(mine: Sequence[Measurement], theirs: Sequence[Measurement]) -> float | None:
    a = {(m.item, m.repeat): m.decode_tps for m in mine if m.decode_tps}
    b = {(m.item, m.repeat): m.decode_tps for m in theirs if m.decode_tps}
    keys = sorted(a.keys() & b.keys())
    if not keys:
        return None
    below = statistics.median(float(b[k] or 0) for k in keys)
    return statistics.median(float(a[k] or 0) for k in keys) / below if below > 0 else None


def category_matrix(workload: str, configs: Sequence[tuple[str, str, str | None]],
                    ms: Sequence[Measurement]) -> CategoryMatrix | None:
    """The category × configuration matrices of one workload (None when its measurements carry no category).
    ``configs``: (id, name, baseline id or None) in plan order."""
    ok = [m for m in _ok(ms) if m.workload == workload]
    categories = tuple(dict.fromkeys(m.category for m in ok if m.category))
    if len(categories) < 2:  # a built-in kind's one category is the workload itself
        return None
    cells: dict[tuple[str, str], list[Measurement]] = defaultdict(list)
    for m in ok:
        if m.category:
            cells[(m.category, m.config_id)].append(m)
    speedup: dict[tuple[str, str], float] = {}
    accept: dict[tuple[str, str], float] = {}
    for config_id, _name, baseline in configs:
        for category in categories:
            mine = cells.get((category, config_id), [])
            client = _rates(mine)[0]
            if client is not None:
                accept[(category, config_id)] = client
            if baseline:
                value = _paired(mine, cells.get((category, baseline), []))
                if value is not None:
                    speedup[(category, config_id)] = value
    shown = tuple((i, n) for i, n, _ in configs if any((c, i) in accept or (c, i) in speedup for c in categories))
    return CategoryMatrix(workload, categories, shown, speedup, accept)


@dataclass(frozen=True)
class AcceptanceAnalysis:
    """Per cell acceptance figures and per workload category matrices, for every view."""

    cells: tuple[CellAcceptance, ...] = ()
    categories: tuple[CategoryMatrix, ...] = ()
    engine: str = "sglang"
    """The run's engine profile: what its client and server figures measure (:func:`client_definition`)."""

    def cell(self, config_id: str, workload: str) -> CellAcceptance | None:
        return next((c for c in self.cells if c.config_id == config_id and c.workload == workload), None)

    def to_json(self) -> dict[str, Any]:
        return {"definitions": [{"name": d.name, "label": d.label, "formula": d.formula} for d in GLOSSARY],
                "cells": [c.to_json() for c in self.cells],
                "categories": [m.to_json() for m in self.categories],
                **({} if server_length_figure(self.engine) is None else {"engine": self.engine})}


@dataclass(frozen=True)
class ServerCounts:
    """A workload's speculative-decoding counters as its server reported them (llama.cpp's and vLLM's
    ``/metrics``, diffed around the workload: ``WorkloadFinished.server_log``)."""

    drafts: int
    """Verify steps that had a draft."""
    accepted_per_position: tuple[int, ...] = ()
    accepted: int | None = None
    drafted: int | None = None
    generated: int | None = None

    @property
    def acceptance_length(self) -> float | None:
        """1 + accepted ÷ drafting steps: llama.cpp's ``mean len``, vLLM's ``Mean acceptance length``."""
        return 1.0 + self.accepted / self.drafts if self.accepted is not None and self.drafts > 0 else None

    @property
    def draft_acceptance_rate(self) -> float | None:
        return self.accepted / self.drafted if self.accepted is not None and self.drafted else None

    @property
    def tokens_per_target_forward(self) -> float | None:
        """Generated ÷ (generated − accepted): every target forward commits one token plus its accepted ones."""
        g, a = self.generated, self.accepted
        return g / (g - a) if g is not None and a is not None and g > a else None


def server_counts(log: Mapping[str, object]) -> ServerCounts | None:
    """The counters of a workload's server figures (``WorkloadFinished.server_log``), None unless they come
    from the counters (``source = "metrics"``) and something was drafted."""
    drafts = log.get("drafts")
    if log.get("source") != "metrics" or not _is_count(drafts) or drafts <= 0:
        return None
    positions = log.get("accepted_per_position")
    counted = tuple(positions) if isinstance(positions, list) and all(_is_count(p) for p in positions) else ()

    def one(key: str) -> int | None:
        value = log.get(key)
        return value if _is_count(value) else None

    return ServerCounts(drafts, counted, one("accepted_tokens"), one("draft_tokens"), one("predicted_tokens"))


def _with_server(cell: CellAcceptance, counted: ServerCounts, engine: str) -> CellAcceptance:
    """A cell with its server's counters: per-position acceptance, and on an engine whose client figure is
    another definition (llama.cpp, vLLM) the server's own acceptance length beside it."""
    cell = dataclasses.replace(cell, server_conditional=conditional_from_positions(
        counted.accepted_per_position, counted.drafts) if counted.accepted_per_position else ())
    source = server_length_figure(engine)
    if source is None:
        return cell
    return dataclasses.replace(
        cell, client_definition=client_definition(engine).name, server_source=source,
        server_acceptance_length=counted.acceptance_length,
        server_draft_acceptance_rate=counted.draft_acceptance_rate,
        server_tokens_per_target_forward=counted.tokens_per_target_forward)


def analyse_acceptance(configs: Sequence[tuple[str, str, str | None]], workloads: Sequence[str],
                       ms: Sequence[Measurement], server: Mapping[tuple[str, str], ServerCounts] | None = None,
                       engine: str = "sglang") -> AcceptanceAnalysis:
    """Every sequential cell's figures (``configs``: (id, name, baseline id or None), plan order); ``server``:
    per (config id, workload) the server's counters (:func:`server_counts`); ``engine``: the run's engine
    profile, which says what the client's figure measures."""
    by_cell: dict[tuple[str, str], list[Measurement]] = defaultdict(list)
    for m in ms:
        by_cell[(m.config_id, m.workload)].append(m)
    cells = []
    for config_id, _name, baseline in configs:
        for workload in workloads:
            mine = by_cell.get((config_id, workload), [])
            if not mine:
                continue
            base = by_cell.get((baseline, workload), []) if baseline and baseline != config_id else None
            cell = cell_acceptance(config_id, workload, mine, base if base is not None else ())
            counted = (server or {}).get((config_id, workload))
            if counted is not None:
                cell = _with_server(cell, counted, engine)
            elif server_length_figure(engine) is not None:
                # no counters: the per-request figure is the client's own, not the server's
                cell = dataclasses.replace(cell, client_definition=client_definition(engine).name,
                                           server_acceptance_length=None)
            cells.append(cell)
    matrices = [m for m in (category_matrix(w, configs, ms) for w in workloads) if m is not None]
    return AcceptanceAnalysis(tuple(cells), tuple(matrices), engine)


def from_mapping(data: Mapping[str, object]) -> tuple[int, ...] | None:
    """A ``spec_correct_drafts_histogram`` read from a server's JSON (None unless a list of counts ≥ 0)."""
    value = data.get("spec_correct_drafts_histogram")
    if isinstance(value, list) and value and all(_is_count(v) for v in value):
        return tuple(value)
    return None
