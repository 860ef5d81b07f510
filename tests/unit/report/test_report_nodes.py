"""Reports say which node measured what, and warn when the figures they set side by side were measured on
different GPU models: one run spread over two nodes (H200 and H100), and two runs of this machine compared."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
from node_fakes import H100, H200, NODE_A, NODE_B, fingerprint, on_two_nodes
from tui_fakes import DemoScript, demo_plan

from specbench_tui.core.events import Event, MeasurementRecorded
from specbench_tui.report.compare import compare_runs, render_compare
from specbench_tui.report.formats import render
from specbench_tui.report.load import load_run
from specbench_tui.rundir.store import RunDir

MIXED = "configurations were measured on different GPU models"
PAIR = f"speedups over a baseline measured on another GPU model: dflash-b16-tp1 ({H100}) over ar-tp1 ({H200})"


def write_run(root: Path, name: str, env: dict[str, Any], nodes: bool) -> Path:
    """A run directory of the scripted demo run (on two nodes, or on this machine), written as the engine does."""
    plan = demo_plan()
    run = RunDir.create(root / name, plan.sweep.name, "", plan.to_json())
    run.write_json("env.json", env)
    events: list[Event] = DemoScript(plan, run.path).events
    for event in on_two_nodes(events, plan) if nodes else events:
        run.append_event(event)
        if isinstance(event, MeasurementRecorded) and event.measurement is not None:
            run.append_measurement(event.measurement)
    run.close()
    return run.path


@pytest.fixture
def two_nodes(tmp_path: Path) -> Path:
    """Run on two nodes; the engine's own machine (the Ray head) has no GPU."""
    return write_run(tmp_path, "a", {"schema": 1, "host": {"name": "head"}, "gpus": {"count": 0, "names": {}}},
                     nodes=True)


def test_env_json_holds_both_nodes_fingerprints(two_nodes: Path) -> None:
    env = json.loads((two_nodes / "env.json").read_text())
    assert env["host"] == {"name": "head"}
    assert {node: doc["gpus"]["names"] for node, doc in env["nodes"].items()} == {NODE_A: {H200: 2}, NODE_B: {H100: 2}}


def test_text_report_names_the_node_of_every_row_and_warns_of_mixed_models(two_nodes: Path) -> None:
    text = render(load_run(two_nodes), "txt")
    assert f"node gpu-a: 2x {H200} (driver 570.86.15) [{NODE_A}]" in text
    assert f"node gpu-b: 2x {H100}" in text
    assert f"warning: {MIXED} ({H200}: ar-tp1, ddtree-b8-tp1, ddtree-b32-tp1; {H100}: dflash-b16-tp1, " \
           "ddtree-b16-tp1)" in text
    assert f"warning: {PAIR}, ddtree-b16-tp1 ({H100}) over ar-tp1 ({H200})" in text
    results = text[text.index("Results: code"):]
    header = results.splitlines()[2]
    assert header.split()[:3] == ["config", "node", "TP"]
    row = next(line for line in results.splitlines() if line.lstrip(" *").startswith("dflash-b16-tp1"))
    assert "gpu-b 0" in row


def test_markdown_html_and_json_say_it_too(two_nodes: Path) -> None:
    run = load_run(two_nodes)
    md = render(run, "md")
    assert f"- gpu-a: 2x {H200}" in md and f"> **Warning:** {PAIR}" in md and "| config | node | TP |" in md
    html = render(run, "html")
    assert f"<li>gpu-b: 2x {H100}" in html and f'<p class="simulated">Warning: {PAIR}' in html
    hardware = json.loads(render(run, "json"))["hardware"]
    assert hardware["nodes"]["gpu-a/4f1c2b9e0d7a51c3"] == {"label": "gpu-a", "gpus": {H200: 2},
                                                            "driver_version": "570.86.15"}
    dflash = demo_plan().by_name("dflash-b16-tp1")
    assert dflash is not None
    assert hardware["configs"][dflash.id] == {"launches": [{"node": NODE_B, "gpus": [0], "models": [H100]}],
                                              "gpu_model": H100}
    assert any(w.startswith(MIXED) for w in hardware["warnings"])
    rows = list(csv.DictReader(io.StringIO(render(run, "csv"))))
    assert {(r["config"], r["node"], r["gpu_model"]) for r in rows if r["workload"] == "code"} >= {
        ("dflash-b16-tp1", "gpu-b 0", H100), ("ar-tp1", "gpu-a 0", H200)}


def test_a_run_on_this_machine_alone_reports_as_before(tmp_path: Path) -> None:
    run = load_run(write_run(tmp_path, "a", fingerprint(H200, "box"), nodes=False))
    text = render(run, "txt")
    assert "node" not in text.split("Results: code")[1].splitlines()[2] and "warning" not in text
    assert "hardware" not in json.loads(render(run, "json"))


def test_compare_warns_when_the_two_runs_had_different_gpu_models(tmp_path: Path) -> None:
    """Without any cluster: the same sweep on an H100 box and on an H200 box."""
    a = load_run(write_run(tmp_path, "a", fingerprint(H100, "box-1"), nodes=False))
    b = load_run(write_run(tmp_path, "b", fingerprint(H200, "box-2"), nodes=False))
    text = render_compare(compare_runs(a, b))
    assert (f"warning: different GPU models: A measured on {H100} and B on {H200} (5 configurations: ar-tp1, "
            "dflash-b16-tp1, ddtree-b8-tp1, ddtree-b16-tp1 and 1 more); the changes compare hardware as well as "
            "settings") in text
    assert "Where each configuration was measured" not in text
    same = render_compare(compare_runs(a, load_run(write_run(tmp_path, "c", fingerprint(H100, "box-3"), False))))
    assert "GPU model" not in same


def test_compare_shows_where_each_side_measured(tmp_path: Path, two_nodes: Path) -> None:
    b = load_run(write_run(tmp_path, "b", fingerprint(H200, "box"), nodes=False))
    text = render_compare(compare_runs(load_run(two_nodes), b))
    table = text[text.index("Where each configuration was measured"):]
    assert next(line for line in table.splitlines() if line.startswith("dflash-b16-tp1")).split() == [
        "dflash-b16-tp1", "gpu-b", "0", "local", "0"]
    assert f"different GPU models: A measured on {H100} and B on {H200} (2 configurations: dflash-b16-tp1, " \
           "ddtree-b16-tp1)" in text
    assert f"warning: run A: {MIXED}" in text


def test_a_tampered_nodes_section_is_read_as_far_as_it_goes(tmp_path: Path) -> None:
    env = {"gpus": {"names": {H200: 2}, "devices": "x"}, "nodes": {NODE_A: 5, NODE_B: {"gpus": {"names": [1],
                                                                                              "devices": [7, {}]}}}}
    path = write_run(tmp_path, "a", env, nodes=True)
    (path / "env.json").write_text(json.dumps(env))  # the events' fingerprints still say what the nodes are
    run = load_run(path)
    text = render(run, "txt")
    assert f"node gpu-a: 2x {H200}" in text and f"warning: {PAIR}" in text
    for fmt in ("md", "json", "html", "csv", "latex"):
        render(run, fmt)
