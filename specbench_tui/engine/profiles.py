"""Engine profiles: everything about talking to one server engine, so the orchestrator never asks its name.

A profile says how readiness shows (a log line, then a health endpoint), which endpoints and JSON fields
carry tokens and acceptance, how the context length is learned, which log lines carry the server's own
figures, which environment makes shutdown prompt, and which signal stops it. Only SGLang exists today; the
simulator speaks SGLang and is reached through this profile.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specbench_tui.core.logparse import BatchLine, parse_batch_line


@dataclass(frozen=True)
class EngineProfile:
    """How to launch-watch-measure-stop one engine."""

    name: str
    ready_line: re.Pattern[str]
    """Printed once the server has warmed up and serves requests."""
    health_path: str
    """Answers 200 when the server can generate."""
    info_path: str
    generate_path: str
    tokenize_path: str
    abort_path: str
    flush_cache_path: str
    shutdown_env: Mapping[str, str]
    """Set at launch so that SIGTERM does not wait forever on in-flight requests."""
    stop_signal: int
    parse_stats_line: Callable[[str], BatchLine | None]
    """The server's own decode/prefill figures from one log line."""
    context_length: Callable[[Mapping[str, Any]], int | None]
    """The context length from the info endpoint's JSON."""
    health_timeout_s: float = 30.0
    api_key_header: str = "Authorization"
    extra_env: Mapping[str, str] = field(default_factory=dict)


def _sglang_context_length(info: Mapping[str, Any]) -> int | None:
    """``/server_info`` carries the resolved ServerArgs; ``context_length`` may be None when not passed."""
    for key in ("context_length", "max_model_len", "context_len"):
        value = info.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    for state in info.get("internal_states") or ():
        if isinstance(state, Mapping):
            value = state.get("context_len") or state.get("context_length")
            if isinstance(value, int) and value > 0:
                return value
    return None


SGLANG = EngineProfile(
    name="sglang",
    ready_line=re.compile(r"The server is fired up and ready to roll!"),
    health_path="/health_generate",
    info_path="/server_info",
    generate_path="/generate",
    tokenize_path="/v1/tokenize",
    abort_path="/abort_request",
    flush_cache_path="/flush_cache",
    shutdown_env={"SGL_FORCE_SHUTDOWN": "1", "SGLANG_FORCE_SHUTDOWN": "1"},
    stop_signal=signal.SIGTERM,
    parse_stats_line=parse_batch_line,
    context_length=_sglang_context_length,
)

PROFILES: dict[str, EngineProfile] = {SGLANG.name: SGLANG}


def get_profile(name: str) -> EngineProfile:
    """The profile named by ``engine.profile`` (the sweep loader has already checked the name)."""
    try:
        return PROFILES[name]
    except KeyError:
        raise KeyError(f"no engine profile {name!r}; known: {', '.join(PROFILES)}") from None
