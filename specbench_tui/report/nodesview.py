"""Which node measured what, in a report: the nodes' lines, a node column for the results tables, the hardware
warnings and the JSON section (all from :mod:`specbench_tui.core.nodes`).

A run on this machine alone, on one GPU model, adds nothing: its report stays as it was.
"""

from __future__ import annotations

from collections.abc import Mapping

from specbench_tui.report.load import LoadedRun
from specbench_tui.report.tables import clean_text


def hardware_warnings(run: LoadedRun) -> list[str]:
    """Configurations measured on different GPU models, speedups over a baseline on another model, a
    configuration measured on two (see :meth:`~specbench_tui.core.nodes.RunHardware.warnings`)."""
    configs = run.analysis.configs
    names = {c.id: c.name for c in configs}
    ids = {c.name: c.id for c in configs}
    baselines = {c.id: ids[c.baseline] for c in configs if c.baseline and c.baseline in ids}
    return [clean_text(w) for w in run.hardware.warnings(names, baselines)]


def node_column(run: LoadedRun) -> dict[str, str] | None:
    """Config id -> ``gpu-a 0,1`` when anything ran on a cluster node; None on this machine alone."""
    hardware = run.hardware
    if not hardware.on_nodes:
        return None
    return {config_id: clean_text(hardware.where(config_id), 120) for config_id in hardware.configs}


def node_lines(run: LoadedRun) -> list[str]:
    """``gpu-a: 8x NVIDIA H200 (driver 570.86) [gpu-a/4f1c...]`` per node, when anything ran on one."""
    return [clean_text(line, 200) for line in run.hardware.node_lines()] if run.hardware.on_nodes else []


def hardware_json(run: LoadedRun) -> dict[str, object] | None:
    """``{"nodes": {node: {"label", "gpus", "driver_version"}}, "configs": {id: {"launches": [{"node",
    "gpus", "models"}], "gpu_model"}}, "warnings": [...]}``; None when the run has nothing of it to say."""
    hardware = run.hardware
    warnings = hardware_warnings(run)
    if not (hardware.on_nodes or warnings):
        return None
    labels = hardware.labels
    nodes: dict[str, object] = {}
    for node in hardware.nodes:
        fingerprint = hardware.fingerprints.get(node) or {}
        found = fingerprint.get("gpus")
        gpus: Mapping[str, object] = found if isinstance(found, Mapping) else {}
        nodes[node or "local"] = {"label": labels[node], "gpus": gpus.get("names"),
                                  "driver_version": gpus.get("driver_version")}
    configs = {config_id: {"launches": [{"node": launch.node, "gpus": list(launch.gpus), "models": list(launch.models)}
                                        for launch in config.launches], "gpu_model": config.model}
               for config_id, config in hardware.configs.items()}
    return {"nodes": nodes, "configs": configs, "warnings": warnings}
