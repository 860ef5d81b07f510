"""Line numbers for keys of a TOML document.

``tomllib`` gives values but no positions, so error messages would otherwise say only *which* key is wrong,
not *where*. This scanner walks the text once and records the line of every table header and key
assignment, resolving arrays of tables to indices, so that ``configs[2].matrix.budget`` maps to a line.
It is deliberately forgiving: it only has to locate keys in a document that ``tomllib`` already parsed.
"""

from __future__ import annotations

import re

PathPart = str | int
KeyPath = tuple[PathPart, ...]

_BARE_OR_QUOTED = r'(?:[A-Za-z0-9_\-]+|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
_DOTTED = rf"{_BARE_OR_QUOTED}(?:\s*\.\s*{_BARE_OR_QUOTED})*"
_ARRAY_HEADER = re.compile(rf"^\s*\[\[\s*({_DOTTED})\s*\]\]")
_TABLE_HEADER = re.compile(rf"^\s*\[\s*({_DOTTED})\s*\]")
_ASSIGNMENT = re.compile(rf"^\s*({_DOTTED})\s*=")
_PART = re.compile(_BARE_OR_QUOTED)


def _split_dotted(text: str) -> list[str]:
    parts = []
    for match in _PART.finditer(text):
        part = match.group(0)
        if part[0] in "\"'":
            part = part[1:-1]
        parts.append(part)
    return parts


class KeyLocator:
    """Maps key paths of one TOML text to 1-based line numbers."""

    def __init__(self, text: str) -> None:
        self._lines: dict[KeyPath, int] = {}
        self._scan(text)

    def _scan(self, text: str) -> None:
        array_counts: dict[tuple[str, ...], int] = {}
        current: KeyPath = ()
        in_multiline: str | None = None
        depth = 0  # bracket depth of a value spanning lines (multi-line arrays)
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw
            if in_multiline:
                if in_multiline in line:
                    in_multiline = None
                continue
            if depth > 0:
                depth += _bracket_delta(line)
                continue
            if match := _ARRAY_HEADER.match(line):
                names = tuple(_split_dotted(match.group(1)))
                resolved = self._resolve(names[:-1], array_counts)
                index = array_counts.get(names, 0)
                array_counts[names] = index + 1
                # Nested arrays restart when their parent element changes.
                for key in [k for k in array_counts if len(k) > len(names) and k[: len(names)] == names]:
                    del array_counts[key]
                current = (*resolved, names[-1], index)
                self._lines.setdefault((*resolved, names[-1]), number)
                self._lines[current] = number
                continue
            if match := _TABLE_HEADER.match(line):
                names = tuple(_split_dotted(match.group(1)))
                current = self._resolve(names, array_counts)
                self._lines.setdefault(current, number)
                continue
            if match := _ASSIGNMENT.match(line):
                key = (*current, *_split_dotted(match.group(1)))
                self._lines.setdefault(key, number)
                rest = line[match.end():]
                for quote in ('"""', "'''"):
                    if rest.count(quote) == 1:
                        in_multiline = quote
                depth = max(0, _bracket_delta(rest))

    @staticmethod
    def _resolve(names: tuple[str, ...], array_counts: dict[tuple[str, ...], int]) -> KeyPath:
        resolved: list[PathPart] = []
        for i, name in enumerate(names):
            resolved.append(name)
            count = array_counts.get(names[: i + 1])
            if count:
                resolved.append(count - 1)
        return tuple(resolved)

    def line(self, path: KeyPath) -> int | None:
        """The line of ``path``, or of its closest located ancestor."""
        for end in range(len(path), 0, -1):
            found = self._lines.get(tuple(path[:end]))
            if found is not None:
                return found
        return None


def _bracket_delta(text: str) -> int:
    """Net opening brackets in a line, ignoring quoted strings and comments."""
    delta = 0
    quote: str | None = None
    for char in text:
        if quote:
            if char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif char == "#":
            break
        elif char in "[{":
            delta += 1
        elif char in "]}":
            delta -= 1
    return delta


def format_path(path: KeyPath) -> str:
    """``('configs', 2, 'matrix')`` → ``configs[2].matrix``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out
