"""Sweeps and simulator profiles built from Python values, instead of TOML copied into each test file.

``sim_sweep(...)`` returns the document of a simulator sweep with the house defaults (one GPU, one repeat, no
warm-up, the simulator launched on a free port with ``sim_profile.toml``, Qwen3-8B at 4096 tokens); keyword
arguments override or add to each section. ``sim_profile(...)`` is the fast deterministic profile most
end-to-end tests use. ``write(folder, sweep, profile)`` writes both and returns the sweep's path. The TOML is
written by :func:`dumps`, a small writer for the shapes sweeps use (tables, arrays of tables, inline values).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine_helpers import write_sweep

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }" if value else "{}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, Mapping) for v in value)


def dumps(document: Mapping[str, Any], _prefix: str = "") -> str:
    """``document`` as TOML: scalars, lists and ``inline(...)`` mappings as values; other mappings as tables;
    lists of mappings as arrays of tables."""
    lines: list[str] = []
    nested: list[str] = []
    for key, value in document.items():
        name = f"{_prefix}.{_key(key)}" if _prefix else _key(key)
        if isinstance(value, Inline):
            lines.append(f"{_key(key)} = {_value(dict(value))}")
        elif isinstance(value, Mapping):
            nested.append(f"[{name}]\n" + dumps(value, name))
        elif _is_table_array(value):
            nested.extend(f"[[{name}]]\n" + dumps(item, name) for item in value)
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    return "\n".join([*lines, *nested]) + "\n"


class Inline(dict):
    """A mapping written as an inline table (``args = { tp-size = 2 }``) rather than a ``[table]``."""


def inline(**values: Any) -> Inline:
    return Inline(values)


def _merged(base: dict[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """``base`` updated with ``extra``; a key ``extra`` sets to None is left out."""
    return {k: v for k, v in {**base, **(extra or {})}.items() if v is not None}


def sim_profile(*, tok_s: float | None = 80.0, accept_length: float = 1.0, ttft_ms: float = 5.0,
                time_scale: float | None = 0.05, **extra: Any) -> dict[str, Any]:
    """The fast deterministic simulator profile (``tok_s=None``: no deterministic section); ``extra`` adds
    top-level keys and tables (``seed=5``, ``hang=[{...}]``)."""
    profile: dict[str, Any] = {}
    if time_scale is not None:
        profile["time_scale"] = time_scale
    profile.update({k: v for k, v in extra.items() if not isinstance(v, (Mapping, list))})
    if tok_s is not None:
        profile["deterministic"] = {"enabled": True, "tok_s": tok_s, "accept_length": accept_length,
                                    "ttft_ms": ttft_ms}
    profile["output"] = {"eos": False}
    profile["shutdown"] = {"poll_s": 0.05}
    profile.update({k: v for k, v in extra.items() if isinstance(v, (Mapping, list))})
    return profile


def sim_sweep(name: str, *, configs: list[dict[str, Any]], workloads: list[dict[str, Any]],
              sweep: Mapping[str, Any] | None = None, engine: Mapping[str, Any] | None = None,
              server_args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A simulator sweep named ``name``; ``sweep``, ``engine`` and ``server_args`` override the defaults (a key
    set to None is left out)."""
    return {
        "sweep": _merged({"name": name, "gpus": 1, "repeats": 1, "warmup": 0}, sweep),
        "engine": _merged({"launcher": "simulator", "sim_profile": "sim_profile.toml", "port_base": "{port}",
                           "startup_timeout_s": 30, "shutdown_grace_s": 2, "gpu_release_timeout_s": 2}, engine),
        "server": {"args": _merged({"model-path": "Qwen/Qwen3-8B", "context-length": 4096}, server_args)},
        "configs": configs,
        "workloads": workloads,
    }


def dflash_configs(budgets: Sequence[int] = (8, 16)) -> list[dict[str, Any]]:
    """The autoregressive baseline ``ar`` (tp 1) and ``dflash-b{budget}`` over ``budgets``."""
    return [
        {"name": "ar", "algorithm": "autoregressive", "args": inline(**{"tp-size": 1})},
        {"name": "dflash-b{budget}", "algorithm": "dflash", "matrix": inline(budget=list(budgets)),
         "args": {"speculative-algorithm": "DFLASH", "speculative-draft-model-path": "z-lab/Qwen3-8B-DFlash-b16",
                  "speculative-num-draft-tokens": "{budget}"}},
    ]


def write(folder: Path, sweep: Mapping[str, Any], profile: Mapping[str, Any] | None = None,
          name: str = "sweep.toml", profile_extra: str = "") -> Path:
    """Write ``sweep`` (and ``profile`` as ``sim_profile.toml``, with ``profile_extra`` TOML appended) into
    ``folder``; ``port_base = "{port}"`` becomes a free port base. Returns the sweep's path."""
    text = dumps(sweep).replace('"{port}"', "{port}")
    profile_text = dumps(profile) + profile_extra if profile is not None else None
    return write_sweep(folder, text, profile_text, name=name)
