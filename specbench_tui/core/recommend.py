"""From a table to an answer: per workload and per concurrency band, the configuration to deploy.

At each measured load point (a workload without a load axis is one point, ``c1``; a context ladder's points are
its rungs, so its bands run along context) the candidates are ranked by per-user decode tok/s; a band is a run of
consecutive points with the same winner. A configuration is excluded
at a point, with the reason said, when it crashed or failed, its outputs differ from the baseline's (lossy), its
point is noisy or the measuring client was starved, or its drafts were **idle**: a speculative configuration whose
acceptance length is about 1 (under :data:`IDLE_ACCEPT`: each verify step commits the bonus token only) or that
recorded no verify step at all (speculation never engaged), or an adaptive server that switched speculation off.
Such a configuration is never a winner, whatever its tok/s.

The answer is a command: the winner's server flags exactly as the plan ran them (:func:`deploy_argv`, our own
measuring flags removed: :data:`MEASURING_FLAGS`), the SGLang recipe per band (the winner's speculative flags, or
none), on vLLM the per-batch-size draft-token schedule (vLLM's ``num_speculative_tokens_per_batch_size``:
inclusive batch-size ranges with their K) and a confirm sweep (:mod:`specbench_tui.core.derived`) that measures
each band's winner again against the baseline and the runner-up with more repeats.

Pure: it reads the analysis and the stored plan.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from specbench_tui.core.load import parse_label
from specbench_tui.core.results import IDLE_ACCEPTANCE

if TYPE_CHECKING:
    from specbench_tui.core.crossover.ladder import LadderAnalysis
    from specbench_tui.core.crossover.results import PointRow
    from specbench_tui.core.crossover.stats import Stat
    from specbench_tui.core.results import RunAnalysis, Spread

AXIS_CONTEXT = "context"
"""A band along a context ladder's rungs (:mod:`specbench_tui.core.crossover.ladder`)."""
IDLE_ACCEPT = IDLE_ACCEPTANCE
"""An acceptance length under this is idle drafting: the verify step commits its bonus token and little else
(SGLang #24795: speculation silently idle at 1.0); the analysis flags such a cell by the same rule."""
MEASURING_FLAGS: Mapping[str, tuple[str, ...]] = {
    "sglang": ("--decode-log-interval",),
    "vllm": ("--per-request-spec-decode-metrics",),
    "llamacpp": ("--metrics",),
}
"""Flags a sweep sets only so that specbench can read the server (its per-point acceptance lines and metrics), not
part of the configuration a deployment needs: removed from the printed command (each takes a value but
llama.cpp's ``--metrics``)."""
VALUELESS = frozenset({"--metrics"})
CONFIRM_REPEATS = 5
"""The confirm sweep's repeats at least (and twice the run's, when that is more)."""


@dataclass(frozen=True)
class Excluded:
    config: str
    why: str


@dataclass(frozen=True)
class Candidate:
    """One configuration at one point: what ranks it, and why it cannot win (``why``, "" when it can)."""

    config_id: str
    config: str
    tps: float
    speedup: float | None
    speedup_low: float | None
    speedup_high: float | None
    why: str = ""
    eager: str = ""
    """Set when the point ran decode steps without CUDA graphs (:mod:`specbench_tui.core.graphs`)."""


@dataclass(frozen=True)
class Band:
    """A run of consecutive load points of one workload with the same winner."""

    workload: str
    axis: str
    loads: tuple[str, ...]
    winner_id: str | None
    winner: str | None
    speculative: bool
    margin: float | None
    """The smallest margin (winner ÷ runner-up − 1) over the band's points."""
    speedup: tuple[float, float, float] | None
    """The winner's speedup over its baseline: (median over the points' medians, lowest low, highest high)."""
    runner_up: str | None
    excluded: tuple[Excluded, ...] = ()
    eager: tuple[str, ...] = ()
    """The band's points where the winner ran eager (no CUDA graph) for some decode steps."""
    compared: int = 0
    """The fewest configurations compared at one of the band's points (an adaptive search measures only some)."""
    of: int = 0
    """The configurations measured at any point of the workload."""

    @property
    def partial(self) -> str:
        """``compares 2 of 7 configurations at some points`` when the band rests on points that did not measure
        every configuration (the confirm sweep measures them all), else ""."""
        return (f"compares {self.compared} of {self.of} configurations at some points" if self.compared < self.of
                else "")

    @property
    def span(self) -> str:
        """``c1–c4`` (or ``c1`` for one point); along a context ladder ``1024–8192 tokens``."""
        span = self.loads[0] if len(self.loads) == 1 else f"{self.loads[0]}–{self.loads[-1]}"
        return f"{span} tokens" if self.axis == AXIS_CONTEXT else span

    @property
    def values(self) -> tuple[float, float]:
        """The band's first and last load (a context band's: 0, 0; only load bands make a vLLM schedule)."""
        if self.axis == AXIS_CONTEXT:
            return 0.0, 0.0
        return parse_label(self.loads[0])[1], parse_label(self.loads[-1])[1]


@dataclass(frozen=True)
class Recommendation:
    sweep: str
    engine: str
    bands: tuple[Band, ...]
    configs: Mapping[str, Mapping[str, object]]
    """The stored plan's configurations by id."""

    def workloads(self) -> list[str]:
        return list(dict.fromkeys(b.workload for b in self.bands))


def recommend(analysis: RunAnalysis, plan_json: Mapping[str, object]) -> Recommendation:
    """The recommendation of a run: its bands per workload, from the analysis and the stored plan."""
    listed = plan_json.get("configs")
    configs = {c["id"]: c for c in (listed if isinstance(listed, list) else []) if isinstance(c, Mapping) and "id" in c}
    states = {c.id: c.state for c in analysis.configs}
    lossy = _lossy(analysis)
    bands: list[Band] = []
    names = [w.name for w in analysis.workloads]
    if analysis.load is not None:
        names += [w.name for w in analysis.load.workloads if w.name not in names]
    for workload in names:
        bands += _bands(workload, _points(analysis, workload, configs, states, lossy), configs)
    return Recommendation(str(plan_json.get("sweep", analysis.sweep)), str(plan_json.get("engine", "sglang")),
                          tuple(bands), configs)


def _lossy(analysis: RunAnalysis) -> set[str]:
    from specbench_tui.core.results import LOSSLESS_MISMATCH

    lossy = {r.config for r in analysis.rows if r.lossless.status == LOSSLESS_MISMATCH}
    if analysis.load is not None:
        lossy |= {c for e in analysis.load.schedule for c, why in e.excluded if "differ" in why}
    return lossy


def _points(analysis: RunAnalysis, workload: str, configs: Mapping[str, Mapping[str, object]], states: Mapping[str, str],
            lossy: set[str]) -> list[tuple[str, list[Candidate]]]:
    """(load label, candidates) per measured point of ``workload``, in load order."""
    from specbench_tui.core.graphs import eager_text

    rungs = _rung_points(analysis.ladder, workload, configs, states, lossy)
    if rungs:
        return rungs
    load = analysis.load
    rows = [p for p in load.points if p.workload == workload] if load is not None else []
    if rows:
        labels = sorted({(p.axis, p.value, p.load) for p in rows})
        out = []
        for _, _, label in labels:
            out.append((label, [_candidate(p.config_id, p.config, p.per_user_tps, p.speedup, p.accept_length
                                           or p.server_accept_length, _point_why(p), configs, states, lossy,
                                           eager_text(p)) for p in rows if p.load == label]))
        return out
    cells = [r for r in analysis.rows if r.workload == workload]
    return [("c1", [_candidate(r.config_id, r.config, r.decode_tps, r.speedup, r.accept_length
                               or r.server_log_accept_length, "", configs, states, lossy, eager_text(r))
                    for r in cells])]


def _rung_points(ladder: LadderAnalysis | None, workload: str, configs: Mapping[str, Mapping[str, object]], states: Mapping[str, str],
                 lossy: set[str]) -> list[tuple[str, list[Candidate]]]:
    """A context ladder's points: its rungs in order (a band is then a run of rungs with the same winner;
    :mod:`specbench_tui.core.crossover.ladder`); [] for a workload that is not a ladder."""
    rungs = [r for r in ladder.rungs if r.point.workload == workload] if ladder is not None else []
    order = {label: i for w in (ladder.workloads if ladder is not None else ()) if w.name == workload
             for i, label in enumerate(w.rungs)}
    return [(label, [_candidate(r.point.config_id, r.point.config, r.point.per_user_tps, r.point.speedup,
                                r.point.accept_length, _point_why(r.point), configs, states, lossy, "")
                     for r in rungs if r.label == label])
            for label in sorted({r.label for r in rungs}, key=lambda label: order.get(label, 0))]


def _point_why(p: PointRow) -> str:
    if p.starved:
        return f"client starved: {p.starved}"
    if p.noisy:
        return f"noisy: {p.noise}"
    if p.speculation == "off":
        return "idle drafts: the adaptive server switched speculation off"
    return ""


def _candidate(config_id: str, name: str, tps: Stat | Spread | None, speedup: Stat | Spread | None, accept: float | None, why: str,
               configs: Mapping[str, Mapping[str, object]], states: Mapping[str, str], lossy: set[str],
               eager: str) -> Candidate:
    speculative = bool(configs.get(config_id, {}).get("speculative"))
    state = states.get(config_id, "")
    if state in ("crashed", "failed", "skipped"):
        why = state
    elif name in lossy:
        why = "lossy: outputs differ from the baseline's"
    elif not why and speculative:
        why = idle_why(accept)
    if tps is None:
        why = why or "nothing measured"
    return Candidate(config_id, name, tps.median if tps is not None else 0.0,
                     speedup.median if speedup is not None else None, speedup.low if speedup is not None else None,
                     speedup.high if speedup is not None else None, why, eager)


def idle_why(accept: float | None) -> str:
    """Why a speculative configuration's drafts were idle ("" when they were not)."""
    if accept is None:
        return "idle drafts: no verify step recorded (speculation never engaged)"
    if accept < IDLE_ACCEPT:
        return f"idle drafts: acceptance length {accept:.2f}"
    return ""


def _bands(workload: str, points: Sequence[tuple[str, list[Candidate]]],
           configs: Mapping[str, Mapping[str, object]]) -> list[Band]:
    bands: list[Band] = []
    run: list[Point] = []
    everyone = len({c.config_id for _, candidates in points for c in candidates})
    counts = {label: len(candidates) for label, candidates in points}
    for label, candidates in points:
        able = sorted((c for c in candidates if not c.why), key=lambda c: -c.tps)
        winner = able[0] if able else None
        entry = (label, winner, able[1] if len(able) > 1 else None, [c for c in candidates if c.why])
        if run and (run[-1][1].config_id if run[-1][1] else None) != (winner.config_id if winner else None):
            bands.append(_band(workload, run, configs, counts, everyone))
            run = []
        run.append(entry)
    if run:
        bands.append(_band(workload, run, configs, counts, everyone))
    return bands


Point = tuple[str, "Candidate | None", "Candidate | None", list[Candidate]]
"""(load label, winner, runner-up, the excluded) of one point."""


def _band(workload: str, run: list[Point], configs: Mapping[str, Mapping[str, object]], counts: Mapping[str, int],
          everyone: int) -> Band:
    winner = run[0][1]
    margins = [w.tps / r.tps - 1.0 for _, w, r, _ in run if w is not None and r is not None and r.tps > 0]
    runners = [r.config for _, _, r, _ in run if r is not None]
    excluded: dict[str, str] = {}
    for _, _, _, out in run:
        for c in out:
            excluded.setdefault(c.config, c.why)
    eager = tuple(label for label, w, _, _ in run if w is not None and w.eager)
    speculative = bool(configs.get(winner.config_id, {}).get("speculative")) if winner else False
    return Band(workload, _axis(run[0][0]), tuple(label for label, *_ in run),
                winner.config_id if winner else None, winner.config if winner else None, speculative,
                min(margins) if margins else None, _band_speedup(run),
                max(set(runners), key=runners.count) if runners else None,
                tuple(Excluded(c, why) for c, why in excluded.items()), eager,
                min(counts.get(label, 0) for label, *_ in run), everyone)


def _axis(label: str) -> str:
    """The axis of a point's label: a load axis (``c4``, ``r2``), else a context ladder's rung (``8192``, ``max``)."""
    return parse_label(label)[0] if label[:1] in ("c", "r") else AXIS_CONTEXT


def _band_speedup(run: list[Point]) -> tuple[float, float, float] | None:
    """The winner's speedup over the band: the median of its points' medians, the lowest low, the highest high."""
    ups = [(w.speedup, w.speedup_low or w.speedup, w.speedup_high or w.speedup)
           for _, w, _, _ in run if w is not None and w.speedup is not None]
    if not ups:
        return None
    medians = sorted(u[0] for u in ups)
    return medians[len(medians) // 2], min(u[1] for u in ups), max(u[2] for u in ups)


def _argv(config: Mapping[str, object]) -> list[str]:
    """The configuration's server argv as the plan stored it (none when it is not a list)."""
    argv = config.get("argv")
    return [str(a) for a in argv] if isinstance(argv, list) else []


def deploy_argv(config: Mapping[str, object], engine: str) -> list[str]:
    """The configuration's server flags as the plan ran them, the :data:`MEASURING_FLAGS` (and their values)
    removed."""
    argv = _argv(config)
    drop = MEASURING_FLAGS.get(engine, ())
    out: list[str] = []
    skip = False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
            continue
        flag = arg.split("=", 1)[0]
        if flag in drop:
            skip = "=" not in arg and arg not in VALUELESS and i + 1 < len(argv) and not argv[i + 1].startswith("--")
            continue
        out.append(arg)
    return out


def recipe(config: Mapping[str, object] | None) -> str:
    """The speculative flags of a band's winner (``--speculative-…`` and their values), or ``no speculation``."""
    if config is None or not config.get("speculative"):
        return "no speculation (autoregressive)"
    argv = _argv(config)
    parts = []
    for i, arg in enumerate(argv):
        if arg.startswith("--speculative"):
            value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else None
            parts.append(arg if value is None else f"{arg} {value}")
    return " ".join(parts) or "speculation (no --speculative flags)"


def vllm_schedule(bands: Sequence[Band], configs: Mapping[str, Mapping[str, object]],
                  top: int | None = None) -> list[list[int]]:
    """vLLM's ``num_speculative_tokens_per_batch_size``: ``[[first batch, last batch, K], ...]`` from the
    bands of one concurrency axis (K = the winner's draft budget, 0 for no speculation); each band covers the
    batch sizes from its first point to just below the next band's, the first from 1 and the last up to ``top``
    (its own highest point when None)."""
    conc = [b for b in bands if b.axis == "concurrency"]
    out: list[list[int]] = []
    for i, band in enumerate(conc):
        start = 1 if i == 0 else int(band.values[0])
        end = int(conc[i + 1].values[0]) - 1 if i + 1 < len(conc) else int(top or band.values[1])
        budget = configs.get(band.winner_id or "", {}).get("draft_budget")
        k = int(budget) if band.speculative and isinstance(budget, (int, float)) else 0
        if out and out[-1][2] == k:
            out[-1][1] = end
        else:
            out.append([start, end, k])
    return out


def confirm_configs(rec: Recommendation, workload: str) -> list[str]:
    """The configuration ids a workload's confirm sweep measures: each band's winner, its baseline and its
    runner-up."""
    by_name = {c.get("name"): cid for cid, c in rec.configs.items()}
    ids: list[str] = []
    for band in (b for b in rec.bands if b.workload == workload and b.winner_id):
        winner = rec.configs.get(band.winner_id or "", {})
        for name in (band.winner, winner.get("baseline"), band.runner_up):
            cid = by_name.get(name)
            if cid is not None and cid not in ids:
                ids.append(cid)
    return ids
