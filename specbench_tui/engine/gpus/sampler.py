"""The sampler thread: polls a backend about twice a second and hands the samples to the event loop."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from specbench_tui.engine.gpus.backend import GpuBackend, GpuSample
from specbench_tui.engine.gpus.summary import GpuSummariser, GpuSummary

log = logging.getLogger(__name__)


SampleCallback = Callable[[list[GpuSample]], None]


class GpuSampler:
    """Polls a backend in a daemon thread every ``interval_s`` and hands each sample list to ``callback``.

    NVML calls block for milliseconds, so they never run on the event loop. With ``loop`` given, the
    callback is scheduled on that loop (``call_soon_threadsafe``); otherwise it runs in the sampler thread.
    A backend with no device is not polled at all. Measured windows (:meth:`open_window` /
    :meth:`close_window`) summarise the samples taken while they were open. ``node``: the cluster node the
    backend is on (a remote executor's sampler); its samples and summaries carry it.
    """

    def __init__(self, backend: GpuBackend, callback: SampleCallback | None = None, *, interval_s: float = 0.5,
                 loop: asyncio.AbstractEventLoop | None = None, clock: Callable[[], float] = time.monotonic,
                 node: str | None = None) -> None:
        self.backend = backend
        self.node = node
        self.callback = callback
        self.interval_s = interval_s
        self.loop = loop
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._windows: dict[str, GpuSummariser] = {}
        self._latest: list[GpuSample] = []
        self._latest_at: float | None = None
        self._callback_failed = False
        self.rounds = 0
        """How many times the backend was sampled."""

    @property
    def latest(self) -> list[GpuSample]:
        with self._lock:
            return list(self._latest)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running or self.backend.device_count() == 0:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="specbench-gpu-sampler", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop polling and wait (up to ``timeout_s``) for the thread to end."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def __enter__(self) -> GpuSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def poll_once(self) -> list[GpuSample]:
        """Sample now, feed the open windows and the callback; what the thread does each round."""
        try:
            samples = self.backend.sample()
        except Exception:  # a backend must not kill the thread (logged); NVML getters do not raise
            log.exception("GPU backend failed to sample")
            samples = []
        if self.node is not None:
            samples = [replace(sample, node=self.node) for sample in samples]
        at = self._clock()
        with self._lock:
            self._latest = samples
            self._latest_at = at
            for window in self._windows.values():
                window.add(samples, at)
            self.rounds += 1
        if samples and self.callback is not None:
            self._deliver(samples)
        return samples

    def _deliver(self, samples: list[GpuSample]) -> None:
        assert self.callback is not None
        try:
            if self.loop is not None:
                if self.loop.is_closed():
                    return
                self.loop.call_soon_threadsafe(self.callback, samples)
            else:
                self.callback(samples)
        except RuntimeError:  # the loop closed between the check and the call
            return
        except Exception:  # a faulty consumer is reported once (logged), polling goes on
            if not self._callback_failed:
                self._callback_failed = True
                log.exception("GPU sample callback failed")

    def _run(self) -> None:
        while not self._stop.is_set():
            started = self._clock()
            self.poll_once()
            self._stop.wait(max(0.0, self.interval_s - (self._clock() - started)))

    def open_window(self, key: str, indices: Iterable[int]) -> None:
        """Start summarising ``indices`` under ``key`` (e.g. the configuration id); reopening restarts it."""
        with self._lock:
            self._windows[key] = GpuSummariser(indices, self.node)

    def close_window(self, key: str) -> GpuSummary | None:
        """The summary of the window ``key`` (None if it was never opened). A window too short to see a
        sampling round is summarised from the latest sample."""
        with self._lock:
            window = self._windows.pop(key, None)
            if window is None:
                return None
            if window.instants == 0 and self._latest:
                window.add(self._latest, self._latest_at)
            return window.summary()
