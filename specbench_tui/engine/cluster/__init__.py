"""Running configurations on the nodes of a Ray cluster (``[cluster] executor = "ray"``).

Ray is an optional extra (``pip install 'specbench-tui[ray]'``): nothing here imports it at module level, and
nothing outside this package imports this package's Ray modules unless the sweep chose the Ray executor.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import TYPE_CHECKING

from specbench_tui.core.cluster import ClusterSpec
from specbench_tui.core.events import Event
from specbench_tui.core.plan import Plan
from specbench_tui.engine.cluster.head_lost import end_process, mark_head_lost

if TYPE_CHECKING:
    from specbench_tui.core.sweep.schema import Sweep
    from specbench_tui.engine.executor import Executor, Placer

RAY_MISSING = ("[cluster] executor = 'ray' needs Ray, which is not installed: "
               "pip install 'specbench-tui[ray]' (the same Ray version on every node)")

__all__ = ["end_process", "mark_head_lost"]


def ray_installed() -> bool:
    """Whether Ray can be imported (without importing it)."""
    return importlib.util.find_spec("ray") is not None


def cluster_problems(spec: ClusterSpec) -> list[str]:
    """Pre-flight problems of the ``[cluster]`` choice (none for the local executor)."""
    if not spec.on_ray:
        return []
    if not ray_installed():
        return [RAY_MISSING]
    return []


def cluster_workload_problems(plan: Plan) -> list[str]:
    """Workloads the Ray executor cannot run yet: those with a load axis (their adaptive search lives in the
    engine, between every point)."""
    return [f"workload '{w.name}' has a load axis (concurrency / request_rate), which the Ray executor does not "
            "run yet: run it with the local executor (remove [cluster] or set executor = 'local')"
            for w in plan.workloads if w.load is not None]


def cluster_executor(plan: Plan, publish: Callable[[Event], None], api_key: str | None, port_base: int,
                     excerpt_wait_s: float, on_lost: Callable[[str], None]) -> Executor | None:
    """The executor ``[cluster]`` chose, when it is not this machine's (None: the local executor). Ray is imported
    here, and only here, when the sweep chose it. ``on_lost`` is called once if the cluster's head is lost."""
    if not plan.sweep.cluster.on_ray:
        return None
    from specbench_tui.engine.cluster.ray_executor import RayExecutor

    return RayExecutor(plan, publish, api_key=api_key, port_base=port_base, excerpt_wait_s=excerpt_wait_s,
                       on_lost=on_lost)


def placement_note(sweep: Sweep, placer: Placer) -> str | None:
    """The notice at the start that says how configurations are placed (None: one at a time on this machine)."""
    sizes = getattr(placer, "node_sizes", None)
    if sweep.cluster.on_ray and sizes is not None:
        nodes = f"{len(sizes)} GPU node{'s' if len(sizes) != 1 else ''} ({', '.join(str(n) for n in sizes)} GPUs)"
        if not sweep.concurrent:
            return (f"one configuration at a time on the Ray cluster's {nodes}: set [sweep] concurrent = true "
                    "to use every node at once")
        return (f"concurrent: configurations run side by side, each on one node of the Ray cluster's {nodes}; "
                "neighbours on a node can disturb each other's measurements (recorded in every result)")
    if sweep.concurrent:
        return (f"concurrent: configurations run side by side on disjoint GPUs of the pool {list(placer.indices)}; "
                "neighbours can disturb each other's measurements (recorded in every result)")
    return None
