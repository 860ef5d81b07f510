"""Line numbers for keys of a TOML document.

``tomllib`` gives values but no positions, so error messages would otherwise say only *which* key is wrong,
not *where*. :class:`KeyLocator` walks the text once with a small character-level scanner and records the
line of every table header, key assignment, inline-table key and array element, resolving arrays of tables
to indices, so that ``configs[2].matrix.budget`` or ``configs[1].exclude[0].reason`` maps to a line.

It only has to locate keys in a document that ``tomllib`` already parsed, so it is forgiving: on text it
cannot follow it stops recording and keeps what it found, and it never raises. Positions are kept in a trie
(one node per key, however it was spelt), and nesting past ``max_depth`` is not followed, so time and memory
stay linear in the text whatever its shape (dotted keys a thousand deep, arrays nested a thousand deep).
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


class _Node:
    """One key of the document: the line it was first seen on, and its children (a trie keeps memory linear)."""

    __slots__ = ("line", "children")

    def __init__(self, line: int) -> None:
        self.line = line
        self.children: dict[PathPart, _Node] = {}

    def child(self, part: PathPart, line: int) -> _Node:
        found = self.children.get(part)
        if found is None:
            found = self.children[part] = _Node(line)
        return found


MAX_TRACKED_DEPTH = 64
"""Keys nested deeper than this are located at their ancestor at this depth (the sweep loader refuses
anything that deep anyway); it bounds both the work per key and the scanner's recursion."""


class KeyLocator:
    """Maps key paths of one TOML text to 1-based line numbers, in time and memory linear in the text."""

    def __init__(self, text: str, max_depth: int = MAX_TRACKED_DEPTH) -> None:
        self._root = _Node(0)
        self._max_depth = max_depth
        self._array_counts: dict[tuple[str, ...], int] = {}
        self._nested_arrays: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
        self.too_deep: int | None = None
        """The first line where keys or values nest deeper than ``max_depth`` (None: nothing does)."""
        self.stopped_at: int | None = None
        """The offset where the scanner met text it cannot follow (None: it read the whole text)."""
        scanner = _Scanner(text)
        try:
            self._document(scanner)
        except (_Stop, IndexError, RecursionError):
            self.stopped_at = scanner.pos

    def _deep(self, line: int) -> None:
        if self.too_deep is None:
            self.too_deep = line

    # ------------------------------------------------------------------------------------------ scanning

    def _record(self, node: _Node, parts: tuple[PathPart, ...] | list[PathPart], line: int, depth: int) -> _Node:
        """Record ``parts`` below ``node`` (at ``depth``); parts past the depth limit stay at their ancestor."""
        for part in parts:
            if depth >= self._max_depth:
                self._deep(line)
                break
            node = node.child(part, line)
            depth += 1
        return node

    def _document(self, s: _Scanner) -> None:
        current, depth = self._root, 0
        while True:
            s.skip_blanks(newlines=True)
            if s.done:
                return
            line = s.line
            if s.peek(2) == "[[":
                s.advance(2)
                names = self._header_key(s, line)
                s.skip_blanks(newlines=False)
                s.expect("]]")
                path = self._array_header(names)
                current, depth = self._record(self._root, path, line, 0), min(len(path), self._max_depth)
            elif s.peek() == "[":
                s.advance()
                names = self._header_key(s, line)
                s.skip_blanks(newlines=False)
                s.expect("]")
                path = self._resolve(names)
                current, depth = self._record(self._root, path, line, 0), min(len(path), self._max_depth)
            else:
                self._assignment(s, current, depth)
            s.skip_blanks(newlines=False)
            if not s.done and s.peek() != "\n":
                raise _Stop
            s.skip_line()

    def _header_key(self, s: _Scanner, line: int) -> tuple[str, ...]:
        names = s.key()
        if len(names) > self._max_depth:
            self._deep(line)
            raise _Stop  # nothing this deep is worth following
        return names

    def _array_header(self, names: tuple[str, ...]) -> KeyPath:
        parent = self._resolve(names[:-1])
        index = self._array_counts.get(names)
        if index is None:
            index = 0
            # Remember this array under every enclosing array, so that a new element of an enclosing one
            # restarts it (each registration is undone at most once: linear overall).
            for end in range(1, len(names)):
                if names[:end] in self._array_counts:
                    self._nested_arrays.setdefault(names[:end], []).append(names)
        self._array_counts[names] = index + 1
        for nested in self._nested_arrays.pop(names, ()):
            self._array_counts.pop(nested, None)
        return (*parent, names[-1], index)

    def _resolve(self, names: tuple[str, ...]) -> KeyPath:
        """Header names → a key path, with the current index of every array of tables on the way."""
        resolved: list[PathPart] = []
        for i, name in enumerate(names):
            resolved.append(name)
            count = self._array_counts.get(names[: i + 1])
            if count:
                resolved.append(count - 1)
        return tuple(resolved)

    def _assignment(self, s: _Scanner, table: _Node, depth: int) -> None:
        line = s.line
        names = s.key()
        node = self._record(table, names, line, depth)
        depth = min(depth + len(names), self._max_depth)
        s.skip_blanks(newlines=False)
        s.expect("=")
        s.skip_blanks(newlines=False)
        self._value(s, node, depth)

    def _value(self, s: _Scanner, node: _Node, depth: int) -> None:
        char = s.peek()
        if char in ('"', "'"):
            s.string()
        elif char in "[{":
            if depth >= self._max_depth:
                self._deep(s.line)
                raise _Stop  # deeper than anything a sweep may hold: keep what is located so far
            if char == "[":
                self._array(s, node, depth)
            else:
                self._inline_table(s, node, depth)
        else:
            start = s.pos
            while not s.done and s.text[s.pos] not in _SCALAR_END:
                s.advance()
            if s.pos == start:
                raise _Stop

    def _array(self, s: _Scanner, node: _Node, depth: int) -> None:
        s.expect("[")
        index = 0
        while True:
            s.skip_blanks(newlines=True)
            if s.peek() == "]":
                s.advance()
                return
            self._value(s, node.child(index, s.line), depth + 1)
            s.skip_blanks(newlines=True)
            if s.peek() == ",":
                s.advance()
                index += 1
            elif s.peek() != "]":
                raise _Stop

    def _inline_table(self, s: _Scanner, node: _Node, depth: int) -> None:
        s.expect("{")
        while True:
            s.skip_blanks(newlines=True)  # newlines are TOML 1.1; harmless to accept here
            if s.peek() == "}":
                s.advance()
                return
            self._assignment(s, node, depth)
            s.skip_blanks(newlines=True)
            if s.peek() == ",":
                s.advance()
            elif s.peek() != "}":
                raise _Stop

    # ------------------------------------------------------------------------------------------ queries

    def _walk(self, path: KeyPath) -> tuple[int, _Node]:
        """How many parts of ``path`` were seen, and the node of the last one."""
        node, seen = self._root, 0
        for part in path:
            found = node.children.get(part)
            if found is None:
                break
            node, seen = found, seen + 1
        return seen, node

    def exact(self, path: KeyPath) -> int | None:
        """The line of exactly ``path``, or None when it was not seen."""
        seen, node = self._walk(tuple(path))
        return node.line if seen == len(path) and seen else None

    def line(self, path: KeyPath) -> int | None:
        """The line of ``path``, or of its closest located ancestor."""
        seen, node = self._walk(tuple(path))
        return node.line if seen else None


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
