"""Finding runs: every run directory under a runs folder with its state, progress and live owner.

``specbench runs`` prints them; ``latest`` (every command that takes a run) is the newest of them, live or not
(:func:`find_run`). Both read the runs folder's index (:mod:`specbench_tui.rundir.index`), so 10,000 run
directories cost one file and a few ``stat`` calls each (``latest``: two, :class:`~specbench_tui.rundir.index.Ordering`),
plus a read of any run that changed. Counts are the ledger's (:class:`~specbench_tui.core.ledger.Progress`), as in every view. A run's state is read
from its events (how the sweep ended), its owner from the run directory's lock (a live specbench holds it), so
a run whose engine died mid-sweep reads ``interrupted`` and can be resumed.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass
from pathlib import Path

from specbench_tui.core.ledger import Progress
from specbench_tui.rundir import engine_owns, held_locks
from specbench_tui.rundir.index import Entry, Ordering, entry_of, scan
from specbench_tui.rundir.lock import read_owner

DEFAULT_RUNS_DIR = Path("runs")


@dataclass(frozen=True)
class RunInfo:
    """One run directory as ``specbench runs`` lists it."""

    path: Path
    sweep: str
    state: str
    """running (a live specbench owns it), completed, aborted, failed, interrupted (no end recorded), or
    unreadable (a state file of the wrong kind: :attr:`problem` says which)."""
    ran: int
    """Configurations that ran to an end (done, crashed or failed)."""
    skipped: int
    """Configurations skipped (by the plan or the user): out of the count to run, as in the TUI's header."""
    total: int
    owner_pid: int | None
    """The pid of the specbench running it, while one does."""
    started: float
    measurements: int = 0
    """Measurements on record, one per key (as every view counts them)."""
    problem: str | None = None
    """What could not be read in this directory (said per directory; the listing goes on)."""

    @property
    def counts(self) -> Progress:
        return Progress(total=self.total, ran=self.ran, skipped=self.skipped, measurements=self.measurements)

    @property
    def progress(self) -> str:
        """``2/11 ran, 3 skipped``: the TUI header's words."""
        return self.counts.configs_text


def progress_text(ran: int, total: int, skipped: int) -> str:
    """``2/11 ran, 3 skipped``: what ran of what is to run (skipped ones are counted apart, never as done)."""
    return Progress(total=total, ran=ran, skipped=skipped, measurements=0).configs_text


def _info(path: Path, entry: Entry, locks: frozenset[str] | None) -> RunInfo:
    """The listing's row of ``path`` from its index entry; whether it is live is read now, from its lock."""
    owner_pid: int | None = None
    if entry.unreadable:
        state = "unreadable"
    elif (locks is None or locks) and engine_owns(path, locks):  # nothing flocked here: nothing is live
        pid = read_owner(path).get("pid")
        owner_pid = pid if isinstance(pid, int) and not isinstance(pid, bool) else None
        state = "running"
    else:
        state = entry.ended if entry.ended is not None else "interrupted"
    return RunInfo(path=path, sweep=entry.sweep, state=state, ran=entry.ran, skipped=entry.skipped,
                   total=entry.total, owner_pid=owner_pid, started=entry.started, measurements=entry.measurements,
                   problem=entry.problem)


def read_run(path: Path) -> RunInfo | None:
    """What ``path`` holds, or None when it is not a run directory. A file that cannot be read is said in
    :attr:`RunInfo.problem` (state ``unreadable`` when the run's own records cannot be); nothing raises. Read
    from the runs folder's index when its entry is fresh (:mod:`specbench_tui.rundir.index`)."""
    entry = entry_of(path)
    return _info(path, entry, held_locks()) if entry is not None else None


def list_runs(runs_dir: Path = DEFAULT_RUNS_DIR) -> list[RunInfo]:
    """Every run directory directly under ``runs_dir``, oldest first (from the folder's index, each entry
    read again only where its files changed)."""
    locks = held_locks()
    runs = [_info(path, entry, locks) for path, entry in scan(runs_dir)]
    return sorted(runs, key=lambda r: (r.started, r.path.name))


def latest_run(runs_dir: Path = DEFAULT_RUNS_DIR) -> RunInfo | None:
    """The run started last under ``runs_dir``."""
    runs = list_runs(runs_dir)
    return runs[-1] if runs else None


class RunNotFound(Exception):
    """A run reference names no run directory; the message says what there is instead (never blames the user
    for there being no run)."""


_LATEST = re.compile(r"latest(?:~(\d{1,6}))?")


def is_latest(text: str | None) -> bool:
    """``latest`` or ``latest~N`` (or nothing: the same as ``latest``)."""
    return not text or _LATEST.fullmatch(text) is not None


def find_run(text: str | None, runs_dir: Path = DEFAULT_RUNS_DIR, *, live: bool = False) -> RunInfo:
    """The run ``text`` names: ``latest`` (the newest run directory under ``runs_dir``, live or not; with
    ``live``, the newest one a live specbench runs), ``latest~N`` (the one N before it), a run directory's path,
    or the name of a run directory under ``runs_dir``. :class:`RunNotFound` saying why not."""
    match = _LATEST.fullmatch(text or "latest")
    if match is None:
        path = Path(str(text)).expanduser()
        for candidate in (path, runs_dir / str(text)):
            if candidate.is_dir():
                info = read_run(candidate)
                if info is None:
                    raise RunNotFound(f"{candidate} is not a run directory (it holds no sweep, plan, results or "
                                      "events)")
                return info
        raise RunNotFound(f"{text}: no such run directory (nor one of that name under {runs_dir})")
    back = int(match.group(1) or 0)
    ordering = Ordering(runs_dir)  # two stat calls a run: a run whose files changed is read again, no other
    order = ordering.order
    newest = runs_dir / order[-1][1] if order else None
    locks = held_locks()
    if live:
        order = [(started, name) for started, name in order if engine_owns(runs_dir / name, locks)]
    if not order:
        where = f"under {runs_dir}" if runs_dir.is_dir() else f"yet: {runs_dir} does not exist"
        what = "no sweep is running" if live else "there is no run directory"
        info = read_run(newest) if newest is not None else None
        also = (f"; the newest run is {info.path} ({info.state}): specbench report {info.path}"
                if info is not None else "")
        raise RunNotFound(f"{what} {where} (a sweep writes its run directory in its runs_dir; give --runs-dir DIR "
                          f"or the run directory itself; specbench ps lists the sweeps running here){also}")
    if back >= len(order):
        raise RunNotFound(f"latest~{back}: there are only {len(order)} {'live ' if live else ''}run directories "
                          f"under {runs_dir} (latest~{len(order) - 1} is the oldest)")
    name = order[-1 - back][1]
    entry = ordering.entry(name)
    if entry is None:  # no longer a run directory (its files removed this instant): the whole listing's answer
        return _find_listed(back, runs_dir, live)
    return _info(runs_dir / name, entry, locks)


def _find_listed(back: int, runs_dir: Path, live: bool) -> RunInfo:
    """``latest~back`` from the whole listing (every entry made fresh)."""
    locks = held_locks()
    order = _by_start(runs_dir)
    if live:
        order = [(path, entry) for path, entry in order if engine_owns(path, locks)]
    if back >= len(order):
        raise RunNotFound(f"latest~{back}: there are only {len(order)} {'live ' if live else ''}run directories "
                          f"under {runs_dir}")
    path, entry = order[-1 - back]
    return _info(path, entry, locks)


def _by_start(runs_dir: Path) -> list[tuple[Path, Entry]]:
    """The run directories directly under ``runs_dir`` with their entries, oldest first, as :func:`list_runs`
    orders them."""
    return [(path, entry) for _, _, path, entry in
            sorted(((entry.started, path.name, path, entry) for path, entry in scan(runs_dir)),
                   key=lambda item: (item[0], item[1]))]


def format_runs(runs: list[RunInfo], now: float | None = None) -> str:
    """A table: state, progress, owner pid (while live), when it started, and the path."""
    now = time.time() if now is None else now
    head = ("STATE", "PROGRESS", "OWNER", "STARTED", "SWEEP", "PATH")
    rows = [head]
    for run in runs:
        started = "?"
        if run.started:
            with contextlib.suppress(OverflowError, OSError, ValueError):
                started = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.started))
        rows.append((run.state, f"{run.progress}, {run.measurements:,} meas", f"pid {run.owner_pid}" if run.owner_pid else "-", started,
                     run.sweep, str(run.path)))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head) - 1)]
    lines = ["  ".join(str(cell).ljust(width) for cell, width in zip(row[:-1], widths)) + "  " + str(row[-1])
             for row in rows]
    lines += [f"  {run.path.name}: {run.problem}" for run in runs if run.problem]
    return "\n".join(lines)
