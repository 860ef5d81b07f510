"""The scripted demo run (tests/tui_fakes.py) moved onto two cluster nodes with different GPU models.

``gpu-a`` has two NVIDIA H200, ``gpu-b`` two NVIDIA H100 80GB HBM3. Each configuration's launch names its node (as
the Ray executor's ``ServerLaunching.node`` does), each node's GPUs are sampled apart (``GpuSampled.node``), and
both nodes publish their fingerprint (``NodeFingerprinted``) after the sweep starts.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from tui_fakes import FakeEngine

from specbench_tui.core.events import Event, GpuSampled, NodeFingerprinted, ServerLaunching, SweepStarted
from specbench_tui.core.plan import Plan

NODE_A = "gpu-a/4f1c2b9e0d7a51c3"
NODE_B = "gpu-b/9e8d7c6b5a4332f1"
H200 = "NVIDIA H200"
H100 = "NVIDIA H100 80GB HBM3"
MODELS = {NODE_A: H200, NODE_B: H100}
PLACES = {"ar-tp1": (NODE_A, 0), "dflash-b16-tp1": (NODE_B, 0), "ddtree-b8-tp1": (NODE_A, 0),
          "ddtree-b16-tp1": (NODE_B, 1), "ddtree-b32-tp1": (NODE_A, 1)}
"""Configuration -> (node, GPU) it runs on."""
_BUSY = {"util_pct": 97.0, "mem_used_mib": 121_344.0, "temp_c": 64.0, "power_w": 612.5}
_IDLE = {"util_pct": 0.0, "mem_used_mib": 512.0, "temp_c": 31.0, "power_w": 74.0, "pids": []}


def fingerprint(model: str, host: str, driver: str = "570.86.15") -> dict[str, Any]:
    """A node's ``env.json``-shaped fingerprint (trimmed) with two GPUs of ``model``."""
    return {"schema": 1, "host": {"name": host}, "gpus": {
        "backend": "nvml", "count": 2, "names": {model: 2}, "driver_version": driver, "cuda_driver_version": "12.8",
        "devices": [{"index": i, "name": model, "compute_capability": "9.0", "sm": "sm_90"} for i in (0, 1)]}}


def on_two_nodes(events: list[Event], plan: Plan) -> list[Event]:
    """``events`` with every launch placed per :data:`PLACES` and every GPU sample taken on both nodes."""
    names = {c.id: c.name for c in plan.configs}
    current: tuple[str, int] | None = None
    out: list[Event] = []
    for event in events:
        if isinstance(event, SweepStarted):
            out.append(event)
            for node, model in MODELS.items():
                out.append(NodeFingerprinted(node=node, fingerprint=fingerprint(model, node.split("/")[0]),
                                             ts=event.ts))
        elif isinstance(event, ServerLaunching):
            node, gpu = current = PLACES[names[event.config_id]]
            out.append(dataclasses.replace(event, node=node, gpus=(gpu,)))
        elif isinstance(event, GpuSampled):
            busy = any(s.get("util_pct") for s in event.samples)
            for node, model in MODELS.items():
                samples = tuple({**sample, "name": model, **(_BUSY if busy and current == (node, sample["index"])
                                                              else _IDLE)} for sample in event.samples)
                out.append(GpuSampled(samples=samples, node=node, ts=event.ts))
        else:
            out.append(event)
    return out


def two_node_engine(run_dir: Path) -> FakeEngine:
    """The scripted FakeEngine with its events moved onto :data:`NODE_A` and :data:`NODE_B`."""
    engine = FakeEngine(run_dir)
    script = engine.script
    cutoff_event = script.events[script.running_cutoff - 1]
    script.events[:] = on_two_nodes(script.events, engine.plan)
    script.running_cutoff = max(i for i, e in enumerate(script.events) if e.ts <= cutoff_event.ts) + 1
    return engine
