"""GPU telemetry and the GPU pool: NVML, a scripted fake box, a sampler thread and per-configuration summaries.

One module each: :mod:`.backend` (samples, the :class:`GpuBackend` protocol, and :class:`ScriptedBackend` for a
backend told what the servers do), :mod:`.nvml`, :mod:`.fake`, :mod:`.sampler`, :mod:`.summary`, :mod:`.pool`.

How the orchestrator uses this module::

    backend = open_backend("auto")        # "auto" | "nvml" | "fake" (demo/simulator) | "none"
    if backend.hint:                      # no driver / no GPU: say it once; everything else still works
        publish(Notice(level="info", text=backend.hint))
    pool = GpuPool(sweep.gpus if sweep.gpus is not None else tuple(range(backend.device_count())))

    sampler = GpuSampler(backend, lambda samples: publish(GpuSampled(samples=samples_to_json(samples, owners))),
                         loop=asyncio.get_running_loop())   # polled in a thread every 0.5 s, delivered on the loop
    sampler.start()
    for config in placement.order_configs(plan.runnable(), pool.indices, sweep.concurrent):  # strictly in order;
        # when sweep.concurrent, what follows acquire runs in a task per configuration
        gpus = await pool.acquire(config.gpus_needed)
        # launch with CUDA_VISIBLE_DEVICES=",".join(map(str, gpus)) and CUDA_DEVICE_ORDER=PCI_BUS_ID
        pid = await server.start()
        if isinstance(backend, ScriptedBackend):         # the fake box: memory and utilisation follow the server
            backend.attach(config.name, gpus, (pid,))
        sampler.open_window(config.id, gpus)              # the measured window starts
        backend.set_busy(gpus, True) ... (False)          # fake only: while requests are in flight
        summary = sampler.close_window(config.id)         # GpuSummary; ConfigFinished(gpu_summary=summary.to_json())
        ...stop the server; server.pids_seen is the tree snapshot taken before killing (as SGLang's tests do)
        if isinstance(backend, ScriptedBackend):
            backend.detach(gpus)
        leftover = await wait_gpus_released(backend, gpus, server.pids_seen, engine.gpu_release_timeout_s)
        if leftover:
            fail(release_failure_message(gpus, leftover, engine.gpu_release_timeout_s))
        await pool.release(gpus)
    sampler.stop()

``owners`` maps pid -> configuration name (``FakeBackend.owners()`` for the fake, or the orchestrator's own
map of server pids) so each GPU process shows which configuration holds it.

GPU indices are NVML's, which follow PCI bus order; CUDA's default order ("fastest first") can differ, so
servers must be launched with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` for ``CUDA_VISIBLE_DEVICES`` to name the same
cards. NVML is imported lazily inside :class:`NvmlBackend`, so nothing here costs anything until it is used.
NVML reports host pids: inside a container with its own pid namespace they do not match the server's pids,
and :func:`wait_gpus_released` then returns at once (SGLang's own helper has the same limit).
"""


from __future__ import annotations

from typing import Unpack

from specbench_tui.engine.gpus.backend import (
    MIB,
    NA,
    BackendKind,
    BoxInfo,
    DescribedBackend,
    GpuBackend,
    GpuInfo,
    GpuSample,
    NullBackend,
    ScriptedBackend,
    architecture,
    fmt,
    samples_to_json,
    sm_name,
)
from specbench_tui.engine.gpus.fake import FakeBackend, FakeOptions
from specbench_tui.engine.gpus.nvml import NvmlBackend, cuda_version_text
from specbench_tui.engine.gpus.pool import GpuPool, release_failure_message, wait_gpus_released
from specbench_tui.engine.gpus.sampler import GpuSampler, SampleCallback
from specbench_tui.engine.gpus.summary import GpuSummariser, GpuSummary, summarise

__all__ = [
    "MIB", "NA", "BackendKind", "BoxInfo", "DescribedBackend", "FakeBackend", "GpuBackend", "GpuInfo", "GpuPool",
    "GpuSample", "GpuSampler", "GpuSummariser", "GpuSummary", "NullBackend", "NvmlBackend", "SampleCallback",
    "ScriptedBackend", "architecture", "cuda_version_text", "describe_backend", "fmt", "open_backend",
    "release_failure_message", "samples_to_json", "sm_name", "summarise", "wait_gpus_released",
]


def open_backend(kind: BackendKind = "auto", **fake_options: Unpack[FakeOptions]) -> NvmlBackend | FakeBackend | NullBackend:
    """The backend for ``kind``.

    "auto": NVML when it sees at least one GPU, else a :class:`NullBackend` carrying NVML's hint;
    "nvml": NVML even when it sees nothing (its ``hint`` says why); "fake": the scripted box, with
    ``fake_options`` passed to :class:`FakeBackend`; "none": telemetry off.
    """
    if kind == "fake":
        return FakeBackend(**fake_options)
    if kind == "none":
        return NullBackend("GPU telemetry is off")
    if kind not in ("auto", "nvml"):
        raise ValueError(f"unknown GPU backend {kind!r}: expected auto, nvml, fake or none")
    nvml = NvmlBackend()
    if kind == "auto" and (nvml.hint is not None or nvml.device_count() == 0):
        nvml.close()
        return NullBackend(nvml.hint or "no GPU found: GPU figures are n/a")
    return nvml


def describe_backend(backend: GpuBackend) -> BoxInfo:
    """The backend's static facts (an empty description for backends without ``describe``)."""
    if isinstance(backend, DescribedBackend):
        return backend.describe()
    return BoxInfo(backend=type(backend).__name__, hint=backend.hint)
