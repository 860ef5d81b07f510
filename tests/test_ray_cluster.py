"""The Ray executor on a local fake cluster (tests/ray_cluster.py: a head without GPUs and three raylets with 8
fake GPUs each), the simulator as the server."""

from __future__ import annotations

import pytest
from ray_cluster import FakeCluster

pytestmark = [pytest.mark.ray]


def test_fake_cluster_is_three_8_gpu_nodes(ray_cluster: FakeCluster) -> None:
    import ray

    assert ray.cluster_resources().get("GPU") == 24.0
    assert len(ray_cluster.node_ids()) == 3
    alive = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU")]
    assert sorted(n["NodeID"] for n in alive) == sorted(ray_cluster.node_ids())
