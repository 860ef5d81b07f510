"""``[measure]``: how every measurement of the sweep starts. ``cache = "cold"`` (the default where the engine can
flush) empties the server's caches before every measured request at concurrency 1 and before every load point;
``cache = "warm"`` keeps them (a repeat then meets its own prefix in the radix cache, and an n-gram drafter its
own earlier output). A workload may override it with its own ``cache`` key. An engine whose server cannot
flush refuses a written ``cold`` (with why) and runs ``warm`` by default, saying so. ``temperature`` (a number or a
list, :mod:`specbench_tui.core.sweep.temperature`) is every workload's default sampling temperature."""

from __future__ import annotations

from dataclasses import dataclass

from specbench_tui.core.errors import did_you_mean
from specbench_tui.core.records import CACHE_COLD, CACHE_POLICIES, CACHE_WARM
from specbench_tui.core.sweep.reader import Reader, short_repr
from specbench_tui.core.sweep.temperature import read_temperatures
from specbench_tui.core.tomlpos import KeyPath

MEASURE_KEYS = ("cache", "temperature")


@dataclass(frozen=True)
class MeasureSpec:
    """``[measure]`` as read."""

    cache: str = CACHE_COLD
    note: str | None = None
    """Why the policy is not what the file says or implies (an engine that cannot flush runs warm)."""
    temperatures: tuple[float, ...] = (0.0,)
    """``[measure] temperature``: every workload's temperatures unless it lists its own
    (:mod:`specbench_tui.core.sweep.temperature`)."""


def _flush_facts(profile_name: str) -> tuple[bool, str]:
    """(whether the engine's server can flush its caches, how it flushes or why not)."""
    from specbench_tui.core.engines.registry import get_profile

    try:
        profile = get_profile(profile_name)
    except (KeyError, ImportError):  # an unknown profile is reported by [engine]; assume it can
        return True, ""
    return profile.flush_cache_path is not None, profile.cache_flush_note


def cache_value(r: Reader, raw: dict[str, object], key: KeyPath, default: str, profile_name: str) -> str:
    """The ``cache`` key of ``raw`` (``[measure]`` or a workload), ``default`` when absent, checked: an unknown
    value and ``cold`` on an engine that cannot flush are errors at the key's line."""
    if "cache" not in raw:
        return default
    value = raw["cache"]
    if not isinstance(value, str) or value not in CACHE_POLICIES:
        hint = did_you_mean(str(value), CACHE_POLICIES) if isinstance(value, str) else None
        r.error((*key, "cache"), f"cache must be \"cold\" or \"warm\", got {short_repr(value)}",
                hint or "\"cold\" flushes the server before every measurement; \"warm\" keeps its caches")
        return default
    if value == CACHE_COLD:
        can_flush, why = _flush_facts(profile_name)
        if not can_flush:
            r.error((*key, "cache"), f"cache = \"cold\" needs a server that can flush its caches, and the "
                    f"'{profile_name}' engine's cannot: {why}", "write cache = \"warm\" (every view then says so)")
            return CACHE_WARM
    return value


def measure_spec(r: Reader, raw: object, profile_name: str) -> MeasureSpec:
    """``[measure]``, with the engine's flush facts deciding the default."""
    table = r.table(raw, ("measure",), MEASURE_KEYS)
    can_flush, why = _flush_facts(profile_name)
    default = CACHE_COLD if can_flush else CACHE_WARM
    cache = cache_value(r, table, ("measure",), default, profile_name)
    note = None
    if "cache" not in table and not can_flush:
        note = (f"measurements run warm: the '{profile_name}' engine cannot flush its server's caches ({why}); "
                "repeats may meet their own prefix")
    return MeasureSpec(cache=cache, note=note, temperatures=read_temperatures(r, table, ("measure",), (0.0,)))
