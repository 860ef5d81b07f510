"""OTLP export of the engine's metrics: the very figures the Prometheus endpoint serves
(:class:`~specbench_tui.engine.metrics_server.MetricsExporter`, whose module lists them in ``METRICS``),
pushed by OpenTelemetry's SDK to a collector (``specbench run --otlp-endpoint URL`` or ``[metrics] otlp_endpoint``).

Optional: the ``otlp`` extra (``opentelemetry-sdk`` and its HTTP/protobuf exporter), imported only here and only
when a sweep asks for it. Each metric is an observable instrument of the same name whose callback reads the
Prometheus collector's families, so the two cannot drift apart: gauges stay gauges, a counter is an observable
counter under its exposed name (``specbench_measurements_total``; the ``_total`` already there is not added again
by a Prometheus that ingests OTLP), labels become attributes. The SDK exports every :data:`EXPORT_EVERY_S` from a
thread of its own, each export bounded by :data:`EXPORT_TIMEOUT_S`; a failed export is a notice (once, and once
more when it works again), never a stopped sweep. Headers such as an API key come from OpenTelemetry's own
environment variables (``OTEL_EXPORTER_OTLP_HEADERS``), never from the sweep file.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricReader, MetricsData
    from prometheus_client.metrics_core import Metric

EXPORT_EVERY_S = 10.0
"""How often the metrics are pushed (a Prometheus scrape interval's order)."""
EXPORT_TIMEOUT_S = 5.0
"""The longest one export (and the last one, at the sweep's end) may take."""
FAMILIES_FRESH_S = 0.5
"""One collection reads every instrument in a row: the collector's families are read once for all of them."""
MISSING = ("OTLP export needs OpenTelemetry's SDK: pip install 'specbench-tui[otlp]' "
           "(the sweep goes on without it)")
"""What is said when the extra is not installed."""


def metrics_url(endpoint: str) -> str:
    """The HTTP exporter's URL for ``endpoint``: a collector's base address (``http://host:4318``) gets OTLP's
    ``/v1/metrics`` path, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` does; a URL with a path is used as written."""
    parts = urlsplit(endpoint)
    return endpoint.rstrip("/") + "/v1/metrics" if parts.path in ("", "/") else endpoint


def otlp_available() -> bool:
    """Whether the ``otlp`` extra is installed (looked up without importing it)."""
    from importlib.util import find_spec

    return all(find_spec(name) is not None for name in ("opentelemetry.sdk", "opentelemetry.exporter.otlp"))


class Collector(Protocol):
    """What the bridge reads: prometheus-client's custom-collector face (the metrics endpoint's exporter)."""

    def collect(self) -> Iterable[Metric]: ...


class OtlpBridge:
    """The Prometheus collector's families as OpenTelemetry instruments, read by ``reader`` (the SDK's periodic
    exporting reader in a sweep, its in-memory reader in a test)."""

    def __init__(self, collector: Collector, names: Mapping[str, str], reader: MetricReader, *, sweep: str = "sweep") -> None:
        """``names``: every metric's exposed name and description (the endpoint's ``METRICS``)."""
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource

        self.collector = collector
        """An object whose ``collect()`` yields prometheus-client metric families (the metrics endpoint's)."""
        self._lock = threading.Lock()
        self._families: list[Metric] = []
        self._read_at = float("-inf")
        self.provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False,
                                      resource=Resource.create({"service.name": "specbench",
                                                                "specbench.sweep": sweep}))
        meter = self.provider.get_meter("specbench_tui")
        for name, description in names.items():
            create = meter.create_observable_counter if name.endswith("_total") else meter.create_observable_gauge
            create(name, callbacks=[partial(self._observe, name)], description=description)

    def _observe(self, name: str, _options: CallbackOptions) -> Iterator[Observation]:
        from opentelemetry.metrics import Observation

        for family in self._read():
            for sample in family.samples:
                if sample.name == name:
                    yield Observation(float(sample.value), dict(sample.labels))

    def _read(self) -> list[Metric]:
        with self._lock:
            now = time.monotonic()
            if now - self._read_at >= FAMILIES_FRESH_S:
                self._families, self._read_at = list(self.collector.collect()), now
            return self._families

    def close(self, timeout_s: float = EXPORT_TIMEOUT_S) -> None:
        """A last export of the final figures, then the SDK's thread is stopped."""
        self.provider.shutdown(timeout_millis=timeout_s * 1000)


def open_otlp(collector: Collector, names: Mapping[str, str], endpoint: str, say: Callable[[str, str], None], *,
              sweep: str = "sweep", every_s: float = EXPORT_EVERY_S) -> OtlpBridge | None:
    """Push ``collector``'s metrics to ``endpoint`` every ``every_s`` (None when the extra is missing: said with
    ``say(level, text)``, which must be safe to call from the SDK's thread)."""
    if not otlp_available():
        say("warning", f"metrics: {MISSING}")
        return None
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    logging.getLogger("opentelemetry").addHandler(logging.NullHandler())  # failures are our notices, not stderr
    url = metrics_url(endpoint)
    exporter = _reporting_exporter(url, say)
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=every_s * 1000,
                                           export_timeout_millis=EXPORT_TIMEOUT_S * 1000)
    bridge = OtlpBridge(collector, names, reader, sweep=sweep)
    say("info", f"metrics: exported over OTLP to {url} every {every_s:g} s")
    return bridge


def _reporting_exporter(url: str, say: Callable[[str, str], None]) -> MetricExporter:
    """The SDK's OTLP/HTTP exporter, saying when its exports start failing and when they work again."""
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.sdk.metrics.export import MetricExportResult

    class ReportingExporter(OTLPMetricExporter):
        failing = False

        def export(self, metrics_data: MetricsData, timeout_millis: float | None = None,
                   **kwargs: object) -> MetricExportResult:
            try:
                result = super().export(metrics_data, timeout_millis=timeout_millis, **kwargs)
            except Exception:  # noqa: BLE001 - an export problem is a notice, never a stopped sweep
                result = MetricExportResult.FAILURE
            failed = result is not MetricExportResult.SUCCESS
            if failed != self.failing:
                self.failing = failed
                say("warning" if failed else "info",
                    f"metrics: OTLP export to {url} " + ("failed; trying again at the next export (is the "
                                                          "collector up? the sweep goes on)" if failed
                                                          else "works again"))
            return result

    return ReportingExporter(endpoint=url, timeout=EXPORT_TIMEOUT_S)

