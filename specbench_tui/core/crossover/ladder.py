"""The context ladder (pure): per rung the acceptance length, per-position acceptance, decode tok/s and the
speedup over the matched baseline at the same rung; per speculative configuration C*, the context where that
speedup falls below 1, with its bracket and interval; and which rungs to measure next.

Rules, and why:

- a rung's figures come from its measurements (one request per repeat; each repeat has its own filler, so the
  repeats are independent): decode tok/s over repeats as a :class:`~.stats.Stat` (median, MAD with ≥ 3 repeats),
  the acceptance length verify-weighted, the conditional acceptance per draft position from the summed
  histograms (SGLang's ``spec_correct_drafts_histogram``);
- a rung's **context** is its token count; ``max`` is the prompt tokens measured there (the model's limit less
  the output), or twice the rung below it before it is measured. A rung whose prompt was cut to fit is
  **clamped**: shown, but it never decides C* (it measured another context than its label says);
- the **speedup** pairs requests with the matched baseline at the same rung and repeat
  (:func:`specbench_tui.core.cells.paired_speedup`, as cells and load points do); a rung whose ratios spread
  more than :data:`~specbench_tui.core.load.DEFAULT_NOISE` of their median is noisy and never decides C*;
- **C*** is the load crossover's rule on the context axis (:func:`~.bracket.crossover_of`): the interval
  (lo, hi] between the largest context still ≥ 1 below the first under 1, with a log-linear estimate inside;
  ``never pays`` when the smallest rung is under 1, ``pays at every rung`` when ``max`` is still ≥ 1,
  ``not monotonic`` when it comes back above 1;
- the **search** follows the load search's rules (:func:`specbench_tui.core.crossover.search._probes`): both ends
  of the ladder first, the middle when they agree, then one probe inside the bracket until its ends are
  neighbouring rungs; the probe is the rung nearest the log-log interpolated root (:func:`context_probes`); the
  matched baseline measures the union of its configurations' rungs. ``search = "grid"`` measures every rung.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from specbench_tui.core.acceptance import add_histograms, conditional_from_histogram
from specbench_tui.core.context_ladder import SEARCH_GRID, is_ladder, ladder_rungs, ladder_search
from specbench_tui.core.crossover.bracket import crossover_of, is_usable
from specbench_tui.core.crossover.results import Crossover, PointRow, plan_workloads
from specbench_tui.core.crossover.stats import Stat, stat_of
from specbench_tui.core.load import DEFAULT_NOISE
from specbench_tui.core.records import STATUS_ERROR, STATUS_OK, STATUS_ZERO_OUTPUT, Measurement
from specbench_tui.core.results import ConfigSummary

AXIS_CONTEXT = "context"


@dataclass(frozen=True)
class LadderWorkload:
    name: str
    rungs: tuple[str, ...]
    """Rung labels from the smallest context to ``max``."""
    search: str
    repeats: int


@dataclass(frozen=True)
class Rung:
    """One configuration × ladder workload × rung."""

    point: PointRow
    """Its figures as a point on the context axis (``load`` is the rung's label, ``value`` its context):
    ``per_user_tps`` is the decode tok/s over repeats, ``speedup`` the paired speedup, ``accept_length``."""
    requested: int | None
    """The rung's token count (None: ``max``)."""
    prompt_tokens: float | None
    """The median prompt tokens the server counted."""
    clamped: bool
    conditional: tuple[float | None, ...] = ()
    """P(accept draft k | drafts before it accepted), k = 1, 2, …, from the summed histograms."""

    @property
    def label(self) -> str:
        return self.point.load


@dataclass(frozen=True)
class LadderAnalysis:
    workloads: tuple[LadderWorkload, ...] = ()
    rungs: tuple[Rung, ...] = ()
    crossovers: tuple[Crossover, ...] = ()
    """C* per speculative configuration and ladder workload (``axis`` is ``context``)."""
    measured: int = 0
    """(configuration, rung) pairs measured in full, over every ladder workload."""
    grid: int = 0
    """(configuration, rung) pairs of the full grid."""

    def rung(self, config_id: str, workload: str, label: str) -> Rung | None:
        return next((r for r in self.rungs if r.point.config_id == config_id and r.point.workload == workload
                     and r.label == label), None)

    def rungs_of(self, config_id: str, workload: str) -> list[Rung]:
        return [r for r in self.rungs if r.point.config_id == config_id and r.point.workload == workload]

    def crossover(self, config_id: str, workload: str) -> Crossover | None:
        return next((c for c in self.crossovers if c.config_id == config_id and c.workload == workload), None)


def ladder_workloads(plan_json: Mapping[str, object]) -> list[LadderWorkload]:
    out = []
    for raw in plan_workloads(plan_json):
        name = raw.get("name")
        if isinstance(name, str) and is_ladder(raw):
            repeats = raw.get("repeats")
            out.append(LadderWorkload(name, tuple(ladder_rungs(raw)), ladder_search(raw),
                                      repeats if isinstance(repeats, int) and repeats > 0 else 1))
    return out


def analyse_ladder(plan_json: Mapping[str, object], measurements: Iterable[Measurement],
                   configs: Sequence[ConfigSummary]) -> LadderAnalysis | None:
    """The ladder figures of a run (None when its plan has no ladder). ``measurements``: one per key;
    ``configs``: the analysis' :class:`~specbench_tui.core.analysis.ConfigSummary` list."""
    workloads = ladder_workloads(plan_json)
    if not workloads:
        return None
    names = {w.name for w in workloads}
    cells: dict[tuple[str, str, str], list[Measurement]] = defaultdict(list)
    for m in measurements:
        if m.workload in names:
            cells[(m.config_id, m.workload, m.item)].append(m)
    rungs: list[Rung] = []
    crossovers: list[Crossover] = []
    by_name = {c.name: c for c in configs}
    for workload in workloads:
        values = _contexts(workload, cells)
        own = {c.id: _own_rungs(c, workload, cells, values) for c in configs}
        for config in configs:
            base = by_name.get(config.baseline) if config.speculative and config.baseline else None
            mine = [_against(r, base, workload, cells) for r in own[config.id]]
            rungs += mine
            if base is not None:
                crossovers.append(_context_crossover(config, workload, values, mine))
    runnable = [c for c in configs if getattr(c, "in_plan", True) and c.state != "skipped"]
    return LadderAnalysis(workloads=tuple(workloads), rungs=tuple(rungs), crossovers=tuple(crossovers),
                          measured=sum(1 for r in rungs if r.point.complete),
                          grid=len(runnable) * sum(len(w.rungs) for w in workloads))


def _contexts(workload: LadderWorkload, cells: Mapping[tuple[str, str, str], list[Measurement]]) -> list[float]:
    """Each rung's position on the context axis: its token count; ``max``: the prompt tokens measured there
    (any configuration: they are sent the same prompt), else twice the rung below."""
    out: list[float] = []
    for label in workload.rungs:
        if label != "max":
            out.append(float(label))
            continue
        counted = [m.prompt_tokens for (_, w, item), ms in cells.items() if w == workload.name and item == label
                   for m in ms if m.status == STATUS_OK and m.prompt_tokens]
        below = out[-1] if out else 1024.0
        measured = float(statistics.median(counted)) if counted else None
        out.append(measured if measured is not None and measured > below else 2.0 * below)
    return out


def _own_rungs(config: ConfigSummary, workload: LadderWorkload, cells: Mapping[tuple[str, str, str], list[Measurement]],
               values: Sequence[float]) -> list[Rung]:
    """The configuration's measured rungs, without the baseline yet."""
    return [_rung(config, workload, label, value, ms) for label, value in zip(workload.rungs, values)
            if (ms := cells.get((config.id, workload.name, label)))]


def _rung(config: ConfigSummary, workload: LadderWorkload, label: str, value: float, ms: list[Measurement]) -> Rung:
    from specbench_tui.core.cells import acceptance

    ok = [m for m in ms if m.status == STATUS_OK]
    counted = [m.prompt_tokens for m in ok if m.prompt_tokens]
    histograms = [m.accept_histogram for m in ok if m.accept_histogram]
    repeats = len({m.repeat for m in ms})
    point = PointRow(
        config_id=config.id, config=config.name, workload=workload.name, load=label, axis=AXIS_CONTEXT, value=value,
        n_ok=len(ok), n_error=sum(1 for m in ms if m.status == STATUS_ERROR),
        n_zero_output=sum(1 for m in ms if m.status == STATUS_ZERO_OUTPUT), repeats=repeats,
        complete=repeats >= workload.repeats, per_user_tps=stat_of([m.decode_tps for m in ok if m.decode_tps]),
        accept_length=acceptance(ok)[0])
    return Rung(point=point, requested=int(label) if label != "max" else None,
                prompt_tokens=float(statistics.median(counted)) if counted else None,
                clamped=any(m.clamped for m in ms),
                conditional=conditional_from_histogram(add_histograms(histograms)) if histograms else ())


def _against(rung: Rung, base: ConfigSummary | None, workload: LadderWorkload,
             cells: Mapping[tuple[str, str, str], list[Measurement]]) -> Rung:
    """The rung with its speedup over the matched baseline at the same rung (and why it is noisy)."""
    from specbench_tui.core.cells import paired_speedup

    if base is None:
        return rung
    point = rung.point
    mine = [m for m in cells[(point.config_id, workload.name, point.load)] if m.status == STATUS_OK]
    theirs = [m for m in cells.get((base.id, workload.name, point.load), []) if m.status == STATUS_OK]
    central, ratios, pairs = paired_speedup(mine, theirs)
    if central is None:
        return rung
    s = stat_of(ratios) or Stat(central, None, central, central, 0)
    speed = Stat(central, s.mad, min(s.low, central), max(s.high, central), s.repeats)
    noise = None
    if rung.clamped:
        noise = "clamped: the prompt was cut to fit the context"
    elif speed.rel_spread is not None and speed.rel_spread > DEFAULT_NOISE:
        noise = f"speedup MAD is {speed.rel_spread:.0%} of its median"
    fields = {name: getattr(point, name) for name in point.__dataclass_fields__}
    fields.update(speedup=speed, speedup_pairs=pairs, baseline=base.name, noisy=noise is not None, noise=noise)
    return Rung(point=PointRow(**fields), requested=rung.requested, prompt_tokens=rung.prompt_tokens,
                clamped=rung.clamped, conditional=rung.conditional)


def _context_crossover(config: ConfigSummary, workload: LadderWorkload, values: list[float], mine: list[Rung]) -> Crossover:
    by_label = {r.label: r.point for r in mine}
    pts = [by_label.get(label) for label in workload.rungs]
    crossover = crossover_of(config, workload.name, AXIS_CONTEXT, list(workload.rungs), pts, values)
    note = crossover.note.replace("load point", "rung").replace("load", "context")
    fields = {name: getattr(crossover, name) for name in crossover.__dataclass_fields__}
    fields["note"] = note
    return Crossover(**fields)


# ------------------------------------------------------------------------------------------------- search


def ladder_needs(ladder: LadderAnalysis, configs: Sequence[ConfigSummary]) -> tuple[dict[str, dict[str, set[str]]], list[str]]:
    """Which rungs each configuration must have measured now (done ones included), and why the probes: config
    id → workload → rung labels. A configuration neither searched nor a baseline measures every rung."""
    by_name: dict[str | None, ConfigSummary] = {c.name: c for c in configs}
    needs: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    reasons: list[str] = []
    dependents = {by_name[c.baseline].id for c in configs if c.speculative and c.baseline in by_name}
    cells = {(r.point.config_id, r.point.workload, r.label): r for r in ladder.rungs}
    for workload in ladder.workloads:
        for config in configs:
            searched = config.speculative and config.baseline in by_name and workload.search != SEARCH_GRID
            if workload.search == SEARCH_GRID or (not searched and config.id not in dependents):
                needs[config.id][workload.name].update(workload.rungs)
            elif searched:
                base = by_name[config.baseline]
                chosen, why = _rungs_step(workload, _search_values(workload, ladder), cells, config.id, base.id)
                needs[config.id][workload.name].update(chosen)
                needs[base.id][workload.name].update(chosen)
                if why:
                    reasons.append(f"{config.name} {workload.name}: {why}")
    return needs, reasons


def _rungs_step(workload: LadderWorkload, values: list[float], cells: Mapping[tuple[str, str, str], Rung],
                config_id: str, base_id: str) -> tuple[set[str], str]:
    """The rungs a searched configuration and its baseline must both have measured (what both have, and the
    probes next), and why the probes ("" when there are none): the load search's probe rule on context."""
    label_of = dict(zip(values, workload.rungs))
    measured: set[float] = set()
    usable: dict[float, float] = {}
    for value, label in zip(values, workload.rungs):
        mine, theirs = cells.get((config_id, workload.name, label)), cells.get((base_id, workload.name, label))
        if mine is None or theirs is None or not mine.point.complete or not theirs.point.complete:
            continue
        measured.add(value)
        if is_usable(mine.point) and mine.point.speedup is not None:
            usable[value] = mine.point.speedup.median
    probes, why = context_probes(values, usable, measured)
    chosen = {label_of[v] for v in probes} | {label_of[v] for v in measured}
    said = f"rungs {', '.join(label_of[v] for v in probes)} ({why.replace('load', 'context')})" if probes else ""
    return chosen, said


def context_probes(values: list[float], usable: dict[float, float],
                   measured: set[float]) -> tuple[list[float], str]:
    """The rungs to measure next for one configuration (their contexts), and why; empty: the search is done.

    The load search's rules (:func:`specbench_tui.core.crossover.search._probes`): both ends first; ends that
    agree get the middle measured before a verdict; points that disagree with one crossing get their gap
    measured; then one probe inside the bracket until its ends are neighbouring rungs. The probe is the rung
    nearest the root of the line through the bracket's ends in log(context) × log(speedup): acceptance decays
    about exponentially with context, which that line follows far better than the load search's fit (made for
    step times that grow linearly with the batch)."""
    from specbench_tui.core.crossover.search import _bracket, _dip_gap, _ends_agree, _unmeasured_inside

    missing = [v for v in (values[0], values[-1]) if v not in measured]
    if missing:
        return missing, "the ends of the ladder"
    dip = _dip_gap(values, usable, measured)
    if dip is not None:
        return dip
    lo, hi = _bracket(usable)
    if (hi is not None and hi == values[0]) or (hi is None and lo == values[-1]):
        return _ends_agree(values, measured, dominated=hi == values[0])
    candidates = _unmeasured_inside(values, measured, lo, hi)
    if not candidates:
        return [], "bracketed"
    guess = _log_log_root(lo, hi, usable)
    if guess is None:
        guess = math.sqrt(candidates[0] * candidates[-1])
    best = min(candidates, key=lambda v: abs(math.log(v) - math.log(guess)))
    return [best], f"nearest the log-log interpolated root {guess:.3g} (assumes one crossing)"


def _log_log_root(lo: float | None, hi: float | None, usable: dict[float, float]) -> float | None:
    """Where the line through (log lo, log S(lo)) and (log hi, log S(hi)) crosses S = 1 (None: an end is missing
    or a speedup is not positive)."""
    if lo is None or hi is None or usable[lo] <= 0 or usable[hi] <= 0 or lo <= 0 or usable[lo] == usable[hi]:
        return None
    s_lo, s_hi = math.log(usable[lo]), math.log(usable[hi])
    t = s_lo / (s_lo - s_hi)
    return math.exp(math.log(lo) + t * (math.log(hi) - math.log(lo)))


def _search_values(workload: LadderWorkload, ladder: LadderAnalysis) -> list[float]:
    """The rungs' contexts as the analysis put them (strictly increasing: what the search interpolates on)."""
    seen = {r.label: r.point.value for r in ladder.rungs if r.point.workload == workload.name}
    out: list[float] = []
    for label in workload.rungs:
        value = seen.get(label, float(label) if label != "max" else 2.0 * (out[-1] if out else 1024.0))
        out.append(value if not out or value > out[-1] else math.nextafter(out[-1], math.inf))
    return out
