"""The ``[cluster]`` table of a sweep: where configurations run (this machine, or the nodes of a Ray cluster).

```toml
[cluster]
executor = "ray"            # "local" (the default: this machine, no Ray) or "ray"
address = "10.0.0.1:6379"   # the head's address (``ray start --head`` prints it); "auto": the cluster this
                            # machine joined with ``ray start``; absent: Ray's own RAY_ADDRESS, else "auto"
node_retries = 2            # a configuration whose node is lost is queued again at most this many times
head_timeout_s = 10         # the head answers nothing this long: it is lost, the sweep stops (--resume continues)
```

Pure (no I/O, no Ray): :func:`read_cluster` reads the table through the sweep reader's typed accessors, so
every problem is one :class:`~specbench_tui.core.errors.SweepIssue` with the file and line, and
:func:`with_address` applies ``--ray-address``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from specbench_tui.core.errors import did_you_mean
from specbench_tui.core.tomlpos import KeyPath

if TYPE_CHECKING:  # the sweep reader reads this table (core/sweep imports this module at run time)
    from specbench_tui.core.sweep.reader import Reader

Executor = Literal["local", "ray"]
EXECUTORS: tuple[Executor, ...] = ("local", "ray")
CLUSTER_KEYS = ("executor", "address", "node_retries", "head_timeout_s")
MAX_NODE_RETRIES = 100
"""``node_retries`` is at most this (each retry re-launches a server on another node)."""
MAX_HEAD_TIMEOUT_S = 300.0
"""``head_timeout_s`` is at most this (Ray's nodes give up on a lost head after 60 s unless told otherwise)."""

_ADDRESS = re.compile(r"(?:ray://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.\-]*[A-Za-z0-9])?)"
                      r":(?P<port>[0-9]{1,5})")


@dataclass(frozen=True)
class ClusterSpec:
    """Where configurations run. ``executor = "local"`` is this machine (Ray is never imported)."""

    executor: Executor = "local"
    address: str | None = None
    """The Ray head (``host:port``, ``ray://host:port`` or ``auto``); None: Ray's default (``RAY_ADDRESS``, else
    the cluster this machine joined)."""
    node_retries: int = 2
    """How many times a configuration whose node (or actor) was lost is queued again before it fails."""
    head_timeout_s: float = 10.0
    """How long the head may answer nothing before it is lost: the sweep then stops cleanly (exit code 5)."""

    @property
    def on_ray(self) -> bool:
        return self.executor == "ray"

def address_problem(address: str) -> str | None:
    """Why ``address`` is not a Ray head address (None when it is one)."""
    if address == "auto":
        return None
    match = _ADDRESS.fullmatch(address)
    if match is None:
        return f"'{address[:80]}' is not a Ray address"
    if not 1 <= int(match["port"]) <= 65535:
        return f"port {match['port']} of '{address[:80]}' is not between 1 and 65535"
    return None


_ADDRESS_HINT = ("write address = \"HOST:6379\" (what `ray start --head` printed), \"ray://HOST:10001\" "
                 "(Ray Client) or \"auto\" (the cluster this machine joined)")


def read_cluster(r: Reader, raw: object) -> ClusterSpec:
    """The ``[cluster]`` table (absent: the local executor); issues are recorded in ``r``."""
    key: KeyPath = ("cluster",)
    t = r.table(raw, key, CLUSTER_KEYS)
    named = r.get(t, key, "executor", (str,), "local")
    executor = next((e for e in EXECUTORS if e == named), None)
    if executor is None:
        r.error((*key, "executor"), f"unknown executor '{named}'",
                did_you_mean(named, EXECUTORS) or "write executor = \"local\" or executor = \"ray\"")
        executor = "local"
    address = r.get(t, key, "address", (str,))
    if address is not None:
        problem = address_problem(address)
        if problem is not None:
            r.error((*key, "address"), problem, _ADDRESS_HINT)
            address = None
        elif executor != "ray":
            r.error((*key, "address"), "address is a Ray head, but the executor is local",
                    "add executor = \"ray\" to [cluster] (or remove address)")
    retries = r.get(t, key, "node_retries", (int,), 2)
    if not 0 <= retries <= MAX_NODE_RETRIES:
        r.error((*key, "node_retries"), f"expected 0 to {MAX_NODE_RETRIES} (MAX_NODE_RETRIES), got {retries}",
                "a configuration whose node is lost runs again on another node at most this many times")
        retries = 2
    head_timeout_s = r.positive(t, key, "head_timeout_s", (int, float), 10.0, limit=MAX_HEAD_TIMEOUT_S,
                                limit_name="MAX_HEAD_TIMEOUT_S")
    return ClusterSpec(executor=executor, address=address, node_retries=retries,
                       head_timeout_s=float(head_timeout_s))


def with_address(spec: ClusterSpec, address: str | None) -> ClusterSpec:
    """``--ray-address``: the Ray executor on that cluster (None: ``spec`` unchanged). Raises ValueError for an
    address that is not one."""
    if address is None:
        return spec
    problem = address_problem(address)
    if problem is not None:
        raise ValueError(f"--ray-address: {problem}; {_ADDRESS_HINT.replace('address = ', '')}")
    return replace(spec, executor="ray", address=address)
