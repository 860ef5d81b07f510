"""A server that dies before ready saying "Address already in use" is launched again on another port (issue 49,
point 8; docs/campaigns.md): its port, or one it binds of its own, was taken and perhaps let go before we looked,
so no stranger is seen on our port; it is never recorded as a crash on the first try."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from engine_helpers import plan_for, run_plan, write_sweep
from sweep_builder import dumps, sim_profile, sim_sweep

from specbench_tui.core.events import Notice, ServerLaunching
from specbench_tui.engine.local_executor import PORT_RETRIES


@pytest.mark.e2e
def test_a_bind_failure_before_ready_is_launched_again_on_another_port(tmp_path: Path) -> None:
    sweep = sim_sweep("bind", configs=[{"name": "ar", "algorithm": "autoregressive"}],
                      workloads=[{"name": "w", "kind": "haiku", "count": 1, "max_new_tokens": 4}])
    profile = sim_profile(failures={"port_in_use": True})  # the simulator's uvicorn fails to bind, every launch
    path = write_sweep(tmp_path, dumps(sweep).replace('"{port}"', "{port}"), dumps(profile))
    _outcome, events, _run_dir, _ = asyncio.run(run_plan(plan_for(path), tmp_path / "runs", timeout_s=240))
    launches = [e for e in events if isinstance(e, ServerLaunching)]
    again = [e for e in events if isinstance(e, Notice) and "launched again on another port" in e.text]
    assert len(again) == PORT_RETRIES, [e.text for e in events if isinstance(e, Notice)]
    assert len(launches) == PORT_RETRIES + 1 and len({e.port for e in launches}) == len(launches)
