"""Classifying and highlighting server log lines: fatal and warning lines, ``Decode batch`` figures.

The live panel and the full-log screen share this: a line is ``fatal``, ``error``, ``warning`` or ``info``.

Only a ``fatal`` line is drawn as a crash (``✖``, the error colour), and the TUI has no rule of its own for it:
a live line is fatal when the engine said so (its crash signatures matched while the server was not being
stopped). A line read back from disk has no level: the full-log screen draws as the crash the line the engine
recorded (its ``CrashDetected`` line number), and no other, since whether a signature's line is a crash depends
on what the engine knew then (a ``sigquit`` at teardown is not). The patterns here only raise a line to
``error`` or ``warning`` for colour: ``core dumped`` or ``Traceback`` in a line the engine did not call fatal is
an error line (``!``, drawn like a warning), never a crash the engine did not record.
SGLang prints some error lines at a normal teardown (``Received sigquit from a child process … the child
failed``).

Engine-specific hints (extra error patterns, the compact form of stats lines, a shorter timestamp) come from each
engine's module (``EngineProfile.log``); the patterns here are the ones every engine shares.
"""

from __future__ import annotations

import functools
import re

from rich.highlighter import Highlighter
from rich.text import Text

from specbench_tui.core.engines.registry import all_profiles, engine_names, get_profile
from specbench_tui.core.signatures import LEVEL_ERROR, LEVEL_FATAL, LEVEL_INFO, LEVEL_WARNING, line_level
from specbench_tui.tui.palette import DEFAULT_PALETTE, Palette

SERIOUS_PATTERN = (r"Traceback \(most recent call last\)|CUDA error|AcceleratorError|OutOfMemoryError|"
                 r"CUDA out of memory|NCCL error|Segmentation fault|core dumped|Fatal Python error|"
                 r"\bFATAL\b|illegal instruction|illegal memory access")
ERROR_PATTERN = r"\bERROR\b|\b[A-Za-z]*Error\b|\bException\b|\bfailed\b"
WARNING_PATTERN = r"\bWARN(?:ING)?\b|\bWarning\b|\bwarning:"

_ERROR = re.compile(ERROR_PATTERN)
_WARNING = re.compile(WARNING_PATTERN)
_PROBLEM_KEYWORDS = (b"Error", b"ERROR", b"error", b"Exception", b"Traceback", b"WARN", b"Warning", b"warning",
                    b"FATAL", b"Fatal", b"illegal", b"failed", b"sigquit", b"Segmentation fault", b"core dumped",
                    b"out of memory", b"CUDA", b"NCCL")


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

_DECODE_FIGURES = re.compile(r"(?:accept len: |gen throughput \(token/s\): |accept )([0-9.]+)|([0-9.]+)(?= tok/s)")
_DECODE = re.compile(r"Decode (?:batch|▸)")
_PREFILL = re.compile(r"Prefill (?:batch|▸)")


def is_fatal(line: str, level: str | None = None) -> bool:
    """Whether ``line`` is drawn as a crash line (live and in the full log) and found by the crash finder."""
    return classify(line, level) == LEVEL_FATAL


def classify(line: str, level: str | None = None) -> str:
    """``fatal``, ``error``, ``warning`` or ``info``.

    ``fatal`` is the engine's verdict only: ``level`` as the engine gave it with a live line (a line read back
    from disk has none, and core's word rule gives it ``error`` at most). The patterns raise a line to ``error``
    or ``warning`` for colour, never to ``fatal``.
    """
    serious = _engine_hints()[0]
    verdict = _VERDICTS.get((level or "").lower(), LEVEL_INFO) if level else line_level(line)
    if verdict == LEVEL_FATAL:
        return LEVEL_FATAL
    if serious.search(line) or _ERROR.search(line):
        return LEVEL_ERROR
    if verdict == LEVEL_INFO and _WARNING.search(line):
        return LEVEL_WARNING
    return verdict


class LogHighlighter(Highlighter):
    """Colours a log line in place: the whole line by level, ``Decode batch`` figures bold."""

    def __init__(self, palette: Palette = DEFAULT_PALETTE, *, live: bool = True) -> None:
        self.palette = palette
        self.live = live
        """Live lines start with a level marker and the configuration name up to ``│``."""

    def highlight(self, text: Text) -> None:
        plain = text.plain
        palette = self.palette
        body_start = 0
        if self.live:
            marker = plain[:1]
            bar = plain.find("│")
            if 0 < bar < 80:
                text.stylize(palette.muted, 0, bar + 1)
                body_start = bar + 1
            if marker == "✖":
                text.stylize(palette.crash, 0, len(plain))
                return
            if marker == "!":
                text.stylize(palette.error_line, 0, len(plain))
                return
            if marker == "▲":
                text.stylize(palette.warning, 0, len(plain))
                return
            level = "info"
        else:
            level = classify(plain)
        if level == "fatal":
            text.stylize(palette.crash, body_start, len(plain))
            return
        if level == "error":
            text.stylize(palette.error_line, body_start, len(plain))
            return
        if level == "warning":
            text.stylize(palette.warning, body_start, len(plain))
            return
        decode = _DECODE.search(plain, body_start)
        if decode:
            text.stylize(palette.primary, decode.start(), decode.end())
            for match in _DECODE_FIGURES.finditer(plain, decode.end()):
                group = 1 if match.group(1) is not None else 2
                text.stylize(palette.accent, match.start(group), match.end(group))
        elif (prefill := _PREFILL.search(plain, body_start)) is not None:
            text.stylize(palette.muted, prefill.start(), len(plain))
