"""Highlighting server log lines: fatal and warning lines, ``Decode batch`` figures.

The live panel and the full-log screen share this: a line is ``fatal``, ``error``, ``warning`` or ``info``.
The classifying is done before a live line reaches the UI (:mod:`specbench_tui.application.logview`, re-exported
here); a live line arrives with its level marker, and the highlighter colours it by that marker.

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

import re

from rich.highlighter import Highlighter
from rich.text import Text

from specbench_tui.core.acceptance import ACCEPTANCE_LENGTH, DRAFT_ACCEPTANCE_RATE
from specbench_tui.application.logview import (
    ERROR_PATTERN,
    LEVEL_RANK,
    MARKERS,
    SERIOUS_PATTERN,
    WARNING_PATTERN,
    classify,
    compact_line,
    is_fatal,
    problem_keywords,
    short_stamp,
)
from specbench_tui.tui.palette import DEFAULT_PALETTE, Palette

__all__ = ["ERROR_PATTERN", "LEVEL_RANK", "MARKERS", "SERIOUS_PATTERN", "WARNING_PATTERN", "LogHighlighter",
           "classify", "compact_line", "is_fatal", "problem_keywords", "short_stamp"]

_DECODE_FIGURES = re.compile(
    r"(?:accept len: |accept rate: |gen throughput \(token/s\): "
    rf"|{re.escape(ACCEPTANCE_LENGTH.short)} |{re.escape(DRAFT_ACCEPTANCE_RATE.short)} )([0-9.]+)|([0-9.]+)(?= tok/s)")
"""The figures of a decode line drawn bold: SGLang's own (``accept len: 3.91``) and the compact line's, under
the glossary's short names (``acc.len 3.91 · acc.rate 0.78``)."""
_DECODE = re.compile(r"Decode (?:batch|▸)")
_PREFILL = re.compile(r"Prefill (?:batch|▸)")


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
