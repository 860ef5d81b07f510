"""Test-session set-up shared by every test module."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import sweep_builder
from cpu_share import CPU_HUNGRY, CpuShare, lock_path
from engine_helpers import SimulatorSweep
from hypothesis import HealthCheck, settings

# Hypothesis times every example with the wall clock (200 ms by default) and checks how fast it generates data:
# on a loaded 2-core CI box a stall in one example reads as DeadlineExceeded (then Flaky, as the replay is quick)
# in tests whose logic is fine. The tests bound time themselves where time is the point.
settings.register_profile("specbench", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("specbench")

pytest_plugins = ["ray_cluster"]  # the ``ray_cluster`` fixture: a local fake Ray cluster (tests/ray_cluster.py)

# Port and GPU leases are machine-wide (engine/leases.py): a test session keeps its own lease directory, so
# that test runs side by side (and a user's real sweeps) neither wait for each other's simulated GPUs nor see
# each other's ports. Subprocess engines inherit it through the environment. Tests that need two sweeps to
# contend share this one directory.
os.environ.setdefault("SPECBENCH_LEASE_DIR", tempfile.mkdtemp(prefix="specbench-test-leases-"))


@pytest.fixture(autouse=True)
def _own_lease_dir(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each test its own lease directory: an engine of an earlier test still shutting down (or of a test in
    another xdist worker) never holds this test's simulated GPUs or ports, so no "GPUs taken elsewhere"
    notice reaches a test that counts notices. Two sweeps within one test still contend in it."""
    monkeypatch.setenv("SPECBENCH_LEASE_DIR", str(tmp_path_factory.mktemp("leases")))


@pytest.fixture
def sweep_file(tmp_path: Path) -> Callable[..., Path]:
    """Write a sweep built with :mod:`sweep_builder` (and its simulator profile) into this test's folder:
    ``sweep_file(sim_sweep(...), sim_profile(...))`` returns the sweep's path."""

    def write_into(sweep: Mapping[str, Any], profile: Mapping[str, Any] | None = None, **options: Any) -> Path:
        return sweep_builder.write(tmp_path, sweep, profile, **options)

    return write_into


@pytest.fixture
def simulator_sweep(tmp_path: Path) -> SimulatorSweep:
    """Run a simulator sweep in this process, as the engine benches do (one helper for both:
    tests/sim_sweeps.py): ``simulator_sweep.run_sync(text, profile, stop_when=crashed)`` writes
    the sweep into this test's folder, runs it, and returns the outcome, every event and the run directory."""
    return SimulatorSweep(tmp_path)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Real engines (llama.cpp, vLLM on the CPU) take whole cores while they load and serve: under pytest-xdist
    their tests run one after another in one worker (``--dist loadgroup``), the rest of the suite beside them."""
    for item in items:
        if item.get_closest_marker("llamacpp") or item.get_closest_marker("vllm"):
            item.add_marker(pytest.mark.xdist_group("real-engines"))
        elif item.get_closest_marker("ray"):  # one fake Ray cluster at a time, started once per module
            item.add_marker(pytest.mark.xdist_group("ray-cluster"))


_CPU = CpuShare(lock_path())
"""This worker's share of the cores (tests/cpu_share.py): timing tests never run beside a real server."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture of the test (a real server's module fixture included) is set up."""
    if item.get_closest_marker("timing"):
        _CPU.hold(fcntl.LOCK_EX)
    elif any(item.get_closest_marker(name) for name in CPU_HUNGRY):
        _CPU.hold(fcntl.LOCK_SH, item.nodeid.split("::")[0])
    else:
        _CPU.hold(None)  # the previous module's real server was torn down with its last test


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    if _CPU.mode == fcntl.LOCK_EX:
        _CPU.hold(None)


def pytest_sessionfinish(session: pytest.Session) -> None:
    _CPU.release()
    if not hasattr(session.config, "workerinput"):  # the main process, after every worker has ended
        shutil.rmtree(_CPU.path.parent, ignore_errors=True)
