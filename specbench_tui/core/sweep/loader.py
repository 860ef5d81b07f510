"""Reading a sweep file: the entry points :func:`load_sweep` (a path) and :func:`parse_sweep` (text), with the
guards that run before and around the TOML parser (size, UTF-8, nesting depth) and tomllib's errors turned
into issues at a line with a hint. The document itself is checked by :mod:`specbench_tui.core.sweep.document`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from specbench_tui.core.errors import SweepError, SweepIssue
from specbench_tui.core.plan import flag_name_issues
from specbench_tui.core.sweep.document import build_sweep
from specbench_tui.core.sweep.limits import MAX_NESTING, MAX_SWEEP_BYTES
from specbench_tui.core.sweep.reader import Reader, sort_issues
from specbench_tui.core.sweep.schema import Sweep
from specbench_tui.core.tomlpos import KeyLocator, KeyPath

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


def load_sweep(path: str | Path, display_path: str | None = None) -> Sweep:
    """Read and validate a sweep file; raise :class:`SweepError` listing every issue."""
    path = Path(path)
    shown = display_path or str(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SWEEP_BYTES + 1)
    except OSError as exc:
        raise SweepError([SweepIssue(shown, None, "", f"cannot read the sweep file: {exc.strerror or exc}",
                                     "check the path (shipped sweeps can be named by stem, e.g. demo)")]) from None
    if len(raw) > MAX_SWEEP_BYTES:
        line = raw[:MAX_SWEEP_BYTES].count(b"\n") + 1
        raise SweepError([SweepIssue(shown, line, "", f"the file is larger than {MAX_SWEEP_BYTES:,} bytes "
                                     "(MAX_SWEEP_BYTES); this line is past the limit",
                                     "a sweep file is a few KB: is this the right file?")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise SweepError([SweepIssue(shown, line, "", f"the file is not valid UTF-8 (byte 0x{raw[exc.start]:02x} "
                                     f"at column {column})", "TOML files are UTF-8: re-save the file as UTF-8")]
                         ) from None
    return parse_sweep(text, path, shown)


def parse_sweep(text: str, path: Path, shown: str | None = None) -> Sweep:
    """Validate sweep ``text`` that was read from ``path`` (used to resolve relative paths)."""
    shown = shown or str(path)
    if len(text) > MAX_SWEEP_BYTES:
        line = text.count("\n", 0, MAX_SWEEP_BYTES) + 1
        raise SweepError([SweepIssue(shown, line, "", f"the text is longer than {MAX_SWEEP_BYTES:,} characters "
                                     "(MAX_SWEEP_BYTES)", "a sweep file is a few KB: is this the right file?")])
    # Located first, and limited in depth before tomllib sees the text: tomllib's time grows with the square
    # of a dotted key's length and it recurses once per nested array.
    locator = KeyLocator(text, max_depth=MAX_NESTING)
    deep_line = locator.too_deep or _crude_depth_line(text, locator.stopped_at)
    if deep_line is not None:
        raise SweepError([_too_deep(shown, deep_line)])
    try:
        data = tomllib.loads(text)
    except RecursionError:
        raise SweepError([_too_deep(shown, locator.stopped_at and text.count("\n", 0, locator.stopped_at) + 1 or 1)]
                         ) from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"\(at line (\d+), column (\d+)\)", message)
        toml_line = int(match.group(1)) if match else None
        if toml_line is None and "end of document" in message:
            toml_line = text.count("\n") + 1
        message = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", message)
        hint = _TOML_HINTS.get(message, "docs/sweep-format.md shows the syntax of every construct")
        if match:
            message += f" at column {match.group(2)}"
        raise SweepError([SweepIssue(shown, toml_line or 1, "", f"invalid TOML: {message}", hint)]) from None
    deep_path = _too_deep_path(data)
    if deep_path is not None:
        raise SweepError([_too_deep(shown, locator.line(deep_path) or 1)])
    reader = Reader(shown, locator)
    sweep = build_sweep(reader, data, text, path, shown)
    if reader.issues:
        # Report flag-name mistakes too, so one edit fixes the file.
        raise SweepError(sort_issues(reader.issues + flag_name_issues(sweep)))
    return sweep


_TOML_HINTS = {
    "Illegal character '\\n'": "is a string missing its closing quote? A \"...\" string ends on its own line",
    "Cannot overwrite a value": "a key is set twice in the same table; keep one",
    "Cannot declare a table twice": "a [table] header appears twice; merge the two",
    "Expected '=' after a key in a key/value pair": "write key = value",
    "Invalid value": "strings need quotes: key = \"text\"",
}
"""Extra advice for tomllib's commonest messages."""


def _too_deep(shown: str, line: int) -> SweepIssue:
    return SweepIssue(shown, line, "", f"keys or values nest deeper than {MAX_NESTING} levels (MAX_NESTING)",
                      "a sweep needs a few levels: [[configs]], its matrix or args, a flag's table")


def _crude_depth_line(text: str, stopped_at: int | None) -> int | None:
    """Where the locator could not follow the text, the first later line with more dots and brackets than a
    key within the depth limit could have (so that tomllib is never given a key thousands of parts long)."""
    if stopped_at is None:
        return None
    start = text.rfind("\n", 0, stopped_at) + 1
    line = text.count("\n", 0, start) + 1
    for number, chunk in enumerate(text[start:].split("\n"), start=line):
        if chunk.count(".") + chunk.count("[") + chunk.count("{") > 4 * MAX_NESTING:
            return number
    return None


def _too_deep_path(data: object) -> KeyPath | None:
    """The path of a value nested deeper than :data:`MAX_NESTING`, or None (walked without recursion)."""
    stack: list[tuple[object, KeyPath]] = [(data, ())]
    while stack:
        value, path = stack.pop()
        if len(path) > MAX_NESTING:
            return path[:MAX_NESTING]
        if isinstance(value, dict):
            stack.extend((v, (*path, k)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(value))
    return None
