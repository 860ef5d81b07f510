"""Making untrusted strings (server log lines, error bodies, model names) safe to display.

Everything a server prints is hostile to a terminal UI: markup-like brackets, ANSI escapes, NUL and other
control bytes, lone surrogates from undecodable bytes, and lines a megabyte long. :func:`clean` turns any of
them into one printable line; :func:`safe` wraps the result in a ``Text`` so no markup is ever parsed.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from specbench_tui.application.logview import MAX_LINE_CHARS, clean

__all__ = ["MAX_LINE_CHARS", "clean", "safe"]
"""``clean`` lives in the application layer, which formats live log lines off the UI thread."""


def safe(value: object, style: Style | str = "", limit: int = MAX_LINE_CHARS) -> Text:
    """A ``Text`` holding :func:`clean` ``(value)`` literally (square brackets are never markup)."""
    return Text(clean(value, limit), style=style, no_wrap=True, overflow="ellipsis")
