"""A workload's load axis: ``concurrency`` (closed loop) or ``request_rate`` (open loop) points, requests and
waves per point, the adaptive or grid search, the arrival seed, the noise threshold and the SLO; the result is
a :class:`specbench_tui.core.load.LoadSpec`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from specbench_tui.core.errors import did_you_mean
from specbench_tui.core.load import SEARCHES, LoadSpec, Slo, rate_label
from specbench_tui.core.sweep.limits import (
    MAX_CONCURRENCY,
    MAX_LOAD_POINTS,
    MAX_REQUEST_RATE,
    MAX_REQUESTS,
    MAX_TIMEOUT_S,
    MAX_WAVES,
)
from specbench_tui.core.sweep.reader import Reader, is_type, short_repr, type_name, types_text
from specbench_tui.core.tomlpos import KeyLocator, KeyPath

if TYPE_CHECKING:
    from specbench_tui.core.sweep.schema import Sweep

LOAD_KEYS = ("concurrency", "request_rate", "requests", "waves", "search", "arrival_seed", "noise_threshold", "slo")
"""The load axis of a workload (see :mod:`specbench_tui.core.load`)."""
_SLO_KEYS = ("ttft_ms", "itl_ms", "e2e_ms", "percentile")


def _load_axis(r: Reader, key: KeyPath, raw: dict[str, object], name: str, types: tuple[type, ...], limit: float,
               limit_name: str) -> tuple[Any, ...]:
    value = raw.get(name)
    if value is None:
        return ()
    if not isinstance(value, list):
        value = [value]  # one value without brackets
    if not value:
        r.error((*key, name), "empty list: no load point to measure", f"e.g. {name} = [1, 4, 16, 64]")
        return ()
    if len(value) > MAX_LOAD_POINTS:
        r.error((*key, name, MAX_LOAD_POINTS), f"{len(value):,} load points (MAX_LOAD_POINTS = {MAX_LOAD_POINTS})",
                "use fewer points: the adaptive search finds the crossover between them")
        return ()
    out: list[Any] = []
    for i, v in enumerate(value):
        if not is_type(v, types) or (isinstance(v, float) and not math.isfinite(v)):
            r.error((*key, name, i), f"expected {types_text(types)}, got {type_name(v)} {short_repr(v)}")
            return ()
        if v <= 0:
            r.error((*key, name, i), f"expected a positive number, got {v}",
                    "concurrency counts requests in flight; request_rate is requests per second")
            return ()
        if v > limit:
            r.too_large((*key, name, i), name, v, limit, limit_name)
            return ()
        if v in out:
            r.error((*key, name, i), f"{v:g} is listed twice", "list each load point once")
            return ()
        out.append(int(v) if name == "concurrency" else float(v))
    return tuple(out)


def load_spec(r: Reader, key: KeyPath, raw: dict[str, object], kind: str) -> LoadSpec | None:
    """A workload's load axis, or None when it has neither ``concurrency`` nor ``request_rate``."""
    concurrency = _load_axis(r, key, raw, "concurrency", (int,), MAX_CONCURRENCY, "MAX_CONCURRENCY")
    rate = _load_axis(r, key, raw, "request_rate", (int, float), MAX_REQUEST_RATE, "MAX_REQUEST_RATE")
    if not concurrency and not rate:
        _no_axis(r, key, {k: v for k, v in raw.items() if not (kind == "context_ladder" and k == "search")})
        return None
    if kind == "context_ladder":  # its own axis is context (core/context_ladder.py); search is its own key
        r.error((*key, "concurrency" if concurrency else "request_rate"),
                "a context ladder measures one request at a time along context, not under load",
                "remove the load axis, or measure load on another workload")
        return None
    if kind == "agentic":
        r.error((*key, "concurrency" if concurrency else "request_rate"),
                "an agentic workload is a conversation, which cannot be put under load", "use a single-turn kind")
        return None
    requests = r.positive(raw, key, "requests", (int,), None, limit=MAX_REQUESTS, limit_name="MAX_REQUESTS")
    waves = r.positive(raw, key, "waves", (int,), None, limit=MAX_WAVES, limit_name="MAX_WAVES")
    if waves is not None and not concurrency:
        r.error((*key, "waves"), "waves counts closed-loop rounds, and this workload has no concurrency",
                "set requests = N for an open-loop point")
    return LoadSpec(concurrency=concurrency, request_rate=rate, requests=requests, waves=waves or 4,
                    search=_search(r, key, raw), arrival_seed=_arrival_seed(r, key, raw),
                    noise_threshold=_noise_threshold(r, key, raw), slo=_slo(r, key, raw) if "slo" in raw else None)


def _no_axis(r: Reader, key: KeyPath, raw: dict[str, object]) -> None:
    """A key of a load axis on a workload that has none is an error (a typo'd or forgotten axis)."""
    present = [k for k in LOAD_KEYS if k in raw and k not in ("concurrency", "request_rate")]
    if present and "concurrency" not in raw and "request_rate" not in raw:
        r.error((*key, present[0]), f"'{present[0]}' belongs to a load axis, and this workload has none",
                "add concurrency = [1, 4, 16, 64] (closed loop) or request_rate = [...] (open loop)")


def _search(r: Reader, key: KeyPath, raw: dict[str, object]) -> str:
    search = r.get(raw, key, "search", (str,), "adaptive")
    if search not in SEARCHES:
        r.error((*key, "search"), f"unknown search '{search}'", did_you_mean(str(search), SEARCHES)
                or "adaptive (bisect on the load axis) or grid (every point)")
        search = "adaptive"
    return search or "adaptive"


def _arrival_seed(r: Reader, key: KeyPath, raw: dict[str, object]) -> int:
    seed = r.get(raw, key, "arrival_seed", (int,), 0)
    if seed is not None and not 0 <= seed < 1 << 63:
        r.error((*key, "arrival_seed"), f"expected 0 <= arrival_seed < 2**63, got {seed}")
        seed = 0
    return seed or 0


def _noise_threshold(r: Reader, key: KeyPath, raw: dict[str, object]) -> float:
    noise = r.get(raw, key, "noise_threshold", (int, float), 0.1)
    if noise is not None and not 0 < noise <= 10:
        r.error((*key, "noise_threshold"), f"expected a relative spread in (0, 10], got {noise}",
                "0.1 flags a point whose MAD is over 10 % of its median")
        noise = 0.1
    return float(noise or 0.1)


def _slo(r: Reader, key: KeyPath, raw: dict[str, object]) -> Slo:
    """The ``slo`` table: at least one limit, and the percentile they hold at (99 by default)."""
    table = r.table(raw["slo"], (*key, "slo"), _SLO_KEYS, "a table such as { ttft_ms = 500, itl_ms = 50 }")
    values: dict[str, float | None] = {}
    for name in _SLO_KEYS:
        values[name] = r.positive(table, (*key, "slo"), name, (int, float), None, limit=MAX_TIMEOUT_S * 1000,
                                  limit_name="MAX_TIMEOUT_S in ms")
    pct = values.pop("percentile")
    if pct is not None and pct > 100:
        r.error((*key, "slo", "percentile"), f"expected a percentile in (0, 100], got {pct}")
        pct = None
    if table and not any(v is not None for v in values.values()):
        r.error((*key, "slo"), "an SLO needs at least one limit", "e.g. slo = { ttft_ms = 500, itl_ms = 50 }")
    return Slo(ttft_ms=values["ttft_ms"], itl_ms=values["itl_ms"], e2e_ms=values["e2e_ms"],
               percentile=float(pct or 99.0))


POINT_WARN_S = 3600.0
"""An open-loop point expected to take longer than this (its requests over its rate) is warned about."""


def rate_warnings(sweep: Sweep, locator: KeyLocator) -> list[str]:
    """``validate``'s warnings about open-loop rates, as ``file:line: warning: ...`` lines: a rate whose mean gap
    between arrivals exceeds ``stall_timeout_s`` (legal, since the stall watch only counts requests in flight, but
    most of the point is then idle), and a point whose requests would take longer than an hour to arrive."""
    out: list[str] = []
    stall = sweep.engine.stall_timeout_s
    for index, workload in enumerate(sweep.workloads):
        load = workload.load
        if load is None or not load.request_rate:
            continue
        for i, rate in enumerate(load.request_rate):
            line = (locator.line(("workloads", index, "request_rate", i))
                    or locator.line(("workloads", index, "request_rate")) or 1)
            where = f"{sweep.shown_path}:{line}: warning: '{workload.name}' request_rate = {rate:g}"
            count = load.requests_at(rate_label(rate))
            gap = 1.0 / rate
            if count / rate > POINT_WARN_S:
                out.append(f"{where}: {count:,} requests arrive over about {_duration(count / rate)} (a mean gap "
                           f"of {_duration(gap)}): raise the rate or lower requests so the point ends within an hour")
            elif gap > stall:
                out.append(f"{where}: its mean gap between arrivals ({_duration(gap)}) exceeds stall_timeout_s = "
                           f"{stall:g}: the server idles most of the point (only requests in flight count as a "
                           "stall); raise the rate if you meant to load it")
    return out


def _duration(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:,.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:,.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:,.1f} min"
    return f"{seconds:,.1f} s"
