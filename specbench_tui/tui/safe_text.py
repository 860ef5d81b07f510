"""Making untrusted strings (server log lines, error bodies, model names) safe to display.

Everything a server prints is hostile to a terminal UI: markup-like brackets, ANSI escapes, NUL and other
control bytes, lone surrogates from undecodable bytes, and lines a megabyte long. :func:`clean` turns any of
them into one printable line; :func:`safe` wraps the result in a ``Text`` so no markup is ever parsed.
"""

from __future__ import annotations

import re

from rich.style import Style
from rich.text import Text

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


def safe(value: object, style: Style | str = "", limit: int = MAX_LINE_CHARS) -> Text:
    """A ``Text`` holding :func:`clean` ``(value)`` literally (square brackets are never markup)."""
    return Text(clean(value, limit), style=style, no_wrap=True, overflow="ellipsis")
