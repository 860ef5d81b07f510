"""Energy per token (issue 48): NVML's total-energy counter of every GPU a configuration holds, read over each
measured window, against the simulator's fake GPU box, whose power follows load (busy: 87 % of the 600 W limit),
so the truth is known: joules per output token and per accepted token and the energy speedup against the
matched baseline equal it within 2 %; a backend without the counter says "no energy counter"."""

from __future__ import annotations

import asyncio
import json

import pytest

from engine_helpers import SimulatorSweep, plan_for, write_sweep

from specbench_tui.application.session import make_backend
from specbench_tui.core.energy import NO_COUNTER, EnergyWindow, accepted_tokens, energy_cells
from specbench_tui.core.events import WorkloadFinished
from specbench_tui.core.records import STATUS_OK, Measurement
from specbench_tui.engine.gpus import FakeBackend, NullBackend
from specbench_tui.engine.gpus.energy import EnergyMeter
from specbench_tui.rundir.store import RunDir

PROFILE = """
seed = 3
[deterministic]
enabled = true
tok_s = 300.0
accept_length = 3.0
ttft_ms = 5
[output]
eos = false
[shutdown]
poll_s = 0.05
"""

SWEEP = """
[sweep]
name = "joules"
gpus = 4
repeats = 2
warmup = 0
baseline = "ar"
[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = {port}
startup_timeout_s = 60
shutdown_grace_s = 2
gpu_release_timeout_s = 1
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 8192
[[configs]]
name = "ar"
algorithm = "autoregressive"
[[configs]]
name = "dflash-tp2"
algorithm = "dflash"
[configs.args]
tp-size = 2
speculative-algorithm = "DFLASH"
speculative-draft-model-path = "z-lab/Qwen3-8B-DFlash-b16"
speculative-num-draft-tokens = 8
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci", "quicksort"]
max_new_tokens = 96
"""

Ran = tuple[list[WorkloadFinished], list[Measurement], dict[str, str]]

BUSY_W = FakeBackend.NOMINAL_POWER["busy"] * 600.0


def test_the_fake_counter_integrates_power_from_load_exactly() -> None:
    now = [100.0]
    box = FakeBackend(count=2, load_s=2.0, clock=lambda: now[0])
    start = box.energy_mj((0, 1))
    box.attach("a", (0,), (1,))
    now[0] += 3.0  # 2 s loading, then 1 s attached
    box.set_busy((0,), True)
    now[0] += 10.0
    end = box.energy_mj((0, 1))
    assert None not in (*start.values(), *end.values())
    start_j = {i: float(v or 0.0) / 1000 for i, v in start.items()}
    end_j = {i: float(v or 0.0) / 1000 for i, v in end.items()}
    nominal = {k: v * 600.0 for k, v in FakeBackend.NOMINAL_POWER.items()}
    assert end_j[0] - start_j[0] == pytest.approx(2 * nominal["loading"] + nominal["attached"]
                                                       + 10 * nominal["busy"])
    assert end_j[1] - start_j[1] == pytest.approx(13 * nominal["idle"])


def test_a_backend_without_the_counter_says_so() -> None:
    window = EnergyMeter(NullBackend(), (0, 1)).finish()
    assert window.source is None and window.note == NO_COUNTER and window.total_j is None
    cell = energy_cells([("c", "cfg", "code", window)],
                        [Measurement("c", "cfg", "code", "i", 1, STATUS_OK, completion_tokens=10)], {})[0]
    assert (cell.basis, cell.j_per_output_token) == (NO_COUNTER, None)
    assert EnergyWindow.from_json(window.to_json()) == EnergyWindow.from_json(json.loads(json.dumps(window.to_json())))


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    tmp_path = tmp_path_factory.mktemp("energy")
    plan = plan_for(write_sweep(tmp_path, SWEEP, PROFILE))
    run = SimulatorSweep(tmp_path).run_sync(plan, backend=make_backend(plan), timeout_s=240)
    names = {c.id: c.name for c in plan.configs}
    return run.of_type(WorkloadFinished), run.run_dir.read_measurements(), names


def test_each_window_holds_the_energy_of_every_gpu_the_configuration_holds(ran: Ran) -> None:
    finished, _, names = ran
    by_name = {names[e.config_id]: e for e in finished}
    for name, gpus in (("ar", 1), ("dflash-tp2", 2)):
        window = EnergyWindow.from_json(by_name[name].energy or {})
        assert window is not None and window.source == "nvml_total_energy" and len(window.gpus) == gpus
        for joules in window.joules:  # busy over the whole window: the fake's model, within 2 %
            assert joules / window.window_s == pytest.approx(BUSY_W, rel=0.02)
    assert json.loads(json.dumps(by_name["ar"].to_json()))["energy"]["gpus"] == list(
        EnergyWindow.from_json(by_name["ar"].energy or {}).gpus)  # type: ignore[union-attr]


def test_joules_per_token_and_the_energy_speedup_equal_the_truth(ran: Ran) -> None:
    finished, measurements, names = ran
    windows = [(e.config_id, names[e.config_id], e.workload, EnergyWindow.from_json(e.energy or {}))
               for e in finished]
    cells = {c.config: c for c in energy_cells([w for w in windows if w[3] is not None],  # type: ignore[misc]
                                               measurements, {"dflash-tp2": "ar", "ar": None})}
    truth: dict[str, float] = {}
    for e in finished:
        window = EnergyWindow.from_json(e.energy or {})
        assert window is not None
        ok = [m for m in measurements if m.config_id == e.config_id and m.status == STATUS_OK]
        tokens = sum(m.completion_tokens or 0 for m in ok)
        truth[names[e.config_id]] = BUSY_W * len(window.gpus) * window.window_s / tokens
        cell = cells[names[e.config_id]]
        assert cell.j_per_output_token == pytest.approx(truth[names[e.config_id]], rel=0.02)
        accepted = sum(accepted_tokens(m) or 0 for m in ok)
        if names[e.config_id] == "dflash-tp2":
            assert accepted > 0
            assert cell.j_per_output_token is not None
            assert cell.j_per_accepted_token == pytest.approx(cell.j_per_output_token * tokens / accepted)
    assert cells["dflash-tp2"].energy_speedup == pytest.approx(truth["ar"] / truth["dflash-tp2"], rel=0.02)
    assert cells["ar"].energy_speedup is None and cells["ar"].basis == "gross"


FORMATS = ("txt", "md", "csv", "json", "html")


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The simulator run of the energy sweep, reported in every format."""
    from specbench_tui.report.formats import render
    from specbench_tui.report.load import load_run

    tmp_path = tmp_path_factory.mktemp("energy-report")
    plan = plan_for(write_sweep(tmp_path, SWEEP, PROFILE))
    ran = SimulatorSweep(tmp_path).run_sync(plan, backend=make_backend(plan), timeout_s=240)
    run = load_run(ran.run_dir.path)
    cells = {c.config: c for c in run.energy}
    assert cells["dflash-tp2"].energy_speedup is not None and cells["ar"].j_per_output_token
    return {fmt: render(run, fmt) for fmt in FORMATS} | {
        "dflash": f"{cells['dflash-tp2'].j_per_output_token:.4g}", "speedup": f"{cells['dflash-tp2'].energy_speedup:.2f}x"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_report_format_has_the_energy_figures(reported: dict[str, str], fmt: str) -> None:
    text = reported[fmt]
    if fmt == "csv":
        import csv
        import io

        rows = {r["config"]: r for r in csv.DictReader(io.StringIO(text))}
        assert float(rows["dflash-tp2"]["j_per_output_token"]) == pytest.approx(float(reported["dflash"]), rel=1e-3)
        assert rows["ar"]["energy_basis"] == "gross" and rows["ar"]["energy_speedup"] == ""
        return
    if fmt == "json":
        cells = {c["config"]: c for c in json.loads(text)["energy"]}
        assert f"{cells['dflash-tp2']['j_per_output_token']:.4g}" == reported["dflash"]
        assert cells["dflash-tp2"]["j_per_accepted_token"] > cells["dflash-tp2"]["j_per_output_token"]
        return
    assert "Energy per token" in text and "J/accepted token" in text
    if fmt == "html":  # a table of its own, not only the plain-text report inside the page
        assert "<th><span class=\"w\">J/accepted</span> <span class=\"w\">token</span></th>" in text
    assert reported["dflash"] in text and reported["speedup"] in text
    assert "idle power is not subtracted" in text


def test_a_run_without_the_counter_reports_no_energy_counter() -> None:
    from specbench_tui.report.energyview import energy_table

    window = EnergyMeter(NullBackend(), (0,)).finish()
    cells = energy_cells([("c", "cfg", "code", window)], [], {})
    table = energy_table(cells)
    assert table is not None and table.rows[0][3] == NO_COUNTER and table.rows[0][5] == "n/a"
    assert any(note.startswith(NO_COUNTER) for note in table.notes)
    assert energy_table([]) is None  # a run recorded before energy was measured: no table


def test_the_idle_power_is_measured_before_the_sweep_and_subtracted_where_stated(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    """Through the run host (as every host runs a sweep): the fake box idles at 6.5 % of its 600 W limit before
    anything launches; each window's joules less that power of its GPUs over its length is the truth."""
    from specbench_tui.application.host import OwnedRun
    from specbench_tui.core.events import Event, Notice

    tmp_path = tmp_path_factory.mktemp("idle")
    plan = plan_for(write_sweep(tmp_path, SWEEP, PROFILE))
    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    owned = OwnedRun(plan, run_dir)
    events: list[Event] = []

    async def main() -> None:
        orchestrator = owned.orchestrator()
        orchestrator.subscribe(events.append)
        await asyncio.wait_for(owned.run(orchestrator), 240)

    asyncio.run(main())
    owned.release()
    idle_w = FakeBackend.NOMINAL_POWER["idle"] * 600.0
    stated = [e.text for e in events if isinstance(e, Notice) and e.text.startswith("energy: idle power")]
    assert len(stated) == 1 and f"GPU 0 {idle_w:.1f} W" in stated[0] and "net of it" in stated[0], stated
    measurements = run_dir.read_measurements()
    names = {c.id: c.name for c in plan.configs}
    windows = [(e.config_id, names[e.config_id], e.workload, EnergyWindow.from_json(e.energy or {}))
               for e in events if isinstance(e, WorkloadFinished)]
    cells = {c.config: c for c in energy_cells([w for w in windows if w[3] is not None],  # type: ignore[misc]
                                               measurements, {})}
    for config_id, name, _, window in windows:
        assert window is not None and window.idle_w == pytest.approx(idle_w * len(window.gpus), rel=0.02)
        tokens = sum(m.completion_tokens or 0 for m in measurements if m.config_id == config_id and m.status == STATUS_OK)
        truth = (BUSY_W - idle_w) * len(window.gpus) * window.window_s / tokens
        assert cells[name].basis == "net of idle"
        assert cells[name].j_per_output_token == pytest.approx(truth, rel=0.02)
