"""Where each configuration ran and on what GPUs: cluster nodes, their fingerprints and their GPU models.

A pure fold of what a run directory holds: the launches (:class:`~specbench_tui.core.events.ServerLaunching`,
whose ``node`` is None on this machine and ``host/node-id`` on a cluster node), the nodes' fingerprints
(:class:`~specbench_tui.core.events.NodeFingerprinted`, and the run's environment document: this machine's at its top,
the cluster nodes' under ``nodes``) and the measurements (each belongs to the latest launch of its configuration
that started before it, so a configuration measured on two nodes, after a node was lost, says so).

The GPU model of a launch is the name the node's fingerprint gives the GPUs it was handed. Figures measured on
different GPU models compare hardware as well as settings: :meth:`RunHardware.warnings` says so for one run (a
speedup over a baseline measured on another model, a configuration measured on two), and
:func:`compare_warnings` for two runs compared configuration by configuration.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypedDict

from specbench_tui.core.events import Event, NodeFingerprinted, ServerLaunching
from specbench_tui.core.records import Measurement

THIS_MACHINE = "local"
"""How this machine (node None) is named next to cluster nodes."""
SHOWN = 4
"""Configurations named in one warning; the rest are counted."""


def node_labels(nodes: Iterable[str | None]) -> dict[str | None, str]:
    """A short, unambiguous label per node: the host of ``host/node-id``, ``host/<first 8 of the id>`` where
    several nodes share a host (raylets of one machine), the whole name where even that is ambiguous;
    this machine (None) is :data:`THIS_MACHINE`."""
    unique = list(dict.fromkeys(nodes))
    cluster = [node for node in unique if node is not None]
    hosts = Counter(node.partition("/")[0] for node in cluster)

    def short(node: str) -> str:
        host, slash, ident = node.partition("/")
        if not (host and slash):
            return node
        return host if hosts[host] == 1 else f"{host}/{ident[:8]}"

    labels = {node: short(node) for node in cluster}
    counts = Counter(labels.values())
    out: dict[str | None, str] = {node: label if counts[label] == 1 and label != THIS_MACHINE else node
                                  for node, label in labels.items()}
    if None in unique:
        out[None] = THIS_MACHINE
    return out


class NodeTotals(TypedDict):
    """:func:`node_totals`: one node's GPUs as one sample-like dict."""

    gpus: int
    util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    temp_c: float | None
    power_w: float | None
    power_limit_w: float | None
    models: dict[str, int]


def node_totals(samples: Sequence[Mapping[str, object]]) -> NodeTotals:
    """One node's GPUs as one sample-like dict: mean utilisation, memory and power summed, hottest temperature
    (a figure is None when no GPU gave it)."""
    def values(key: str) -> list[float]:
        found = (s.get(key) for s in samples)
        return [float(v) for v in found if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]

    def total(key: str) -> float | None:
        found = values(key)
        return sum(found) if found else None

    utils, temps = values("util_pct"), values("temp_c")
    return {"gpus": len(samples), "util_pct": sum(utils) / len(utils) if utils else None,
            "mem_used_mib": total("mem_used_mib"), "mem_total_mib": total("mem_total_mib"),
            "temp_c": max(temps) if temps else None, "power_w": total("power_w"),
            "power_limit_w": total("power_limit_w"),
            "models": dict(Counter(str(s["name"]) for s in samples if isinstance(s.get("name"), str) and s["name"]))}


def describe_gpus(fingerprint: Mapping[str, object] | None) -> str:
    """A fingerprint's GPUs on one line: ``2x NVIDIA H200 (driver 570.86)``, ``no GPU``, ``no fingerprint``."""
    gpus = fingerprint.get("gpus") if isinstance(fingerprint, Mapping) else None
    if not isinstance(gpus, Mapping):
        return "no fingerprint"
    names = gpus.get("names")
    text = ", ".join(f"{count}x {name}" for name, count in names.items()) \
        if isinstance(names, Mapping) and names else "no GPU"
    driver = gpus.get("driver_version")
    return text + (f" (driver {driver})" if driver else "")


def gpu_models(fingerprint: Mapping[str, object] | None) -> tuple[dict[int, str], tuple[str, ...]]:
    """GPU index -> model name from a fingerprint's ``gpus.devices``, and the distinct models of ``gpus.names``."""
    gpus = fingerprint.get("gpus") if isinstance(fingerprint, Mapping) else None
    if not isinstance(gpus, Mapping):
        return {}, ()
    devices = gpus.get("devices")
    by_index = {d["index"]: str(d["name"]) for d in devices if isinstance(d, Mapping)
                and isinstance(d.get("index"), int) and isinstance(d.get("name"), str) and d["name"]} \
        if isinstance(devices, list) else {}
    names = gpus.get("names")
    models = tuple(str(n) for n in names if n and n != "unknown") if isinstance(names, Mapping) else ()
    return by_index, models


@dataclass(frozen=True)
class Launch:
    """One server launch of a configuration: where, on which GPUs, with what GPU models."""

    node: str | None
    gpus: tuple[int, ...]
    ts: float
    models: tuple[str, ...] = ()
    """The distinct GPU models of ``gpus`` (empty: unknown, or no GPU)."""


@dataclass(frozen=True)
class ConfigHardware:
    """Where one configuration was measured: the launches its measurements came from (the latest launch when
    none measured anything)."""

    config_id: str
    launches: tuple[Launch, ...]

    @property
    def nodes(self) -> tuple[str | None, ...]:
        return tuple(dict.fromkeys(launch.node for launch in self.launches))

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(model for launch in self.launches for model in launch.models))

    @property
    def model(self) -> str | None:
        """``NVIDIA H200``, ``A + B`` when measured on several, None when unknown."""
        return " + ".join(self.models) or None


@dataclass(frozen=True)
class RunHardware:
    """Nodes, fingerprints and each configuration's launches of one run (see the module docstring)."""

    configs: Mapping[str, ConfigHardware] = field(default_factory=dict)
    fingerprints: Mapping[str | None, Mapping[str, object]] = field(default_factory=dict)
    """Node -> fingerprint; None: this machine (the environment document itself)."""

    @property
    def on_nodes(self) -> bool:
        """Whether anything ran on a cluster node (not this machine)."""
        return any(node is not None for config in self.configs.values() for node in config.nodes)

    @cached_property
    def nodes(self) -> list[str | None]:
        """Every node a configuration ran on or a fingerprint names, this machine first."""
        seen = {node: None for config in self.configs.values() for node in config.nodes}
        seen.update({node: None for node in self.fingerprints if node is not None})
        return sorted(seen, key=lambda n: (n is not None, n or ""))

    @cached_property
    def labels(self) -> dict[str | None, str]:
        """Each node's short label (:func:`node_labels`), worked out once."""
        return node_labels(self.nodes)

    def where(self, config_id: str) -> str:
        """``gpu-a 0,1`` (``gpu-a 0,1; gpu-b 2,3`` when measured on two launches), "" when it never ran."""
        config = self.configs.get(config_id)
        if config is None:
            return ""
        labels = self.labels
        parts = [f"{labels.get(launch.node, THIS_MACHINE)} {','.join(map(str, launch.gpus)) or 'CPU'}"
                 for launch in config.launches]
        return "; ".join(dict.fromkeys(parts))

    def model(self, config_id: str) -> str | None:
        config = self.configs.get(config_id)
        return config.model if config is not None else None

    @property
    def mixed_models(self) -> bool:
        """Whether the configurations were measured on more than one GPU model."""
        return len({model for config in self.configs.values() for model in config.models}) > 1

    def node_lines(self) -> list[str]:
        """One line per node: ``gpu-a: 8x NVIDIA H200 (driver 570.86)``; nodes without fingerprint say so."""
        labels = self.labels
        lines = []
        for node in self.nodes:
            lines.append(f"{labels[node]}: {describe_gpus(self.fingerprints.get(node))}"
                         + (f" [{node}]" if node and labels[node] != node else ""))
        return lines

    def warnings(self, names: Mapping[str, str], baselines: Mapping[str, str] | None = None) -> list[str]:
        """What a reader of this run's figures must know about its hardware: configurations measured on
        different GPU models, a speedup over a baseline measured on another model, a configuration measured on
        two. ``names``: config id -> name; ``baselines``: config id -> its baseline's config id."""
        out: list[str] = []
        by_model: dict[str, list[str]] = {}
        for config_id, config in self.configs.items():
            for model in config.models:
                by_model.setdefault(model, []).append(names.get(config_id, config_id))
        if len(by_model) > 1:
            out.append("configurations were measured on different GPU models ("
                       + "; ".join(f"{model}: {_some(configs)}" for model, configs in by_model.items())
                       + "): figures across them compare hardware as well as settings")
        for config_id, config in self.configs.items():
            if len(config.models) > 1:
                out.append(f"{names.get(config_id, config_id)} was measured on {len(config.models)} GPU models "
                           f"({self.where(config_id)}: {config.model}): its figures mix them")
        pairs = []
        for config_id, baseline_id in (baselines or {}).items():
            mine, theirs = self.model(config_id), self.model(baseline_id)
            if mine and theirs and mine != theirs and config_id != baseline_id:
                pairs.append(f"{names.get(config_id, config_id)} ({mine}) over {names.get(baseline_id, baseline_id)}"
                             f" ({theirs})")
        if pairs:
            out.append("speedups over a baseline measured on another GPU model: " + _some(pairs))
        return out


def _some(items: list[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def fingerprints(env: Mapping[str, object] | None, events: Iterable[Event]) -> dict[str | None, Mapping[str, object]]:
    """Node -> fingerprint: this machine's (the environment document) under None, the cluster nodes' from its
    ``nodes`` and from :class:`NodeFingerprinted` events (the latest wins)."""
    out: dict[str | None, Mapping[str, object]] = {}
    if isinstance(env, Mapping):
        if isinstance(env.get("gpus"), Mapping):
            out[None] = env
        nodes = env.get("nodes")
        if isinstance(nodes, Mapping):
            out.update({str(node): doc for node, doc in nodes.items() if isinstance(doc, Mapping)})
    for event in events:
        if isinstance(event, NodeFingerprinted) and isinstance(event.fingerprint, Mapping):
            out[event.node] = event.fingerprint
    return out


def _models(fingerprint: Mapping[str, object] | None, gpus: tuple[int, ...]) -> tuple[str, ...]:
    if not gpus:
        return ()
    by_index, models = gpu_models(fingerprint)
    if all(index in by_index for index in gpus):
        return tuple(dict.fromkeys(by_index[index] for index in gpus))
    return models if len(models) == 1 else ()


def run_hardware(events: Iterable[Event], measurements: Iterable[Measurement],
                 env: Mapping[str, object] | None) -> RunHardware:
    """The hardware of a run from its events, measurements and environment document (see the module docstring)."""
    events = list(events)
    prints = fingerprints(env, events)
    launches: dict[str, list[Launch]] = {}
    for event in events:
        if isinstance(event, ServerLaunching):
            node = event.node if isinstance(event.node, str) else None
            gpus = tuple(event.gpus)
            launches.setdefault(event.config_id, []).append(
                Launch(node, gpus, event.ts, _models(prints.get(node), gpus)))
    used: dict[str, set[int]] = {}
    for measurement in measurements:
        mine = launches.get(measurement.config_id)
        if not mine:
            continue
        started = measurement.started_at
        index = len(mine) - 1
        if isinstance(started, (int, float)):
            index = max((i for i, launch in enumerate(mine) if launch.ts <= started), default=0)
        used.setdefault(measurement.config_id, set()).add(index)
    configs = {}
    for config_id, mine in launches.items():
        chosen = sorted(used.get(config_id) or {len(mine) - 1})
        configs[config_id] = ConfigHardware(config_id, tuple(mine[i] for i in chosen))
    return RunHardware(configs, prints)


def compare_warnings(a: RunHardware, b: RunHardware, matched: Mapping[str, str]) -> list[str]:
    """Configurations compared across two runs (``matched``: config id -> name) but measured on different GPU
    models, grouped by the pair of models: ``A measured on X and B on Y (3 configurations: ...)``."""
    pairs: dict[tuple[str, str], list[str]] = {}
    for config_id, name in matched.items():
        model_a, model_b = a.model(config_id), b.model(config_id)
        if model_a and model_b and model_a != model_b:
            pairs.setdefault((model_a, model_b), []).append(name)
    return [f"different GPU models: A measured on {model_a} and B on {model_b} ({len(names)} configuration"
            f"{'s' if len(names) != 1 else ''}: {_some(names)}); the changes compare hardware as well as settings"
            for (model_a, model_b), names in pairs.items()]
