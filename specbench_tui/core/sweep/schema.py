"""The validated sweep as data: the frozen dataclasses a sweep file becomes (:class:`Sweep` and its parts),
and the scalar types flag values may have. No validation here (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specbench_tui.core.cluster import ClusterSpec
from specbench_tui.core.load import LoadSpec
from specbench_tui.core.sweep.notify_table import MetricsSpec, NotifySpec


Scalar = str | int | float | bool
ArgValue = Scalar | tuple[Scalar, ...]


@dataclass(frozen=True)
class EngineSpec:
    """How servers are launched, watched and stopped."""

    profile: str = "sglang"
    launcher: str = "simulator"
    python: str | None = None
    """Interpreter that runs the server (None: the one running specbench)."""
    command: tuple[str, ...] = ()
    """argv prefix when ``launcher = "command"``."""
    host: str = "127.0.0.1"
    port_base: int = 30000
    startup_timeout_s: float = 900.0
    stall_timeout_s: float = 120.0
    request_timeout_s: float = 900.0
    shutdown_grace_s: float = 30.0
    gpu_release_timeout_s: float = 60.0
    sim_profile: str | None = None
    """Simulator profile file (absolute), passed as SPECBENCH_SIM_PROFILE."""
    api_key_env: str | None = None
    """Name of the environment variable holding the server's API key (never the key itself)."""
    crash_signatures: tuple[tuple[str, str], ...] = ()
    """Extra (name, regex) crash signatures beside the built-in ones."""


@dataclass(frozen=True)
class ExcludeRule:
    """Removes the matrix points whose parameters all equal ``match``, recording ``reason``."""

    match: tuple[tuple[str, Scalar], ...]
    reason: str
    line: int | None = None


@dataclass(frozen=True)
class ConfigSpec:
    """One ``[[configs]]`` block: a name template, a matrix and the flags it resolves to."""

    index: int
    name: str
    algorithm: str
    matrix: tuple[tuple[str, tuple[Scalar, ...]], ...]
    args: tuple[tuple[str, ArgValue], ...]
    fork_args: tuple[tuple[str, ArgValue], ...]
    env: tuple[tuple[str, str], ...]
    exclude: tuple[ExcludeRule, ...]
    line: int | None = None


@dataclass(frozen=True)
class WorkloadSpec:
    """One ``[[workloads]]`` block."""

    name: str
    kind: str
    max_new_tokens: int
    repeats: int
    warmup: int
    temperature: float
    ignore_eos: bool
    params: tuple[tuple[str, Any], ...]
    item_count: int = 0
    """How many items one repeat sends (the prompts a file holds, counted when it was validated)."""
    load: LoadSpec | None = None
    """The load axis (``concurrency`` / ``request_rate``); None: one request at a time (concurrency 1)."""
    cache: str = "cold"
    """The cache policy of its measurements: ``cold`` (the server is flushed before each measured request at
    concurrency 1 and before each load point) or ``warm`` (:mod:`specbench_tui.core.sweep.measure`)."""
    family: str | None = None
    """The workload's name in the sweep file when its temperature list made it one workload per temperature,
    named ``<family>-t<temperature>`` (:mod:`specbench_tui.core.sweep.temperature`); None otherwise."""

    @property
    def requests(self) -> int:
        """Requests one configuration is sent for this workload: items × repeats + warm-up (with a load axis:
        every point's requests × repeats + its warm-up)."""
        if self.load is not None:
            return sum(self.load.requests_at(p) * self.repeats + self.load.warmup_requests(p, self.warmup)
                       for p in self.load.points())
        return self.item_count * self.repeats + self.warmup

    def param(self, key: str) -> Any:
        """A kind-specific parameter (defaults already applied)."""
        return dict(self.params)[key]


@dataclass(frozen=True)
class Sweep:
    """A validated sweep file."""

    path: Path
    text: str
    name: str
    description: str
    baseline: str | None
    runs_dir: Path
    gpus: tuple[int, ...] | None
    """The GPU pool; None means all visible GPUs (known only at run time)."""
    concurrent: bool
    lossless_check: bool
    engine: EngineSpec
    server_args: tuple[tuple[str, ArgValue], ...]
    server_env: tuple[tuple[str, str], ...]
    configs: tuple[ConfigSpec, ...]
    workloads: tuple[WorkloadSpec, ...]
    display_path: str | None = None
    """The file as the user named it, for messages (None: ``str(path)``)."""
    cluster: ClusterSpec = ClusterSpec()
    """``[cluster]``: where configurations run (:mod:`specbench_tui.core.cluster`)."""
    cache: str = "cold"
    """``[measure] cache``: the workloads' default cache policy."""
    measure_note: str | None = None
    """Why the policy is not the one the file implies (an engine that cannot flush runs warm)."""
    notify: NotifySpec = NotifySpec()
    """``[notify]``: who is called when the sweep needs a person (:mod:`specbench_tui.core.sweep.notify_table`)."""
    metrics: MetricsSpec = MetricsSpec()
    """``[metrics]``: the engine's Prometheus endpoint (off unless a port is given)."""

    @property
    def shown_path(self) -> str:
        """The file name to put in messages."""
        return self.display_path or str(self.path)
