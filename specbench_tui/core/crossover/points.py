"""One configuration's figures at one load point, from its measurements and the runner's per-repeat events:
throughput over the repeat's window, per-user tok/s, latency percentiles, acceptance, goodput and whether the
point meets the workload's SLO, and the noisy-point rule."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypedDict

from specbench_tui.core.crossover.results import LoadWorkload, PointRow
from specbench_tui.core.crossover.stats import Pcts, Stat, finite, pcts, stat_of
from specbench_tui.core.events import LoadPointFinished
from specbench_tui.core.load import AXIS_CONCURRENCY, Slo, parse_label
from specbench_tui.core.measuring_host import starved
from specbench_tui.core.metrics import percentile
from specbench_tui.core.records import STATUS_ERROR, STATUS_OK, STATUS_ZERO_OUTPUT, Measurement


def _good(m: Measurement, slo: Slo) -> bool:
    itl = m.itl_p99_s if m.itl_p99_s is not None else m.itl_p95_s
    checks = ((slo.ttft_ms, m.ttft_s), (slo.itl_ms, itl), (slo.e2e_ms, m.e2e_s))
    for limit, value in checks:
        if limit is None:
            continue
        if value is None:
            if limit is slo.itl_ms and (m.completion_tokens or 0) <= 1:
                continue  # one token: no inter-token latency to judge
            return False
        if value * 1000.0 > limit:
            return False
    return True


def _wall(ms: list[Measurement], event: LoadPointFinished | None) -> float | None:
    """A repeat's window: its first request starting to leave the client to its last answer read (the requests'
    own clocks, so the client's connection set-up before the first byte is not the server's time); the runner's
    wall time of the point when the records lack times."""
    spans = [(m.started_at, m.started_at + m.e2e_s) for m in ms if finite(m.started_at) and finite(m.e2e_s)]
    if spans:
        wall = max(e for _, e in spans) - min(s for s, _ in spans)
        if wall > 0:
            return wall
    if event is not None and finite(event.wall_s) and event.wall_s > 0:
        return float(event.wall_s)
    return None


def capped_text(axis: str, value: float, cap: int | None) -> str | None:
    """``capped (64 in flight, cap 48)`` for a closed-loop point above the server's running cap, else None."""
    if cap is None or axis != AXIS_CONCURRENCY or value <= cap:
        return None
    return f"capped ({int(value)} in flight, cap {cap})"


class _Latencies(TypedDict):
    """A point's latency percentiles (:class:`PointRow`'s fields of the same names)."""

    ttft_s: Pcts | None
    itl_s: Pcts | None
    e2e_s: Pcts | None


class GraphFigures(TypedDict, total=False):
    """:func:`graph_figures`: both keys, or neither when no decode line said (:class:`PointRow`'s fields)."""

    graph_share: float
    eager_batches: tuple[int, ...]


class _Extras(TypedDict):
    """A point's facts beyond its figures (:class:`PointRow`'s fields of the same names)."""

    running_cap: int | None
    capped: str | None
    spec_steps: tuple[int, ...] | None
    speculation: str | None
    n_retracted: int
    cache: str | None


def _adaptive(events: Mapping[int, LoadPointFinished]) -> tuple[tuple[int, ...] | None, str | None]:
    """An adaptive server's candidate steps over the point's repeats, and whether speculation was on/off/mixed."""
    logs = [e.server_log for e in events.values() if isinstance(e.server_log, dict) and e.server_log.get("adaptive")]
    steps = sorted({int(x) for log in logs for x in (log.get("spec_steps") or ()) if isinstance(x, int)})
    states = {log.get("speculation") for log in logs if log.get("speculation")}
    if not logs or not steps:
        return None, None
    speculation = states.pop() if len(states) == 1 else "mixed"
    return tuple(steps), str(speculation)


def _point_extras(axis: str, value: float, ms: list[Measurement], ok: list[Measurement],
                  events: Mapping[int, LoadPointFinished]) -> _Extras:
    """The facts of a point beyond its figures: the server's cap (and whether the point exceeds it), an adaptive
    server's steps, retractions and the cache policy."""
    caps = [m.running_cap for m in ms if m.running_cap is not None]
    cap = min(caps) if caps else None
    steps, speculation = _adaptive(events)
    policies = {m.held_cache for m in ms if m.cache}
    return {"running_cap": cap, "capped": capped_text(axis, value, cap), "spec_steps": steps,
            "speculation": speculation, "n_retracted": sum(1 for m in ok if m.retracted),
            "cache": (policies.pop() if len(policies) == 1 else "mixed") if policies else None}


def point_row(config_id: str, config: str, workload: LoadWorkload, label: str, ms: list[Measurement],
              events: Mapping[int, LoadPointFinished], expected_per_repeat: int, repeats: int,
              accept_fn: Callable[[list[Measurement]], tuple[float | None, str | None]], *, include_retracted: bool = False) -> PointRow:
    """One point's row; a request the server retracted is kept out of the latency percentiles unless
    ``include_retracted``."""
    axis, value = parse_label(label)
    ok = [m for m in ms if m.status == STATUS_OK]
    timed = ok if include_retracted else [m for m in ok if not m.retracted]
    by_repeat: dict[int, list[Measurement]] = defaultdict(list)
    for m in ms:
        by_repeat[m.repeat].append(m)
    rates = _Rates.of(by_repeat, events, workload.spec.slo)
    complete = len(by_repeat) >= repeats and all(len(g) >= expected_per_repeat for g in by_repeat.values())
    attainment, meets = _slo_verdict(ok, workload.spec.slo)
    accept, _ = accept_fn(ok)
    per_user = stat_of(rates.user_tps)
    hungry, noise = _noise(per_user, workload.spec.noise_threshold, ms, events)
    return PointRow(
        config_id=config_id, config=config, workload=workload.name, load=label, axis=axis, value=value,
        n_ok=len(ok), n_error=sum(1 for m in ms if m.status == STATUS_ERROR),
        n_zero_output=sum(1 for m in ms if m.status == STATUS_ZERO_OUTPUT), repeats=len(by_repeat),
        complete=complete, output_tps=stat_of(rates.out_tps), per_user_tps=per_user,
        request_tps=stat_of(rates.req_tps), **_latencies(timed),
        accept_length=accept, server_accept_length=_server_accept(events), **graph_figures(events.values()),
        goodput_rps=statistics.median(rates.good_rps) if rates.good_rps else None,
        goodput_tps=statistics.median(rates.good_tps) if rates.good_tps else None,
        slo_attainment=attainment, meets_slo=meets, noisy=noise is not None, noise=noise, starved=hungry,
        **_point_extras(axis, value, ms, ok, events),
    )


@dataclass
class _Rates:
    """Per repeat of a point: output tok/s and requests/s over the repeat's window, the median per-user tok/s, and
    the goodput (requests and tokens within the SLO per second)."""

    out_tps: list[float] = field(default_factory=list)
    user_tps: list[float] = field(default_factory=list)
    req_tps: list[float] = field(default_factory=list)
    good_rps: list[float] = field(default_factory=list)
    good_tps: list[float] = field(default_factory=list)

    @classmethod
    def of(cls, by_repeat: Mapping[int, list[Measurement]], events: Mapping[int, LoadPointFinished],
           slo: Slo | None) -> _Rates:
        rates = cls()
        for repeat, group in sorted(by_repeat.items()):
            rep_ok = [m for m in group if m.status == STATUS_OK]
            decode = [float(m.decode_tps) for m in rep_ok if finite(m.decode_tps)]
            if decode:
                rates.user_tps.append(statistics.median(decode))
            wall = _wall(group, events.get(repeat))
            if wall:
                rates.add_window(rep_ok, wall, slo)
        return rates

    def add_window(self, rep_ok: list[Measurement], wall: float, slo: Slo | None) -> None:
        self.out_tps.append(sum(m.completion_tokens or 0 for m in rep_ok) / wall)
        self.req_tps.append(len(rep_ok) / wall)
        if slo is not None:
            good = [m for m in rep_ok if _good(m, slo)]
            self.good_rps.append(len(good) / wall)
            self.good_tps.append(sum(m.completion_tokens or 0 for m in good) / wall)


def _itl(m: Measurement) -> float | None:
    """A request's inter-token latency figure: its p99, else its p95."""
    return m.itl_p99_s if m.itl_p99_s is not None else m.itl_p95_s


def _slo_verdict(ok: list[Measurement], slo: Slo | None) -> tuple[float | None, bool | None]:
    """The share of requests within the SLO, and whether the point meets it (each limit at the SLO's
    percentile); None and None without an SLO or a request that succeeded."""
    if slo is None or not ok:
        return None, None
    attainment = sum(1 for m in ok if _good(m, slo)) / len(ok)
    meets = True
    for limit, vals in ((slo.ttft_ms, [m.ttft_s for m in ok]), (slo.itl_ms, [_itl(m) for m in ok]),
                        (slo.e2e_ms, [m.e2e_s for m in ok])):
        if limit is None:
            continue
        got = percentile([float(v) for v in vals if finite(v)], slo.percentile)
        if got is None or got * 1000.0 > limit:
            meets = False
    return attainment, meets


def _noise(per_user: Stat | None, threshold: float, ms: list[Measurement],
           events: Mapping[int, LoadPointFinished]) -> tuple[str | None, str | None]:
    """Why the measuring client was starved (or None), and why the point is noisy (or None): a starved client's
    figures are the host's, so the point is shown, flagged and never evidence (as a noisy one); else a per-user
    spread above the workload's threshold."""
    noise = None
    if per_user is not None and per_user.rel_spread is not None and per_user.rel_spread > threshold:
        noise = f"per-user tok/s MAD is {per_user.rel_spread:.0%} of its median"
    hungry = next((e.starved for e in events.values() if e.starved), None) or starved(ms)
    return hungry, hungry or noise


def _latencies(timed: list[Measurement]) -> _Latencies:
    """The TTFT, inter-token and end-to-end latency percentiles of the requests timed."""
    return {"ttft_s": pcts([m.ttft_s for m in timed if finite(m.ttft_s)]),
            "itl_s": pcts([float(v) for v in map(_itl, timed) if finite(v)]),
            "e2e_s": pcts([m.e2e_s for m in timed if finite(m.e2e_s)])}


def graph_figures(events: Iterable[object]) -> GraphFigures:
    """``graph_share`` (decode lines that ran a captured graph ÷ those that said) and ``eager_batches`` over the
    events' server logs (a point's repeats, or a workload's attempts): ``{}`` when no line said."""
    lines = graphed = 0
    eager: set[int] = set()
    for e in events:
        log = getattr(e, "server_log", None)
        if not isinstance(log, dict) or not finite(log.get("graph_lines")) or not finite(log.get("graph_share")):
            continue
        n = int(log["graph_lines"])
        lines += n
        graphed += round(float(log["graph_share"]) * n)
        eager |= {int(b) for b in log.get("eager_batches") or [] if isinstance(b, int) and not isinstance(b, bool)}
    if not lines:
        return {}
    return {"graph_share": graphed / lines, "eager_batches": tuple(sorted(eager))}


def _server_accept(events: Mapping[int, LoadPointFinished]) -> float | None:
    """The median acceptance length the server's log gave over the point's repeats."""
    server = [float(e.server_log["accept_length"]) for e in events.values()
              if isinstance(e.server_log, dict) and finite(e.server_log.get("accept_length"))]
    return statistics.median(server) if server else None
