"""The sampler thread and the per-configuration GPU summary."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from specbench_tui.engine.gpus import (
    FakeBackend,
    GpuSample,
    GpuSampler,
    GpuSummariser,
    NullBackend,
    summarise,
)


def _wait_for(predicate, timeout_s: float = 30.0) -> None:  # ends when it holds
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_sampler_polls_in_a_thread_and_stops_cleanly():
    got: list[tuple[int, str]] = []
    sampler = GpuSampler(FakeBackend(), lambda s: got.append((len(s), threading.current_thread().name)),
                         interval_s=0.02)
    sampler.start()
    sampler.start()  # idempotent
    _wait_for(lambda: len(got) >= 3)
    assert sampler.running
    started = time.monotonic()
    sampler.stop()
    # At once (milliseconds quiet), and well within stop's own 2 s wait for the thread on a loaded box.
    assert time.monotonic() - started < 1.5 and not sampler.running
    count = len(got)
    time.sleep(0.08)
    assert len(got) == count, "no callback after stop"
    assert all(n == 8 and name == "specbench-gpu-sampler" for n, name in got)
    assert len(sampler.latest) == 8
    assert not any(t.name == "specbench-gpu-sampler" for t in threading.enumerate())


def test_default_interval_is_about_twice_a_second():
    assert GpuSampler(NullBackend()).interval_s == 0.5


def test_stop_interrupts_the_wait_at_once():
    sampler = GpuSampler(FakeBackend(), interval_s=30.0)
    sampler.start()
    _wait_for(lambda: sampler.rounds >= 1)
    started = time.monotonic()
    sampler.stop()
    assert time.monotonic() - started < 1.5 and not sampler.running  # not the 30 s interval, nor stop's 2 s join


def test_a_backend_without_gpus_is_not_polled():
    calls = []
    with GpuSampler(NullBackend(), calls.append, interval_s=0.01) as sampler:
        time.sleep(0.05)
        assert not sampler.running
    assert calls == []


def test_a_failing_callback_or_backend_does_not_kill_the_thread(caplog):
    class Flaky(FakeBackend):
        def __init__(self) -> None:
            super().__init__()
            self.calls = 0

        def sample(self) -> list[GpuSample]:
            self.calls += 1
            if self.calls % 2:
                raise RuntimeError("boom")
            return super().sample()

    def bad_callback(samples):
        raise ValueError("consumer bug")

    backend = Flaky()
    with GpuSampler(backend, bad_callback, interval_s=0.01) as sampler:
        _wait_for(lambda: backend.calls >= 6)
        assert sampler.running
    assert sum("callback failed" in r.getMessage() for r in caplog.records) == 1


async def test_callback_runs_on_the_event_loop_when_given():
    loop = asyncio.get_running_loop()
    seen: list[bool] = []
    got = asyncio.Event()

    def on_samples(samples):
        seen.append(threading.current_thread() is threading.main_thread())
        got.set()

    sampler = GpuSampler(FakeBackend(), on_samples, interval_s=0.02, loop=loop)
    sampler.start()
    try:
        await asyncio.wait_for(got.wait(), 30.0)
    finally:
        sampler.stop()
    assert seen and all(seen)


def test_measured_window_summarises_the_servers_gpus():
    backend = FakeBackend(load_s=0.0)
    backend.attach("tp2", (2, 3), (50,), mem_fraction=0.9)
    backend.set_busy((2, 3), True)
    with GpuSampler(backend, interval_s=0.01) as sampler:
        sampler.open_window("cfg", (2, 3))
        _wait_for(lambda: sampler.rounds >= 5)
        summary = sampler.close_window("cfg")
    assert summary is not None and summary.gpus == (2, 3) and summary.samples >= 3
    assert summary.peak_mem_mib == pytest.approx(0.9 * 97887 + 3, rel=1e-3)
    assert summary.peak_mem_total_mib == pytest.approx(2 * (0.9 * 97887 + 3), rel=1e-3)
    assert 88 <= summary.mean_util_pct <= summary.max_util_pct <= 99
    assert summary.mean_power_w > 450
    assert summary.mean_power_total_w == pytest.approx(2 * summary.mean_power_w, rel=0.01)
    assert summary.max_temp_c is not None
    assert sampler.close_window("cfg") is None
    assert summary.to_json()["gpus"] == [2, 3]


def test_a_window_shorter_than_a_round_uses_the_latest_sample():
    sampler = GpuSampler(FakeBackend(), interval_s=60.0)
    sampler.poll_once()
    sampler.open_window("quick", (0,))
    summary = sampler.close_window("quick")
    assert summary is not None and summary.samples == 1 and summary.peak_mem_mib is not None


def _s(index, util=None, mem=None, power=None, temp=None):
    return GpuSample(index=index, util_pct=util, mem_used_mib=mem, power_w=power, temp_c=temp)


def test_summariser_figures():
    series = [
        [_s(0, 10, 1000, 100, 40), _s(1, 30, 3000, 200, 50), _s(2, 99, 9999, 999, 99)],
        [_s(0, 50, 5000, 300, 60), _s(1, 70, 2000, 400, 45), _s(2, 99, 9999, 999, 99)],
    ]
    summary = summarise(series, (0, 1))
    assert summary.samples == 2 and summary.duration_s == 1.0
    assert summary.peak_mem_mib == 5000 and summary.peak_mem_total_mib == 7000
    assert summary.mean_util_pct == 40 and summary.max_util_pct == 70
    assert summary.mean_power_w == 250 and summary.mean_power_total_w == 500
    assert summary.max_temp_c == 60


def test_summariser_with_na_figures_and_no_samples():
    empty = GpuSummariser((0,)).summary()
    assert empty.samples == 0 and empty.peak_mem_mib is None and empty.mean_util_pct is None
    summary = summarise([[_s(0), _s(1, 20, 100, 50, 30)], [_s(0, 40), _s(1)]], (0, 1))
    assert summary.mean_util_pct == 30 and summary.peak_mem_mib == 100
    assert summary.peak_mem_total_mib is None, "a total with an n/a member is unknown"
    assert summary.mean_power_total_w is None and summary.max_temp_c == 30
    assert summarise([[_s(5, 10)]], (0,)).samples == 0, "other GPUs' samples do not count"
