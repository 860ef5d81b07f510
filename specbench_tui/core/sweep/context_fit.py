"""What a sweep asks of the server's context, checked before any server runs (issue 46).

A ``long_context`` prompt size or a ``max_new_tokens`` that cannot fit ``--context-length`` (less the tokens the
server reserves for speculation: :attr:`EngineProfile.planned_reserved`) would be clamped or refused at run time;
``specbench validate`` reports it where it is written, naming the configuration whose context is the tightest.
A configuration without ``--context-length`` runs at its model's own context, which is known only once the
server runs: nothing is checked for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from specbench_tui.core.budget import DEFAULT_MARGIN
from specbench_tui.core.engines.base import argv_value
from specbench_tui.core.errors import SweepIssue
from specbench_tui.core.sweep.schema import Sweep
from specbench_tui.core.tomlpos import KeyLocator, KeyPath, format_path

MIN_PROMPT_TOKENS = 16
"""The smallest prompt a context must still hold beside the output (:func:`~specbench_tui.core.budget.plan_budget`)."""


class _Config(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def argv(self) -> tuple[str, ...]: ...
    @property
    def skipped(self) -> bool: ...


@dataclass(frozen=True)
class _Tightest:
    name: str
    context: int
    reserved: int

    @property
    def usable(self) -> int:
        return self.context - self.reserved

    def said(self) -> str:
        less = f" less {self.reserved} reserved speculative tokens" if self.reserved else ""
        return f"context-length {self.context}{less} of '{self.name}'"


def _tightest(configs: Sequence[_Config], reserved_of: Callable[[Sequence[str]], int]) -> _Tightest | None:
    """The runnable configuration with the least usable context among those that pass ``--context-length``."""
    best: _Tightest | None = None
    for config in configs:
        if config.skipped:
            continue
        try:
            context = int(argv_value(config.argv, "--context-length") or "")
        except ValueError:
            continue
        one = _Tightest(config.name, context, max(0, reserved_of(config.argv)))
        if best is None or one.usable < best.usable:
            best = one
    return best


def _file_index(sweep: Sweep, name: str, family: str | None) -> int:
    """The ``[[workloads]]`` block a (possibly temperature-expanded) workload was written in."""
    seen: list[str] = []
    for workload in sweep.workloads:
        key = workload.family or workload.name
        if key not in seen:
            seen.append(key)
    key = family or name
    return seen.index(key) if key in seen else 0


def context_issues(sweep: Sweep, configs: Sequence[_Config],
                   reserved_of: Callable[[Sequence[str]], int]) -> list[SweepIssue]:
    """Every prompt size and ``max_new_tokens`` that cannot fit the tightest configuration's context."""
    tight = _tightest(configs, reserved_of)
    if tight is None:
        return []
    locator = KeyLocator(sweep.text)
    issues: list[SweepIssue] = []
    reported: set[KeyPath] = set()

    def issue(path: KeyPath, message: str, hint: str) -> None:
        if path not in reported:
            reported.add(path)
            line = locator.line(path) or locator.line(path[:2]) or 1
            issues.append(SweepIssue(sweep.shown_path, line, format_path(path), message, hint))

    room = tight.usable - DEFAULT_MARGIN
    for workload in sweep.workloads:
        where: KeyPath = ("workloads", _file_index(sweep, workload.name, workload.family))
        output = workload.max_new_tokens
        if output + MIN_PROMPT_TOKENS > room:
            issue((*where, "max_new_tokens"),
                  f"max_new_tokens = {output} leaves no room for a prompt in the {tight.said()} "
                  f"(at most {room - MIN_PROMPT_TOKENS} fits with a {MIN_PROMPT_TOKENS}-token prompt and a "
                  f"{DEFAULT_MARGIN}-token margin)",
                  f"lower max_new_tokens to at most {max(1, room - MIN_PROMPT_TOKENS)}, or raise context-length")
            continue
        largest = room - output
        for i, size in enumerate(dict(workload.params).get("prompt_tokens", ()) or ()):
            if isinstance(size, int) and not isinstance(size, bool) and size > largest:
                issue((*where, "prompt_tokens", i),
                      f"a {size}-token prompt with max_new_tokens = {output} cannot fit the {tight.said()}: it "
                      f"would be cut to {largest} tokens",
                      f"use at most {largest} (or \"max\" to fill the context), or raise context-length")
    return issues
