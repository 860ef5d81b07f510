"""The engine's Prometheus endpoint (issue 48): Prometheus's own text parser reads what a simulator sweep served,
the figures are the run's one analysis, and the Grafana dashboard in docs/ reads only metric names the endpoint
serves."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine_helpers import SimulatorSweep, plan_for, write_sweep
from notify_helpers import PROFILE, sweep_text

from repo_paths import REPO
from specbench_tui.core.ledger import Ledger
from specbench_tui.application.session import make_backend
from specbench_tui.engine.metrics_server import METRICS, MetricsExporter, open_metrics

ROOT = REPO
DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"


Samples = dict[str, list[tuple[dict[str, str], float]]]
Served = tuple[Samples, Ledger]


def _scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Served:
    """A simulator sweep (a baseline, crashes, a zero-output and a stalled configuration) with the endpoint
    subscribed live; what a scrape read after its end, and the run's ledger."""
    tmp_path = tmp_path_factory.mktemp("metrics")
    plan = plan_for(write_sweep(tmp_path, sweep_text(), PROFILE))
    exporter = MetricsExporter(plan.to_json(), port=0).start()

    try:
        run_dir = SimulatorSweep(tmp_path).run_sync(plan, backend=make_backend(plan), subscribers=[exporter],
                                                    timeout_s=240).run_dir
        ledger = Ledger.from_run(plan.to_json(), run_dir.read_measurements(), run_dir.read_events())
        return _scrape(exporter.port), ledger
    finally:
        exporter.close()


def test_prometheus_reads_the_endpoint_and_the_figures_are_the_runs_analysis(served: Served) -> None:
    samples, ledger = served
    assert set(METRICS) <= set(samples), set(METRICS) - set(samples)
    assert samples["specbench_sweep_running"] == [({}, 0.0)]
    assert samples["specbench_configs_planned"] == [({}, 7.0)]
    states = {labels["state"]: value for labels, value in samples["specbench_configs"]}
    assert (states["done"], states["crashed"], states["failed"], states["pending"]) == (3, 3, 1, 0)
    assert samples["specbench_measurements_total"] == [({}, float(len(ledger.measurements)))]
    crashes = {labels["signature"]: value for labels, value in samples["specbench_crashes_total"]}
    assert crashes == {"cuda_illegal_instruction": 3.0, "stalled": 1.0}
    rows = {(row.config, row.workload): row for row in ledger.analyse().rows}
    decode = {(labels["config"], labels["workload"]): value
              for labels, value in samples["specbench_decode_tokens_per_second"]}
    medians = {key: row.decode_tps.median for key, row in rows.items() if row.decode_tps is not None}
    assert decode and all(medians[key] == value for key, value in decode.items())
    assert decode[("ar", "code")] > 0
    ttft = {(labels["config"], labels["workload"]): value for labels, value in samples["specbench_ttft_seconds"]}
    assert ttft[("ar", "code")] == rows[("ar", "code")].ttft_s.median  # type: ignore[union-attr]
    energy = {labels["config"]: value for labels, value in samples["specbench_energy_joules_per_output_token"]}
    assert energy["ar"] > 0 and set(energy) == {"ar", "dflash-b4"}  # only these finished a window with tokens
    speedups = {labels["config"]: value for labels, value in samples["specbench_energy_speedup"]}
    assert set(speedups) == {"dflash-b4"} and speedups["dflash-b4"] > 0
    power = samples["specbench_gpu_power_watts"]
    assert power and power[0][0]["gpu"] == "0" and power[0][1] > 0


def _expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]


def test_the_grafana_dashboard_reads_only_metrics_the_endpoint_serves(served: Served) -> None:
    samples, _ = served
    expressions = _expressions()
    assert len(expressions) >= 10
    for expr in expressions:
        names = re.findall(r"\bspecbench_[a-z_]+", expr)
        assert names, expr
        assert set(names) <= set(samples), (expr, set(names) - set(samples))
    read = {name for expr in expressions for name in re.findall(r"\bspecbench_[a-z_]+", expr)}
    assert read == set(METRICS), set(METRICS) ^ read  # every metric has a panel, and no panel reads another


def test_a_taken_port_is_a_notice_and_no_metrics(tmp_path: Path) -> None:
    from specbench_tui.core.events import Event, Notice

    first = MetricsExporter({}, port=0).start()
    notices: list[Event] = []
    try:
        assert open_metrics({}, first.port, "127.0.0.1", notices.append, lambda _: None) is None
    finally:
        first.close()
    assert notices and isinstance(notices[0], Notice) and notices[0].text.startswith(f"metrics: cannot serve on 127.0.0.1:{first.port}")


def test_the_metrics_table_is_validated_with_file_line_and_fix(tmp_path: Path) -> None:
    from specbench_tui.core.errors import SweepError
    from specbench_tui.core.sweep.loader import parse_sweep

    text = sweep_text('[metrics]\nport = 99999\nhost = "0.0.0.0"').replace("{port}", "31000")
    path = write_sweep(tmp_path, text, PROFILE)
    with pytest.raises(SweepError) as caught:
        parse_sweep(path.read_text(), path)
    lines = text.split("\n")
    issues = [str(issue) for issue in caught.value.issues]
    assert f"sweep.toml:{lines.index('port = 99999') + 1}: metrics.port: port 99999 is not a TCP port" in issues[0]
    assert "metrics.host: host '0.0.0.0' is not this machine's loopback" in issues[1]
    assert "SSH tunnel" in issues[1]
    ok = parse_sweep(sweep_text("[metrics]\nport = 9464").replace("{port}", "31000"), path)
    assert (ok.metrics.port, ok.metrics.host) == (9464, "127.0.0.1")
