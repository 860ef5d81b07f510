"""The views know nodes: a sweep spread over two cluster nodes shows each configuration's node in the queue and
groups the GPU panel by node; a sweep on this machine alone shows neither (its screens stay as they were)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from node_fakes import H100, H200, NODE_A, NODE_B, two_node_engine
from tui_fakes import T0, FakeEngine, at_rest, repaint_all

from specbench_tui.core.events import GpuSampled, ServerLaunching
from specbench_tui.tui.app import SpecbenchApp
from specbench_tui.tui.gpu_panel import GpuLine, GpuPanel
from specbench_tui.tui.queue_panel import QueuePanel


def make_app(engine: FakeEngine) -> SpecbenchApp:
    app = SpecbenchApp(engine, clock=lambda: T0 + 754)
    app.animation_level = "none"
    return app


async def steady(pilot) -> None:
    """Fold pending events, drop toasts, and wait until the screen is at rest (see :func:`tui_fakes.at_rest`)."""
    app = pilot.app
    while not app.panels_ready:
        await pilot.pause(0.02)
    app.drain_events()
    await at_rest(pilot)
    app.clear_notifications()
    await at_rest(pilot)
    repaint_all(app)
    await at_rest(pilot)


def queue_gpus(app: SpecbenchApp) -> dict[str, str]:
    """Configuration name -> the queue's GPUs cell."""
    queue = app.sweep_screen.query_one(QueuePanel)
    return {app.state.configs[row.key].name: queue.get_cell(row.key, "gpus").text for row in queue.rows}


def gpu_rows(app: SpecbenchApp) -> list[list[str]]:
    table = app.sweep_screen.query_one(GpuPanel).table
    return [table.texts_at(i) for i in range(table.row_count)]


async def test_queue_names_each_configurations_node_and_gpu_panel_groups_by_node(tmp_path: Path) -> None:
    engine = two_node_engine(tmp_path / "runs" / "2026-01-01_100000_demo")
    app = make_app(engine)
    async with app.run_test(size=(160, 48)) as pilot:
        await steady(pilot)
        engine.play_until_running()
        await steady(pilot)
        gpus = queue_gpus(app)
        assert gpus["ar-tp1"] == "0 @ gpu-a"
        assert gpus["dflash-b16-tp1"] == "0 @ gpu-b"
        assert gpus["ddtree-b16-tp1"] == "1 @ gpu-b"
        assert gpus["ddtree-b32-tp1"] == "1 @ gpu-a"  # running now
        rows = gpu_rows(app)
        assert [row[0] for row in rows] == ["gpu-a", "  0", "  1", "gpu-b", "  0", "  1"]
        assert rows[0][-1] == f"2× {H200}" and rows[3][-1] == f"2× {H100}"
        assert rows[2][-1] == "ddtree-b32-tp1" and rows[5][-1] == "–"  # held on gpu-a, not on gpu-b's GPU 1
        assert rows[2][1].startswith(" 97%") and rows[0][1].startswith(" 48%")  # the node row: mean utilisation
        assert "2 nodes" in str(app.sweep_screen.query_one(GpuPanel).border_subtitle)
        line = app.sweep_screen.query_one(GpuLine).render().plain
        assert "gpu-a: 0" in line and "gpu-b: 0" in line and "1 97% 118/140G ddtree-b32-tp1" in line
        engine.play()
        await steady(pilot)
        assert queue_gpus(app)["ddtree-b32-tp1"] == "1 @ gpu-a"  # kept after teardown, like the GPUs
        assert len(gpu_rows(app)) == 6


async def test_a_node_that_appears_later_keeps_the_groups_together(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    sample = {"index": 0, "name": H200, "util_pct": 10.0, "mem_used_mib": 1024.0, "mem_total_mib": 143_771.0}
    async with app.run_test(size=(160, 48)) as pilot:
        await steady(pilot)
        engine.emit(GpuSampled(samples=(sample, {**sample, "index": 1}), node=NODE_B, ts=T0))
        await steady(pilot)
        engine.emit(GpuSampled(samples=(sample,), node=NODE_A, ts=T0 + 1))
        engine.emit(GpuSampled(samples=(sample, {**sample, "index": 1}), ts=T0 + 1))
        await steady(pilot)
        assert [row[0] for row in gpu_rows(app)] == ["local", "  0", "  1", "gpu-a", "  0", "gpu-b", "  0", "  1"]
        engine.emit(GpuSampled(samples=(), node=NODE_A, ts=T0 + 2))  # a lost node: its GPUs leave the panel
        await steady(pilot)
        assert [row[0] for row in gpu_rows(app)] == ["local", "  0", "  1", "gpu-b", "  0", "  1"]


async def test_this_machine_alone_shows_no_node(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path / "run")
    app = make_app(engine)
    async with app.run_test(size=(160, 48)) as pilot:
        await steady(pilot)
        engine.play()
        await steady(pilot)
        assert all("@" not in cell for cell in queue_gpus(app).values())
        assert [row[0] for row in gpu_rows(app)] == ["0", "1"]
        assert "node" not in str(app.sweep_screen.query_one(GpuPanel).border_subtitle)


@pytest.mark.parametrize("node", ["[/crash]\x1b[31m/x", "a" * 5000, "\x00/\udcff"])
async def test_hostile_node_names_are_shown_as_text(tmp_path: Path, node: str) -> None:
    engine = FakeEngine(tmp_path / "run")
    engine.script.events[:] = [dataclasses.replace(e, node=node) if isinstance(e, (ServerLaunching, GpuSampled))
                               else e for e in engine.script.events]
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        await steady(pilot)
        engine.play()
        await steady(pilot)
        assert all(" @ " in cell for cell in queue_gpus(app).values() if cell != "–")
        assert len(gpu_rows(app)) == 3
        app.sweep_screen.query_one(GpuLine).render()


def test_two_nodes_mid_run_wide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snap_compare) -> None:
    monkeypatch.chdir(tmp_path)
    engine = two_node_engine(tmp_path / "runs" / "2026-01-01_100000_demo")

    async def run_before(pilot) -> None:
        await steady(pilot)
        engine.play_until_running()
        await steady(pilot)

    assert snap_compare(make_app(engine), terminal_size=(160, 48), run_before=run_before)


def test_node_fakes_place_every_launch() -> None:
    assert {NODE_A, NODE_B} == {"gpu-a/4f1c2b9e0d7a51c3", "gpu-b/9e8d7c6b5a4332f1"}
