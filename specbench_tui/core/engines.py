"""What the product knows about each server engine's command line, as pure data.

The I/O side of an engine (readiness, endpoints, shutdown) lives in ``engine.profiles``; this module only
knows flags: which exist, which are reserved for the launcher, how many GPUs a configuration needs, and
which values must be positive integers. The orchestrator and the UI never branch on an engine's name.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources

# Flags whose value must be a positive integer, when present.
_SGLANG_POSITIVE_INT = frozenset(
    {
        "tp-size", "tensor-parallel-size", "dp-size", "data-parallel-size", "pp-size",
        "pipeline-parallel-size", "attn-dp-size", "context-length", "decode-log-interval",
        "cuda-graph-max-bs-decode", "cuda-graph-max-bs-prefill", "max-running-requests",
        "chunked-prefill-size", "max-prefill-tokens", "max-total-tokens", "page-size",
        "speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens",
        "speculative-dflash-block-size", "speculative-ddtree-budget", "stream-interval",
    }
)


@dataclass(frozen=True)
class EngineFlags:
    """Command-line facts of one engine profile."""

    name: str
    known_flags: frozenset[str]
    """Every long flag (without dashes) the engine's own parser accepts."""
    known_fork_flags: frozenset[str] = frozenset()
    """Flags that exist only in forks; recognised so their values can be checked."""
    reserved: Mapping[str, str] = field(default_factory=dict)
    """Flags the launcher sets itself, with the sweep key to use instead."""
    positive_int: frozenset[str] = frozenset()
    tp_flags: tuple[str, ...] = ()
    dp_flags: tuple[str, ...] = ()
    pp_flags: tuple[str, ...] = ()
    default_port: int = 30000

    def gpus_needed(self, args: Mapping[str, object]) -> int:
        """GPUs one server of this configuration occupies: tp × dp × pp."""
        total = 1
        for names in (self.tp_flags, self.dp_flags, self.pp_flags):
            for name in names:
                if name in args:
                    total *= _as_int(args[name])
                    break
        return total

    def parallel_size(self, args: Mapping[str, object], which: str) -> int:
        """The tp, dp or pp size set by ``args`` (1 when unset)."""
        names = {"tp": self.tp_flags, "dp": self.dp_flags, "pp": self.pp_flags}[which]
        for name in names:
            if name in args:
                return _as_int(args[name])
        return 1


def _as_int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 1


@functools.cache
def _sglang_flags() -> frozenset[str]:
    text = resources.files("specbench_tui.core").joinpath("sglang_0_5_23_flags.txt").read_text()
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


@functools.cache
def engine_flags(name: str) -> EngineFlags:
    """The flag facts of engine profile ``name`` (raises KeyError when unknown)."""
    if name == "sglang":
        return EngineFlags(
            name="sglang",
            known_flags=_sglang_flags(),
            known_fork_flags=frozenset({"speculative-ddtree-budget", "speculative-dflash-enable-ddtree",
                                        "speculative-dflash-tree-verify"}),
            reserved={"port": "engine.port_base", "host": "engine.host", "api-key": "engine.api_key_env"},
            positive_int=_SGLANG_POSITIVE_INT,
            tp_flags=("tp-size", "tensor-parallel-size"),
            dp_flags=("dp-size", "data-parallel-size"),
            pp_flags=("pp-size", "pipeline-parallel-size"),
        )
    raise KeyError(name)


ENGINE_NAMES = ("sglang",)
"""Engine profiles a sweep may name."""
