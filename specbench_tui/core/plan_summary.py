"""The stored plan as the analysis reads it: the run's plan (:meth:`~specbench_tui.core.plan.Plan.to_json`) parsed
once into typed records, so the analysis reads typed fields, not an untyped mapping.

The plan comes from a run directory, never trusted: a field of the wrong type reads as absent (its default), a
configuration without an id and a workload without a name are left out, and a plan from before a field existed
reads as it did (``draft_budget`` and ``speculative`` unrecorded: the engine's rule decides). ``{}`` (a missing
plan) is a plan with no configurations: the analysis then takes them from the results and events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_ENGINE = "sglang"
"""The engine of a plan from before plans named theirs."""


@dataclass(frozen=True)
class PlannedRecord:
    """One configuration as the stored plan records it."""

    id: str
    name: str
    algorithm: str = "unknown"
    argv: tuple[str, ...] = ()
    tp: int | None = None
    baseline: str | None = None
    """The name of its matched baseline, as the plan declares it."""
    skip_reason: str | None = None
    speculative: bool | None = None
    """None: not recorded (a plan from before plans recorded it)."""
    params: Mapping[str, object] = field(default_factory=dict)
    """The matrix parameters of this point."""
    draft_budget: int | None = None
    budget_recorded: bool = False
    """The plan recorded ``draft_budget`` (None included); else the engine's rule gives it."""

    @classmethod
    def parse(cls, raw: Mapping[str, object]) -> PlannedRecord:
        tp, params, budget = raw.get("tp"), raw.get("params"), raw.get("draft_budget")
        speculative, argv = raw.get("speculative"), raw.get("argv")
        return cls(
            id=str(raw["id"]), name=str(raw.get("name", raw["id"])), algorithm=str(raw.get("algorithm") or "unknown"),
            argv=tuple(str(a) for a in argv) if isinstance(argv, (list, tuple)) else (),
            tp=int(tp) if isinstance(tp, int) else None, baseline=_text(raw.get("baseline")),
            skip_reason=_text(raw.get("skip_reason")),
            speculative=speculative if isinstance(speculative, bool) else None,
            params=dict(params) if isinstance(params, Mapping) else {},
            draft_budget=budget if isinstance(budget, int) and not isinstance(budget, bool) else None,
            budget_recorded="draft_budget" in raw)


@dataclass(frozen=True)
class PlannedWorkload:
    """One workload as the stored plan records it."""

    name: str
    kind: str = "?"
    temperature: float | None = None
    repeats: int | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, object]) -> PlannedWorkload:
        temperature, repeats = raw.get("temperature"), raw.get("repeats")
        return cls(name=str(raw["name"]), kind=str(raw.get("kind") or "?"),
                   temperature=float(temperature) if isinstance(temperature, (int, float)) else None,
                   repeats=repeats if isinstance(repeats, int) else None)


@dataclass(frozen=True)
class PlanSummary:
    """What the analysis reads of a run's stored plan."""

    sweep: str = "?"
    engine: str = DEFAULT_ENGINE
    notes: tuple[str, ...] = ()
    configs: tuple[PlannedRecord, ...] = ()
    workloads: tuple[PlannedWorkload, ...] = ()
    loaded: frozenset[str] = frozenset()
    """The workloads measured along a load axis (their load half is :mod:`specbench_tui.core.crossover`'s)."""
    has_configs: bool = False
    """The plan lists configurations (else they are taken from the results and events)."""

    @classmethod
    def parse(cls, plan_json: Mapping[str, object] | None) -> PlanSummary:
        plan = plan_json or {}
        configs, workloads, notes = _list(plan.get("configs")), _list(plan.get("workloads")), _list(plan.get("notes"))
        tables = [w for w in workloads if isinstance(w, Mapping)]
        return cls(sweep=str(plan.get("sweep") or "?"), engine=str(plan.get("engine") or DEFAULT_ENGINE),
                   notes=tuple(str(n) for n in notes if n),
                   configs=tuple(PlannedRecord.parse(c) for c in configs if isinstance(c, Mapping) and "id" in c),
                   workloads=tuple(PlannedWorkload.parse(w) for w in tables if "name" in w),
                   loaded=frozenset(str(w.get("name")) for w in tables if w.get("load")),
                   has_configs=bool(plan.get("configs")))

    @property
    def baseline_names(self) -> frozenset[str]:
        """The names configurations are matched to as their baseline."""
        return frozenset(c.baseline for c in self.configs if c.baseline)


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, (list, tuple)) else []


def _text(value: object) -> str | None:
    """A recorded name or reason: its text, None when absent or empty."""
    return str(value) if value else None
