"""A local fake Ray cluster for tests: a head with no GPUs and raylets that declare fake GPUs, all on this machine.

``ray_cluster`` (module scope: about 8-20 s to start on 2 shared cores) yields a :class:`FakeCluster` with three
8-GPU raylets; tests that use it carry the ``ray`` marker, which keeps them in one xdist worker (conftest.py),
so only one cluster runs at a time. Ray declares any number of GPUs; the simulator is the server, so nothing
needs a real one. Without the ``ray`` extra the tests skip (``SPECBENCH_REQUIRE_RAY=1``, set by CI, makes that a
failure: tools/setup_test_deps.sh installs it).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

NODES = 3
GPUS_PER_NODE = 8
NODES_UP_WITHIN_S = 120.0
"""How long raylets may take to register (Ray's default, 30 s, is short for raylets starting on a loaded 2-core
box); the wait ends as soon as they are all up."""


@dataclass
class FakeCluster:
    cluster: Any
    address: str
    nodes: list[Any] = field(default_factory=list)

    def node_ids(self) -> list[str]:
        return [node.node_id for node in self.nodes]

    def add_node(self, gpus: int = GPUS_PER_NODE) -> Any:
        node = self.cluster.add_node(num_cpus=1, num_gpus=gpus)
        self.cluster.wait_for_nodes(timeout=NODES_UP_WITHIN_S)
        self.nodes.append(node)
        return node

    def remove(self, node_id: str) -> None:
        node = next(n for n in self.nodes if n.node_id == node_id)
        self.cluster.remove_node(node)
        self.nodes.remove(node)



def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        if os.environ.get("SPECBENCH_REQUIRE_RAY"):
            pytest.fail("Ray is not installed: pip install -e '.[test,ray]' (tools/setup_test_deps.sh does)")
        pytest.skip("Ray is not installed: pip install -e '.[test,ray]' (tools/setup_test_deps.sh does)")
    return ray


def start_cluster(nodes: int = NODES, gpus: int = GPUS_PER_NODE, *, connect: bool = True) -> FakeCluster:
    """A head without GPUs and ``nodes`` raylets of ``gpus`` fake GPUs; ``connect``: this process is its driver
    (``ray.init``), else it only starts the processes (a second cluster, for an engine in another process)."""
    ray = require_ray()
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0})
    fake = FakeCluster(cluster=cluster, address=cluster.address)
    for _ in range(nodes):
        fake.nodes.append(cluster.add_node(num_cpus=1, num_gpus=gpus))
    if connect:
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    cluster.wait_for_nodes(timeout=NODES_UP_WITHIN_S)
    return fake


def stop_cluster(fake: FakeCluster) -> None:
    import ray

    ray.shutdown()
    fake.cluster.shutdown()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[FakeCluster]:
    started = time.monotonic()
    fake = start_cluster()

    print(f"fake Ray cluster up in {time.monotonic() - started:.1f} s at {fake.address}")
    try:
        yield fake
    finally:
        stop_cluster(fake)
