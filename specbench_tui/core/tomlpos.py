"""Line numbers for keys of a TOML document.

``tomllib`` gives values but no positions, so error messages would otherwise say only *which* key is wrong,
not *where*. :class:`KeyLocator` walks the text once with a small character-level scanner and records the
line of every table header, key assignment, inline-table key and array element, resolving arrays of tables
to indices, so that ``configs[2].matrix.budget`` or ``configs[1].exclude[0].reason`` maps to a line.

It only has to locate keys in a document that ``tomllib`` already parsed, so it is forgiving: on text it
cannot follow it stops recording and keeps what it found, and it never raises.
"""

from __future__ import annotations

import json

PathPart = str | int
KeyPath = tuple[PathPart, ...]

_BARE_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_SCALAR_END = frozenset(",]}#\n")


class _Stop(Exception):
    """The scanner met text it cannot follow; what was recorded so far stays valid."""


class _Scanner:
    """A cursor over the text that knows its 1-based line number."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1

    def peek(self, count: int = 1) -> str:
        return self.text[self.pos:self.pos + count]

    def advance(self, count: int = 1) -> None:
        chunk = self.text[self.pos:self.pos + count]
        self.line += chunk.count("\n")
        self.pos += len(chunk)

    @property
    def done(self) -> bool:
        return self.pos >= len(self.text)

    def skip_blanks(self, newlines: bool) -> None:
        """Skip spaces and tabs, comments, and (when ``newlines``) line breaks."""
        while not self.done:
            char = self.text[self.pos]
            if char in " \t\r":
                self.advance()
            elif char == "\n" and newlines:
                self.advance()
            elif char == "#":
                end = self.text.find("\n", self.pos)
                self.advance((len(self.text) if end < 0 else end) - self.pos)
            else:
                return

    def skip_line(self) -> None:
        end = self.text.find("\n", self.pos)
        self.advance((len(self.text) if end < 0 else end + 1) - self.pos)

    def expect(self, token: str) -> None:
        if self.peek(len(token)) != token:
            raise _Stop
        self.advance(len(token))

    def string(self) -> str:
        """Read one string of any of TOML's four kinds and return its (approximately unescaped) content."""
        for quote in ('"""', "'''"):
            if self.peek(3) == quote:
                self.advance(3)
                start = self.pos
                while not self.done:
                    if quote == '"""' and self.peek() == "\\":
                        self.advance(2)
                        continue
                    if self.peek(3) == quote:
                        # A closing delimiter may be followed by up to two more quotes that belong to the string.
                        while self.peek(4) == quote + quote[0]:
                            self.advance()
                        content = self.text[start:self.pos]
                        self.advance(3)
                        return content
                    self.advance()
                raise _Stop
        quote = self.peek()
        if quote not in ("'", '"'):
            raise _Stop
        self.advance()
        start = self.pos
        while not self.done:
            char = self.peek()
            if char == "\n":
                raise _Stop
            if quote == '"' and char == "\\":
                self.advance(2)
                continue
            if char == quote:
                raw = self.text[start:self.pos]
                self.advance()
                return _unescape(raw) if quote == '"' else raw
            self.advance()
        raise _Stop

    def key(self) -> tuple[str, ...]:
        """Read a (possibly dotted, possibly quoted) key."""
        parts: list[str] = []
        while True:
            self.skip_blanks(newlines=False)
            if self.peek() in ('"', "'"):
                parts.append(self.string())
            else:
                start = self.pos
                while not self.done and self.text[self.pos] in _BARE_KEY_CHARS:
                    self.advance()
                if self.pos == start:
                    raise _Stop
                parts.append(self.text[start:self.pos])
            self.skip_blanks(newlines=False)
            if self.peek() != ".":
                return tuple(parts)
            self.advance()


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    try:
        return str(json.loads(f'"{raw}"'))
    except ValueError:
        return raw


class KeyLocator:
    """Maps key paths of one TOML text to 1-based line numbers."""

    def __init__(self, text: str) -> None:
        self._lines: dict[KeyPath, int] = {}
        self._array_counts: dict[tuple[str, ...], int] = {}
        try:
            self._document(_Scanner(text))
        except (_Stop, IndexError, RecursionError):
            pass

    # ------------------------------------------------------------------------------------------ scanning

    def _record(self, path: KeyPath, line: int) -> None:
        self._lines.setdefault(path, line)

    def _document(self, s: _Scanner) -> None:
        current: KeyPath = ()
        while True:
            s.skip_blanks(newlines=True)
            if s.done:
                return
            line = s.line
            if s.peek(2) == "[[":
                s.advance(2)
                names = s.key()
                s.skip_blanks(newlines=False)
                s.expect("]]")
                current = self._array_header(names, line)
            elif s.peek() == "[":
                s.advance()
                names = s.key()
                s.skip_blanks(newlines=False)
                s.expect("]")
                current = self._resolve(names)
                for end in range(1, len(current) + 1):
                    self._record(current[:end], line)
            else:
                self._assignment(s, current)
            s.skip_blanks(newlines=False)
            if not s.done and s.peek() != "\n":
                raise _Stop
            s.skip_line()

    def _array_header(self, names: tuple[str, ...], line: int) -> KeyPath:
        parent = self._resolve(names[:-1])
        index = self._array_counts.get(names, 0)
        self._array_counts[names] = index + 1
        # A nested array of tables restarts when its parent element changes.
        for key in [k for k in self._array_counts if len(k) > len(names) and k[:len(names)] == names]:
            del self._array_counts[key]
        path = (*parent, names[-1], index)
        for end in range(1, len(path) + 1):
            self._record(path[:end], line)
        return path

    def _resolve(self, names: tuple[str, ...]) -> KeyPath:
        """Header names → a key path, with the current index of every array of tables on the way."""
        resolved: list[PathPart] = []
        for i, name in enumerate(names):
            resolved.append(name)
            count = self._array_counts.get(names[: i + 1])
            if count:
                resolved.append(count - 1)
        return tuple(resolved)

    def _assignment(self, s: _Scanner, table: KeyPath) -> None:
        line = s.line
        names = s.key()
        path = (*table, *names)
        for end in range(len(table) + 1, len(path) + 1):
            self._record(path[:end], line)
        s.skip_blanks(newlines=False)
        s.expect("=")
        s.skip_blanks(newlines=False)
        self._value(s, path)

    def _value(self, s: _Scanner, path: KeyPath) -> None:
        char = s.peek()
        if char in ('"', "'"):
            s.string()
        elif char == "[":
            self._array(s, path)
        elif char == "{":
            self._inline_table(s, path)
        else:
            start = s.pos
            while not s.done and s.text[s.pos] not in _SCALAR_END:
                s.advance()
            if s.pos == start:
                raise _Stop

    def _array(self, s: _Scanner, path: KeyPath) -> None:
        s.expect("[")
        index = 0
        while True:
            s.skip_blanks(newlines=True)
            if s.peek() == "]":
                s.advance()
                return
            self._record((*path, index), s.line)
            self._value(s, (*path, index))
            s.skip_blanks(newlines=True)
            if s.peek() == ",":
                s.advance()
                index += 1
            elif s.peek() != "]":
                raise _Stop

    def _inline_table(self, s: _Scanner, path: KeyPath) -> None:
        s.expect("{")
        while True:
            s.skip_blanks(newlines=True)  # newlines are TOML 1.1; harmless to accept here
            if s.peek() == "}":
                s.advance()
                return
            self._assignment(s, path)
            s.skip_blanks(newlines=True)
            if s.peek() == ",":
                s.advance()
            elif s.peek() != "}":
                raise _Stop

    # ------------------------------------------------------------------------------------------ queries

    def exact(self, path: KeyPath) -> int | None:
        """The line of exactly ``path``, or None when it was not seen."""
        return self._lines.get(tuple(path))

    def line(self, path: KeyPath) -> int | None:
        """The line of ``path``, or of its closest located ancestor."""
        for end in range(len(path), 0, -1):
            found = self._lines.get(tuple(path[:end]))
            if found is not None:
                return found
        return None


def format_path(path: KeyPath) -> str:
    """``('configs', 2, 'matrix')`` → ``configs[2].matrix``; keys that need it are quoted."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = part if part and all(c in _BARE_KEY_CHARS for c in part) else json.dumps(part)
            out += f".{text}" if out else text
    return out
