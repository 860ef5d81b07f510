"""The engine's Prometheus endpoint: a sweep's progress and figures for the team's dashboards
(``docs/grafana-dashboard.json`` reads them; :data:`METRICS` lists every name served).

The same figures go over OTLP when asked for (``--otlp-endpoint URL`` or ``[metrics] otlp_endpoint``:
:mod:`~specbench_tui.engine.otlp_export`). Off unless asked for (``specbench run --metrics-port PORT`` or
``[metrics] port``); served on the loopback only,
by prometheus-client's own HTTP server (a thread of its own), from a registry of its own (nothing of the process's
default collectors). The figures are the run's one analysis (:class:`~specbench_tui.core.ledger.Ledger`, as every
view computes them): the event subscriber folds events into a ledger on the engine's loop and, at most every
:data:`SNAPSHOT_EVERY_S`, leaves an immutable snapshot that a scrape analyses on the server's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from specbench_tui.core.energy import energy_from_run
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    Event,
    GpuSampled,
    Notice,
    SweepFinished,
    SweepStarted,
)
from specbench_tui.core.ledger import Ledger, LedgerSnapshot
from specbench_tui.core.results import RunAnalysis

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client.metrics_core import Metric

    from specbench_tui.engine.otlp_export import OtlpBridge

SNAPSHOT_EVERY_S = 1.0
"""How stale a scrape's figures may be (a snapshot copies the ledger's measurements)."""
MIB = 1024 * 1024

METRICS: dict[str, str] = {
    "specbench_sweep_running": "1 while the sweep runs, 0 once it ended",
    "specbench_configs": "configurations by state",
    "specbench_configs_planned": "configurations in the plan",
    "specbench_measurements_total": "measurements recorded",
    "specbench_crashes_total": "crashed or failed configurations, by crash signature",
    "specbench_decode_tokens_per_second": "median decode rate per configuration and workload",
    "specbench_ttft_seconds": "median time to first token per configuration and workload",
    "specbench_acceptance_length": "mean acceptance length (tokens per verify step) per configuration and workload",
    "specbench_speedup": "decode speedup over the matched baseline per configuration and workload",
    "specbench_energy_joules_per_output_token": "GPU energy per output token per configuration and workload",
    "specbench_energy_speedup": "the matched baseline's joules per output token over this configuration's",
    "specbench_gpu_power_watts": "power draw of each GPU",
    "specbench_gpu_memory_used_bytes": "memory in use on each GPU",
    "specbench_gpu_utilization_ratio": "utilisation of each GPU (0-1)",
}
"""Every metric the endpoint serves (counters by their exposed name, with ``_total``)."""


class MetricsExporter:
    """An event subscriber whose figures a Prometheus scrape reads."""

    def __init__(self, plan_json: Mapping[str, object], *, port: int, host: str = "127.0.0.1",
                 clock: Callable[[], float] = time.monotonic) -> None:
        from prometheus_client import CollectorRegistry

        self.port = port
        self.host = host
        self.clock = clock
        self.ledger = Ledger(plan_json=dict(plan_json))
        configs = plan_json.get("configs")
        self.planned = len(configs) if isinstance(configs, list) else 0
        self.running = False
        self.crashes: dict[str, int] = {}
        self.gpus: dict[str, dict[str, object]] = {}
        self.windows: list[Event] = []
        """The events that carry an energy window (their figures: :func:`~specbench_tui.core.energy.energy_from_run`)."""
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)  # a custom collector: collect() is all it needs
        self._snapshot: LedgerSnapshot = self.ledger.snapshot()
        self._snapshot_at = float("-inf")
        self._analysis: tuple[int, RunAnalysis] | None = None
        self._lock = threading.Lock()
        self._server: WSGIServer | None = None
        self.otlp: OtlpBridge | None = None
        """The OTLP export reading these figures (:class:`~specbench_tui.engine.otlp_export.OtlpBridge`), if any."""

    def start(self) -> MetricsExporter:
        """Listen on ``host:port`` (OSError when the port is taken)."""
        from prometheus_client import start_http_server

        server, _ = start_http_server(self.port, addr=self.host, registry=self.registry)
        self._server = server
        self.port = server.server_address[1]
        return self

    def close(self) -> None:
        """Stop serving; the OTLP export, when there is one, sends its last figures first (a few seconds at most:
        call off the event loop)."""
        if self.otlp is not None:
            self.otlp.close()
            self.otlp = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- the engine's side: events ------------------------------------------------------------------------------

    def __call__(self, event: Event) -> None:
        if isinstance(event, GpuSampled):
            for sample in event.samples:
                gpu = f"{sample.get('node') or ''}{':' if sample.get('node') else ''}{sample.get('index')}"
                self.gpus[gpu] = dict(sample)
        else:
            self.ledger.apply(event)
            if getattr(event, "energy", None) is not None:
                self.windows.append(event)
            if isinstance(event, SweepStarted | SweepFinished):
                self.running = isinstance(event, SweepStarted)
            elif isinstance(event, ConfigFinished) and event.state in (ConfigState.CRASHED, ConfigState.FAILED):
                signature = event.signature or ("stalled" if (event.reason or "").startswith("stalled")
                                                else event.state.value)
                self.crashes[signature] = self.crashes.get(signature, 0) + 1
        now = self.clock()
        if now - self._snapshot_at >= SNAPSHOT_EVERY_S or isinstance(event, SweepFinished):
            self._snapshot, self._snapshot_at = self.ledger.snapshot(), now

    # -- the scrape's side -------------------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        snapshot = self._snapshot
        yield GaugeMetricFamily("specbench_sweep_running", METRICS["specbench_sweep_running"],
                                value=1.0 if self.running else 0.0)
        yield GaugeMetricFamily("specbench_configs_planned", METRICS["specbench_configs_planned"],
                                value=float(self.planned))
        states = GaugeMetricFamily("specbench_configs", METRICS["specbench_configs"], labels=["state"])
        counted: dict[str, int] = {state.value: 0 for state in ConfigState}
        for state in _states(snapshot).values():
            counted[state] = counted.get(state, 0) + 1
        for state, count in counted.items():
            states.add_metric([state], float(count))
        yield states
        yield CounterMetricFamily("specbench_measurements", "measurements recorded",
                                  value=float(len(snapshot.measurements)))
        crashes = CounterMetricFamily("specbench_crashes", "crashed or failed configurations, by crash signature",
                                      labels=["signature"])
        for signature, count in sorted(dict(self.crashes).items()):
            crashes.add_metric([signature], float(count))
        yield crashes
        yield from self._figures(snapshot)
        yield from self._energy(snapshot)
        yield from self._gpu_families()

    def _analyse(self, snapshot: LedgerSnapshot) -> RunAnalysis:
        with self._lock:
            if self._analysis is None or self._analysis[0] != snapshot.version:
                self._analysis = (snapshot.version, snapshot.analyse())
            return self._analysis[1]

    def _figures(self, snapshot: LedgerSnapshot) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        names = ("specbench_decode_tokens_per_second", "specbench_ttft_seconds", "specbench_acceptance_length",
                 "specbench_speedup")
        families = {name: GaugeMetricFamily(name, METRICS[name], labels=["config", "workload"]) for name in names}
        for row in self._analyse(snapshot).rows:
            labels = [row.config, row.workload]
            values = (row.decode_tps.median if row.decode_tps else None, row.ttft_s.median if row.ttft_s else None,
                      row.accept_length, row.speedup.median if row.speedup else None)
            for name, value in zip(names, values, strict=True):
                if value is not None:
                    families[name].add_metric(labels, float(value))
        yield from families.values()

    def _energy(self, snapshot: LedgerSnapshot) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        per_token = GaugeMetricFamily("specbench_energy_joules_per_output_token",
                                      METRICS["specbench_energy_joules_per_output_token"], labels=["config", "workload"])
        speedup = GaugeMetricFamily("specbench_energy_speedup", METRICS["specbench_energy_speedup"],
                                    labels=["config", "workload"])
        for cell in energy_from_run(snapshot.plan_json, list(self.windows), snapshot.measurements):
            if cell.j_per_output_token is not None:
                per_token.add_metric([cell.config, cell.workload], cell.j_per_output_token)
            if cell.energy_speedup is not None:
                speedup.add_metric([cell.config, cell.workload], cell.energy_speedup)
        yield per_token
        yield speedup

    def _gpu_families(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        fields = (("specbench_gpu_power_watts", "power_w", 1.0), ("specbench_gpu_memory_used_bytes", "mem_used_mib",
                  float(MIB)), ("specbench_gpu_utilization_ratio", "util_pct", 0.01))
        gpus = dict(self.gpus)
        for name, key, scale in fields:
            family = GaugeMetricFamily(name, METRICS[name], labels=["gpu", "name"])
            for gpu, sample in sorted(gpus.items()):
                value = sample.get(key)
                if isinstance(value, int | float):
                    family.add_metric([gpu, str(sample.get("name") or "")], float(value) * scale)
            yield family


def open_metrics(plan_json: Mapping[str, object], port: int | None, host: str, publish: Callable[[Event], None],
                 subscribe: Callable[[Callable[[Event], None]], object], *, otlp_endpoint: str | None = None,
                 sweep: str = "sweep") -> MetricsExporter | None:
    """The endpoint on ``host:port``, serving, and the OTLP export to ``otlp_endpoint``
    (:mod:`~specbench_tui.engine.otlp_export`), both subscribed (None: neither asked for, or the port could not
    listen and no OTLP export was asked for: said in a notice; the sweep goes on without them). Call from the
    engine's event loop: the OTLP export's notices come from its own thread and are published on it."""
    if port is None and otlp_endpoint is None:
        return None
    exporter = MetricsExporter(plan_json, port=port or 0, host=host)
    if port is not None:
        try:
            exporter.start()
        except OSError as exc:
            publish(Notice(level="warning", text=f"metrics: cannot serve on {host}:{port} ({exc.strerror or exc}); "
                                                 "pick another with --metrics-port (the sweep goes on without them)"))
            if otlp_endpoint is None:
                return None
        else:
            publish(Notice(level="info", text=f"metrics: Prometheus metrics on http://{host}:{exporter.port}/metrics"))
    if otlp_endpoint is not None:
        from specbench_tui.engine.otlp_export import open_otlp

        exporter.otlp = open_otlp(exporter, METRICS, otlp_endpoint, _threadsafe(publish), sweep=sweep)
    subscribe(exporter)
    return exporter


def _threadsafe(publish: Callable[[Event], None]) -> Callable[[str, str], None]:
    """``say(level, text)`` as a notice published on this loop, from any thread (on standard error once the loop
    is gone)."""
    loop = asyncio.get_running_loop()

    def say(level: str, text: str) -> None:
        with contextlib.suppress(RuntimeError):
            if asyncio.get_running_loop() is loop:
                publish(Notice(level=level, text=text))
                return
        if not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(publish, Notice(level=level, text=text))
                return
        print(f"specbench: {text}", file=sys.stderr, flush=True)

    return say


def _states(snapshot: LedgerSnapshot) -> dict[str, str]:
    """Each configuration's state: the plan's (pending, or skipped when excluded), then its last state event."""
    listed = snapshot.plan_json.get("configs")
    configs = [c for c in listed if isinstance(c, Mapping)] if isinstance(listed, list) else []
    states = {str(c.get("id")): "skipped" if c.get("skip_reason") else "pending" for c in configs}
    for event in snapshot.events:
        state = getattr(event, "state", None)
        config_id = getattr(event, "config_id", None)
        if isinstance(state, ConfigState) and isinstance(config_id, str):
            states[config_id] = state.value
    return states
