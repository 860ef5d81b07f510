"""The temperature axis: ``temperature`` on a workload (or ``[measure] temperature``, every workload's default) is a
number or a list of numbers, each >= 0. A list measures the workload once per temperature, as one workload each,
named ``<name>-t<temperature>`` (``code-t0``, ``code-t0.7``): the workload's name is part of every measurement's
key (configuration id, workload, item, repeat), so each temperature's measurements are kept, resumed and compared
apart, and run directories from before the axis read as they did. A single number (or a list of one) keeps the
workload's own name.

SGLang 0.5.23 takes ``sampling_params.temperature`` (``srt/sampling/sampling_params.py``: a non-negative finite
number; below 1e-6 it samples greedily, with top_k = 1). 0 is greedy: only there do a speculative configuration's
outputs have to equal its baseline's, so the losslessness check runs at temperature 0 only and says "not
applicable" for a sampled workload.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TypeGuard

from specbench_tui.core.sweep.limits import MAX_TEMPERATURES
from specbench_tui.core.sweep.reader import Reader, short_repr, type_name
from specbench_tui.core.sweep.schema import WorkloadSpec
from specbench_tui.core.tomlpos import KeyPath

_HINT = "a number >= 0 (0 is greedy), or a list of them, e.g. temperature = [0.0, 0.7]"


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _checked(r: Reader, key: KeyPath, value: object) -> float | None:
    """One temperature, or None after recording why it cannot be one."""
    if not _number(value):
        r.error(key, f"expected a temperature (a number >= 0), got {type_name(value)} {short_repr(value)}", _HINT)
        return None
    if not math.isfinite(value):
        r.error(key, f"expected a finite temperature, got {value}", _HINT)
        return None
    if value < 0:
        r.error(key, f"expected a temperature >= 0, got {value}", "0 means greedy; SGLang refuses a negative one")
        return None
    return float(value)


def read_temperatures(r: Reader, raw: dict[str, object], key: KeyPath,
                      default: tuple[float, ...]) -> tuple[float, ...]:
    """``raw["temperature"]`` as a tuple of temperatures (``default`` when absent or wrong, the issue recorded at
    the key's line, or at the list item's)."""
    if "temperature" not in raw:
        return default
    value = raw["temperature"]
    tkey = (*key, "temperature")
    if not isinstance(value, list):
        checked = _checked(r, tkey, value)
        return (checked,) if checked is not None else default
    if not value:
        r.error(tkey, "an empty list of temperatures: the workload would be measured at none", _HINT)
        return default
    if len(value) > MAX_TEMPERATURES:
        r.error(tkey, f"{len(value)} temperatures (MAX_TEMPERATURES = {MAX_TEMPERATURES})",
                "list fewer; each one measures the workload again")
        return default
    out: list[float] = []
    for i, item in enumerate(value):
        checked = _checked(r, (*tkey, i), item)
        if checked is None:
            return default
        if checked in out:
            r.error((*tkey, i), f"temperature {checked:g} is listed twice", "list each temperature once")
            return default
        out.append(checked)
    return tuple(out)


def variant_name(name: str, temperature: float) -> str:
    """``code-t0.7``: the name of a workload's run at one temperature of its list."""
    return f"{name}-t{temperature:g}"


def variants(spec: WorkloadSpec, temperatures: tuple[float, ...]) -> list[WorkloadSpec]:
    """The workload once per temperature: itself (its own name) for one, else one named per temperature."""
    if len(temperatures) <= 1:
        return [dataclasses.replace(spec, temperature=temperatures[0])] if temperatures else [spec]
    return [dataclasses.replace(spec, name=variant_name(spec.name, t), temperature=t, family=spec.name)
            for t in temperatures]
