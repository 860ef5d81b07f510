"""What the measuring host was doing while it measured: its load on record, and the guard against a starved client.

A figure is a server's only while the client reading it keeps up. Two ways it stops being so:

- **A saturated host.** More runnable tasks than cores (the load average at or above the core count): the client
  waits for a core as the server does, and a difference between two runs can be the host's, not the servers'.
  Every workload and load point records the host's load average, its core count and our own process's CPU time
  over the window (:class:`HostLoad`, in the ``host`` field of ``WorkloadFinished`` and ``LoadPointFinished``);
  ``report`` warns of saturated windows and ``compare`` calls no change significant where either side was
  measured on a saturated host.
- **A starved client.** A client scheduled only when the server yields reads each answer in one piece: its
  tokens all "arrive" at one instant, TTFT equals e2e and TPOT is 0 (seen on a real vLLM server in a session of
  its own: 19 of 24 answers). :func:`starved` names it from the answers themselves (most of them in one burst)
  or from the server's own time-to-first-token counters over the window (ours far above the server's), and a
  point so marked is not reported as a figure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from specbench_tui.core.records import STATUS_OK, Measurement

BURST_S = 0.001
"""An answer whose last token came within this of its first arrived in one burst (no gap between its tokens)."""
MIN_BURST_TOKENS = 8
"""Answers shorter than this are not judged (a 2-token answer may well arrive at once)."""
MIN_JUDGED = 4
"""Answers needed before the burst rule says anything."""
STARVED_SHARE = 0.5
"""The share of judged answers in one burst above which the client was starved."""
SERVER_TTFT_SLACK_S = 0.005
SERVER_TTFT_FACTOR = 1.5
"""Our TTFT mean may exceed the server's own by the network and HTTP handling: at most this factor of it plus
:data:`SERVER_TTFT_SLACK_S`; beyond it, the client read late."""


@dataclass(frozen=True)
class HostLoad:
    """The measuring host over one window."""

    load_avg: float
    """The 1-minute load average at the window's end."""
    cpus: int
    client_cpu_s: float
    """Our own process's CPU time over the window (every thread)."""
    wall_s: float

    @property
    def saturated(self) -> bool:
        """More runnable tasks than cores: the client and the server waited for CPUs."""
        return self.cpus > 0 and self.load_avg >= self.cpus

    def to_json(self) -> dict[str, float | int]:
        return {"load_avg": round(self.load_avg, 2), "cpus": self.cpus, "client_cpu_s": round(self.client_cpu_s, 4),
                "wall_s": round(self.wall_s, 4)}

    @classmethod
    def from_json(cls, data: object) -> HostLoad | None:
        """The record's ``host`` field, or None when absent or malformed (records from before it)."""
        if not isinstance(data, Mapping):
            return None
        values = [data.get(k) for k in ("load_avg", "cpus", "client_cpu_s", "wall_s")]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
                   for v in values):
            return None
        load, cpus, cpu, wall = values
        return cls(float(load), int(cpus), float(cpu), float(wall))  # type: ignore[arg-type]

    def describe(self) -> str:
        return f"load {self.load_avg:.1f} on {self.cpus} cores"


def bursts(measurements: Iterable[Measurement]) -> tuple[int, int]:
    """(answers that arrived in one burst, answers judged): ok answers of at least :data:`MIN_BURST_TOKENS`."""
    judged = burst = 0
    for m in measurements:
        if m.status != STATUS_OK or (m.completion_tokens or 0) < MIN_BURST_TOKENS:
            continue
        if m.ttft_s is None or m.e2e_s is None or not math.isfinite(m.ttft_s) or not math.isfinite(m.e2e_s) \
                or m.e2e_s < m.ttft_s:  # not a timing a client reads (a hand-made record): nothing to judge
            continue
        judged += 1
        if m.e2e_s - m.ttft_s < BURST_S:
            burst += 1
    return burst, judged


def starved(measurements: Iterable[Measurement], server_ttft_mean_s: float | None = None) -> str | None:
    """Why the client that took ``measurements`` was starved (None: it was not, as far as can be told).
    ``server_ttft_mean_s`` is the server's own mean time to first token over the same window, where it counts
    one (Prometheus histograms of vLLM and SGLang)."""
    ms = list(measurements)
    burst, judged = bursts(ms)
    if judged >= MIN_JUDGED and burst > STARVED_SHARE * judged:
        return (f"client starved: {burst} of {judged} answers arrived in one piece (TTFT = end-to-end): the "
                "measuring process got no CPU while the server streamed")
    ours = [m.ttft_s for m in ms if m.status == STATUS_OK and m.ttft_s is not None and math.isfinite(m.ttft_s)]
    if server_ttft_mean_s is not None and server_ttft_mean_s >= 0 and len(ours) >= MIN_JUDGED:
        mean = statistics.fmean(ours)
        if mean > SERVER_TTFT_FACTOR * server_ttft_mean_s + SERVER_TTFT_SLACK_S:
            return (f"client starved: our mean TTFT {mean * 1000:.1f} ms, the server's own "
                    f"{server_ttft_mean_s * 1000:.1f} ms over the same window")
    return None


def server_ttft_mean(before: Mapping[str, float] | None, after: Mapping[str, float] | None,
                     name: str | None) -> float | None:
    """The server's mean time to first token between two reads of its Prometheus counters: histogram ``name``'s
    ``_sum`` and ``_count`` summed over their label sets (None: no counter, or no request counted in between)."""
    if not before or not after or not name:
        return None

    def total(values: Mapping[str, float], suffix: str) -> float:
        series = name + suffix
        return sum(v for k, v in values.items() if k == series or k.startswith(series + "{"))

    count = total(after, "_count") - total(before, "_count")
    spent = total(after, "_sum") - total(before, "_sum")
    return spent / count if count > 0 and spent >= 0 else None


def host_loads(events: Iterable[object]) -> dict[tuple[str, str], HostLoad]:
    """Per (configuration id, workload): the most loaded window on record (``WorkloadFinished`` and
    ``LoadPointFinished`` events' ``host`` field)."""
    worst: dict[tuple[str, str], HostLoad] = {}
    for event in events:
        host = HostLoad.from_json(getattr(event, "host", None))
        config_id, workload = getattr(event, "config_id", None), getattr(event, "workload", None)
        if host is None or not isinstance(config_id, str) or not isinstance(workload, str):
            continue
        key = (config_id, workload)
        if key not in worst or host.load_avg / max(host.cpus, 1) > worst[key].load_avg / max(worst[key].cpus, 1):
            worst[key] = host
    return worst


def saturated_warning(loads: Mapping[tuple[str, str], HostLoad]) -> str | None:
    """The report's warning when some window was measured on a saturated host."""
    hot = [h for h in loads.values() if h.saturated]
    if not hot:
        return None
    peak = max(hot, key=lambda h: h.load_avg / max(h.cpus, 1))
    return (f"{len(hot)} of {len(loads)} configuration × workload cells were measured on a saturated host (up to "
            f"{peak.describe()}): their figures may be the host's, not the server's; measure again on a quieter "
            "host before trusting a difference")
