"""OTLP export of the engine's metrics (issue 48): OpenTelemetry's own in-memory reader reads the same names,
labels and values that Prometheus's text parser reads off the endpoint after a simulator sweep; the SDK's
OTLP/HTTP exporter reaches a collector (a small HTTP server here) at ``/v1/metrics``, and a collector that is not
there is a notice; ``[metrics] otlp_endpoint`` is validated; ``specbench --help`` imports nothing of OpenTelemetry."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine_helpers import plan_for, write_sweep
from notify_helpers import PROFILE, sweep_text

from specbench_tui.application.session import make_backend
from specbench_tui.engine.metrics_server import METRICS, MetricsExporter
from specbench_tui.engine.orchestrator import Orchestrator
from specbench_tui.rundir.store import RunDir

pytest.importorskip("opentelemetry.sdk.metrics", reason="the otlp extra: pip install -e '.[otlp]' "
                                                        "(tools/setup_test_deps.sh installs it)")

Points = dict[str, dict[tuple[tuple[str, str], ...], float]]


def _prometheus(port: int) -> Points:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out: Points = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def _otel(metrics_data: Any) -> tuple[Points, dict[str, str]]:
    """name -> {sorted attributes: value}, and name -> the kind of its data (Gauge, Sum), of an SDK reader's data."""
    out: Points = {}
    kinds: dict[str, str] = {}
    for resource in metrics_data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                kinds[metric.name] = type(metric.data).__name__ + (
                    " monotonic" if getattr(metric.data, "is_monotonic", False) else "")
                points = out.setdefault(metric.name, {})
                for point in metric.data.data_points:
                    points[tuple(sorted((str(k), str(v)) for k, v in point.attributes.items()))] = float(point.value)
    return out, kinds


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[Points, Points, dict[str, str]]:
    """A simulator sweep (a baseline, crashes, a stall, energy) read after its end through the Prometheus
    endpoint and through OpenTelemetry's in-memory reader over the same collector."""
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from specbench_tui.engine.otlp_export import OtlpBridge

    tmp_path = tmp_path_factory.mktemp("otlp")
    plan = plan_for(write_sweep(tmp_path, sweep_text(), PROFILE))
    exporter = MetricsExporter(plan.to_json(), port=0).start()
    reader = InMemoryMetricReader()
    bridge = OtlpBridge(exporter, METRICS, reader, sweep=plan.sweep.name)

    async def main() -> None:
        run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
        orchestrator = Orchestrator(plan, run_dir, backend=make_backend(plan))
        orchestrator.subscribe(exporter)
        try:
            await asyncio.wait_for(orchestrator.run(), 240)
        finally:
            run_dir.close()

    try:
        asyncio.run(main())
        otel, kinds = _otel(reader.get_metrics_data())
        return _prometheus(exporter.port), otel, kinds
    finally:
        bridge.close()
        exporter.close()


def test_the_otlp_names_and_values_are_the_prometheus_ones(both: tuple[Points, Points, dict[str, str]]) -> None:
    prometheus, otel, kinds = both
    assert set(METRICS) <= set(otel), set(METRICS) - set(otel)
    for name in METRICS:
        assert otel[name] == prometheus[name], name
    assert otel["specbench_crashes_total"] and otel["specbench_energy_joules_per_output_token"]  # not empty alike
    assert kinds["specbench_measurements_total"] == "Sum monotonic" and kinds["specbench_speedup"] == "Gauge"


class _Collector:
    """OTLP/HTTP's receiving end: every POST body, by path."""

    def __init__(self) -> None:
        self.bodies: list[tuple[str, bytes]] = []
        got = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                got.append((self.path, self.rfile.read(int(self.headers.get("Content-Length") or 0))))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        if self.server.socket.fileno() != -1:  # not closed yet
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def collector() -> Iterator[_Collector]:
    serving = _Collector()
    yield serving
    serving.close()


def test_the_sdk_exporter_reaches_a_collector_and_a_missing_one_is_a_notice(collector: _Collector) -> None:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

    from specbench_tui.engine.otlp_export import open_otlp

    said: list[tuple[str, str]] = []
    source = MetricsExporter({"configs": [{"id": "a", "name": "a"}]}, port=0)
    bridge = open_otlp(source, METRICS, f"http://127.0.0.1:{collector.port}", lambda *s: said.append(s),
                       every_s=0.2)
    assert bridge is not None
    deadline = time.monotonic() + 20
    while not collector.bodies and time.monotonic() < deadline:
        time.sleep(0.05)
    bridge.close()
    assert collector.bodies, said
    path, body = collector.bodies[0]
    assert path == "/v1/metrics"
    request = ExportMetricsServiceRequest.FromString(body)
    names = {m.name for r in request.resource_metrics for s in r.scope_metrics for m in s.metrics}
    assert {"specbench_configs_planned", "specbench_measurements_total"} <= names, names
    assert said == [("info", f"metrics: exported over OTLP to http://127.0.0.1:{collector.port}/v1/metrics every 0.2 s")]

    port = collector.port
    collector.close()  # nobody listens there any more
    said.clear()
    bridge = open_otlp(source, METRICS, f"http://127.0.0.1:{port}/v1/metrics", lambda *s: said.append(s), every_s=0.2)
    assert bridge is not None
    deadline = time.monotonic() + 20
    while len(said) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    bridge.close(timeout_s=1.0)
    assert said[1][0] == "warning" and "OTLP export to" in said[1][1] and "failed" in said[1][1], said


def test_the_otlp_endpoint_is_validated_with_file_line_and_fix(tmp_path: Path) -> None:
    from specbench_tui.core.errors import SweepError
    from specbench_tui.core.sweep.loader import parse_sweep

    for written, wrong in (('"ftp://collector:4318"', "is not an http(s) URL"),
                           ('"https://user:secret@collector:4318"', "carries a user or password")):
        text = sweep_text(f"[metrics]\notlp_endpoint = {written}").replace("{port}", "31000")
        path = write_sweep(tmp_path, text, PROFILE)
        with pytest.raises(SweepError) as caught:
            parse_sweep(path.read_text(), path)
        line = text.split("\n").index(f"otlp_endpoint = {written}") + 1
        assert f"sweep.toml:{line}: metrics.otlp_endpoint: " in str(caught.value.issues[0]), caught.value.issues
        assert wrong in str(caught.value.issues[0]) and "secret" not in str(caught.value.issues[0])
    ok = parse_sweep(sweep_text('[metrics]\notlp_endpoint = "http://127.0.0.1:4318"').replace("{port}", "31000"),
                     tmp_path / "sweep.toml")
    assert ok.metrics.otlp_endpoint == "http://127.0.0.1:4318" and ok.metrics.port is None


HELP_IMPORTS = """
import sys
from specbench_tui.__main__ import run
for argv in (["specbench", "--help"], ["specbench", "run", "--help"]):
    sys.argv = argv
    try:
        run()
    except SystemExit:
        pass
import specbench_tui.engine.metrics_server, specbench_tui.engine.otlp_export
print("loaded:", sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""


def test_help_imports_nothing_of_opentelemetry() -> None:
    done = subprocess.run([sys.executable, "-c", HELP_IMPORTS], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "--otlp-endpoint" in done.stdout
    assert done.stdout.strip().endswith("loaded: []"), done.stdout[-500:]
