"""The engines a sweep may name (``[engine] profile``): the built-in modules, plus the ones a user adds.

An engine added outside this package is a module that builds an :class:`EngineProfile` and calls
:func:`register` when imported. It is found either way:

- listed in the environment variable ``SPECBENCH_ENGINES`` (module names, comma-separated), e.g.
  ``SPECBENCH_ENGINES=mypackage.trtllm specbench run sweeps/demo.toml``;
- or declared by an installed package as an entry point of the group ``specbench_tui.engines``
  (``[project.entry-points."specbench_tui.engines"] trtllm = "mypackage.trtllm"``).

Both are imported the first time an engine is looked up, in every process that looks one up (the TUI, a
headless or detached run), so the sweep loader, the planner and the runtime all see the same engines.
"""

from __future__ import annotations

import importlib
import os
from importlib import metadata

from specbench_tui.core.engines.base import EngineFlags, EngineProfile
from specbench_tui.core.engines.llamacpp import LLAMACPP
from specbench_tui.core.engines.sglang import SGLANG
from specbench_tui.core.engines.vllm import VLLM

ENV_MODULES = "SPECBENCH_ENGINES"
"""Modules (comma-separated) imported before the first lookup; each registers its engine."""
ENTRY_POINT_GROUP = "specbench_tui.engines"

_ENGINES: dict[str, EngineProfile] = {p.name: p for p in (SGLANG, LLAMACPP, VLLM)}
_plugins_loaded = False


class EngineLoadError(ImportError):
    """An engine module named by ``SPECBENCH_ENGINES`` or an entry point cannot be imported."""


def register(profile: EngineProfile) -> EngineProfile:
    """Make ``profile`` an engine a sweep may name; registering the same object again is harmless, another
    engine under a taken name is refused. Returns ``profile`` (so a module may write ``X = register(...)``)."""
    known = _ENGINES.get(profile.name)
    if known is not None and known is not profile:
        raise ValueError(f"an engine named {profile.name!r} is already registered (by {_origin(known)})")
    if not profile.name or not profile.name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"engine name {profile.name!r}: use letters, digits, '-' and '_'")
    _ENGINES[profile.name] = profile
    return profile


def _origin(profile: EngineProfile) -> str:
    return getattr(profile.load_flags, "__module__", None) or "?"


def load_plugins() -> None:
    """Import the engine modules named by ``SPECBENCH_ENGINES`` and by ``specbench_tui.engines`` entry points
    (once per process)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for name in (m.strip() for m in os.environ.get(ENV_MODULES, "").split(",")):
        if name:
            _import(name, f"{ENV_MODULES}={os.environ[ENV_MODULES]}")
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        _import(entry.value, f"the entry point {entry.name} = {entry.value!r} ({ENTRY_POINT_GROUP})")


def _import(module: str, where: str) -> None:
    try:
        importlib.import_module(module.split(":")[0])
    except Exception as exc:  # any failure of a user's module is reported as its own (re-raised)
        _reset()
        raise EngineLoadError(f"engine module {module!r} named by {where} cannot be imported: "
                              f"{type(exc).__name__}: {exc}") from exc


def _reset() -> None:
    global _plugins_loaded
    _plugins_loaded = False


def get_profile(name: str) -> EngineProfile:
    """The engine named ``name`` (raises KeyError naming the known ones when there is none)."""
    load_plugins()
    try:
        return _ENGINES[name]
    except KeyError:
        raise KeyError(f"no engine profile {name!r}; known: {', '.join(_ENGINES)}") from None


def engine_flags(name: str) -> EngineFlags:
    """The flag facts of engine ``name`` (raises KeyError when unknown)."""
    return get_profile(name).flags()


def engine_names() -> tuple[str, ...]:
    """Every engine a sweep may name, built-ins first."""
    load_plugins()
    return tuple(_ENGINES)


def all_profiles() -> tuple[EngineProfile, ...]:
    """Every registered engine, built-ins first."""
    load_plugins()
    return tuple(_ENGINES.values())
