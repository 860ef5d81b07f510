"""Red first, details after: a configuration reads crashed from the first event that names its crash signature.

The real orchestrator runs a simulated server that crashes with a CUDA illegal instruction after its first
request (the simulator prints SGLang's ``Scheduler hit an exception: Traceback`` block). The order of the events
is checked, never their timing: the first :class:`CrashDetected` (``complete`` false, the signature and the fatal
line) comes before the excerpt's (``complete``), the teardown's :class:`ServerStopped` and :class:`ConfigFinished`;
every view's fold of the events up to that first event already says crashed (the state the queue and the header
draw, the analysis the results table draws), and the TUI's row is red once that one event is drained (Pilot).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from engine_helpers import plan_for, run_plan, write_sweep
from tui_fakes import T0, FakeEngine

from specbench_tui.core.analysis import analyse
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    CrashDetected,
    LogLines,
    ServerLaunching,
    ServerStopped,
)
from specbench_tui.core.state import RunState
from specbench_tui.tui.app import SpecbenchApp

PROFILE = """
seed = 3
[deterministic]
enabled = true
tok_s = 400.0
accept_length = 3.0
ttft_ms = 10
[output]
eos = false
[shutdown]
poll_s = 0.05
[[crash]]
algorithm = "DDTREE"
budget = [8]
when = "after_requests"
after_requests = 1
signature = "cuda_illegal_instruction"
"""

SWEEP = """
[sweep]
name = "red-first"
gpus = 1
repeats = 3
warmup = 0
[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = {port}
startup_timeout_s = 60
shutdown_grace_s = 5
gpu_release_timeout_s = 1
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 8192
[[configs]]
name = "ddtree-b{budget}"
algorithm = "ddtree"
matrix = { budget = [8] }
[configs.args]
speculative-algorithm = "DDTREE"
speculative-draft-model-path = "z-lab/Qwen3-8B-DFlash-b16"
page-size = 1
[configs.fork_args]
speculative-ddtree-budget = "{budget}"
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci"]
max_new_tokens = 40
"""


async def test_the_crash_is_said_before_its_excerpt_and_teardown_and_every_fold_reads_crashed(tmp_path: Path) -> None:
    plan = plan_for(write_sweep(tmp_path, SWEEP, PROFILE))
    _, events, run_dir, _ = await run_plan(plan, tmp_path / "runs", timeout_s=120)
    config_id = plan.configs[0].id
    ours = [e for e in events if getattr(e, "config_id", None) == config_id]
    crashes = [i for i, e in enumerate(ours) if isinstance(e, CrashDetected)]
    assert len(crashes) == 2, [type(e).__name__ for e in ours]
    first, full = (ours[i] for i in crashes)
    assert isinstance(first, CrashDetected) and isinstance(full, CrashDetected)
    assert not first.complete and full.complete
    assert first.signature and full.signature == "cuda_illegal_instruction"
    assert first.line in first.excerpt and first.log_line_number is not None
    assert len(full.excerpt) > len(first.excerpt)  # the trailing lines came later
    stopped = next(i for i, e in enumerate(ours) if isinstance(e, ServerStopped))
    finished = next(i for i, e in enumerate(ours) if isinstance(e, ConfigFinished))
    assert crashes[0] < crashes[1] < stopped < finished
    assert cast(ConfigFinished, ours[finished]).state == ConfigState.CRASHED

    # The line that matched was published as fatal in its batch too (the batch comes after the crash).
    batch = next(e for e in ours[crashes[0]:] if isinstance(e, LogLines) and first.line in e.lines)
    assert (batch.lines.index(first.line), "fatal") in batch.marked

    # Every fold of the events up to the first crash event says crashed: the state (queue, header)...
    upto = events[: events.index(first) + 1]
    state = RunState.from_plan(plan, str(run_dir.path))
    for event in upto:
        state.apply(event)
    view = state.configs[config_id]
    assert view.state == ConfigState.CRASHED and view.signature == first.signature
    assert view.gpus, "its server still holds its GPUs until the teardown says otherwise"
    # ... and the analysis (the results table).
    analysis = analyse(plan.to_json(), [], upto)
    assert next(c for c in analysis.configs if c.id == config_id).state == "crashed"


async def test_the_row_is_red_at_the_first_crash_event(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path / "runs" / "2026-01-01_100000_demo")
    app = SpecbenchApp(engine, clock=lambda: T0 + 600)
    async with app.run_test(size=(160, 48)) as pilot:
        while not app.panels_ready:
            await pilot.pause(0.02)
        view = next(iter(app.state.configs.values()))
        cid, name = view.config_id, view.name
        engine.emit(ConfigStateChanged(config_id=cid, name=name, state=ConfigState.LAUNCHING, ts=T0))
        engine.emit(ServerLaunching(config_id=cid, name=name, argv=("x",), gpus=(0,), port=1, pid=2,
                                    log_path=str(tmp_path / "x.log"), ts=T0))
        engine.emit(ConfigStateChanged(config_id=cid, name=name, state=ConfigState.RUNNING, ts=T0 + 1))
        app.drain_events()
        await pilot.pause()
        line = next(line for line in app.view.lines if line.config_id == cid)
        assert line.word == "running"
        engine.emit(CrashDetected(config_id=cid, signature="cuda_illegal_instruction",
                                  line="RuntimeError: CUDA error: an illegal instruction was encountered",
                                  excerpt=("RuntimeError: CUDA error: an illegal instruction was encountered",),
                                  log_line_number=40, complete=False, ts=T0 + 2))
        app.drain_events()
        await pilot.pause()
        line = next(line for line in app.view.lines if line.config_id == cid)
        assert line.word == "crashed" and "cuda_illegal_instruction" in line.note
        assert app.view.crashed == 1
        assert line.holding, "the GPUs are held until the server is stopped"
