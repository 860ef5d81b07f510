"""Server log lines on their way to the screen: classified, compacted and made safe here, never on the UI thread.

The engine publishes a server's output as batches (:class:`~specbench_tui.core.events.LogLines`, one event per
read of its pipe) with the lines its crash signatures found fatal. What a live log panel draws of a line (its
level marker, the configuration's name, the cleaned text, a stats line's compact form, a short timestamp) is
worked out by :func:`format_live_line`, and the screen only draws the result.

:class:`LogFeed` sits between the engine's thread and the UI thread. ``put`` (the engine's thread) only appends a
batch to a queue whose size in bytes is capped: a flood drops the oldest *display* lines, counted, never a line
of the log file (the pump wrote it before it was published) nor a crash (detected in the engine before). A
thread of its own formats the newest lines at most :data:`FRAME_S` apart (a capped frame rate: a flood is not
read line by line), at most :data:`FRAME_LINES` per frame, and ``take`` (the UI thread) picks up what is
formatted: a list swap.

A line read back from disk (the full-log screen) has no level from the engine: :func:`classify` gives it
``error`` or ``warning`` at most from its words; only the engine's verdict makes a line ``fatal``.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from specbench_tui.core.engines.registry import all_profiles, engine_names, get_profile
from specbench_tui.core.events import ConfigFinished, ConfigStateChanged, Event, LogLine, LogLines, ServerLaunching
from specbench_tui.core.signatures import (
    LEVEL_ERROR,
    LEVEL_FATAL,
    LEVEL_INFO,
    LEVEL_WARNING,
    SignatureSet,
    last_lines,
    line_level,
)

# ------------------------------------------------------------------------------------------ safe text

MAX_LINE_CHARS = 2000
"""Characters of one line kept for display; the rest is summarised (the full line stays on disk)."""

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?|\x9b[0-?]*[ -/]*[@-~]")
_NEWLINES = re.compile(r"\r\n|[\r\n\u2028\u2029\x85]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(value: object, limit: int = MAX_LINE_CHARS) -> str:
    """One printable line: ANSI stripped, controls and bad code points replaced, at most ``limit`` chars."""
    text = value if isinstance(value, str) else str(value)
    extra = 0
    if len(text) > limit * 4:
        extra = len(text) - limit * 4
        text = text[: limit * 4]
    if "\x1b" in text or "\x9b" in text:
        text = _ANSI.sub("", text)
    text = text.replace("\t", "    ")
    text = _NEWLINES.sub(" ", text)
    text = _CONTROL.sub("\ufffd", text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    if len(text) > limit:
        extra += len(text) - limit
        text = text[:limit]
    if extra:
        text += f" … [+{extra} chars]"
    return text


# ------------------------------------------------------------------------------------------ classifying

SERIOUS_PATTERN = (r"Traceback \(most recent call last\)|CUDA error|AcceleratorError|OutOfMemoryError|"
                   r"CUDA out of memory|NCCL error|Segmentation fault|core dumped|Fatal Python error|"
                   r"\bFATAL\b|illegal instruction|illegal memory access")
ERROR_PATTERN = r"\bERROR\b|\b[A-Za-z]*Error\b|\bException\b|\bfailed\b"
WARNING_PATTERN = r"\bWARN(?:ING)?\b|\bWarning\b|\bwarning:"

_ERROR = re.compile(ERROR_PATTERN)
_WARNING = re.compile(WARNING_PATTERN)
_LEVEL_WORDS = ("ERROR", "CRITICAL", "Error", "Exception", "error", "WARN", "Warning", "warning", "deprecated",
                "Traceback", "CUDA", "NCCL", "Segmentation fault", "core dumped", "Fatal", "FATAL", "illegal", "failed")
"""A literal each line :func:`classify` gives ``error`` or ``warning`` without a level contains: one of every
alternative of core's word rule (:func:`~specbench_tui.core.signatures.line_level`), of :data:`SERIOUS_PATTERN`,
:data:`ERROR_PATTERN` and :data:`WARNING_PATTERN`; the engines' own fatal patterns add their ``keywords``."""


_PROBLEM_KEYWORDS = (*(word.encode() for word in _LEVEL_WORDS), b"sigquit", b"out of memory")
"""The full-log screen's pre-filter: every level word (so a ``CRITICAL`` or ``deprecated`` line is found as
:func:`classify` colours it), and the words of dying lines that carry no level word."""


def _engine_hints() -> tuple[re.Pattern[str], tuple[bytes, ...]]:
    """The serious-line pattern and the keywords, with every registered engine's hints (built once per set of
    engines)."""
    return _hints_of(engine_names())


@functools.cache
def _hints_of(names: tuple[str, ...]) -> tuple[re.Pattern[str], tuple[bytes, ...]]:
    engines = [get_profile(name) for name in names]
    serious = [SERIOUS_PATTERN, *(p for engine in engines for p in engine.log.fatal)]
    keywords = [*_PROBLEM_KEYWORDS, *(k for engine in engines for k in engine.log.keywords)]
    return re.compile("|".join(f"(?:{p})" for p in serious)), tuple(dict.fromkeys(keywords))


def problem_keywords() -> tuple[bytes, ...]:
    """Literal bytes every fatal, error or warning line contains at least one of (a fast pre-filter for big logs;
    :func:`classify` decides): the shared words and every registered engine's."""
    return _engine_hints()[1]


def compact_line(text: str) -> str:
    """An engine's stats line with its key figures first (the first engine whose hint rewrites it), for the
    narrow live panel; other lines unchanged (the full-log screen always shows the original)."""
    for engine in all_profiles():
        if engine.log.compact is not None:
            compacted = engine.log.compact(text)
            if compacted != text:
                return compacted
    return text


def short_stamp(text: str) -> str:
    """The line with its timestamp shortened by the first engine whose hint recognises it (else unchanged)."""
    for engine in all_profiles():
        if engine.log.short_stamp is not None:
            shortened = engine.log.short_stamp(text)
            if shortened != text:
                return shortened
    return text


LEVEL_RANK = {"info": 0, "debug": 0, "warning": 1, "warn": 1, "error": 2, "fatal": 3, "critical": 3}
_VERDICTS = {"fatal": LEVEL_FATAL, "critical": LEVEL_FATAL, "error": LEVEL_ERROR, "warning": LEVEL_WARNING,
             "warn": LEVEL_WARNING}
MARKERS = {"fatal": "✖", "error": "!", "warning": "▲"}
"""Glyph in front of a live log line, so its level reads without colour too."""


@functools.cache
def _words_of(names: tuple[str, ...]) -> tuple[str, ...]:
    keywords = (k.decode("utf-8", errors="replace") for name in names for k in get_profile(name).log.keywords)
    return tuple(dict.fromkeys((*_LEVEL_WORDS, *keywords)))


def classify(line: str, level: str | None = None) -> str:
    """``fatal``, ``error``, ``warning`` or ``info``.

    ``fatal`` is the engine's verdict only: ``level`` as the engine gave it with a live line (a line read back
    from disk has none, and core's word rule gives it ``error`` at most). The patterns raise a line to ``error``
    or ``warning`` for colour, never to ``fatal``. A line without a level that holds none of the words those
    patterns need is ``info`` at once (most lines of a flood: a few substring tests instead of five searches).
    """
    if not level and not any(word in line for word in _words_of(engine_names())):
        return LEVEL_INFO
    return _classify(line, level)


def _classify(line: str, level: str | None) -> str:
    """:func:`classify` without its pre-filter."""
    serious = _engine_hints()[0]
    verdict = _VERDICTS.get((level or "").lower(), LEVEL_INFO) if level else line_level(line)
    if verdict == LEVEL_FATAL:
        return LEVEL_FATAL
    if serious.search(line) or _ERROR.search(line):
        return LEVEL_ERROR
    if verdict == LEVEL_INFO and _WARNING.search(line):
        return LEVEL_WARNING
    return verdict


def is_fatal(line: str, level: str | None = None) -> bool:
    """Whether ``line`` is drawn as a crash line (live and in the full log) and found by the crash finder."""
    return classify(line, level) == LEVEL_FATAL


@functools.cache
def _crash_signatures(names: tuple[str, ...]) -> SignatureSet:
    return SignatureSet(builtins=[s for name in names for s in get_profile(name).crash_signatures])


def said_at_teardown(line: str, level: str | None) -> bool:
    """Whether a live ``line`` is one a server says while it is being stopped: it matches an engine's crash
    signature, and the engine did not mark it fatal (``level``), which it does for every such line but those
    read while it stops the server (SGLang's ``SIGQUIT received … It usually means one child failed`` at every
    normal end). Such a line is the teardown's, not an error of the run."""
    return level in (None, LEVEL_INFO) and _crash_signatures(engine_names()).match(line) is not None


NAME_WIDTH = 16


def format_live_line(name: str, line: str, level: str | None) -> str:
    """``"✖ ddtree-b8-tp1   │ text"``: level marker, configuration name, cleaned text (no marker for a line the
    server said while it was being stopped: :func:`said_at_teardown`)."""
    text = clean(line)
    level_found = classify(text, level)
    if level_found == LEVEL_ERROR and said_at_teardown(text, level):
        level_found = LEVEL_INFO
    if level_found == "info":
        text = compact_line(text)
    text = short_stamp(text)
    marker = MARKERS.get(level_found, " ")
    label = clean(name, 40)
    return f"{marker} {label:<{NAME_WIDTH}} │ {text}"


# ------------------------------------------------------------------------------------------ the feed

FRAME_S = 0.25
"""Least time between two formatted bursts while lines pour in (the panel repaints at most this often too)."""
FRAME_LINES = 500
"""Newest lines formatted per frame (at most 2,000 a second: a few ms of CPU, which the measurement client in the
same process does not feel); older ones of a flood are dropped from the display, counted."""
MAX_QUEUED_BYTES = 8 << 20
"""Bytes of log lines waiting to be formatted, at most; beyond, the oldest batches are dropped (counted)."""


@dataclass
class Burst:
    """What the panel takes in one refresh: display lines, newest last, and how many it will never see."""

    lines: list[str] = field(default_factory=list)
    dropped: int = 0


def _count(lines: LogLines | LogLine) -> int:
    return lines.count if isinstance(lines, LogLines) else 1


def _newest(lines: LogLines | LogLine, take: int) -> list[str]:
    """The newest ``take`` lines of a batch (only those are split off its text), oldest first."""
    if isinstance(lines, LogLine):
        return [lines.line][-take:] if take else []
    return last_lines(lines.text, take) if take else []


class LogFeed:
    """Batches of server log lines from the engine's thread, formatted by a thread of its own at a capped rate,
    taken by the UI thread as finished display lines."""

    def __init__(self, *, frame_s: float = FRAME_S, frame_lines: int = FRAME_LINES,
                 max_bytes: int = MAX_QUEUED_BYTES, keep: int = 5000,
                 on_ready: Callable[[], None] | None = None, threaded: bool = True) -> None:
        """``keep``: formatted lines held for the UI at most (it keeps no more); ``on_ready``: called (from the
        feed's thread) when formatted lines wait to be taken; ``threaded`` false: no thread of its own, the
        caller calls :meth:`format_pending` (one formatter at a time keeps the lines in order)."""
        self._frame_s = frame_s
        self._frame_lines = frame_lines
        self._max_bytes = max_bytes
        self._keep = keep
        self._on_ready = on_ready
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pending: deque[tuple[str, LogLines | LogLine, dict[int, str], int]] = deque()
        self._pending_bytes = 0
        self._pending_dropped = 0
        self._ready: list[str] = []
        self._ready_dropped = 0
        self._names: dict[str, str] = {}
        self._thread: threading.Thread | None = None
        self._closed = not threaded
        self.last_line_at: float | None = None
        """``ts`` of the newest line put (the engine is alive)."""
        self.received = 0
        """Lines put so far (dropped ones included)."""

    @property
    def queued_bytes(self) -> int:
        """Bytes of lines waiting to be formatted now (at most the cap, or one batch)."""
        return self._pending_bytes

    # -- the engine's side ----------------------------------------------------------------------------

    def put(self, event: Event) -> bool:
        """Take ``event`` if it is a log line or a batch of them (then True); note a configuration's name from the
        events that carry one (then False: the caller handles those). Never blocks, never formats."""
        if isinstance(event, LogLines):
            self._queue(event.config_id, event, dict(event.marked), len(event.text), event.ts)
            return True
        if type(event) is LogLine:
            if not self._pending and self._thread is None:  # a note or a progress line, nothing queued: now
                self._inline(event)
            else:
                self._queue(event.config_id, event, {0: event.level}, len(event.line), event.ts)
            return True
        if isinstance(event, (ServerLaunching, ConfigStateChanged, ConfigFinished)):
            self._names[event.config_id] = event.name
        return False

    def names(self, names: dict[str, str]) -> None:
        """Configuration names by id, known before their first event (a resumed or attached run's plan)."""
        self._names.update(names)

    def _inline(self, event: LogLine) -> None:
        shown = format_live_line(self._names.get(event.config_id, event.config_id), event.line, event.level)
        with self._lock:
            self.received += 1
            self.last_line_at = event.ts
            self._ready.append(shown)
            if len(self._ready) > self._keep:
                del self._ready[0]
                self._ready_dropped += 1
        if self._on_ready is not None:
            self._on_ready()

    def _queue(self, config_id: str, lines: LogLines | LogLine, levels: dict[int, str], size: int,
               ts: float) -> None:
        with self._lock:
            self._pending.append((config_id, lines, levels, size))
            self._pending_bytes += size
            self.received += _count(lines)
            self.last_line_at = ts
            while self._pending_bytes > self._max_bytes and len(self._pending) > 1:
                _, old, _, old_size = self._pending.popleft()
                self._pending_bytes -= old_size
                self._pending_dropped += _count(old)
        if self._thread is None and not self._closed:
            self._start()
        self._wake.set()

    # -- the formatter -------------------------------------------------------------------------------

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="log-feed", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        formatted_at = float("-inf")
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            if self._closed:
                return
            wait = formatted_at + self._frame_s - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            formatted_at = time.monotonic()
            if self.format_pending() and self._on_ready is not None:
                self._on_ready()

    def format_pending(self) -> bool:
        """Format the newest pending lines now (the feed's thread does; a test may); whether any were."""
        with self._lock:
            pending, self._pending = self._pending, deque()
            self._pending_bytes = 0
            dropped, self._pending_dropped = self._pending_dropped, 0
        if not pending and not dropped:
            return False
        chosen: list[tuple[str, str, str | None]] = []
        room = self._frame_lines
        for config_id, lines, levels, _ in reversed(pending):
            count = _count(lines)
            if room <= 0:
                dropped += count
                continue
            take = min(room, count)
            dropped += count - take
            name = self._names.get(config_id, config_id)
            tail = _newest(lines, take)
            start = count - take  # index in the batch of tail[0]
            chosen.extend((name, tail[i], levels.get(start + i)) for i in range(take - 1, -1, -1))
            room -= take
        chosen.reverse()
        shown = [format_live_line(name, line, level) for name, line, level in chosen]
        with self._lock:
            self._ready.extend(shown)
            self._ready_dropped += dropped
            excess = len(self._ready) - self._keep
            if excess > 0:
                del self._ready[:excess]
                self._ready_dropped += excess
        return True

    # -- the UI's side --------------------------------------------------------------------------------

    def take(self) -> Burst:
        """The display lines formatted since the last call, and how many lines were dropped meanwhile."""
        with self._lock:
            burst = Burst(self._ready, self._ready_dropped)
            self._ready, self._ready_dropped = [], 0
        return burst

    def close(self) -> None:
        self._closed = True
        self._wake.set()
