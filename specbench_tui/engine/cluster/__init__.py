"""Running configurations on the nodes of a Ray cluster (``[cluster] executor = "ray"``).

Ray is an optional extra (``pip install 'specbench-tui[ray]'``): nothing here imports it at module level, and
nothing outside this package imports this package's Ray modules unless the sweep chose the Ray executor.
"""

from __future__ import annotations

import importlib.util

from specbench_tui.core.cluster import ClusterSpec

RAY_MISSING = ("[cluster] executor = 'ray' needs Ray, which is not installed: "
               "pip install 'specbench-tui[ray]' (the same Ray version on every node)")

RAY_NOT_WIRED = ("[cluster] executor = 'ray': this build validates the choice but does not run on Ray yet; "
                 "remove [cluster] (or set executor = 'local') to run on this machine")


def ray_installed() -> bool:
    """Whether Ray can be imported (without importing it)."""
    return importlib.util.find_spec("ray") is not None


def cluster_problems(spec: ClusterSpec) -> list[str]:
    """Pre-flight problems of the ``[cluster]`` choice (none for the local executor)."""
    if not spec.on_ray:
        return []
    if not ray_installed():
        return [RAY_MISSING]
    return [RAY_NOT_WIRED]
