"""A toy engine, added the way ``docs/adding-an-engine.md`` says: this one module plus its flags file
(``toy_engine_flags.tsv``) and tests (``test_toy_engine.py``). Its server is ``toy_server.py``, a stand-in.

Importing this module registers the engine ``toy``; a process that is to know it (``specbench run``) is told to
import it with ``SPECBENCH_ENGINES=toy_engine`` (and this folder on ``PYTHONPATH``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from specbench_tui.core.engines.base import (
    STREAM_OPENAI,
    EngineFlags,
    EngineProfile,
    LogHints,
    UserError,
    argv_value,
    declared_speculation,
    draft_acceptance_meta,
    flag_table,
    openai_usage_meta,
    positive,
    table_release,
)
from specbench_tui.core.engines.registry import register
from specbench_tui.core.logparse import MAX_STATS_LINE, BatchLine
from specbench_tui.core.signatures import EXIT_SIGNATURES, signature

FLAGS_FILE = Path(__file__).with_name("toy_engine_flags.tsv")


# 1. Flags: what the sweep loader and planner check a configuration's args against.
@functools.cache
def toy_flags() -> EngineFlags:
    text = FLAGS_FILE.read_text()
    shapes, aliases, removed = flag_table(text)
    return EngineFlags(name="toy", known_flags=frozenset(shapes), release=f"toy-server {table_release(text)}",
                       shapes=shapes, short_aliases=aliases, removed=removed,
                       positive_int=frozenset({"context-length", "crash-after"}), runs_on_cpu=True,
                       model_flags=())


# 2. The server's own figures: one log line per request.
_STATS = re.compile(r"toy stats: accept len (?P<accept>\d+(?:\.\d+)?), gen (?P<gen>\d+(?:\.\d+)?) tok/s")


def parse_stats_line(line: str) -> BatchLine | None:
    match = _STATS.search(line) if len(line) <= MAX_STATS_LINE else None
    if match is None:
        return None
    return BatchLine(kind="decode", time="", tp_rank=None, dp_rank=None, running_req=None, queue_req=None,
                     num_token=None, token_usage=None, accept_length=float(match["accept"]), accept_rate=None,
                     gen_throughput=float(match["gen"]), new_tokens=None, input_throughput=None)


def compact_stats_line(text: str) -> str:
    match = _STATS.search(text)
    return f"Decode ▸ {match['gen']} tok/s · accept {match['accept']}" if match else text


# 3. The stream's last chunk → meta_info (usage, and acceptance when the server drafted).
def final_meta(payload: Mapping[str, Any]) -> dict[str, Any]:
    meta = openai_usage_meta(payload)
    spec = payload.get("toy_spec")
    completion = meta.get("completion_tokens")
    if isinstance(spec, Mapping) and isinstance(completion, int) and completion:
        meta.update(draft_acceptance_meta(completion, int(spec.get("accepted", 0)), int(spec.get("drafted", 0))))
    return meta


# 4. Plan rules and speculation detection.
def user_errors(args: Mapping[str, object]) -> list[UserError]:
    if "crash-after" in args and args.get("draft-window") in (None, 0):
        return [("crash-after", "--crash-after only melts a drafting server", "set draft-window too")]
    return []


def speculates(argv: Sequence[str], algorithm: str) -> bool:
    window = argv_value(argv, "--draft-window")
    return (window is not None and window != "0") or declared_speculation(argv, algorithm)


TOY = register(EngineProfile(
    name="toy",
    load_flags=toy_flags,
    ready_line=re.compile(r"toy server ready"),
    health_path="/health",
    info_path="/info",
    generate_path="/v1/completions",
    tokenize_path="/tokenize",
    abort_path=None,
    flush_cache_path=None,
    context_length=lambda info: positive(info.get("context_length")),
    parse_stats_line=parse_stats_line,
    stats_hint="toy stats",
    health_timeout_s=5.0,
    health_poll_s=0.05,
    stream_format=STREAM_OPENAI,
    final_meta=final_meta,
    crash_signatures=(signature("toy_meltdown", r"TOY MELTDOWN", 90),),
    exit_signatures=EXIT_SIGNATURES,
    python_packages=("httpx",),  # what env.json records of the server's interpreter
    user_errors=user_errors,
    speculative=speculates,
    budget_flags=("--draft-window",),
    log=LogHints(fatal=(r"TOY MELTDOWN",), keywords=(b"TOY MELTDOWN",), compact=compact_stats_line),
))
