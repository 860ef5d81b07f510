"""Servers left behind by an earlier run of this tool on this machine: found, named, never killed.

A server should never outlive the engine that launched it (its own process group, ``PR_SET_PDEATHSIG``,
the teardown), but a process stuck in the GPU driver (state ``D``), a ``launcher = "command"`` wrapper that
daemonises, or a machine without ``prctl`` can still leave one holding 80 GB of GPU memory. On start the
tool looks for them and tells the user, with the command to end them; it never signals anything itself,
because it cannot be sure a process is its own beyond doubt, and killing someone else's job is worse than
leaving one of ours.

What is known comes from the run directories: every launch is a ``ServerLaunching`` event with the pid
(which leads its own process group, so pgid == pid), the argv (the API key redacted), the time, the keeper's
pid and the tree's identity (``SPECBENCH_TREE`` in the environment of every process the server started,
set by its keeper). Whether a living process belongs to a recorded server is decided in one place,
:func:`belongs_to_server`:

- the main process: alive, not a zombie, its command line matches the recorded argv and it started within
  seconds of the recorded launch (a pid reused by an unrelated process is never blamed);
- the keeper's record: any process, in any session or group, whose environment carries the recorded tree
  identity and that started after the launch (a daemon that double-forked and called ``setsid()`` keeps
  its environment);
- children of a dead main process (SGLang's schedulers): same process group, started during the server's
  life, running the same program, repeating a distinctive argument of it, or carrying one of SGLang's own
  process titles (``sglang::scheduler_TP0``: ``setproctitle`` replaces their command line).

A server whose run directory a live specbench still runs (another sweep of this machine holds its lock) is
not a leftover: it is that run's, and is named as such (run, pid, user), never with a command to end it.

Run directories last written before the machine booted cannot hold a living server and are not read
further, nor are those whose runs folder's index says they launched none
(:class:`~specbench_tui.rundir.index.LaunchFree`: a folder of 10,000 runs is not read file by file at each
start). Processes are read with psutil (only this user's environments can be read, which is where our servers
are).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from specbench_tui.keeper import TREE_VAR
from specbench_tui.rundir import engine_owns, event_lines, records_mtime
from specbench_tui.rundir.index import LaunchFree
from specbench_tui.rundir.lock import read_owner

LAUNCH_SLACK_S = 60.0
"""How long before its ``ServerLaunching`` event a server may have started (the event follows the fork)."""
CLOCK_SLACK_S = 2.0
"""Tolerance of the start-time comparison (``/proc/stat`` btime has whole seconds)."""
CHILD_WINDOW_S = 600.0
"""How long after the last recorded event of its run a child of a dead main process may have started."""


@dataclass(frozen=True)
class _Proc:
    pid: int
    ppid: int
    pgid: int
    state: str
    started: float
    """Epoch seconds."""
    cmdline: tuple[str, ...]
    tree: str | None = None
    """``SPECBENCH_TREE`` from its environment (None when absent or unreadable)."""


@dataclass(frozen=True)
class RunOwner:
    """A live specbench that runs a run directory (from its lock)."""

    run: str
    pid: int | str
    user: str


def live_owner(run_dir: Path) -> RunOwner | None:
    """Who runs ``run_dir`` now, when another live specbench holds its lock (None: nobody, or this process)."""
    if not engine_owns(run_dir):
        return None
    note = read_owner(run_dir)
    pid = note.get("pid")
    if pid == os.getpid():
        return None
    return RunOwner(run=run_dir.name, pid=pid if isinstance(pid, int) else "?", user=str(note.get("user") or "?"))


@dataclass(frozen=True)
class Leftover:
    """One server of an earlier run that is still alive."""

    run_dir: Path
    config: str
    """The configuration's name as recorded."""
    pid: int
    """The server's main process (the group leader) as recorded."""
    pgid: int
    pids: tuple[int, ...]
    """Every living process of the server (main process, if alive, and its group and descendants)."""
    launched_at: float
    """When the launch was recorded (epoch seconds)."""
    main_alive: bool
    parent_pid: int | None = None
    """The main process's parent, when it is alive and not init: its engine may still be running it."""
    argv: tuple[str, ...] = field(default=(), repr=False)
    keeper_pid: int | None = None
    """The server's keeper, when it is still alive (``kill -TERM`` to it ends the whole tree)."""
    outside_group: tuple[int, ...] = ()
    """Living processes of the server outside its process group (escaped sessions), found by the tree identity."""
    owner: RunOwner | None = None
    """The live specbench whose run it is (not a leftover then: it is that run's server)."""

    @property
    def orphaned(self) -> bool:
        """Whether nothing that could have launched it is still its parent (it was left behind)."""
        return self.parent_pid is None

    @property
    def kill_command(self) -> str:
        """The command that ends it: SIGTERM to its whole process group and to each escaped process (or to
        its keeper, when alive, which then ends the whole tree)."""
        if self.keeper_pid is not None:
            return f"kill -TERM {self.keeper_pid}"
        extra = "".join(f" {pid}" for pid in self.outside_group)
        return f"kill -TERM -- -{self.pgid}{extra}"

    @property
    def force_command(self) -> str:
        extra = "".join(f" {pid}" for pid in self.outside_group)
        return f"kill -KILL -- -{self.pgid}{extra}"


# ------------------------------------------------------------------------------------------------ processes


def _boot_time() -> float | None:
    try:
        return float(psutil.boot_time())
    except (psutil.Error, OSError, ValueError):
        return None


def _all_procs(need_environ: bool) -> dict[int, _Proc]:
    """Every living process (zombies left out), with its tree identity when ``need_environ``."""
    procs: dict[int, _Proc] = {}
    attrs = ["pid", "ppid", "status", "create_time", "cmdline"] + (["environ"] if need_environ else [])
    for proc in psutil.process_iter(attrs, ad_value=None):
        info = proc.info
        if info.get("status") in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD) or info.get("create_time") is None:
            continue
        try:
            pgid = os.getpgid(info["pid"])
        except OSError:
            continue
        environ = info.get("environ") or {}
        procs[info["pid"]] = _Proc(info["pid"], info.get("ppid") or 0, pgid, str(info.get("status")),
                                   float(info["create_time"]), tuple(info.get("cmdline") or ()),
                                   environ.get(TREE_VAR))
    return procs


def _argv_matches(recorded: tuple[str, ...], actual: tuple[str, ...]) -> bool:
    """Whether a live command line is the recorded argv (``***`` stands for a redacted value)."""
    if not recorded or len(recorded) != len(actual):
        return False
    return all(r == a or r == "***" or (r.endswith("=***") and a.startswith(r[:-3]))
               for r, a in zip(recorded, actual))


def _shares_argument(recorded: tuple[str, ...], actual: tuple[str, ...]) -> bool:
    """Whether a command line repeats a distinctive value of the recorded argv (model path, port, ...)."""
    distinctive = {a for a in recorded[1:] if len(a) >= 4 and not a.startswith("-") and a != "***"}
    return bool(distinctive.intersection(actual[1:]))


def _same_program(recorded: tuple[str, ...], actual: tuple[str, ...]) -> bool:
    return bool(recorded and actual) and os.path.basename(recorded[0]) == os.path.basename(actual[0])


SGLANG_TITLE_PREFIX = "sglang::"
"""SGLang's children retitle themselves with ``setproctitle`` (``sglang::scheduler_TP0``,
``sglang::detokenizer``, ``sglang::data_parallel_controller``...), which replaces their whole command line."""


def _sglang_titled(actual: tuple[str, ...]) -> bool:
    """Whether a command line is one of SGLang's process titles."""
    return bool(actual) and actual[0].startswith(SGLANG_TITLE_PREFIX)


# ------------------------------------------------------------------------------------------ run directories


@dataclass
class _Launch:
    run_dir: Path
    config: str
    config_id: str
    pid: int
    argv: tuple[str, ...]
    ts: float
    keeper_pid: int | None = None
    tree_id: str | None = None


def _run_dirs(roots: Iterable[Path | str], launched_none: LaunchFree | None = None) -> Iterator[Path]:
    """Each root is a run directory (has an event record) or a folder of them; missing ones are skipped, and
    with ``launched_none`` the runs of a folder its index says launched no server."""
    seen: set[str] = set()
    for root in roots:
        base = os.fspath(root)
        if records_mtime(base) is not None:
            candidates = [(base, True)]
        else:
            try:
                with os.scandir(base) as listing:  # by name; the folder resolved once, not each of its runs
                    children = sorted((child.name, child.is_symlink()) for child in listing)
            except OSError:
                continue
            try:
                resolved = os.fspath(Path(base).resolve())
            except OSError:
                continue
            quiet = launched_none.folder(base) if launched_none is not None else None
            candidates = [(f"{base}/{name}", linked) for name, linked in children
                          if quiet is None or not quiet(name)]  # one stat call each, nothing read
        for path, linked in candidates:  # as strings: a folder of 10,000 runs makes a Path of each run alone
            if records_mtime(path) is None:
                continue
            try:
                key = os.fspath(Path(path).resolve()) if linked else f"{resolved}/{os.path.basename(path)}"
            except OSError:
                continue
            if key not in seen:
                seen.add(key)
                yield Path(path)


_LAUNCH_LINE = b'{"type":"ServerLaunching"'
_STORE_LINE = b'{"type":"'
_STAMP = re.compile(rb'\{"type":"[A-Za-z]+","ts":(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)[,}]')
"""How the store writes every event (compact JSON, its type then its time first): the time read without
parsing the line; any other line is parsed whole."""


def _launches(run_dir: Path) -> tuple[list[_Launch], float]:
    """The launches recorded in one run directory and the time of its last readable event."""
    launches: list[_Launch] = []
    last = 0.0
    lines = list(event_lines(run_dir))
    if not any(raw.startswith(_LAUNCH_LINE) or not raw.startswith(_STORE_LINE) for raw in lines):
        return launches, last  # every line the store's, none a launch: nothing it launched (its time unused)
    for raw in lines:
        if not raw.startswith(_LAUNCH_LINE):
            stamped = _STAMP.match(raw)
            if stamped is not None and raw.rstrip().endswith(b"}"):  # a whole line the store wrote: its time is
                last = max(last, float(stamped.group(1)))  # all it gives (a folder of 10,000 runs is 200,000)
                continue
        data = _event(raw)
        if data is None:
            continue
        ts = data.get("ts")
        if isinstance(ts, (int, float)):
            last = max(last, float(ts))
        launch = _launch_of(run_dir, data)
        if launch is not None:
            launches.append(launch)
    return launches, last


def _event(raw: bytes) -> dict[str, object] | None:
    """An events line with a time, parsed; None for any other (a line torn by a crash included)."""
    if b'"ts"' not in raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _launch_of(run_dir: Path, data: dict[str, object]) -> _Launch | None:
    """The launch a ServerLaunching event records (None for another event, or one without a usable pid, time and
    argv)."""
    if data.get("type") != "ServerLaunching":
        return None
    pid, argv, ts = data.get("pid"), data.get("argv"), data.get("ts")
    if not isinstance(pid, int) or pid <= 1 or not isinstance(ts, (int, float)) or not isinstance(argv, list):
        return None
    keeper, tree = data.get("keeper_pid"), data.get("tree_id")
    return _Launch(run_dir, str(data.get("name") or data.get("config_id") or "?"), str(data.get("config_id") or ""),
                   pid, tuple(str(a) for a in argv), float(ts), keeper if isinstance(keeper, int) and keeper > 1 else None,
                   tree if isinstance(tree, str) and tree else None)


def find_leftovers(runs_dirs: Iterable[Path | str], *, exclude: Iterable[int] = ()) -> list[Leftover]:
    """Servers recorded in the run directories under ``runs_dirs`` that are still alive; kills nothing.

    ``runs_dirs`` holds folders of run directories (``runs/``) or run directories themselves. Processes in
    ``exclude`` (the caller's own servers) and the caller itself are never reported.
    """
    boot = _boot_time()
    if boot is None:
        return []
    excluded = {os.getpid(), *exclude}
    found: list[Leftover] = []
    procs: dict[int, _Proc] | None = None
    for run_dir in _run_dirs(runs_dirs, LaunchFree()):  # a run its folder's index says launched none: passed over
        written = records_mtime(run_dir)
        if written is None or written < boot - CLOCK_SLACK_S:
            continue  # written before this boot: nothing it launched can be alive
        launches, last = _launches(run_dir)
        if not launches:
            continue
        if procs is None:
            procs = _all_procs(need_environ=True)
        owner = live_owner(run_dir)
        for launch in launches:
            leftover = _check(launch, last, procs, excluded)
            if leftover is not None:
                found.append(leftover if owner is None else dataclasses.replace(leftover, owner=owner))
    return found


def _is_main(launch: _Launch, proc: _Proc | None) -> bool:
    """The recorded main process itself: same pid, same command line, started with the launch."""
    earliest = launch.ts - LAUNCH_SLACK_S - CLOCK_SLACK_S
    return (proc is not None and proc.pid == launch.pid and _argv_matches(launch.argv, proc.cmdline)
            and earliest <= proc.started <= launch.ts + CLOCK_SLACK_S)


def belongs_to_server(launch: _Launch, proc: _Proc, *, main_alive: bool, last_event: float) -> bool:
    """Whether the living process ``proc`` is part of the server recorded by ``launch``: the single rule of
    leftover detection (the module's docstring says it in words). ``main_alive``: the recorded main process
    is alive and is that server's (then its process group is that server's too)."""
    earliest = launch.ts - LAUNCH_SLACK_S - CLOCK_SLACK_S
    if proc.started < earliest:
        return False
    if _is_main(launch, proc):
        return True
    if launch.tree_id is not None and proc.tree == launch.tree_id:
        return True  # the keeper's record: any session, any group (escaped daemons), the keeper itself
    if proc.pgid != launch.pid:
        return False
    if main_alive:
        return True
    if proc.pid == launch.pid:  # the main's pid, reused by another program
        return False
    latest = max(last_event, launch.ts) + CHILD_WINDOW_S
    return proc.started <= latest and (_same_program(launch.argv, proc.cmdline)
                                       or _shares_argument(launch.argv, proc.cmdline)
                                       or _sglang_titled(proc.cmdline))


def _check(launch: _Launch, last_event: float, procs: dict[int, _Proc], excluded: set[int]) -> Leftover | None:
    main = procs.get(launch.pid)
    main_ok = main is not None and main.pid not in excluded and _is_main(launch, main)
    members = {p.pid for p in procs.values()
               if belongs_to_server(launch, p, main_alive=main_ok, last_event=last_event)}
    if main_ok:
        members |= _descendants(launch.pid, procs)
    else:  # and what the main's surviving children started (SGLang's schedulers run a bare spawn command line)
        group = {pid: p for pid, p in procs.items() if p.pgid == launch.pid}
        for pid in list(members):
            members |= _descendants(pid, group)
    members -= excluded
    if not members:
        return None
    keeper = procs.get(launch.keeper_pid) if launch.keeper_pid is not None else None
    keeper_ok = keeper is not None and keeper.pid in members
    parent = _parent(keeper if keeper_ok else None, main if main_ok else None, procs, members)
    outside = tuple(sorted(pid for pid in members if procs[pid].pgid != launch.pid))
    return Leftover(run_dir=launch.run_dir, config=launch.config, pid=launch.pid, pgid=launch.pid,
                    pids=tuple(sorted(members)), launched_at=launch.ts, main_alive=main_ok, parent_pid=parent,
                    argv=launch.argv, keeper_pid=launch.keeper_pid if keeper_ok else None, outside_group=outside)


def _parent(keeper: _Proc | None, main: _Proc | None, procs: dict[int, _Proc], members: set[int]) -> int | None:
    """The specbench that runs the server, if it is alive: the keeper's parent, else (no keeper of the server's
    alive) the main process's parent when it is not itself one of the server's processes."""
    if keeper is not None:
        return keeper.ppid if keeper.ppid > 1 and keeper.ppid in procs else None
    if main is not None and main.ppid > 1 and main.ppid in procs and main.ppid not in members:
        return main.ppid
    return None


def _descendants(root: int, procs: dict[int, _Proc]) -> set[int]:
    children: dict[int, list[int]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc.pid)
    found: set[int] = set()
    frontier = [root]
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


def format_leftovers(leftovers: Iterable[Leftover]) -> list[str]:
    """One message per leftover server, with the command that ends it; empty when there are none."""
    out = []
    for item in leftovers:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(item.launched_at))
        pids = ", ".join(str(p) for p in item.pids)
        if item.owner is not None:
            out.append(f"server '{item.config}' (pids {pids}) is the live run {item.owner.run}'s (specbench pid "
                       f"{item.owner.pid}, user {item.owner.user}), not a leftover: it ends with that run")
            continue
        owner = ("" if item.orphaned else
                 f"; its parent, pid {item.parent_pid}, is still alive (another specbench may be using it)")
        head = "server" if item.main_alive else "child processes of the server"
        out.append(
            f"{head} '{item.config}' of the earlier run {item.run_dir} (launched {when}) is still alive: "
            f"pids {pids}{owner}. It may hold GPU memory and ports; this tool does not stop processes it "
            f"did not start in this run. End it with: {item.kill_command}   "
            f"(if it is still there after a minute: {item.force_command})"
        )
    return out


def leftover_command_line(leftover: Leftover) -> str:
    """The recorded command line, quoted for a shell (for display only; never executed)."""
    return shlex.join(leftover.argv)
