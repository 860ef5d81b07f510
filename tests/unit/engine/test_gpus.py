"""GPU backends: the scripted fake box, NVML's no-driver path and its per-getter degradation, and the pool."""

from __future__ import annotations

import asyncio
import json
import time
from types import SimpleNamespace

import pynvml
import pytest

from specbench_tui.engine.gpus import (
    FakeBackend,
    GpuPool,
    NullBackend,
    NvmlBackend,
    architecture,
    cuda_version_text,
    describe_backend,
    fmt,
    open_backend,
    release_failure_message,
    samples_to_json,
    sm_name,
    wait_gpus_released,
)


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# ------------------------------------------------------------------------------------------- fake backend

def test_fake_box_is_an_idle_sm120_rtx_pro_6000_box():
    backend = FakeBackend(clock=FakeClock())
    samples = backend.sample()
    assert backend.hint is None and backend.device_count() == 8 and len(samples) == 8
    for s in samples:
        assert s.name == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
        assert s.mem_total_mib == pytest.approx(97887.0) and s.mem_used_mib < 100
        assert s.util_pct == 0.0 and s.pids == ()
        assert 0 < s.power_w < 60 and s.power_limit_w == 600.0
    box = backend.describe()
    assert {g.sm for g in box.gpus} == {"sm_120"} and box.cuda_driver_version == "13.0"


def test_memory_and_utilisation_follow_the_attached_server():
    clock = FakeClock()
    backend = FakeBackend(clock=clock, load_s=2.0)
    backend.attach("eagle-tp4", (0, 1, 2, 3), (4242,), mem_fraction=0.88)
    clock.now += 1.0  # half loaded
    half = backend.sample()
    assert 0.40 * 97887 < half[0].mem_used_mib < 0.50 * 97887
    assert half[5].mem_used_mib < 100, "a GPU outside the lease stays idle"
    clock.now += 5.0  # loaded, idle
    loaded = backend.sample()
    assert all(s.mem_used_mib == pytest.approx(0.88 * 97887 + 3, rel=1e-3) for s in loaded[:4])
    assert all(s.util_pct <= 2 for s in loaded[:4])
    assert loaded[0].pids == ((4242, pytest.approx(0.88 * 97887, rel=1e-3)),)
    backend.set_busy((0, 1, 2, 3), True)
    busy = []
    for _ in range(20):
        clock.now += 5.0
        busy.append(backend.sample())
    assert all(88 <= s[i].util_pct <= 99 for s in busy for i in range(4))
    assert all(s[i].power_w > 0.75 * 600 for s in busy for i in range(4))
    assert busy[-1][0].temp_c > busy[0][0].temp_c > loaded[0].temp_c, "a busy card heats up"
    assert all(s[6].util_pct == 0.0 for s in busy)
    backend.set_busy((0,), False)  # one index names the whole server
    assert all(s.util_pct <= 2 for s in backend.sample()[:4])
    assert backend.owners() == {4242: "eagle-tp4"}


def test_pids_holding_reflects_attached_pids_until_detached():
    clock = FakeClock()
    backend = FakeBackend(clock=clock)
    backend.attach("a", (0,), (10, 11, 12))
    backend.attach("b", (1, 2), (20,))
    assert backend.pids_holding((0,)) == {10, 11, 12}
    assert backend.pids_holding((2,)) == {20}
    assert backend.pids_holding((0, 1, 2, 3)) == {10, 11, 12, 20}
    assert backend.pids_holding((3,)) == set()
    backend.detach((0,))
    assert backend.pids_holding((0, 1)) == {20}
    assert backend.sample()[0].mem_used_mib < 100 and backend.sample()[0].pids == ()
    with pytest.raises(ValueError, match="outside"):
        backend.attach("c", (8,), (1,))


def test_release_delay_keeps_memory_held_after_detach():
    clock = FakeClock()
    backend = FakeBackend(clock=clock, release_delay_s=3.0, load_s=0.0)
    backend.attach("a", (0, 1), (7,))
    backend.detach((1,))  # any index of the lease stops the whole server
    clock.now += 2.9
    assert backend.pids_holding((0, 1)) == {7}
    assert backend.sample()[0].mem_used_mib > 80_000 and backend.sample()[0].util_pct == 0.0
    clock.now += 0.2
    assert backend.pids_holding((0, 1)) == set()
    assert backend.sample()[0].mem_used_mib < 100


async def test_wait_gpus_released_waits_out_the_release_delay():
    backend = FakeBackend(release_delay_s=0.3, load_s=0.0)
    backend.attach("a", (2, 3), (99, 100))
    backend.detach((2, 3))
    started = time.monotonic()
    leftover = await wait_gpus_released(backend, (2, 3), {99, 100}, timeout_s=30.0, poll_s=0.05)
    waited = time.monotonic() - started
    assert leftover == set() and 0.25 <= waited < 10.0  # the delay (0.3 s), not the timeout (30 s)


async def test_wait_gpus_released_times_out_with_the_leftover_pids():
    backend = FakeBackend(release_delay_s=60.0, load_s=0.0)
    backend.attach("a", (0,), (5, 6))
    backend.attach("other", (1,), (77,))
    backend.detach((0,))
    leftover = await wait_gpus_released(backend, (0, 1), {5, 6}, timeout_s=0.2, poll_s=0.05)
    assert leftover == {5, 6}, "pids of other servers are not ours to wait for"
    message = release_failure_message((0, 1), leftover, 0.2)
    assert "GPU 0,1" in message and "pid 5, 6" in message and "gpu_release_timeout_s" in message


async def test_wait_gpus_released_returns_at_once_when_nothing_holds():
    assert await wait_gpus_released(NullBackend(), (0,), {1}, timeout_s=10.0) == set()


async def test_pool_hands_out_disjoint_gpus_and_waits():
    pool = GpuPool((0, 1, 2, 3, 4, 5, 6, 7))
    a = await pool.acquire(4)
    b = await pool.acquire(4)
    assert set(a).isdisjoint(b) and set(a) | set(b) == set(range(8))
    waiter = asyncio.create_task(pool.acquire(1))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    await pool.release(b)
    assert await asyncio.wait_for(waiter, 1.0) == (4,)
    with pytest.raises(ValueError):
        await pool.acquire(9)


def test_samples_to_json_names_the_owning_config():
    backend = FakeBackend(load_s=0.0)
    backend.attach("tp1-a", (0,), (123,))
    data = samples_to_json(backend.sample(), backend.owners())
    assert data[0]["processes"][0]["pid"] == 123 and data[0]["processes"][0]["config"] == "tp1-a"
    assert data[0]["pids"] == [[123, data[0]["processes"][0]["mem_mib"]]]
    assert data[1]["pids"] == [] and data[1]["processes"] == [] and data[0]["index"] == 0
    assert json.loads(json.dumps(data)) == list(data), "JSON-safe for events"


def test_small_helpers():
    assert sm_name("12.0") == "sm_120" and sm_name("9.0") == "sm_90" and sm_name(None) is None
    assert sm_name("garbage") is None
    assert "SM120" in architecture("12.0") and architecture("9.0") == "Hopper" and architecture(None) is None
    assert cuda_version_text(12080) == "12.8" and cuda_version_text(13000) == "13.0"
    assert cuda_version_text(None) is None and cuda_version_text("x") is None
    assert fmt(None, " W") == "n/a" and fmt(451.26, " W") == "451 W"


def test_open_backend_kinds():
    assert isinstance(open_backend("fake", count=2), FakeBackend)
    assert open_backend("fake", count=2).device_count() == 2
    assert open_backend("none").device_count() == 0 and open_backend("none").hint
    with pytest.raises(ValueError, match="unknown GPU backend"):
        open_backend("cuda")


# ------------------------------------------------------------------------------------------- NVML: no driver

def _nvml_really_works() -> bool:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return False
    pynvml.nvmlShutdown()
    return True


@pytest.mark.skipif(_nvml_really_works(), reason="this machine has an NVIDIA driver")
def test_no_driver_is_detected_once_with_a_hint_and_nothing_raises():
    backend = NvmlBackend()
    assert backend.hint and "n/a" in backend.hint and "driver" in backend.hint
    assert backend.device_count() == 0
    assert backend.sample() == []
    assert backend.pids_holding((0, 1)) == set()
    assert backend.name(0) is None and backend.util_pct(3) is None and backend.memory_mib(0) == (None, None)
    box = describe_backend(backend)
    assert box.gpus == () and box.driver_version is None and box.hint == backend.hint
    auto = open_backend("auto")
    assert isinstance(auto, NullBackend) and auto.hint == backend.hint
    assert isinstance(open_backend("nvml"), NvmlBackend)


@pytest.mark.parametrize("code, words", [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no NVIDIA driver"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "not loaded"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "permission"),
    (pynvml.NVML_ERROR_UNKNOWN, "NVML could not start"),
])
def test_init_failures_become_hints(monkeypatch, code, words):
    def fail() -> None:
        raise pynvml.NVMLError(code)

    monkeypatch.setattr(pynvml, "nvmlInit", fail)
    backend = NvmlBackend()
    assert words in backend.hint and backend.device_count() == 0 and backend.sample() == []


# ------------------------------------------------------------------------------------------- NVML: getters

GETTERS = {
    # NVML function -> the GpuSample field it feeds
    "nvmlDeviceGetName": "name",
    "nvmlDeviceGetUtilizationRates": "util_pct",
    "nvmlDeviceGetMemoryInfo": "mem_used_mib",
    "nvmlDeviceGetTemperature": "temp_c",
    "nvmlDeviceGetPowerUsage": "power_w",
    "nvmlDeviceGetEnforcedPowerLimit": "power_limit_w",
    "nvmlDeviceGetClockInfo": "sm_clock_mhz",
    "nvmlDeviceGetComputeRunningProcesses": "pids",
}


@pytest.fixture
def fake_nvml(monkeypatch):
    """pynvml patched to describe two healthy SM120 GPUs, without a driver."""
    GiB = 1024 ** 3
    calls = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: 2,
        "nvmlDeviceGetHandleByIndex": lambda i: f"handle{i}",
        "nvmlDeviceGetName": lambda h: b"NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=87, memory=40),
        "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(used=80 * GiB, total=96 * GiB, free=16 * GiB),
        "nvmlDeviceGetTemperature": lambda h, sensor: 71,
        "nvmlDeviceGetPowerUsage": lambda h: 512_345,
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: 600_000,
        "nvmlDeviceGetClockInfo": lambda h, clock: 2400,
        "nvmlDeviceGetComputeRunningProcesses": lambda h: [SimpleNamespace(pid=4321, usedGpuMemory=79 * GiB),
                                                           SimpleNamespace(pid=4322, usedGpuMemory=None)],
        "nvmlDeviceGetCudaComputeCapability": lambda h: (12, 0),
        "nvmlDeviceGetUUID": lambda h: f"GPU-{h}",
        "nvmlDeviceGetPciInfo": lambda h: SimpleNamespace(busId=b"00000000:18:00.0"),
        "nvmlSystemGetDriverVersion": lambda: "580.95.05",
        "nvmlSystemGetCudaDriverVersion": lambda: 13000,
        "nvmlSystemGetNVMLVersion": lambda: "13.580.95.05",
    }
    for name, fn in calls.items():
        monkeypatch.setattr(pynvml, name, fn)
    return monkeypatch


def test_healthy_nvml_fills_every_field(fake_nvml):
    backend = NvmlBackend()
    assert backend.hint is None and backend.device_count() == 2
    s = backend.sample()[0]
    assert s.name == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert (s.util_pct, s.temp_c, s.sm_clock_mhz) == (87.0, 71.0, 2400.0)
    assert (s.mem_used_mib, s.mem_total_mib) == (80 * 1024.0, 96 * 1024.0)
    assert (s.power_w, s.power_limit_w) == (pytest.approx(512.345), 600.0)
    assert s.pids == ((4321, 79 * 1024.0), (4322, None))
    assert backend.pids_holding((0, 1)) == {4321, 4322}
    box = backend.describe()
    assert box.driver_version == "580.95.05" and box.cuda_driver_version == "13.0"
    assert box.gpus[1].sm == "sm_120" and box.gpus[1].uuid == "GPU-handle1"
    assert box.gpus[0].pci_bus_id == "00000000:18:00.0"
    backend.close()
    assert backend.sample() == [] and backend.device_count() == 0


@pytest.mark.parametrize("function, field", GETTERS.items())
def test_each_getter_degrades_to_none_on_nvml_error(fake_nvml, function, field):
    def broken(*args):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    fake_nvml.setattr(pynvml, function, broken)
    backend = NvmlBackend()
    samples = backend.sample()
    assert len(samples) == 2
    sample = samples[0]
    assert getattr(sample, field) in (None, ()), f"{function} failing must leave {field} n/a"
    if field == "mem_used_mib":
        assert sample.mem_total_mib is None
    healthy = {f for f in GETTERS.values() if f != field}
    assert all(getattr(sample, f) not in (None, ()) for f in healthy), "other figures must survive"
    if function == "nvmlDeviceGetComputeRunningProcesses":
        assert backend.pids_holding((0,)) == set()


def test_every_getter_failing_still_gives_a_row_per_gpu(fake_nvml):
    def broken(*args):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)

    for function in (*GETTERS, "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo",
                     "nvmlSystemGetDriverVersion", "nvmlSystemGetCudaDriverVersion", "nvmlSystemGetNVMLVersion"):
        fake_nvml.setattr(pynvml, function, broken)
    backend = NvmlBackend()
    samples = backend.sample()
    assert [s.index for s in samples] == [0, 1]
    assert all(v in (None, ()) for s in samples for k, v in vars(s).items() if k != "index")
    box = backend.describe()
    assert box.driver_version is None and all(g.sm is None for g in box.gpus)


def test_a_gpu_without_a_handle_and_missing_functions_are_na(fake_nvml, caplog):
    def handle(i):
        if i == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_GPU_IS_LOST)
        return "handle0"

    def missing(*args):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    fake_nvml.setattr(pynvml, "nvmlDeviceGetHandleByIndex", handle)
    fake_nvml.setattr(pynvml, "nvmlDeviceGetClockInfo", missing)
    backend = NvmlBackend()
    samples = backend.sample()
    backend.sample()
    assert samples[0].util_pct == 87.0 and samples[0].sm_clock_mhz is None
    assert samples[1].name is None and samples[1].mem_used_mib is None
    warnings = [r for r in caplog.records if "nvmlDeviceGetClockInfo" in r.getMessage()]
    assert len(warnings) == 1, "a missing function is reported once"


def test_no_gpu_behind_a_loaded_driver(fake_nvml):
    fake_nvml.setattr(pynvml, "nvmlDeviceGetCount", lambda: 0)
    backend = NvmlBackend()
    assert backend.hint and "no GPU" in backend.hint and backend.sample() == []


def test_nvml_is_imported_only_when_an_nvml_backend_is_built():
    import subprocess
    import sys

    code = ("import sys\nimport specbench_tui.engine.gpus as g, specbench_tui.engine.fingerprint, "
            "specbench_tui.core.placement\nassert 'pynvml' not in sys.modules\n"
            "g.open_backend('fake'); assert 'pynvml' not in sys.modules\n"
            "g.NvmlBackend(); assert 'pynvml' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)


def test_only_the_fake_box_is_scripted():
    """The fake box's extra methods are a declared protocol (``ScriptedBackend``), checked by type, not looked
    up by name: the orchestrator tells it what the servers do, and tells NVML or the null backend nothing."""
    from specbench_tui.engine.gpus import DescribedBackend, NvmlBackend, ScriptedBackend, describe_backend

    fake, null = FakeBackend(count=2), NullBackend("off")
    assert isinstance(fake, ScriptedBackend) and isinstance(fake, DescribedBackend)
    assert not isinstance(null, ScriptedBackend) and isinstance(null, DescribedBackend)
    assert not issubclass(NvmlBackend, ScriptedBackend) and callable(NvmlBackend.describe)
    assert [g.uuid for g in describe_backend(fake).gpus] == ["GPU-fake-0000", "GPU-fake-0001"]
    assert describe_backend(null).backend == "none" and describe_backend(null).hint == "off"
