"""What a ready server says about itself, read once and bounded before anything uses it.

A server's info endpoint (``/server_info``, ``/props``, ``/v1/models``) is foreign data: a context length of
10^30 must not make a long-context item build a 10^30-token prompt, and a malformed field (``internal_states:
5``, JSON nested 100,000 deep) must not fail the configuration as an internal error. Each figure is read through
its engine's rule under a guard (a rule that raises leaves the figure unknown, with a notice naming it) and
clamped to the sweep's own limits (with a warning naming the field and the value the server gave).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specbench_tui.core.safetext import printable
from specbench_tui.core.sweep.limits import MAX_CONCURRENCY, MAX_NEW_TOKENS, MAX_PROMPT_TOKENS

if TYPE_CHECKING:
    from specbench_tui.core.engines.base import EngineProfile
    from specbench_tui.engine.client import ServerClient

MAX_CONTEXT_TOKENS = MAX_PROMPT_TOKENS + MAX_NEW_TOKENS
"""The most context a sweep can use: its largest prompt plus its largest output. A server saying more is
clamped to this (nothing the sweep sends can need more)."""
MAX_RESERVED_TOKENS = MAX_NEW_TOKENS
"""Context a server may say it reserves per request for speculative decoding."""
MAX_RUNNING_CAP = 1 << 20
"""A running-request cap or CUDA-graph batch beyond this is not a figure (a sweep sends at most
:data:`MAX_CONCURRENCY` at once)."""
_MALFORMED = (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError, OverflowError)
"""What an engine's reading rule raises on a field of the wrong shape."""

assert MAX_RUNNING_CAP >= MAX_CONCURRENCY


@dataclass
class ServerFigures:
    """The figures one ready server gave about itself, bounded; ``notices`` are (level, text) to publish."""

    info: dict[str, object]
    context_length: int | None = None
    reserved_tokens: int = 0
    input_limit: int | None = None
    running_cap: int | None = None
    graph_ceiling: int | None = None
    notices: list[tuple[str, str]] = field(default_factory=list)


def bounded(name: str, value: int | None, limit: int, notices: list[tuple[str, str]], source: str) -> int | None:
    """``value`` clamped to ``limit``, with a warning naming the field and the value the server gave."""
    if value is None or value <= limit:
        return value
    shown = f"{value:,}" if value < 10**15 else f"about 10^{len(str(value)) - 1}"
    notices.append(("warning", f"the server's {source} says {name} = {shown}: more than any sweep can use, "
                               f"so {limit:,} is used instead"))
    return limit


def read_rule(name: str, rule: Callable[[Mapping[str, object]], object], info: Mapping[str, object],
              notices: list[tuple[str, str]], source: str) -> int | None:
    """``rule(info)``, or None with a notice when a field of the wrong shape makes it raise."""
    try:
        value = rule(info)
    except _MALFORMED as exc:
        notices.append(("warning", f"the server's {source} has a malformed field for {name} "
                                   f"({type(exc).__name__}: {printable(exc, 120)}): ignored, {name} is unknown"))
        return None
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        notices.append(("warning", f"the server's {source} gives {name} as {printable(repr(value), 60)}: ignored"))
        return None
    return value


async def read_server_figures(client: ServerClient, profile: EngineProfile) -> ServerFigures:
    """The ready server's figures, each read under a guard and bounded (never raises on what the server sent)."""
    notices: list[tuple[str, str]] = []
    source = profile.info_path
    try:
        info = await client.server_info() or {}
    except RecursionError:
        notices.append(("warning", f"the server's {source} is JSON nested too deeply to read: ignored, its "
                                   "figures are unknown"))
        info = {}
    figures = ServerFigures(info=info, notices=notices)
    try:
        context = await client.context_length(info)
    except _MALFORMED as exc:
        notices.append(("warning", f"the server's {profile.models_path or source} has a malformed context length "
                                   f"({type(exc).__name__}): ignored, the context length is unknown"))
        context = None
    if context is not None and (not isinstance(context, int) or isinstance(context, bool) or context <= 0):
        context = None
    context_source = f"{profile.models_path} (or {source})" if profile.models_path else source
    figures.context_length = bounded("context_length (max_model_len)", context, MAX_CONTEXT_TOKENS, notices,
                                     context_source)
    figures.reserved_tokens = bounded("the reserved speculative tokens",
                                      read_rule("the reserved speculative tokens", profile.reserved_tokens, info,
                                                notices, source), MAX_RESERVED_TOKENS, notices, source) or 0
    figures.input_limit = bounded("max_req_input_len", read_rule("max_req_input_len", profile.input_limit, info,
                                                                 notices, source), MAX_CONTEXT_TOKENS, notices, source)
    figures.running_cap = bounded("max_running_requests", read_rule("the running-request cap",
                                                                       profile.running_cap, info, notices, source),
                                  MAX_RUNNING_CAP, notices, source)
    figures.graph_ceiling = bounded("the CUDA-graph batch (cuda_graph_max_bs)", read_rule("the CUDA-graph batch", profile.graph_ceiling,
                                                                      info, notices, source),
                                    MAX_RUNNING_CAP, notices, source)
    return figures
