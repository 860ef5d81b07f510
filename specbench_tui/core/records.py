"""Result records: one :class:`Measurement` per measured request, keyed for resume."""

from __future__ import annotations

import math
import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from enum import Enum
from typing import Any

MeasurementKey = tuple[str, str, str, int] | tuple[str, str, str, int, str]
"""(config id, workload, item, repeat), with the load point as a fifth part for a measurement taken under load:
present in the store means done. A sequential workload's keys (and a run directory's from before load points)
keep their four parts."""

STATUS_OK = "ok"
STATUS_ZERO_OUTPUT = "zero_output"
STATUS_ERROR = "error"
STATUSES = (STATUS_OK, STATUS_ZERO_OUTPUT, STATUS_ERROR)

CACHE_COLD = "cold"
CACHE_WARM = "warm"
CACHE_POLICIES = (CACHE_COLD, CACHE_WARM)
"""``[measure] cache``: ``cold`` flushes the server's caches (radix prefix cache, an n-gram drafter's corpus)
before every measured request at concurrency 1 and before every load point; ``warm`` keeps them."""

ERROR_KIND_CRASH = "crash"
"""``error_kind`` of the request that was in flight when its server died: an error measurement whose ``error``
is the crash, so the cut is on record and ``--retry-crashed`` measures that key again."""


@dataclass(frozen=True)
class Measurement:
    """One measured request (or one agentic conversation) against one configuration."""

    config_id: str
    config: str
    workload: str
    item: str
    repeat: int
    status: str
    """ok, zero_output (kept out of every average) or error (with ``error`` saying why)."""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    decode_tps: float | None = None
    """Completion tokens after the first ÷ time after the first token."""
    itl_mean_s: float | None = None
    itl_p50_s: float | None = None
    itl_p95_s: float | None = None
    accept_length: float | None = None
    """Server's ``spec_accept_length`` for this request (completion tokens ÷ verify steps)."""
    verify_ct: int | None = None
    accept_rate: float | None = None
    finish_reason: str | None = None
    error: str | None = None
    http_status: int | None = None
    requested_prompt_tokens: int | None = None
    clamped: bool = False
    """The requested prompt size could not fit the context and was reduced."""
    turns: int | None = None
    output_sha: str | None = None
    """Hash of the generated text, for the losslessness check."""
    started_at: float | None = None
    error_kind: str | None = None
    """For errors: http, sse, connection, timeout, protocol, or crash (the server died under this request)."""
    chunks: int | None = None
    """Token-bearing stream chunks (completion tokens ÷ chunks is a live acceptance proxy)."""
    itl_p99_s: float | None = None
    load: str | None = None
    """The load point it was measured at (``c8``: 8 requests in flight; ``r2.5``: Poisson arrivals at 2.5 req/s);
    None for a sequential workload, which reads as concurrency 1 (:data:`specbench_tui.core.load.SEQUENTIAL`)."""
    cache: str | None = None
    """The workload's cache policy (``cold`` or ``warm``, :data:`CACHE_POLICIES`); None in records from before it."""
    started_cold: bool | None = None
    """The server's caches were flushed right before this request (or its load point): True only under ``cold``
    when the flush was accepted."""
    num_retractions: int | None = None
    """How often the server retracted this request to free KV cache and prefilled it again (SGLang's
    ``meta_info.num_retractions``): a retracted request's latency is the pool's, not the configuration's."""
    running_cap: int | None = None
    """The server's running-request cap when the request was sent (SGLang's ``/server_info``
    ``max_running_requests``, per DP rank where it says): a load point above it queues on the server."""
    correct_drafts: int | None = None
    """Accepted draft tokens (SGLang's ``meta_info.spec_num_correct_drafts``; summed over a conversation's turns)."""
    proposed_drafts: int | None = None
    """Proposed draft tokens (``spec_num_proposed_drafts`` = verify steps × (draft tokens − 1))."""
    accept_histogram: tuple[int, ...] | None = None
    """Verify steps that accepted exactly 0, 1, … drafts (``spec_correct_drafts_histogram``): per-position
    acceptance is read from it (:mod:`specbench_tui.core.acceptance`)."""
    category: str | None = None
    """The prompt's category in its dataset (Spec-Bench's ``category``), for the category × configuration matrices."""

    @property
    def retracted(self) -> bool:
        """The server retracted this request at least once (kept out of latency percentiles unless asked)."""
        return bool(self.num_retractions)

    @property
    def held_cache(self) -> str | None:
        """The cache policy that held: ``warm`` for a cold measurement whose flush failed (``started_cold`` false,
        as a run recorded before such records were stamped warm says), else :attr:`cache`."""
        return CACHE_WARM if self.cache == CACHE_COLD and self.started_cold is False else self.cache

    @property
    def key(self) -> MeasurementKey:
        if self.load is None:
            return (self.config_id, self.workload, self.item, self.repeat)
        return (self.config_id, self.workload, self.item, self.repeat, self.load)

    @property
    def planned_key(self) -> MeasurementKey:
        """The key the plan knows this measurement by: a clamped prompt is filed under the size actually sent
        (its ``item``) with the request beside it (``requested_prompt_tokens``), and planned under the request."""
        if not self.clamped or self.requested_prompt_tokens is None:
            return self.key
        planned = str(self.requested_prompt_tokens)
        if self.load is None:
            return (self.config_id, self.workload, planned, self.repeat)
        return (self.config_id, self.workload, planned, self.repeat, self.load)

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        for name in _OMIT_WHEN_NONE:  # a sequential workload's record is written as before load points existed
            if data[name] is None:
                del data[name]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Measurement:
        names = _FIELD_NAMES.get(cls)
        if names is None:
            names = _FIELD_NAMES[cls] = frozenset(f.name for f in fields(cls))
        missing = {"config_id", "config", "workload", "item", "repeat", "status"} - data.keys()
        if missing:
            raise ValueError(f"missing fields {sorted(missing)}")
        kwargs = {k: v for k, v in data.items() if k in names}
        check_field_types(cls, kwargs)
        if kwargs["status"] not in STATUSES:
            raise ValueError(f"unknown status {str(kwargs['status'])[:40]!r}")
        if cls is not Measurement:
            return cls(**kwargs)
        # Checked above, field by field: built without the frozen __init__'s per-field setattr (a run directory
        # holds tens of thousands of these, and an attaching client reads them all before its first frame).
        record = object.__new__(cls)
        record.__dict__.update(_MEASUREMENT_DEFAULTS)
        record.__dict__.update(kwargs)
        return record


_MEASUREMENT_DEFAULTS = {f.name: f.default for f in fields(Measurement) if f.default is not MISSING}

_OMIT_WHEN_NONE = ("itl_p99_s", "load", "cache", "started_cold", "num_retractions", "running_cap", "correct_drafts",
                   "proposed_drafts", "accept_histogram", "category")

_HINTS: dict[type, dict[str, object]] = {}
_FIELD_NAMES: dict[type, frozenset[str]] = {}
_FITTING: dict[type, set[tuple[str, type]]] = {}
"""Per class, the (field, type of value) pairs known to fit: a value's type decides, but for a float's finiteness."""


def check_field_types(cls: type, values: Mapping[str, object]) -> None:
    """Raise ``ValueError`` naming the first value whose JSON type does not fit ``cls``'s field (a record read
    back from a run directory is never trusted: ``"repeat": "x"`` or ``"accept_length": [1, 2]`` must be
    skipped, not crash a report). ``float`` fields take integers; ``int`` fields take no booleans; a tuple
    field takes a JSON array; numbers must be finite."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    fitting = _FITTING.setdefault(cls, set())
    for name, value in values.items():
        kind = type(value)
        finite = type(value) is not float or math.isfinite(value)
        if finite and (name, kind) in fitting:
            continue
        expected = hints.get(name)
        if expected is None:
            continue
        if not _fits(value, expected):
            shown = repr(value)
            raise ValueError(f"field {name!r} has the wrong type: {shown[:40] + '…' if len(shown) > 40 else shown}")
        if finite:
            fitting.add((name, kind))


def _fits(value: object, expected: object) -> bool:
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(expected))
    if expected is type(None):
        return value is None
    if expected is Any:
        return True
    if origin is tuple:
        return isinstance(value, (list, tuple))
    if origin in (dict, list):
        return isinstance(value, origin)
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if isinstance(expected, type) and issubclass(expected, Enum):
        return isinstance(value, (str, expected))
    if isinstance(expected, type):
        return isinstance(value, expected)
    return True
