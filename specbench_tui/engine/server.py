"""One server process: launch, log pump, readiness, crash watch and a teardown that leaves nothing behind.

Every server runs under a keeper (:mod:`specbench_tui.keeper`), the engine's direct child in a session of its
own: a child subreaper that dies with the engine (``PR_SET_PDEATHSIG``), starts the server in a process group
of its own with stdin closed and stdout+stderr into the engine's :class:`~specbench_tui.engine.logpump.LogPump`,
and, when told to or when the engine dies, SIGKILLs every process of its subtree (escaped ``setsid`` daemons
and the children of a wrapper that does not ``exec`` included) and exits only once none is left. The engine
signals the keeper alone, through a pidfd (never a pid that could have been reused), and reads the server's
exit status from the keeper's. An ``atexit`` hook tells every live keeper to end its tree on ordinary exits.

Readiness proves identity: a healthy answer on the server's port counts only when the listening socket is a
file descriptor of a process in the keeper's tree (psutil maps the kernel's socket table to pids), so another
sweep's or another user's server answering on that port is never taken for ours.

Crash watch: the log lines arrive in batches (one read of the pipe, up to 1 MiB, read straight from it by a
:class:`~specbench_tui.engine.logpump.PipeReader`) and every batch is matched against the crash signatures as it
arrives, in one linear pass over its bytes (RE2) that finds the stats reader's lines too; only the lines that
pass touches are cut out and decoded, the batch is not split. The first match marks the server dead *at once* (the
orchestrator cancels the request in flight) and publishes :class:`CrashDetected` with that line
(``complete`` false): every view shows the configuration crashed from then on. The watcher then waits
``excerpt_wait_s`` for the trailing lines, upgrades the signature if a more specific one appears (a
``Traceback`` is followed by the ``CUDA error`` that names it) and publishes :class:`CrashDetected` again with
the lines around it (``complete``). Both events' ``ts`` is the moment of the first match: the detection time.
Each batch is published as one :class:`LogLines` event with the level of its marked lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, cast


from specbench_tui.core.events import CrashDetected, Event, LogLine, LogLines
from specbench_tui.core.launch import argv_secrets, env_secrets, secret_redactor
from specbench_tui.core.logparse import BatchLine
from specbench_tui.core.outcomes import DEATH_CRASH, DEATH_EXIT, DEATH_STARTUP_TIMEOUT, DeathKind
from specbench_tui.core.signatures import (
    LEVEL_FATAL,
    SignatureMatch,
    SignatureSet,
    crash_cause,
    last_lines,
    lines_holding,
    lines_touched,
    most_specific,
)
from specbench_tui.engine.client import ServerClient
from specbench_tui.engine.logpump import NOT_SCANNED, LogPump, PipeReader, widen_pipe
from specbench_tui.engine.processes import (
    _LIVE_KEEPERS,
    KEEPER_PATH,
    REPORT_TIMEOUT_S,
    _exit_text,
    _exited,
    _identities,
    _Keeper,
    _open_pidfd,
    _read_report,
    _same_process,
    describe_pid,
    find_free_port,
    keeper_argv as keeper_prefix,
    first_of,
    listening_pids,
    port_listened,
    process_tree,
    tree_listens_on,
)
from specbench_tui.core.engines.base import EngineProfile
from specbench_tui.keeper import TREE_VAR
from specbench_tui.rundir.store import StoreError

_ADDRESS_IN_USE = re.compile(r"address already in use|EADDRINUSE|\[Errno 98\]", re.IGNORECASE)
"""What a failed bind prints (Python's OSError, uvicorn's message, ZMQ's)."""

__all__ = ["KEEPER_PATH", "Death", "ServerProcess", "StopReport", "find_free_port", "first_of", "process_tree"]


async def spawn_in_own_group(argv: Sequence[str], *, stdout: int, env: Mapping[str, str],
                             pass_fds: tuple[int, ...]) -> asyncio.subprocess.Process:
    """Start ``argv`` (stdin closed, stderr into ``stdout``) in a process group of its own, in the measuring
    process's session (issue 44: one scheduling group; the group kill still reaches the whole tree):
    ``process_group=0`` on asyncio's own loops. uvloop, which Ray's workers run whenever it is installed (vLLM and
    SGLang install it), refuses that keyword ("unexpected kwargs: process_group": every configuration failed on the
    node), so there the child calls ``setpgrp`` itself between fork and exec."""
    if isinstance(asyncio.get_running_loop(), asyncio.BaseEventLoop):
        return await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=asyncio.subprocess.STDOUT, env=env,
            pass_fds=pass_fds, process_group=0)
    return await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=stdout, stderr=asyncio.subprocess.STDOUT, env=env,
        pass_fds=pass_fds, preexec_fn=os.setpgrp)


@dataclass(frozen=True)
class Death:
    """Why a server can no longer serve."""

    kind: DeathKind
    reason: str
    signature: str | None = None


@dataclass(frozen=True)
class StopReport:
    """How a teardown went."""

    exit_code: int | None
    teardown_s: float
    leftover_pids: tuple[int, ...]
    """Processes of the server still alive, or still holding GPU memory, when teardown gave up."""


EXCERPT_CAP = 400
"""Lines kept after the first crash line while the excerpt waits for its trailing lines (a traceback storm
must not grow it without bound; the log file has them all)."""


class _Batch:
    """A batch's text, split into lines the first time something needs them (most batches never are)."""

    __slots__ = ("split", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.split: list[str] | None = None

    def lines(self) -> list[str]:
        if self.split is None:
            self.split = self.text.split("\n")
        return self.split


def _literal(pattern: re.Pattern[str] | None) -> bytes | None:
    """``pattern`` as the UTF-8 bytes it matches when it is a plain literal of one line (no regular-expression
    syntax, no flags), else None."""
    if pattern is None or pattern.flags & ~re.UNICODE or "\n" in pattern.pattern \
            or any(char in pattern.pattern for char in ".^$*+?{}[]\\|()"):
        return None
    return pattern.pattern.encode()


# ----------------------------------------------------------------------------------------------- the server


class ServerProcess:
    """A launched server and everything watching it."""

    def __init__(self, config_id: str, argv: Sequence[str], env: Mapping[str, str], log_path: Path,
                 profile: EngineProfile, signatures: SignatureSet, publish: Callable[[Event], None], *,
                 on_stats: Callable[[BatchLine], None] | None = None, excerpt_before: int = 6,
                 excerpt_after: int = 6, excerpt_wait_s: float = 0.2,
                 on_store_error: Callable[[str], None] | None = None, port: int | None = None) -> None:
        """``on_store_error`` is told (once) when the log file cannot be written any more (a full disk): the
        run directory is failing, and the sweep should stop. The server's output is still read meanwhile."""
        self.config_id = config_id
        self.argv = list(argv)
        self.env = dict(env)
        self.log_path = log_path
        self.profile = profile
        self.signatures = signatures
        self._publish = publish
        self._on_stats = on_stats
        self._on_store_error = on_store_error
        self._redact = secret_redactor((*argv_secrets(self.argv), *env_secrets(self.env)))
        """Takes the API key and the environment's secrets out of every log line before it is written or
        published."""
        self._excerpt_before = excerpt_before
        self._excerpt_after = excerpt_after
        self._excerpt_wait_s = excerpt_wait_s
        self._recent: deque[tuple[int, str]] = deque(maxlen=excerpt_before + 1)
        self._proc: asyncio.subprocess.Process | None = None
        self.port = port
        """The port the server was told to listen on: readiness requires the listener to be in its tree."""
        self._stranger_said = False
        self.stranger: str | None = None
        """Who answered on our port instead of our server, once seen."""
        self._keeper: _Keeper | None = None
        self._server_pid: int | None = None
        self._hurry = asyncio.Event()
        self.tree_id = uuid.uuid4().hex
        """Carried by every process of this server in its environment (``SPECBENCH_TREE``): leftover detection
        finds escaped processes by it."""
        self._output: PipeReader | None = None
        self._pump_task: asyncio.Task[None] | None = None
        self._exit_task: asyncio.Task[None] | None = None
        self._death: asyncio.Future[Death] | None = None
        self._ready_line = asyncio.Event()
        self._stopping = False
        self._crash_matches: list[SignatureMatch] = []
        self._crash_numbers: list[int] = []
        """The log line number of each of ``_crash_matches``."""
        self._crash_first_line = 0
        self._crash_excerpt: list[tuple[int, str]] = []
        self._crash_detected_at = 0.0
        self._crash_done = asyncio.Event()
        self.crash: CrashDetected | None = None
        hints = (profile.stats_hint,) if profile.stats_hint is not None else profile.stats_hints
        self._hints = tuple(hints) if on_stats is not None else ()
        self._hint_bytes = tuple(hint.encode() for hint in self._hints)
        self._scan = signatures.scanner(self._hints)
        """One RE2 pass over a batch finds every line a signature or a stats hint may touch (None: every line
        is tried, a signature cannot be combined)."""
        self._ready_literal = _literal(profile.ready_line)
        self.started_at = 0.0
        self.pids_seen: set[int] = set()

    # -- state -----------------------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The server's main process (its process group leader), once the keeper said it."""
        return self._server_pid

    @property
    def keeper_pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def hurry(self) -> None:
        """Abort now: a grace wait in progress ends at once and the whole tree is SIGKILLed."""
        self._hurry.set()
        if self._stopping and self._keeper is not None and self._proc is not None and self._proc.returncode is None:
            self._keeper.signal(signal.SIGUSR2)

    @property
    def death(self) -> asyncio.Future[Death]:
        """Resolves once the server can no longer serve (crash, exit, stall, start-up timeout)."""
        if self._death is None:
            self._death = asyncio.get_running_loop().create_future()
        return self._death

    @property
    def dead(self) -> bool:
        return self.death.done()

    def mark_dead(self, death: Death) -> None:
        """Record the first reason the server died; later ones are ignored."""
        if not self.death.done():
            self.death.set_result(death)

    async def crash_report(self) -> CrashDetected | None:
        """The crash event once its trailing lines are in (None when no signature matched)."""
        if not self._crash_matches:
            return None
        await self._crash_done.wait()
        return self.crash

    # -- launch ----------------------------------------------------------------------------------------

    async def start(self) -> int:
        """Launch the server under its keeper (:mod:`specbench_tui.keeper`); returns the server's pid. Raises
        :class:`StoreError` when its log file cannot be created (nothing is launched then) and OSError when the
        server cannot be started at all."""
        try:
            log = await asyncio.to_thread(self._open_log)
        except OSError as exc:
            raise StoreError(self._log_error_text(exc)) from exc
        _ = self.death
        self.started_at = time.monotonic()
        report_r, report_w = os.pipe()
        output_r, output_w = os.pipe()  # the server's stdout and stderr; read by the pump straight from the pipe
        widen_pipe(output_r)  # batches of up to 1 MiB (the server blocks on a full pipe less too)
        self._output = PipeReader(output_r)
        keeper_argv = [*keeper_prefix("--parent", str(os.getpid()), "--report-fd", str(report_w),
                                      "--stop-signal", str(int(self.profile.stop_signal))), "--", *self.argv]
        env = {**self.env, TREE_VAR: self.tree_id}
        try:
            self._proc = await spawn_in_own_group(keeper_argv, stdout=output_w, env=env, pass_fds=(report_w,))
        except BaseException:
            log.close()
            os.close(report_r)
            self._output.close()
            raise
        finally:
            os.close(report_w)
            os.close(output_w)
        self._keeper = _Keeper(self._proc.pid, _open_pidfd(self._proc.pid))
        _LIVE_KEEPERS[self._proc.pid] = self._keeper
        pump = LogPump(self._output, self.log_path, self._on_line, on_progress=self._on_progress, log=log,
                       redact=self._redact, on_write_error=self._on_log_write_error, on_block=self._on_block,
                       scan=self._scan_lines if self._scan is not None else None)
        self._pump_task = asyncio.create_task(pump.run(), name=f"logpump-{self.config_id}")
        self._exit_task = asyncio.create_task(self._watch_exit(), name=f"exit-{self.config_id}")
        report = await asyncio.to_thread(_read_report, report_r, REPORT_TIMEOUT_S)
        if report.startswith("error "):
            await self.stop(0.0, now=True)
            code = int(report.split()[1]) or None
            raise OSError(code, os.strerror(code) if code else "the server could not be executed")
        if not report.isdigit():
            await self.stop(0.0, now=True)
            raise OSError(None, f"the keeper did not start the server ({report or 'no answer'})")
        self._server_pid = int(report)
        return self._server_pid

    def _open_log(self) -> BinaryIO:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        return os.fdopen(fd, "ab")  # the pump closes it

    async def _watch_exit(self) -> None:
        assert self._proc is not None
        code = await _exited(self._proc)
        if self._pump_task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):  # a pump's bug must not hide the exit
                await asyncio.wait_for(asyncio.shield(self._pump_task), timeout=1.0)
        if not self._stopping:
            crashed = self.profile.exit_signatures.get(code) if code is not None else None
            if crashed is not None:  # e.g. SIGSEGV: nothing is logged, the exit code is the signature
                self.mark_dead(Death(DEATH_CRASH, f"{_exit_text(code)} ({crashed})", crashed))
            else:
                self.mark_dead(Death(DEATH_EXIT, _exit_text(code)))

    async def wait_ready(self, client: ServerClient, timeout_s: float, poll_s: float | None = None) -> Death | None:
        """Wait for the ready line (when the profile has one) and a healthy answer; None when ready, else why not.
        A refused connection or a non-200 answer (llama.cpp's 503 "Loading model") means still loading."""
        poll_s = self.profile.health_poll_s if poll_s is None else poll_s
        if self.profile.ready_line is None:
            self._ready_line.set()
        deadline = self.started_at + timeout_s
        while True:
            if self.dead:
                return self.death.result()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.mark_dead(Death(DEATH_STARTUP_TIMEOUT, f"not ready after startup_timeout_s = {timeout_s:g} s"))
                return self.death.result()
            if not self._ready_line.is_set():
                await first_of(self._ready_line.wait(), self.death, timeout_s=remaining)
                continue
            health = asyncio.ensure_future(client.healthy(timeout_s=min(remaining, self.profile.health_timeout_s)))
            try:
                await first_of(health, self.death, timeout_s=remaining)
            finally:
                health.cancel()
            if health.done() and not health.cancelled() and health.result() and not self.dead:
                if await self._answer_is_ours():
                    return None
            await asyncio.sleep(poll_s)

    def said_address_in_use(self) -> bool:
        """Whether the server's last log lines say a bind failed (``EADDRINUSE``): another process held a port it
        needed, ours or one of its own (vLLM binds more than its HTTP port)."""
        return any(_ADDRESS_IN_USE.search(line) for _, line in self._recent)

    async def look_for_stranger(self) -> None:
        """After a death before ready: whether a process outside our tree listens on our port (it took the
        port, and our server failed to bind); sets :attr:`stranger` when so."""
        if self.port is None or self._proc is None or self.stranger is not None:
            return
        # Our tree before and after the socket table, and every pid it ever had: a server that crashes while
        # this looks (its socket still listed, its process gone from the tree) is ours, never a stranger.
        tree = await asyncio.to_thread(process_tree, self._proc.pid)
        holders = await asyncio.to_thread(listening_pids, self.port)
        if holders is None:
            return
        tree |= await asyncio.to_thread(process_tree, self._proc.pid)
        ours = tree | self.pids_seen | {self._proc.pid} | ({self._server_pid} if self._server_pid else set())
        strangers = holders - ours
        if strangers or (not holders and await asyncio.to_thread(port_listened, self.port)):
            who = ", ".join(describe_pid(pid) for pid in sorted(strangers)) or "a process of another user"
            self.stranger = f"port {self.port} is held by {who}, not by this server"

    async def _answer_is_ours(self) -> bool:
        """Whether the process that answered on our port is in our server's tree (the listening socket is one
        of its file descriptors). When it is not, a stranger answered (another sweep's server, another user's
        demo): said once, and we keep waiting for our own server, which will fail to bind or take its time."""
        if self.port is None or self._proc is None:
            return True
        if await asyncio.to_thread(tree_listens_on, self._proc.pid, self.port):
            return True
        if not self._stranger_said:
            self._stranger_said = True
            holders = await asyncio.to_thread(listening_pids, self.port)
            who = ", ".join(describe_pid(pid) for pid in sorted(holders or ())) or "a process of another user"
            self.stranger = f"port {self.port} answers, but not from this server: it is held by {who}"
            self._publish(LogLine(config_id=self.config_id, level="warning",
                                  line=f"specbench: {self.stranger}; not ready until our own server answers"))
        return False

    # -- log lines -------------------------------------------------------------------------------------

    def _log_error_text(self, exc: OSError) -> str:
        where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(self.log_path) else ""
        return f"cannot write the server log {self.log_path}: {exc.strerror or exc}{where}"

    def _on_log_write_error(self, exc: OSError) -> None:
        """The log file stopped being writable mid-run (the pump goes on reading): the run directory fails."""
        if self._on_store_error is not None:
            self._on_store_error(self._log_error_text(exc))

    def _on_progress(self, text: str) -> None:
        self._publish(LogLine(config_id=self.config_id, line=text, level="info"))

    def _on_line(self, number: int, text: str) -> None:
        """The pump's line-by-line handler (it hands batches to :meth:`_on_block`, which wins): one line is a
        batch of one."""
        self._on_block(number, 1, text, text.encode("utf-8", errors="replace"), NOT_SCANNED)

    def _scan_lines(self, data: bytes) -> list[tuple[int, bytes]] | None:
        """The lines of a batch the one pass touches (None: every line must be tried); a pure function of the
        bytes, which the pump runs on its worker thread while it writes the batch."""
        return lines_touched(self._scan, data) if self._scan is not None else None

    def _on_block(self, first: int, count: int, block: str, data: bytes, scanned: object = NOT_SCANNED) -> None:
        """One read's lines, as one batch (``block``: ``count`` lines joined by ``\\n``; ``data``: it as UTF-8).
        The checks that rarely fire (crash signatures, the ready line, the stats hints) run once over the whole
        batch in linear time (RE2, ``str.find``); the batch is split into lines only when one of them points at
        a line, and is published as one :class:`LogLines` event. A crash line is published first, on its own
        (:class:`CrashDetected`, ``complete`` false): nothing waits for the traceback before the configuration
        reads crashed."""
        batch = _Batch(block)
        found = self._scan_lines(data) if scanned is NOT_SCANNED else cast("list[tuple[int, bytes]] | None", scanned)
        marked = self._crash_scan(first, batch, found)
        self._ready_of_block(batch, data)
        if self._on_stats is not None:
            self._stats_of_block(batch, found)
        keep = self._excerpt_before + 1
        tail = batch.split[-keep:] if batch.split is not None else last_lines(block, keep)
        self._recent.extend(zip(range(first + count - len(tail), first + count), tail, strict=True))
        self._publish(LogLines(config_id=self.config_id, first=first, text=block, count=count,
                               marked=tuple(sorted(marked.items()))))

    def _crash_scan(self, first: int, batch: _Batch, found: list[tuple[int, bytes]] | None) -> dict[int, str]:
        """Match the crash signatures over the batch (not while stopping: a teardown's lines are no crash);
        the lines found fatal, by index. ``found``: the lines the batch's one pass touched (None: try every
        line). The first match marks the server dead and publishes the crash at once; the lines after it, up to
        :data:`EXCERPT_CAP`, are kept for the excerpt until it is complete."""
        if self._stopping:
            return {}
        collecting = bool(self._crash_matches) and not self._crash_done.is_set()
        if found is None:
            matches = [(index, match) for index, text in enumerate(batch.lines())
                       if (match := self.signatures.match(text)) is not None]
        else:
            matches = [(index, match) for index, line in found if self.signatures.may_match(line)
                       and (match := self.signatures.match(line.decode("utf-8", errors="replace"))) is not None]
        if not matches and not collecting:
            return {}  # the common case: no line of the batch matches, and it is not split
        texts = batch.lines()
        collect_from: int | None = 0 if collecting else None
        if matches and not self._crash_matches:
            index, match = matches.pop(0)
            prior = [(first + i, texts[i]) for i in range(max(0, index - self._excerpt_before), index)]
            self._first_crash_line(first + index, texts[index], match, [*self._recent, *prior])
            collect_from = index + 1
        if collect_from is not None:
            room = EXCERPT_CAP - len(self._crash_excerpt)
            self._crash_excerpt.extend((first + i, texts[i]) for i in range(collect_from, min(len(texts),
                                                                                           collect_from + room)))
            for index, match in matches:
                self._crash_matches.append(match)
                self._crash_numbers.append(first + index)
        return {index: LEVEL_FATAL for index, _ in matches} | (
            {self._crash_first_line - first: LEVEL_FATAL} if 0 <= self._crash_first_line - first < len(texts) else {})

    def _ready_of_block(self, batch: _Batch, data: bytes) -> None:
        """Whether the batch holds the ready line (searched until it is seen): a literal one is found in the
        bytes, any other pattern in the text and then line by line."""
        ready = self.profile.ready_line
        if ready is None or self._ready_line.is_set():
            return
        if self._ready_literal is not None:
            seen = self._ready_literal in data
        else:
            seen = ready.search(batch.text) is not None and any(ready.search(text) for text in batch.lines())
        if seen:
            self._ready_line.set()

    def _stats_of_block(self, batch: _Batch, found: list[tuple[int, bytes]] | None) -> None:
        """The stats lines of a batch: only the lines holding the profile's hint(s) are parsed, in order;
        ``found`` (the lines the batch's one pass touched) holds every one of them."""
        if not self._hints:
            for text in batch.lines():
                self._stats_of(text)
            return
        if found is None:
            holding = lines_holding(batch.text, self._hints)
            texts = batch.lines() if holding else []
            for index in sorted(holding):
                self._stats_of(texts[index])
            return
        for _, line in found:
            if any(hint in line for hint in self._hint_bytes):
                self._stats_of(line.decode("utf-8", errors="replace"))

    def _stats_of(self, text: str) -> None:
        figures = self.profile.parse_stats_line(text)
        if figures is not None and self._on_stats is not None:
            self._on_stats(figures)

    def _first_crash_line(self, number: int, text: str, match: SignatureMatch,
                          before: list[tuple[int, str]]) -> None:
        """Mark the server dead and say it crashed now; finish the excerpt after a short wait for the trailing
        lines."""
        self._crash_detected_at = time.time()
        self._crash_matches.append(match)
        self._crash_numbers.append(number)
        self._crash_first_line = number
        self._crash_excerpt = [*before[-self._excerpt_before:], (number, text)]
        self.mark_dead(Death(DEATH_CRASH, f"crash signature {match.name}: {text.strip()[:300]}", match.name))
        self._publish(CrashDetected(config_id=self.config_id, signature=match.name, line=text,
                                    excerpt=tuple(t for _, t in self._crash_excerpt), log_line_number=number,
                                    complete=False, ts=self._crash_detected_at,
                                    cause=crash_cause(match.name, text, [t for _, t in self._crash_excerpt])))
        asyncio.get_running_loop().call_later(self._excerpt_wait_s, self._finish_crash)

    def _finish_crash(self) -> None:
        if self._crash_done.is_set():
            return
        best = most_specific(self._crash_matches)
        assert best is not None
        best_line = self._crash_numbers[self._crash_matches.index(best)]
        last = self._crash_first_line + self._excerpt_after
        excerpt = tuple(text for number, text in self._crash_excerpt if number <= max(last, best_line))
        self.crash = CrashDetected(config_id=self.config_id, signature=best.name, line=best.line,
                                   excerpt=excerpt[-(self._excerpt_before + self._excerpt_after + 8):],
                                   log_line_number=best_line, ts=self._crash_detected_at,
                                   cause=crash_cause(best.name, best.line, excerpt))
        self._crash_done.set()
        self._publish(self.crash)

    # -- teardown --------------------------------------------------------------------------------------

    async def stop(self, grace_s: float, now: bool = False) -> StopReport:
        """Through the keeper: the stop signal to the server's group, wait ``grace_s`` (none when ``now``, cut
        short by :meth:`hurry`), then SIGKILL of the whole tree; returns once the keeper is gone, which it is
        only when no process of its tree is left. Safe to call more than once. Signals go to the keeper alone
        (through a pidfd), never to a pid that could have been reused."""
        started = time.monotonic()
        self._stopping = True
        if self._crash_matches and not self._crash_done.is_set():
            self._finish_crash()
        proc, keeper = self._proc, self._keeper
        if proc is None or keeper is None:
            return StopReport(None, 0.0, ())
        tree = await asyncio.to_thread(process_tree, proc.pid)
        self.pids_seen |= tree - {proc.pid}
        identities = await asyncio.to_thread(_identities, tree - {proc.pid})
        if proc.returncode is None and not now and not self._hurry.is_set() and grace_s > 0:
            keeper.signal(signal.SIGUSR1)
            await first_of(_exited(proc), self._hurry.wait(), timeout_s=grace_s)
        if proc.returncode is None:
            seen = await asyncio.to_thread(process_tree, proc.pid)
            self.pids_seen |= seen - {proc.pid}
            identities.update(await asyncio.to_thread(_identities, seen - tree - {proc.pid}))
            tree |= seen
            keeper.signal(signal.SIGUSR2)
        await _exited(proc, 5.0)
        leftover: set[int] = set()
        if proc.returncode is None:  # a process stuck in the kernel (state D): the keeper still waits for it
            leftover = await asyncio.to_thread(process_tree, proc.pid)
        else:  # the keeper waits for its whole tree; only a process that escaped it (the keeper was killed) is left
            _LIVE_KEEPERS.pop(proc.pid, None)
            keeper.close()
            leftover = {pid for pid, created in identities.items() if _same_process(pid, created)}
        for task in (self._pump_task, self._exit_task):
            if task is not None and not task.done():
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await asyncio.wait_for(task, timeout=2.0)
        # A process that escaped the group (a daemon in its own session) may still hold the output pipe: close
        # our end now, while the loop runs (the pump, if it still waits, reads an end of file).
        if self._output is not None:
            self._output.close()
        return StopReport(proc.returncode, time.monotonic() - started, tuple(sorted(leftover)))
