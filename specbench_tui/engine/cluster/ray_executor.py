"""The Ray executor: configurations placed on the GPU nodes of a Ray cluster (``[cluster] executor = "ray"``).

An :class:`~specbench_tui.engine.executor.Executor`. Per configuration, :class:`RayPlacer` picks the node where
``tp × dp`` GPUs fit tightest (:func:`specbench_tui.core.cluster_placement.pick_node`, the model the cluster
placement bench measures), reserves them with a placement group of one ``{"GPU": n}`` bundle (``STRICT_PACK``:
a TP group never spans nodes) aimed at that node, and starts a :class:`~specbench_tui.engine.cluster.node.NodeWorker`
actor in it; the GPUs Ray gave the actor are the placement. :meth:`RayExecutor.run` then streams the job's
events and measurements back from the actor (which runs the local executor on its node) into the engine's
sink: only the engine writes the run directory.

Node loss: when the node or the actor goes away (``ActorDiedError`` and Ray's other errors), the job ends
``node_lost``: never a crash and never a measurement; what arrived before is kept; the scheduler queues the
configuration again (at most ``cluster.node_retries`` times) and the placer no longer places on a node Ray
reports dead.

Teardown: the actor's server runs under the keeper (it dies with the actor's worker process, and ends its
whole tree); :meth:`RayExecutor.close` kills every actor and removes every placement group; the actors are
owned by this engine's Ray driver, so when the engine dies (even by SIGKILL) Ray ends them and with them
their keepers' trees.

A lost head (:mod:`~specbench_tui.engine.cluster.head`): the watch's verdict calls ``on_lost`` (the engine stops
the sweep at once: ``failure == "cluster"``); each configuration in flight is told to stop now and ends
``interrupted`` (never ``node_lost``, never a crash; what arrived is kept), and nothing more asks Ray's head for
anything. Every call that needs the head runs in a daemon thread with a time limit, never on the engine's loop,
so a head that vanishes mid-call cannot freeze the engine or keep its process from exiting.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import faulthandler
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import ray
from ray.util.placement_group import PlacementGroup, placement_group, placement_group_table, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from specbench_tui.core.cluster import ClusterSpec
from specbench_tui.core.cluster_placement import pick_node
from specbench_tui.core.events import Event, Notice, ServerLaunching
from specbench_tui.core.plan import Plan
from specbench_tui.core.records import MeasurementKey
from specbench_tui.engine.cluster.head_lost import mark_head_lost
from specbench_tui.engine.cluster.head import GCS_RECONNECT_ENV, GCS_RECONNECT_S, HeadWatch
from specbench_tui.engine.cluster.node import Item, NodeInfo, NodeJob, actor_class, server_lines
from specbench_tui.engine.executor import Job, JobControl, JobSink, OpenFailed, Outcome, Placement, StopJob
from specbench_tui.engine.processes import first_of

NODE_REFRESH_S = 2.0
"""How often a placement that waits for GPUs looks at the cluster's nodes again (joined, lost)."""
ACTOR_START_TIMEOUT_S = 120.0
"""How long a node may take to start the actor once its placement group is ready."""
T = TypeVar("T")

RAY_CALL_TIMEOUT_S = 60.0
"""How long one call that needs the head (list the nodes, create a placement group or an actor) may take."""
STOP_AFTER_HEAD_LOST_S = 20.0
"""Once the head is lost, how long a configuration in flight has to stop on its node and say so."""
SHUTDOWN_TIMEOUT_S = 10.0
"""How long disconnecting from the cluster may take (about 5 s without a head)."""


@dataclass
class _Node:
    node_id: str
    host: str
    gpus: int
    used: int = 0
    alive: bool = True
    held: int = 0
    """GPUs a stopped server kept past the release timeout: never placed on again."""

    @property
    def free(self) -> int:
        return self.gpus - self.held - self.used if self.alive else 0


@dataclass
class _Held:
    node: _Node
    group: PlacementGroup
    actor: Any
    info: NodeInfo
    count: int


def node_label(host: str, node_id: str) -> str:
    """A node as events name it: ``host/node-id`` (the views shorten it: :func:`specbench_tui.core.nodes.node_labels`)."""
    return f"{host}/{node_id}"


CONNECT_TIMEOUT_S = 60.0
"""How long connecting to the cluster's head may take (Ray itself retries for minutes)."""


def unreachable(address: str) -> str | None:
    """Why nothing answers at ``address`` (``host:port`` or ``ray://host:port``); None when something does, or
    for ``auto`` (Ray finds the cluster this machine joined, or says there is none, at once)."""
    if address == "auto":
        return None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=3.0):
            return None
    except (OSError, ValueError) as exc:
        return f"nothing answers on {host}:{port} ({getattr(exc, 'strerror', None) or exc})"


def _faulthandler_on_a_real_file() -> None:
    """``ray.init`` enables :mod:`faulthandler` on ``sys.stderr``, which fails where ``sys.stderr`` is not a file
    (the TUI captures it): enable it first on the process's own standard error."""
    if faulthandler.is_enabled():
        return
    try:
        if sys.stderr.fileno() >= 0:  # Textual's capture answers -1
            return
    except (OSError, ValueError, AttributeError):
        pass
    with contextlib.suppress(Exception):
        faulthandler.enable(file=2, all_threads=False)


async def _in_daemon_thread(call: Callable[[], T], timeout_s: float,
                            orphan: Callable[[T], None] | None = None) -> T:
    """``call()`` in a daemon thread, awaited at most ``timeout_s`` (a hung connect, or a call waiting on a lost
    head, must not keep the process from exiting, as a thread of the default executor would). ``orphan`` gets
    the result of a call that returned after nobody waited for it any more (cancelled, timed out)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T) -> None:
        if future.done():
            if orphan is not None and result is not None:
                orphan(result)
            return
        future.set_result(result)

    def fail(error: BaseException) -> None:
        if not future.done():
            future.set_exception(error)

    def work() -> None:
        try:
            result = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
                loop.call_soon_threadsafe(fail, exc)
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, result)

    threading.Thread(target=work, name="ray-connect", daemon=True).start()
    return await asyncio.wait_for(future, timeout_s)


class RayPlacer:
    """GPUs of the cluster's nodes, one node per configuration (a :class:`~specbench_tui.engine.executor.Placer`)."""

    def __init__(self, nodes: list[_Node], publish: Callable[[Event], None]) -> None:
        self._nodes = {node.node_id: node for node in nodes}
        self._publish = publish
        self._held: dict[tuple[str | None, tuple[int, ...]], _Held] = {}
        self._changed = asyncio.Event()
        self._closed = False
        self.lost = asyncio.Event()
        """Set when the head is lost: nothing more asks it anything (its placement groups went with it)."""

    @property
    def head_lost(self) -> bool:
        return self.lost.is_set()

    async def _ask(self, call: Callable[[], T], orphan: Callable[[T], None] | None = None) -> T:
        """``call()``, which needs the head, in a daemon thread; :class:`asyncio.TimeoutError` when it takes over
        :data:`RAY_CALL_TIMEOUT_S` or the head is lost meanwhile (a late result goes to ``orphan``)."""
        if self.head_lost:
            raise asyncio.TimeoutError("the Ray head is lost")
        answer = asyncio.ensure_future(_in_daemon_thread(call, RAY_CALL_TIMEOUT_S, orphan))
        try:
            await first_of(answer, self.lost.wait())
        finally:
            if not answer.done():
                answer.cancel()
        if answer.cancelled():
            raise asyncio.TimeoutError("the Ray head is lost")
        return answer.result()

    @property
    def indices(self) -> tuple[int, ...]:
        return tuple(range(sum(n.gpus for n in self._nodes.values() if n.alive)))

    @property
    def node_sizes(self) -> list[int]:
        """GPUs per live node, in node order (what :mod:`specbench_tui.core.cluster_placement` packs over)."""
        return [n.gpus for n in self._nodes.values() if n.alive]

    def nodes(self) -> list[dict[str, object]]:
        return [{"node": n.node_id, "label": node_label(n.host, n.node_id), "gpus": n.gpus, "used": n.used,
                 "alive": n.alive} for n in self._nodes.values()]

    def held(self, placement: Placement) -> _Held:
        return self._held[(placement.node, placement.gpus)]

    async def refresh(self) -> None:
        """Ray's view of the nodes: new ones join the pool, dead ones leave it."""
        if self.head_lost:
            return
        try:
            nodes = await self._ask(cluster_nodes)
        except asyncio.TimeoutError:
            return  # the head is slow (or lost: the watch says so): the nodes stay as they were
        for node in nodes:
            known = self._nodes.get(node.node_id)
            if known is None:
                self._nodes[node.node_id] = node
                self._publish(Notice(level="info", text=f"node {node_label(node.host, node.node_id)} joined "
                                                        f"with {node.gpus} GPUs"))
            elif known.alive and not node.alive:
                known.alive = False
                self._publish(Notice(level="warning", text=f"node {node_label(known.host, known.node_id)} is lost: "
                                                           "nothing more is placed on it"))
        alive = {n.node_id for n in nodes if n.alive}
        for node in self._nodes.values():
            if node.alive and node.node_id not in alive:
                node.alive = False

    async def acquire(self, count: int, *, config: str,
                      on_wait: Callable[[str], None] | None = None) -> Placement:
        said = False
        while True:
            nodes = [n for n in self._nodes.values() if n.alive]
            chosen = pick_node([n.free for n in nodes], count)
            if chosen is not None:
                placement = await self._reserve(nodes[chosen], count, config)
                if placement is not None:
                    return placement
            if on_wait is not None and not said:
                said = True
                widest = max((n.gpus - n.held for n in nodes), default=0)
                on_wait(f"waiting for {count} GPUs on one node" if widest >= count else
                        f"waiting for a node with {count} GPUs (the largest live node has {widest})")
            self._changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), NODE_REFRESH_S)
            await self.refresh()

    async def _reserve(self, node: _Node, count: int, config: str) -> Placement | None:
        """A placement group of ``count`` GPUs aimed at ``node`` and the actor in it; None when Ray put it
        elsewhere or could not start it (the node is looked at again)."""
        node.used += count
        group: PlacementGroup | None = None
        actor = None
        try:
            made: PlacementGroup = await self._ask(lambda: placement_group(
                [{"GPU": float(count)}], strategy="STRICT_PACK", name=f"specbench-{config}",
                _soft_target_node_id=node.node_id), orphan=lambda g: self._undo_soon(g, None))
            group = made
            await asyncio.wait_for(made.ready(), ACTOR_START_TIMEOUT_S)
            table = await self._ask(lambda: placement_group_table(made))
            where = table.get("bundles_to_node_id", {}).get(0)
            if where is not None and where != node.node_id and where in self._nodes:
                node.used -= count  # Ray chose another node: the books follow Ray
                node = self._nodes[where]
                node.used += count
            actor = await self._ask(lambda: actor_class().options(
                num_gpus=count, scheduling_strategy=PlacementGroupSchedulingStrategy(made, 0),
                name=None).remote(), orphan=lambda a: self._undo_soon(made, a))
            info: NodeInfo = await asyncio.wait_for(actor.where.remote(), ACTOR_START_TIMEOUT_S)
        except (asyncio.TimeoutError, ray.exceptions.RayError) as exc:
            node.used -= count
            if not self.head_lost:
                self._publish(Notice(level="warning", text=f"{config}: could not start on node "
                                                           f"{node_label(node.host, node.node_id)}: {exc!s:.300}"))
            self._undo_soon(group, actor)
            await self.refresh()
            return None
        except BaseException:  # cancelled while placing (skip, abort): nothing stays reserved
            node.used -= count
            self._undo_soon(group, actor)
            raise
        node.host = info.host
        placement = Placement(gpus=info.gpus, node=info.node_id)
        self._held[(placement.node, placement.gpus)] = _Held(node, made, actor, info, count)
        return placement

    async def release(self, placement: Placement, keep: tuple[int, ...] = ()) -> None:
        held = self._held.pop((placement.node, placement.gpus), None)
        if held is None:
            return
        with contextlib.suppress(asyncio.TimeoutError):
            await self._ask(lambda: _kill(held))
        held.node.used -= held.count
        held.node.held += len(set(keep) & set(placement.gpus))
        self._changed.set()

    def close(self) -> None:
        if not self.head_lost:
            for held in list(self._held.values()):
                _kill(held)
        self._held.clear()
        self._closed = True

    def _undo_soon(self, group: PlacementGroup | None, actor: Any) -> None:
        """:func:`_undo` in a daemon thread (the engine's loop never waits on the head); nothing once it is lost."""
        if group is not None and not self.head_lost:
            threading.Thread(target=_undo, args=(group, actor), name="ray-undo", daemon=True).start()


def _kill(held: _Held) -> None:
    _undo(held.group, held.actor)


def _undo(group: PlacementGroup, actor: Any) -> None:
    """End the actor (its worker, and with it the keeper's tree) and free the placement group's GPUs."""
    if actor is not None:
        with contextlib.suppress(Exception):
            ray.kill(actor)
    with contextlib.suppress(Exception):
        remove_placement_group(group)


def _gcs_address(address: str) -> str:
    """The head's GCS ``host:port`` this process is connected to (``address`` when Ray does not say)."""
    try:
        return str(ray.get_runtime_context().gcs_address or address)
    except Exception:  # noqa: BLE001 - Ray Client, or an older Ray: probe what the user named
        return address


def cluster_nodes() -> list[_Node]:
    """Every node Ray knows with at least one GPU (dead ones too, marked)."""
    nodes = []
    for raw in ray.nodes():
        gpus = int(raw.get("Resources", {}).get("GPU", 0))
        if gpus <= 0:
            continue
        nodes.append(_Node(node_id=raw["NodeID"], host=raw.get("NodeManagerHostname") or raw.get("NodeManagerAddress")
                           or "?", gpus=gpus, alive=bool(raw.get("Alive"))))
    return nodes


class RayExecutor:
    """Runs configurations on a Ray cluster's nodes (an :class:`~specbench_tui.engine.executor.Executor`)."""

    def __init__(self, plan: Plan, publish: Callable[[Event], None] | None = None, *, cluster: ClusterSpec | None = None,
                 api_key: str | None = None, port_base: int | None = None, excerpt_wait_s: float = 0.2,
                 on_lost: Callable[[str], None] | None = None) -> None:
        self.plan = plan
        self.cluster = cluster or plan.sweep.cluster
        self.publish: Callable[[Event], None] = publish or (lambda event: None)
        """Notices that belong to no job (the cluster's nodes); the orchestrator sets it to its own."""
        self.on_lost: Callable[[str], None] = on_lost or (lambda reason: None)
        """Called once when the cluster's head is lost (the engine stops the sweep: ``failure == "cluster"``)."""
        self.watch: HeadWatch | None = None
        self._api_key = api_key
        self._port_base = port_base if port_base is not None else plan.sweep.engine.port_base
        self._excerpt_wait_s = excerpt_wait_s
        self.placer: RayPlacer | None = None
        self._initialised = False
        self._fingerprinted: set[str] = set()
        """Nodes whose environment fingerprint was asked for (once per node)."""

    async def open(self) -> RayPlacer:
        """Connect to the cluster (unless this process already is) and list its GPU nodes; raises
        :class:`OpenFailed` when it cannot be reached, has no GPU node, or no node is wide enough for a
        configuration still to run."""
        address = self.cluster.address or os.environ.get("RAY_ADDRESS") or "auto"
        shown_address = address
        if not ray.is_initialized():
            hint = ("start it with `ray start --head` and join nodes with `ray start --address`, or name another "
                    "with --ray-address (docs/cluster.md)")
            problem = await asyncio.to_thread(unreachable, address)
            if problem is not None:
                raise OpenFailed([f"cannot reach the Ray cluster at {address}: {problem}; {hint}"])
            _faulthandler_on_a_real_file()
            os.environ.setdefault(GCS_RECONNECT_ENV, GCS_RECONNECT_S)  # the head watch decides, not Ray's 60 s
            try:  # never a new local Ray instance: "auto" finds the one this machine joined, or fails
                await _in_daemon_thread(lambda: ray.init(address=address, log_to_driver=False,
                                                         configure_logging=False), CONNECT_TIMEOUT_S)
            except asyncio.TimeoutError:
                raise OpenFailed([f"the Ray cluster at {address} did not answer within {CONNECT_TIMEOUT_S:g} s; "
                                  f"{hint}"]) from None
            except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ValueError...
                raise OpenFailed([f"cannot reach the Ray cluster at {address}: {str(exc).strip()[:300]}; "
                                  f"{hint}"]) from exc
            self._initialised = True
        nodes = await _in_daemon_thread(cluster_nodes, RAY_CALL_TIMEOUT_S)
        live = [n for n in nodes if n.alive]
        widest = max((n.gpus for n in live), default=0)
        needed = max((c.gpus_needed for c in self.plan.runnable()), default=0)
        if not live:
            raise OpenFailed([f"the Ray cluster at {shown_address} has no node with a GPU (`ray status` lists them)"])
        if needed > widest:
            raise OpenFailed([f"a configuration needs {needed} GPUs on one node but the widest node of the Ray "
                              f"cluster has {widest} (a TP group never spans nodes)"])
        shown = ", ".join(f"{node_label(n.host, n.node_id)} ({n.gpus} GPUs)" for n in live)
        self.publish(Notice(level="info", text=f"Ray cluster at {shown_address}: {len(live)} GPU nodes: {shown}"))
        self.placer = RayPlacer(live, lambda event: self.publish(event))
        self.watch = HeadWatch(_gcs_address(address), self._head_lost, lost_after_s=self.cluster.head_timeout_s)
        self.watch.start()
        return self.placer

    def _head_lost(self, reason: str) -> None:
        if self.placer is not None:
            self.placer.lost.set()
        self.publish(Notice(level="error", text=f"{reason}: the sweep stops; what is running is interrupted"))
        self.on_lost(reason)

    async def close(self, now: bool = False) -> None:
        if self.watch is not None:
            await self.watch.stop()
        if self.placer is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await _in_daemon_thread(self.placer.close, RAY_CALL_TIMEOUT_S)
        if self._initialised and self.watch is not None and self.watch.lost is not None:
            # no ray.shutdown: with the head gone it can take the engine's own Ray node (the head's) for dead and
            # end this process on the spot, before the run directory says how the sweep ended (nor at exit)
            atexit.unregister(ray.shutdown)
            mark_head_lost()  # the entry point ends the process with the sweep's exit code
            self._initialised = False
        if self._initialised:
            with contextlib.suppress(asyncio.TimeoutError):
                await _in_daemon_thread(ray.shutdown, SHUTDOWN_TIMEOUT_S)
            self._initialised = False

    def _node_job(self, job: Job, sink: JobSink) -> NodeJob:
        todo: dict[str, list[MeasurementKey]] = {}
        expected: dict[str, list[MeasurementKey]] = {}
        for workload in job.workloads:
            todo[workload.spec.name] = list(sink.todo(workload))
            every = sink.expected(workload)
            expected[workload.spec.name] = list(every) if not isinstance(every, int) else []
        node = job.placement.node or ""
        first_on_node = node not in self._fingerprinted
        self._fingerprinted.add(node)
        held = self.placer.held(job.placement) if self.placer is not None else None
        return NodeJob(plan=self.plan, config=job.config, attempt=job.attempt, todo=todo, expected=expected,
                       api_key=self._api_key, port_base=self._port_base, fingerprint=first_on_node,
                       node=node_label(held.info.host, node) if held is not None else node,
                       excerpt_wait_s=self._excerpt_wait_s)

    async def run(self, job: Job, sink: JobSink, control: JobControl) -> Outcome:
        assert self.placer is not None
        held = self.placer.held(job.placement)
        label = node_label(held.info.host, held.info.node_id)
        started = time.monotonic()
        stream = held.actor.run.remote(self._node_job(job, sink), job.placement.gpus, held.info.node_id)
        forward = asyncio.ensure_future(_forward_control(control, held.actor))
        consume = asyncio.ensure_future(self._consume(stream, sink, held, label))
        try:
            outcome = await self._outcome(consume, label)
        except asyncio.CancelledError:
            consume.cancel()
            with contextlib.suppress(Exception):
                held.actor.control.remote("stop_now")
            raise
        finally:
            forward.cancel()
        outcome.wall_s = outcome.wall_s or time.monotonic() - started
        return outcome

    async def _consume(self, stream: Any, sink: JobSink, held: _Held, label: str) -> Outcome | None:
        """The node's items into the engine's sink, until its outcome (None: the stream ended without one)."""
        outcome: Outcome | None = None
        async for ref in stream:
            batch: list[Item] = await ref
            for item in batch:
                if item.kind == "outcome":
                    outcome = item.value
                else:
                    self._deliver(item, sink, held, label)
        return outcome

    async def _outcome(self, consume: asyncio.Future[Outcome | None], label: str) -> Outcome:
        """How the job ended: the node's outcome; ``node_lost`` when the node or its worker went away;
        ``interrupted`` when the head went (the node was told to stop now: its own outcome, when it can still
        say it within :data:`STOP_AFTER_HEAD_LOST_S`)."""
        watch = self.watch
        try:
            if watch is not None:
                await first_of(consume, watch.lost_event.wait())
                if not consume.done():  # the head is lost: the engine told the node to stop now
                    await first_of(consume, timeout_s=STOP_AFTER_HEAD_LOST_S)
                    if not consume.done():
                        consume.cancel()
                        return self._interrupted()
            outcome = await consume
        except ray.exceptions.RayError as exc:
            if watch is not None and await watch.confirm():
                return self._interrupted()
            return self._node_lost(label, exc)
        if watch is not None and watch.lost is not None and (outcome is None or outcome.kind == "interrupted"):
            return self._interrupted()
        if outcome is None:
            return self._node_lost(label, RuntimeError("the node's stream ended without an outcome"))
        return outcome

    def _interrupted(self) -> Outcome:
        lost = self.watch.lost if self.watch is not None else None
        return Outcome("interrupted", f"interrupted: {lost or 'the Ray head is lost'}")

    def _deliver(self, item: Item, sink: JobSink, held: _Held, label: str) -> None:
        if item.kind == "event":
            event = item.value
            if isinstance(event, ServerLaunching):
                event = replace(event, node=label)
            elif lines := server_lines(event):
                sink.server_log(lines)
            sink.publish(event)
        elif item.kind == "state":
            sink.state(item.value, item.reason)
        elif item.kind == "record":
            try:
                sink.record(item.value)
            except StopJob:
                held.actor.control.remote("stop_now")
        elif item.kind == "store_failed":
            sink.store_failed(item.value)

    @staticmethod
    def _node_lost(label: str, exc: BaseException) -> Outcome:
        return Outcome("node_lost", f"node {label} lost ({type(exc).__name__}): the configuration runs again on "
                                    "another node")


async def _forward_control(control: JobControl, actor: Any) -> None:
    """The engine's signals for this job, sent to the actor as they happen."""
    sent: set[str] = set()
    paused = False
    while True:
        for name in ("skip", "stop_now", "stop_soon"):
            if name not in sent and getattr(control, name).is_set():
                sent.add(name)
                actor.control.remote(name)
        if paused == control.unpaused.is_set():
            paused = not paused
            actor.control.remote("pause" if paused else "unpause")
        await asyncio.sleep(0.05)
