"""One configuration's figures at one load point, from its measurements and the runner's per-repeat events:
throughput over the repeat's window, per-user tok/s, latency percentiles, acceptance, goodput and whether the
point meets the workload's SLO, and the noisy-point rule."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from specbench_tui.core.crossover.results import LoadWorkload, PointRow
from specbench_tui.core.crossover.stats import finite, pcts, stat_of
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
                  events: Mapping[int, LoadPointFinished]) -> dict[str, Any]:
    """The facts of a point beyond its figures: the server's cap (and whether the point exceeds it), an adaptive
    server's steps, retractions and the cache policy."""
    caps = [m.running_cap for m in ms if m.running_cap is not None]
    cap = min(caps) if caps else None
    steps, speculation = _adaptive(events)
    policies = {m.cache for m in ms if m.cache}
    return {"running_cap": cap, "capped": capped_text(axis, value, cap), "spec_steps": steps,
            "speculation": speculation, "n_retracted": sum(1 for m in ok if m.retracted),
            "cache": (policies.pop() if len(policies) == 1 else "mixed") if policies else None}


def point_row(config_id: str, config: str, workload: LoadWorkload, label: str, ms: list[Measurement],
              events: Mapping[int, LoadPointFinished], expected_per_repeat: int, repeats: int,
              accept_fn: Any, *, include_retracted: bool = False) -> PointRow:
    """One point's row; a request the server retracted is kept out of the latency percentiles unless
    ``include_retracted``."""
    axis, value = parse_label(label)
    ok = [m for m in ms if m.status == STATUS_OK]
    timed = ok if include_retracted else [m for m in ok if not m.retracted]
    by_repeat: dict[int, list[Measurement]] = defaultdict(list)
    for m in ms:
        by_repeat[m.repeat].append(m)
    out_tps, user_tps, req_tps, good_rps, good_tps = [], [], [], [], []
    slo = workload.spec.slo
    for repeat, group in sorted(by_repeat.items()):
        rep_ok = [m for m in group if m.status == STATUS_OK]
        wall = _wall(group, events.get(repeat))
        decode = [float(m.decode_tps) for m in rep_ok if finite(m.decode_tps)]
        if decode:
            user_tps.append(statistics.median(decode))
        if wall:
            out_tps.append(sum(m.completion_tokens or 0 for m in rep_ok) / wall)
            req_tps.append(len(rep_ok) / wall)
            if slo is not None:
                good = [m for m in rep_ok if _good(m, slo)]
                good_rps.append(len(good) / wall)
                good_tps.append(sum(m.completion_tokens or 0 for m in good) / wall)
    complete = len(by_repeat) >= repeats and all(len(g) >= expected_per_repeat for g in by_repeat.values())
    attainment = meets = None
    if slo is not None and ok:
        attainment = sum(1 for m in ok if _good(m, slo)) / len(ok)
        q = slo.percentile
        meets = True
        for limit, vals in ((slo.ttft_ms, [m.ttft_s for m in ok]),
                            (slo.itl_ms, [m.itl_p99_s if m.itl_p99_s is not None else m.itl_p95_s for m in ok]),
                            (slo.e2e_ms, [m.e2e_s for m in ok])):
            if limit is None:
                continue
            got = percentile([float(v) for v in vals if finite(v)], q)
            if got is None or got * 1000.0 > limit:
                meets = False
    server = [float(e.server_log["accept_length"]) for e in events.values()
              if isinstance(e.server_log, dict) and finite(e.server_log.get("accept_length"))]
    accept, _ = accept_fn(ok)
    per_user = stat_of(user_tps)
    noise = None
    if per_user is not None and per_user.rel_spread is not None and per_user.rel_spread > workload.spec.noise_threshold:
        noise = f"per-user tok/s MAD is {per_user.rel_spread:.0%} of its median"
    # A starved client's figures are the host's: the point is shown, flagged and never evidence (as a noisy one).
    hungry = next((e.starved for e in events.values() if e.starved), None) or starved(ms)
    noise = hungry or noise
    return PointRow(
        config_id=config_id, config=config, workload=workload.name, load=label, axis=axis, value=value,
        n_ok=len(ok), n_error=sum(1 for m in ms if m.status == STATUS_ERROR),
        n_zero_output=sum(1 for m in ms if m.status == STATUS_ZERO_OUTPUT), repeats=len(by_repeat),
        complete=complete, output_tps=stat_of(out_tps), per_user_tps=per_user, request_tps=stat_of(req_tps),
        ttft_s=pcts([m.ttft_s for m in timed if finite(m.ttft_s)]),
        itl_s=pcts([float(v) for m in timed for v in [m.itl_p99_s if m.itl_p99_s is not None else m.itl_p95_s]
                    if finite(v)]),
        e2e_s=pcts([m.e2e_s for m in timed if finite(m.e2e_s)]),
        accept_length=accept, server_accept_length=statistics.median(server) if server else None,
        goodput_rps=statistics.median(good_rps) if good_rps else None,
        goodput_tps=statistics.median(good_tps) if good_tps else None,
        slo_attainment=attainment, meets_slo=meets, noisy=noise is not None, noise=noise, starved=hungry,
        **_point_extras(axis, value, ms, ok, events),
    )
