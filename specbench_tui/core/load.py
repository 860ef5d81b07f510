"""The load axis of a workload: closed-loop concurrency and open-loop (seeded Poisson) request rates.

Pure: what a workload's ``concurrency`` / ``request_rate`` keys mean, the label a measurement records its
load point under, the seeded arrival schedule of an open-loop point, and the measurement keys a load point
has. The runners are in :mod:`specbench_tui.engine.loadrun`; what the results mean is
:mod:`specbench_tui.core.crossover`.

A load point is labelled ``c<N>`` (N requests in flight) or ``r<rate>`` (Poisson arrivals at ``rate``
requests/s). A measurement recorded before load points existed has no label and reads as ``c1``: a
sequential workload *is* concurrency 1.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

AXIS_CONCURRENCY = "concurrency"
AXIS_RATE = "request_rate"
AXES = (AXIS_CONCURRENCY, AXIS_RATE)

SEARCH_ADAPTIVE = "adaptive"
SEARCH_GRID = "grid"
SEARCHES = (SEARCH_ADAPTIVE, SEARCH_GRID)

DEFAULT_WAVES = 4
"""Closed loop: requests per point = waves × concurrency unless ``requests`` says otherwise."""
DEFAULT_OPEN_REQUESTS = 64
"""Open loop: requests per point unless ``requests`` says otherwise."""
DEFAULT_NOISE = 0.10
"""A point whose relative spread (MAD ÷ median over ≥ 3 repeats) exceeds this is noisy (vLLM's tuner: 0.1)."""
SEQUENTIAL = "c1"
"""The load label of a measurement that has none (recorded by a sequential workload or an older version)."""


@dataclass(frozen=True)
class Slo:
    """Service-level objective a request must meet to count in goodput (None: no limit on that figure)."""

    ttft_ms: float | None = None
    itl_ms: float | None = None
    """Limit on the request's own p99 inter-token latency."""
    e2e_ms: float | None = None
    percentile: float = 99.0
    """The point-level check: this percentile of each figure over the point's requests must meet its limit."""

    def to_json(self) -> dict[str, object]:
        return {"ttft_ms": self.ttft_ms, "itl_ms": self.itl_ms, "e2e_ms": self.e2e_ms, "percentile": self.percentile}

    @classmethod
    def from_json(cls, raw: object) -> Slo | None:
        if not isinstance(raw, Mapping):
            return None

        def num(key: str) -> float | None:
            value = raw.get(key)
            return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        return cls(ttft_ms=num("ttft_ms"), itl_ms=num("itl_ms"), e2e_ms=num("e2e_ms"),
                   percentile=num("percentile") or 99.0)

    def describe(self) -> str:
        parts = [f"{name} ≤ {value:g} ms" for name, value in
                 (("TTFT", self.ttft_ms), ("ITL", self.itl_ms), ("e2e", self.e2e_ms)) if value is not None]
        return " and ".join(parts) or "no limit"


@dataclass(frozen=True)
class LoadSpec:
    """A workload's load axis (from its ``concurrency``, ``request_rate`` and related keys)."""

    concurrency: tuple[int, ...] = ()
    request_rate: tuple[float, ...] = ()
    requests: int | None = None
    """Requests per point and repeat (None: ``waves`` × concurrency closed-loop, 64 open-loop)."""
    waves: int = DEFAULT_WAVES
    search: str = SEARCH_ADAPTIVE
    arrival_seed: int = 0
    noise_threshold: float = DEFAULT_NOISE
    slo: Slo | None = None

    def points(self) -> list[str]:
        """Every load point's label, concurrency first, each axis in the order written."""
        return [concurrency_label(c) for c in self.concurrency] + [rate_label(r) for r in self.request_rate]

    def requests_at(self, label: str) -> int:
        axis, value = parse_label(label)
        if self.requests is not None:
            return self.requests
        return int(value) * self.waves if axis == AXIS_CONCURRENCY else DEFAULT_OPEN_REQUESTS

    def warmup_requests(self, label: str, warmup: int) -> int:
        """Unmeasured requests before a point: ``warmup`` waves of N closed-loop, ``warmup`` requests open-loop."""
        axis, value = parse_label(label)
        return warmup * int(value) if axis == AXIS_CONCURRENCY else warmup

    def axis_points(self, axis: str) -> list[str]:
        values = self.concurrency if axis == AXIS_CONCURRENCY else self.request_rate
        label = concurrency_label if axis == AXIS_CONCURRENCY else rate_label
        # concurrency values are ints and rates floats: each axis's label takes its own; mypy sees the union.
        return [label(v) for v in sorted(values)]  # type: ignore[arg-type]

    def to_json(self) -> dict[str, object]:
        return {"concurrency": list(self.concurrency), "request_rate": list(self.request_rate),
                "requests": self.requests, "waves": self.waves, "search": self.search,
                "arrival_seed": self.arrival_seed, "noise_threshold": self.noise_threshold,
                "slo": self.slo.to_json() if self.slo else None}

    @classmethod
    def from_json(cls, raw: object) -> LoadSpec | None:
        """Read back from the run's plan (never trusted: wrong types fall back to defaults)."""
        if not isinstance(raw, Mapping):
            return None
        conc = tuple(int(v) for v in raw.get("concurrency") or () if _positive(v, int))
        rate = tuple(float(v) for v in raw.get("request_rate") or () if _positive(v, (int, float)))
        if not conc and not rate:
            return None
        requests = raw.get("requests")
        waves = raw.get("waves")
        noise = raw.get("noise_threshold")
        seed = raw.get("arrival_seed")
        return cls(concurrency=conc, request_rate=rate,
                   requests=requests if isinstance(requests, int) and requests > 0 else None,
                   waves=waves if isinstance(waves, int) and waves > 0 else DEFAULT_WAVES,
                   search=str(raw["search"]) if raw.get("search") in SEARCHES else SEARCH_ADAPTIVE,
                   arrival_seed=seed if isinstance(seed, int) else 0,
                   noise_threshold=float(noise) if isinstance(noise, (int, float)) and noise > 0 else DEFAULT_NOISE,
                   slo=Slo.from_json(raw.get("slo")))


def _positive(value: object, kinds: type | tuple[type, ...]) -> bool:
    """A number of ``kinds`` (never a bool) above 0."""
    return isinstance(value, kinds) and not isinstance(value, bool) and value > 0  # type: ignore[operator]


def concurrency_label(n: int) -> str:
    return f"c{int(n)}"


def rate_label(rate: float) -> str:
    return f"r{float(rate):g}"


def parse_label(label: str | None) -> tuple[str, float]:
    """(axis, value) of a load label; no label is concurrency 1."""
    label = label or SEQUENTIAL
    try:
        if label.startswith("c"):
            return AXIS_CONCURRENCY, float(int(label[1:]))
        if label.startswith("r"):
            return AXIS_RATE, float(label[1:])
    except ValueError:
        pass
    raise ValueError(f"not a load label: {label[:20]!r}")


def point_item(items: Sequence[str], index: int) -> tuple[str, str]:
    """(base item, keyed item) of a point's ``index``-th request: items are cycled, each round numbered, so the
    same request index carries the same prompt in every configuration (speedups pair them)."""
    base = items[index % len(items)]
    return base, f"{base}#{index // len(items)}"


def point_keys(config_id: str, workload: str, items: Sequence[str], label: str, repeats: int,
               requests: int) -> list[tuple[str, str, str, int, str]]:
    """Every measurement key of one load point: each repeat sends ``requests`` requests."""
    return [(config_id, workload, point_item(items, j)[1], repeat, label)
            for repeat in range(1, repeats + 1) for j in range(requests)]


def arrival_offsets(rate: float, count: int, seed: int, *salt: object) -> list[float]:
    """Seconds from a point's start at which its ``count`` open-loop requests are sent: a Poisson process at
    ``rate`` requests/s (exponential gaps), seeded by ``seed`` and ``salt`` (workload, point, repeat), so
    the same sweep sends the same schedule to every configuration and on every run."""
    digest = hashlib.sha256(repr((seed, rate, *salt)).encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    now = 0.0
    out = []
    for _ in range(count):
        out.append(now)
        now += rng.expovariate(rate)
    return out
