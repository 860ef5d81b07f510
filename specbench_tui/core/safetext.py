"""Text that came from someone else (a lease note, a registry entry, a socket's answer) made safe to print.

Such text is data: a newline in it must not start a forged line of output (``[00:00.9] sweep completed``), an
escape sequence must not move the cursor, retitle the terminal or hide what follows, a bidirectional override
must not reorder what the reader sees. :func:`printable` escapes every control character (C0, DEL, C1), every
format character (bidi overrides, zero-width characters) and the line and paragraph separators, the way
Python's ``repr`` writes them (``\\n``, ``\\x1b``, ``\\u202e``), and bounds the length.
"""

from __future__ import annotations

import re
import unicodedata

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})
LIMIT = 200
"""The most characters of one foreign value shown (a note of a megabyte is not a message)."""


def _escaped(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(value: object, limit: int | None = LIMIT) -> str:
    """``value`` as text with its control and format characters escaped (a backslash too, so that an escape
    cannot be faked), cut to ``limit`` characters (``…`` marks the cut); None for no limit."""
    text = value if isinstance(value, str) else str(value)
    cut = limit is not None and len(text) > limit
    if cut:
        text = text[:limit]
    out = "".join(_escaped(c) if c == "\\" or unicodedata.category(c) in _UNSAFE_CATEGORIES else c for c in text)
    return out + ("…" if cut else "")


def is_clean(text: str) -> bool:
    """Whether ``text`` prints as itself (no character :func:`printable` would escape, backslash aside)."""
    return not any(unicodedata.category(c) in _UNSAFE_CATEGORIES for c in text)


_SUSPECT = re.compile(r"[^\n\t\x20-\x7e]+")
"""Runs of characters other than printable ASCII, newline and tab: only these can need escaping."""


def _escape_unsafe(match: re.Match[str]) -> str:
    return "".join(_escaped(c) if unicodedata.category(c) in _UNSAFE_CATEGORIES else c for c in match.group())


def _json_escaped(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def _escape_unsafe_json(match: re.Match[str]) -> str:
    return "".join(_json_escaped(c) if unicodedata.category(c) in _UNSAFE_CATEGORIES else c for c in match.group())


def document_safe(text: str, *, json_text: bool = False) -> str:
    """A whole document (a report, a page) with the same rule as :func:`printable` for every character but the
    newlines and tabs that lay it out and the backslashes of its own syntax: a foreign value inside it (a dataset
    category holding OSC, CSI, BEL or CR) cannot retitle, clear or rewrite the terminal it is printed on.
    ``json_text``: the document is JSON, whose strings take ``\\uXXXX`` (the same characters once parsed)."""
    return _SUSPECT.sub(_escape_unsafe_json if json_text else _escape_unsafe, text)
