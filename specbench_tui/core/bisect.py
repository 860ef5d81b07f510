"""The crash boundary: where along the draft budget a configuration stops crashing.

When a budget of one algorithm (at one tensor-parallel size) crashed and a larger budget of the same algorithm
worked, the boundary lies between the largest crashed budget below the working one and that working budget
(the seed campaign: DDTree b8 and b12 crashed, b15 worked: "boundary between 12 and 15"). ``specbench run
--resume RUN --bisect-crashes`` then runs only the budgets in between, by bisection, to find the first that works
(:func:`next_budget`); each budget tried is a fact of this box and build, kept in the run directory's
``bisect.json`` (:data:`FACTS_FILE`) and said as ``crashes at ≤ 14`` (:func:`fact_line`).

Pure: it reads the analysis's configuration summaries and the facts file's JSON, and writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

FACTS_FILE = "bisect.json"
"""The run directory's file of bisected crash boundaries (written by ``--bisect-crashes``)."""
CRASHED = "crashed"
WORKS = "done"


@dataclass(frozen=True)
class Boundary:
    """Between which budgets one algorithm at one TP size stops crashing."""

    algorithm: str
    tp: int | None
    crashed: int
    """The largest budget that crashed below :attr:`works`."""
    works: int
    """The smallest budget above :attr:`crashed` that worked."""
    crashed_config: str
    works_config: str
    crashed_config_id: str = ""
    works_config_id: str = ""

    @property
    def between(self) -> tuple[int, ...]:
        """The budgets not measured between the two (the bisection's candidates)."""
        return tuple(range(self.crashed + 1, self.works))

    @property
    def key(self) -> str:
        return f"{self.algorithm}/tp{self.tp}" if self.tp is not None else self.algorithm

    def line(self) -> str:
        tp = f" at TP {self.tp}" if self.tp is not None else ""
        return (f"{self.algorithm}{tp}: boundary between {self.crashed} and {self.works} "
                f"({self.crashed_config} crashed, {self.works_config} works)")


@dataclass(frozen=True)
class Tried:
    """One budget the bisection ran: its configuration's final state."""

    budget: int
    state: str
    config: str = ""
    run: str = ""
    """The run directory that measured it (relative to the bisected run)."""
    signature: str | None = None

    @property
    def crashed(self) -> bool:
        return self.state != WORKS


@dataclass(frozen=True)
class Fact:
    """A bisected boundary: the budgets tried and what they say, on this box and build."""

    algorithm: str
    tp: int | None
    crashes_at_most: int
    """Every budget up to this one crashed where it was tried (the largest crashed budget)."""
    works_from: int
    """The first budget that works."""
    tried: tuple[Tried, ...] = ()
    box: Mapping[str, object] = field(default_factory=dict)
    """What the facts hold for: the host, the GPUs and the engine's packages (from the run's environment record)."""

    def line(self) -> str:
        tp = f" at TP {self.tp}" if self.tp is not None else ""
        runs = ", ".join(f"b{t.budget} {'crashed' if t.crashed else 'works'}" for t in self.tried) or "nothing run"
        where = self.box.get("where")
        return (f"{self.algorithm}{tp}: crashes at ≤ {self.crashes_at_most}, works from {self.works_from} "
                f"(bisected: {runs})" + (f" on {where}" if where else ""))

    def to_json(self) -> dict[str, object]:
        return {"algorithm": self.algorithm, "tp": self.tp, "crashes_at_most": self.crashes_at_most,
                "works_from": self.works_from,
                "tried": [{"budget": t.budget, "state": t.state, "config": t.config, "run": t.run,
                           "signature": t.signature} for t in self.tried],
                "box": dict(self.box)}


class Budgeted(Protocol):
    """What a crash boundary reads of a configuration (:class:`~specbench_tui.core.results.ConfigSummary` has it)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def algorithm(self) -> str: ...
    @property
    def tp(self) -> int | None: ...
    @property
    def budget(self) -> int | None: ...
    @property
    def state(self) -> str: ...


def boundaries(configs: Iterable[Budgeted]) -> list[Boundary]:
    """Every crash boundary among ``configs`` (:class:`~specbench_tui.core.results.ConfigSummary`-like: ``name``,
    ``algorithm``, ``tp``, ``budget``, ``state``): per (algorithm, TP), each budget that worked above a crashed one,
    bracketed by the largest crashed budget below it. Configurations without a budget are left out."""
    groups: dict[tuple[str, int | None], list[tuple[int, Budgeted]]] = {}
    for config in configs:
        budget = config.budget
        if budget is None or config.state not in (CRASHED, WORKS):
            continue
        groups.setdefault((config.algorithm, config.tp), []).append((budget, config))
    found: list[Boundary] = []
    for (algorithm, tp), members in groups.items():
        members.sort(key=lambda member: member[0])
        for (low_budget, low), (high_budget, high) in zip(members, members[1:]):
            if low.state == CRASHED and high.state == WORKS and high_budget > low_budget:
                found.append(Boundary(algorithm, tp, low_budget, high_budget, low.name, high.name,
                                      low.id, high.id))
    return sorted(found, key=lambda b: (b.algorithm, b.tp or 0, b.crashed))


def next_budget(boundary: Boundary, tried: Sequence[Tried]) -> int | None:
    """The next budget to run: the middle of what is still unknown between the largest budget known to crash and
    the smallest known to work (with ``tried`` counted in), or None once they are neighbours."""
    low, high = narrowed(boundary, tried)
    if high - low <= 1:
        return None
    return (low + high) // 2


def narrowed(boundary: Boundary, tried: Sequence[Tried]) -> tuple[int, int]:
    """(largest budget that crashed, smallest that works), the run's and the bisection's facts together.
    A budget tried inside the bracket narrows it from the side its outcome says (one crossing assumed: a budget
    that works above one that crashes)."""
    low, high = boundary.crashed, boundary.works
    for t in tried:
        if not low < t.budget < high:
            continue
        if t.crashed:
            low = t.budget
        else:
            high = t.budget
    return low, high


def fact_of(boundary: Boundary, tried: Sequence[Tried], box: Mapping[str, object]) -> Fact:
    low, high = narrowed(boundary, tried)
    return Fact(boundary.algorithm, boundary.tp, low, high, tuple(tried), dict(box))


def facts_from_json(data: object) -> list[Fact]:
    """The facts of a ``bisect.json`` (entries of the wrong shape are left out)."""
    entries = data.get("facts") if isinstance(data, Mapping) else None
    facts: list[Fact] = []
    for entry in entries if isinstance(entries, list) else []:
        try:
            tried = tuple(Tried(int(t["budget"]), str(t["state"]), str(t.get("config", "")), str(t.get("run", "")),
                                t.get("signature")) for t in entry.get("tried", []))
            facts.append(Fact(str(entry["algorithm"]), entry.get("tp"), int(entry["crashes_at_most"]),
                              int(entry["works_from"]), tried, dict(entry.get("box") or {})))
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
    return facts


def boundary_lines(configs: Iterable[Budgeted], facts: Sequence[Fact] = ()) -> list[str]:
    """The report's lines: each boundary, and under it what the bisection found (when it ran)."""
    by_key = {(f.algorithm, f.tp): f for f in facts}
    lines: list[str] = []
    for boundary in boundaries(configs):
        lines.append(boundary.line())
        fact = by_key.get((boundary.algorithm, boundary.tp))
        if fact is not None:
            lines.append(f"  {fact.line()}")
        elif boundary.between:
            lines.append(f"  not bisected: {len(boundary.between)} budget(s) in between "
                         "(specbench run --resume RUN --bisect-crashes runs only those)")
    return lines
