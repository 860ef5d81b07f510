"""SGLang's process model: scheduler children (one per TP rank, under a DP controller when dp > 1) and a
detokenizer child, started with multiprocessing's *spawn* method like SGLang's, that die with their parent.

The children are light. A scheduler prints its rank's start-up lines (weights, KV cache, CUDA graph capture
with a ``\\r`` progress bar on rank 0), reports ready over a pipe, then waits for orders: ``crash`` (print
``Scheduler hit an exception: Traceback ...`` and send SIGQUIT to the server's main process, as SGLang's
``run_scheduler_process`` does), ``watchdog`` (the watchdog-timeout variant) or ``stop``. Token generation
itself is modelled in the main process (``engine.py``); only the wire and the logs are visible anyway.

Every child calls ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (SGLang's ``kill_itself_when_parent_died``) and also
polls ``getppid()``, so SIGKILL of the main process leaves no orphans. :func:`kill_process_tree` mirrors
SGLang's: SIGKILL every descendant, reap them, then SIGKILL the calling process itself (exit status -9).
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, NotRequired, TypedDict, Unpack

from specbench_tui.sim import logs

PR_SET_NAME = 15
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class MemoryPlan:
    """Per-GPU memory figures of the start-up log and ``/server_info`` (GB)."""

    total_gb: float
    fraction: float
    weights_gb: float
    draft_gb: float
    pool_gb: float
    max_total_num_tokens: int
    graph_gb: float = 1.44

    @property
    def fits_weights(self) -> bool:
        return self.total_gb * self.fraction >= self.weights_gb + self.draft_gb

    @property
    def fits_pool(self) -> bool:
        return self.pool_gb >= 0.5 and self.max_total_num_tokens > 0


class StartupCrash(TypedDict):
    """A crash in start-up: the stage it hits (``load``, ``kv`` or ``graph``), its signature and the TP ranks
    that crash (``"all"`` or a list)."""

    stage: str
    signature: str
    ranks: str | list[int]


class ChildSettings(TypedDict):
    """What the main process tells every child (:func:`child_config`)."""

    main_pid: int
    dp_size: int
    tp_size: int
    base_gpu_id: int
    style: str
    log_level: str
    startup: dict[str, float]
    """The profile's ``[startup]`` seconds (``init_s``, ``weight_load_s``, ``kv_alloc_s``, ``cuda_graph_s``, ...)."""
    time_scale: float
    extra_delay_s: float
    architecture: str
    draft_architecture: str
    spec_on: bool
    decode_graph: bool
    draft_tokens_per_req: int
    cuda_graph_max_bs: int
    max_total_num_tokens: int
    chunked_prefill_size: int
    max_prefill_tokens: int
    max_running_requests: int
    context_len: int
    watchdog_timeout: float
    startup_crash: StartupCrash | None
    startup_hang: bool


class ChildConfig(ChildSettings):
    """A child's configuration: the settings, the memory plan as a dict, and (added per child as it is started)
    its parent and its place."""

    memory: dict[str, float]
    parent_pid: NotRequired[int]
    dp_rank: NotRequired[int | None]
    tp_rank: NotRequired[int]
    gpu_id: NotRequired[int]


def memory_plan(model: dict[str, Any], mem_fraction_static: float | None, tp_size: int, spec_on: bool,
                max_total_tokens: int | None = None) -> MemoryPlan:
    """Weights and KV pool per GPU, from the profile's model figures and ``--mem-fraction-static``."""
    total = float(model["gpu_memory_gb"])
    fraction = mem_fraction_static or float(model["default_mem_fraction_static"])
    weights = float(model["weights_gb"]) / tp_size
    draft = float(model["draft_weights_gb"]) / tp_size if spec_on else 0.0
    pool = total * fraction - weights - draft
    per_token = float(model["kv_bytes_per_token"]) / tp_size
    tokens = max(0, int(pool * 1024**3 / per_token))
    if max_total_tokens:
        tokens = min(tokens, max_total_tokens)
    return MemoryPlan(total, fraction, weights, draft, pool, tokens)


def kill_itself_when_parent_died(expected_parent: int) -> None:
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)`` on Linux, then exit at once if the parent is already gone."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass
    if os.getppid() != expected_parent:
        os._exit(1)


def set_process_title(title: str) -> None:
    """What SGLang's ``setproctitle.setproctitle`` does on Linux, with the standard library only: the title
    overwrites the process's own argv memory (the area ``/proc/self/stat`` names by ``arg_start``/``arg_end``),
    padded with NULs, so ``/proc/PID/cmdline`` (what ``ps``, ``pgrep -f`` and psutil read) shows the title and
    not ``python -c "from multiprocessing.spawn import spawn_main; ..."``; and the kernel's 15-byte name
    (``/proc/PID/comm``) is set with ``prctl(PR_SET_NAME)``. Python keeps its own copies of the arguments, so
    nothing reads the old text again. Elsewhere (or if ``/proc`` is unreadable) it does nothing."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None).prctl(PR_SET_NAME, ctypes.c_char_p(title.encode()[:15]), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    try:
        with open("/proc/self/stat", "rb") as fh:
            stat = fh.read()
        fields = stat[stat.rfind(b")") + 2:].split()  # fields[0] is field 3 (state) of proc(5)
        arg_start, arg_end = int(fields[48 - 3]), int(fields[49 - 3])
    except (OSError, ValueError, IndexError):
        return
    size = arg_end - arg_start
    if size <= 1:
        return
    data = title.encode()[:size - 1]
    ctypes.memmove(arg_start, data + b"\0" * (size - len(data)), size)


def _sleep(seconds: float, parent: int) -> None:
    """Sleep, but leave as soon as the parent dies (the PDEATHSIG fallback)."""
    end = time.monotonic() + max(0.0, seconds)
    while True:
        if os.getppid() != parent:
            os._exit(1)
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.2))


def capture_sizes(max_bs: int) -> list[int]:
    sizes = [bs for bs in (1, 2, 4, 8, 12) if bs <= max_bs]
    sizes += list(range(16, max_bs + 1, 8))
    return sizes or [1]


def _progress_bar(label_bs: list[int], avail: float, seconds: float, parent: int) -> None:
    """A tqdm-like ``Capturing batches`` bar drawn with ``\\r`` on stderr."""
    n = len(label_bs)
    start = time.monotonic()
    drawn = -1.0
    for i, bs in enumerate([*reversed(label_bs), label_bs[0]]):
        done = min(i, n)
        elapsed = time.monotonic() - start
        if 0 < done < n and elapsed - drawn < 0.1:  # tqdm's mininterval
            _sleep(seconds / n, parent)
            continue
        drawn = elapsed
        pct = int(100 * done / n)
        bar = ("█" * (10 * done // n)).ljust(10)
        rate = f"{done / elapsed:.2f}it/s" if elapsed > 0 and done else "?it/s"
        end = "\n" if done == n else ""
        logs.write_raw(f"\rCapturing batches (bs={bs} avail_mem={avail:.2f} GB): {pct:3d}%|{bar}| {done}/{n} "
                       f"[00:{int(elapsed):02d}<00:00, {rate}]{end}")
        if done < n:
            _sleep(seconds / n, parent)


def _crash(log: logs.Logger, cfg: ChildConfig, traceback: str, signature: str, parent: int) -> None:
    """Log SGLang's scheduler exception, SIGQUIT the server's main process, then wait to be killed."""
    tail = logs.exception_tail(signature, cfg["gpu_id"], cfg["memory"]["total_gb"])
    log.error(f"Scheduler hit an exception: {traceback}{tail}")
    try:
        os.kill(cfg["main_pid"], signal.SIGQUIT)
    except ProcessLookupError:
        pass
    if os.environ.get("SGLANG_KILLPG_ON_SCHEDULER_EXCEPTION", "").lower() in ("1", "true"):
        os.killpg(os.getpgrp(), signal.SIGKILL)
    _sleep(10.0, parent)
    os._exit(1)


def scheduler_main(conn: Connection, cfg: ChildConfig) -> None:
    """A scheduler rank: start-up log lines, ``ready`` over ``conn``, then wait for orders."""
    parent = cfg["parent_pid"]
    kill_itself_when_parent_died(parent)
    prefix = logs.scheduler_prefix(cfg["dp_rank"], cfg["tp_rank"], cfg["tp_size"], cfg["style"])
    set_process_title("sglang::scheduler" + prefix.replace(" ", "_"))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's business
    log = logs.Logger(prefix, cfg["log_level"])
    crash = cfg.get("startup_crash")  # {"stage": ..., "signature": ..., "ranks": "all" | [int]} or None
    if crash and crash["ranks"] != "all" and cfg["tp_rank"] not in crash["ranks"]:
        crash = None
    stage = crash["stage"] if crash else None

    def crash_at(name: str) -> None:
        if crash and stage == name:
            _crash(log, cfg, logs.startup_traceback(name), crash["signature"], parent)

    log.info("Init parallel begin.")  # 0.5.23's distributed/bootstrap.py
    t0 = time.monotonic()
    _sleep(cfg["startup"]["init_s"] * cfg["time_scale"], parent)
    log.info(f"Init parallel ends. elapsed={time.monotonic() - t0:.2f} s")
    avail = _load_weights(log, cfg, crash_at)
    avail = _allocate_kv(log, cfg, avail, crash_at)
    avail = _capture_graphs(log, cfg, avail, crash_at)
    _log_pool_limits(log, cfg, avail)
    conn.send(("ready", {"pid": os.getpid(), "tp_rank": cfg["tp_rank"], "dp_rank": cfg["dp_rank"]}))
    _serve_orders(conn, log, cfg)


def _load_weights(log: logs.Logger, cfg: ChildConfig, crash_at: Callable[[str], None]) -> float:
    """``Load weight begin/end`` for the target (and the draft model with speculation); a start-up hang stays
    inside the first; return the memory left (GB)."""
    parent, st, mem, scale = cfg["parent_pid"], cfg["startup"], cfg["memory"], cfg["time_scale"]
    avail = mem["total_gb"] - 0.5
    log.info(f"Load weight begin. avail mem={avail:.2f} GB")
    if cfg.get("startup_hang"):
        while True:
            _sleep(3600, parent)
    t0 = time.monotonic()
    _sleep(st["weight_load_s"] * scale + cfg["extra_delay_s"], parent)
    crash_at("load")
    avail -= mem["weights_gb"]
    log.info(f"Load weight end. elapsed={time.monotonic() - t0:.2f} s, type={cfg['architecture']}, "
             f"avail mem={avail:.2f} GB, mem usage={mem['weights_gb']:.2f} GB.")
    if cfg["spec_on"] and mem["draft_gb"] > 0:
        log.info(f"Load weight begin. avail mem={avail:.2f} GB")
        t0 = time.monotonic()
        _sleep(st["draft_load_s"] * scale, parent)
        avail -= mem["draft_gb"]
        log.info(f"Load weight end. elapsed={time.monotonic() - t0:.2f} s, type={cfg['draft_architecture']}, "
                 f"avail mem={avail:.2f} GB, mem usage={mem['draft_gb']:.2f} GB.")
    return float(avail)


def _allocate_kv(log: logs.Logger, cfg: ChildConfig, avail: float, crash_at: Callable[[str], None]) -> float:
    """``KV Cache is allocated`` and ``Memory pool end``; return the memory left (GB)."""
    mem = cfg["memory"]
    _sleep(cfg["startup"]["kv_alloc_s"] * cfg["time_scale"], cfg["parent_pid"])
    crash_at("kv")
    half = max(mem["pool_gb"], 0.0) / 2
    log.info(f"KV Cache is allocated. #tokens: {cfg['max_total_num_tokens']}, K size: {half:.2f} GB, V size: {half:.2f} GB")
    avail -= mem["pool_gb"]
    log.info(f"Memory pool end. avail mem={avail:.2f} GB")
    return avail


def _capture_graphs(log: logs.Logger, cfg: ChildConfig, avail: float, crash_at: Callable[[str], None]) -> float:
    """The decode CUDA-graph capture (a ``\\r`` progress bar on rank 0); return the memory left (GB)."""
    if not cfg["decode_graph"]:
        crash_at("graph")
        return avail
    parent, seconds, mem = cfg["parent_pid"], cfg["startup"]["cuda_graph_s"] * cfg["time_scale"], cfg["memory"]
    # 0.5.23's model_runner_components/cuda_graph_setup.py capture_decode_graph: the begin line names the role and
    # phase (a speculative target captures its verify graphs) and the end line the captured batch sizes.
    name = "target verify" if cfg["spec_on"] else "target decode"
    per_req = cfg["draft_tokens_per_req"] if cfg["spec_on"] else 1
    log.info(f"Capture {name} CUDA graph begin. backend=full, num_tokens_per_req={per_req}, avail mem={avail:.2f} GB")
    sizes = capture_sizes(cfg["cuda_graph_max_bs"])
    t0 = time.monotonic()
    if cfg["tp_rank"] == 0:
        _progress_bar(sizes, avail, seconds, parent)
    else:
        _sleep(seconds, parent)
    crash_at("graph")
    avail -= mem["graph_gb"]
    log.info(f"Capture {name} CUDA graph end. bs={sizes}, elapsed={time.monotonic() - t0:.2f} s, "
             f"mem usage={mem['graph_gb']:.2f} GB, avail mem={avail:.2f} GB.")
    return avail


def _log_pool_limits(log: logs.Logger, cfg: ChildConfig, avail: float) -> None:
    """The small-pool warning (``TpModelWorker``) and the scheduler's ``max_total_num_tokens=...`` line."""
    if cfg["max_total_num_tokens"] < cfg["context_len"]:  # TpModelWorker: not an error, long requests will be refused
        log.warning(f"KV pool holds {cfg['max_total_num_tokens']} tokens, fewer than --context-length "
                    f"{cfg['context_len']}. One full-length request cannot fit, so long requests will be refused or "
                    "truncated at serving time. Lower --context-length, raise --mem-fraction-static, or free memory "
                    "taken before the pool is sized.")
    log.info(f"max_total_num_tokens={cfg['max_total_num_tokens']}, chunked_prefill_size={cfg['chunked_prefill_size']}, "
             f"max_prefill_tokens={cfg['max_prefill_tokens']}, max_running_requests={cfg['max_running_requests']}, "
             f"context_len={cfg['context_len']}, available_gpu_mem={avail:.2f} GB")


def _serve_orders(conn: Connection, log: logs.Logger, cfg: ChildConfig) -> None:
    """Carry out the main process's orders: ``crash``, ``watchdog``, ``stop``."""
    parent = cfg["parent_pid"]
    for order in _orders(conn, parent):
        if order[0] == "crash" and (order[3] == "all" or cfg["tp_rank"] in order[3]):
            _crash(log, cfg, logs.forward_traceback(order[2]), order[1], parent)
        elif order[0] == "watchdog":
            log.error(f"Scheduler watchdog timeout (self.watchdog_timeout={cfg['watchdog_timeout']}, self.soft=False)")
            try:
                os.kill(cfg["main_pid"], signal.SIGQUIT)
            except ProcessLookupError:
                pass
            _sleep(10.0, parent)
            os._exit(1)
        elif order[0] == "stop":
            os._exit(0)


def _orders(conn: Connection, parent: int) -> Iterator[tuple[Any, ...]]:
    """Orders from the parent, one at a time; exits the child when orphaned (1) or its pipe closes (0)."""
    while True:
        if os.getppid() != parent:
            os._exit(1)
        try:
            if not conn.poll(0.2):
                continue
            order = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        yield order


def detokenizer_main(conn: Connection, cfg: ChildConfig) -> None:
    """The detokenizer: holds its place in the process tree until stopped or orphaned."""
    parent = cfg["parent_pid"]
    kill_itself_when_parent_died(parent)
    set_process_title("sglang::detokenizer")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for order in _orders(conn, parent):
        if order[0] == "stop":
            os._exit(0)


def data_parallel_controller_main(conn: Connection, cfg: ChildConfig) -> None:
    """With dp > 1: start ``dp_size x tp_size`` schedulers, report ready, relay orders to them."""
    parent = cfg["parent_pid"]
    kill_itself_when_parent_died(parent)
    set_process_title("sglang::data_parallel_controller")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    ctx = mp.get_context("spawn")
    links = []
    for dp_rank in range(cfg["dp_size"]):
        for tp_rank in range(cfg["tp_size"]):
            child_cfg: ChildConfig = {**cfg, "dp_rank": dp_rank, "tp_rank": tp_rank, "parent_pid": os.getpid(),
                                      "gpu_id": cfg["base_gpu_id"] + dp_rank * cfg["tp_size"] + tp_rank}
            ours, theirs = ctx.Pipe()
            ctx.Process(target=scheduler_main, args=(theirs, child_cfg), daemon=False).start()
            links.append(ours)
    ranks = []
    for link in links:
        try:
            ranks.append(link.recv()[1])
        except EOFError:
            _sleep(30.0, parent)  # a scheduler died in start-up: its SIGQUIT reaches the main process
            os._exit(1)
    conn.send(("ready", {"pid": os.getpid(), "schedulers": ranks}))
    for order in _orders(conn, parent):
        for link in links:
            try:
                link.send(order)
            except OSError:
                pass
        if order[0] == "stop":
            time.sleep(0.1)
            os._exit(0)


@dataclass
class Child:
    """A started child: its process, our end of its pipe and its SGLang role."""

    process: BaseProcess
    conn: Connection
    role: str


def start_children(cfg: ChildConfig) -> list[Child]:
    """Spawn the schedulers (or the DP controller) and the detokenizer; their ``ready`` comes over ``conn``."""
    ctx = mp.get_context("spawn")
    children: list[Child] = []

    def spawn(target: Callable[[Connection, ChildConfig], None], child_cfg: ChildConfig, role: str) -> None:
        ours, theirs = ctx.Pipe()
        process = ctx.Process(target=target, args=(theirs, child_cfg), daemon=False)
        process.start()
        theirs.close()
        children.append(Child(process, ours, role))

    base: ChildConfig = {**cfg, "parent_pid": os.getpid()}
    if cfg["dp_size"] > 1:
        spawn(data_parallel_controller_main, base, "data_parallel_controller")
    else:
        for tp_rank in range(cfg["tp_size"]):
            spawn(scheduler_main, {**base, "dp_rank": None, "tp_rank": tp_rank, "gpu_id": cfg["base_gpu_id"] + tp_rank},
                  "scheduler")
    spawn(detokenizer_main, base, "detokenizer")
    return children


def descendants(pid: int) -> list[int]:
    """All descendants of ``pid`` (Linux ``/proc``; empty elsewhere), deepest last."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    frontier = [pid]
    while frontier:
        kids = [k for p in frontier for k in parents.get(p, [])]
        found += kids
        frontier = kids
    return found


def kill_process_tree(children: list[Child], include_parent: bool = True, wait_s: float = 5.0) -> None:
    """SIGKILL every descendant, reap our children, then (``include_parent``) SIGKILL ourselves."""
    pids = set(descendants(os.getpid())) | {c.process.pid for c in children if c.process.pid}
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + wait_s
    for child in children:
        child.process.join(max(0.0, deadline - time.monotonic()))
    if include_parent:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def child_config(memory: MemoryPlan, **settings: Unpack[ChildSettings]) -> ChildConfig:
    """A picklable configuration for the children (a plain dict; MemoryPlan becomes a dict)."""
    return {**settings, "memory": asdict(memory)}
