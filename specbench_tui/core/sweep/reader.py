"""Typed access to the parsed TOML that records issues (file, line, key, message, hint) instead of raising,
the wording of types and values in those messages, and the final ordering of the issues."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar, overload

from specbench_tui.core.errors import SweepIssue, did_you_mean
from specbench_tui.core.sweep.limits import MAX_ISSUES
from specbench_tui.core.tomlpos import KeyLocator, KeyPath, format_path

T = TypeVar("T")
D = TypeVar("D")
N = TypeVar("N", bound=float)
"""A number :meth:`Reader.positive` reads (an ``int`` is a ``float`` to the type checker)."""


class Reader:
    """Typed access to the parsed TOML that records issues instead of raising."""

    def __init__(self, path: str, locator: KeyLocator) -> None:
        self.path = path
        self.locator = locator
        self.issues: list[SweepIssue] = []

    def line_of(self, key: KeyPath) -> int:
        """The line of ``key`` (or its closest ancestor); a document-level problem is on line 1."""
        return self.locator.line(key) or 1

    def error(self, key: KeyPath, message: str, hint: str | None = None) -> None:
        self.issues.append(SweepIssue(self.path, self.line_of(key), format_path(key), message, hint))

    def table(self, data: object, key: KeyPath, allowed: Mapping[str, object] | set[str] | tuple[str, ...],
              what: str = "a table") -> dict[str, object]:
        """``data`` as a table, reporting keys outside ``allowed`` with the closest valid spelling."""
        if not isinstance(data, dict):
            self.error(key, f"expected {what}, got {type_name(data)} {short_repr(data)}")
            return {}
        for name in data:
            if name not in allowed:
                where = format_path(key) or "the top level"
                self.error((*key, name), f"unknown key '{name}' in {where}", did_you_mean(name, allowed))
        return data

    @overload
    def get(self, data: Mapping[str, object], key: KeyPath, name: str, types: tuple[type[T], ...],
            default: None = None, required: bool = False) -> T | None: ...
    @overload
    def get(self, data: Mapping[str, object], key: KeyPath, name: str, types: tuple[type[T], ...], default: D,
            required: bool = False) -> T | D: ...
    def get(self, data: Mapping[str, object], key: KeyPath, name: str, types: tuple[type[T], ...],
            default: object = None, required: bool = False) -> object:
        """``data[name]`` when it has one of ``types``; otherwise record why and return ``default``."""
        if name not in data:
            if required:
                self.error(key, f"missing required key '{name}'", f"add {name} = ... to this table")
            return default
        value = data[name]
        if not is_type(value, types):
            self.error((*key, name), f"expected {types_text(types)}, got {type_name(value)} {short_repr(value)}")
            return default
        if isinstance(value, float) and not math.isfinite(value):
            self.error((*key, name), f"expected a finite number, got {value}")
            return default
        return value

    def positive(self, data: Mapping[str, object], key: KeyPath, name: str, types: tuple[type[N], ...], default: D,
                 allow_zero: bool = False, limit: float | None = None, limit_name: str = "") -> N | D:
        """Like :meth:`get` for a number that must be > 0 (or >= 0), and at most ``limit`` when given."""
        value = self.get(data, key, name, types)
        if value is None:
            return default
        if value < 0 or (value == 0 and not allow_zero):
            self.error((*key, name), f"expected a {'non-negative' if allow_zero else 'positive'} number, got {value}",
                       f"set {name} to a value {'>= 0' if allow_zero else '> 0'}")
            return default
        if limit is not None and value > limit:
            self.too_large((*key, name), name, value, limit, limit_name)
            return default
        return value

    def too_large(self, key: KeyPath, what: str, value: float, limit: float, limit_name: str) -> None:
        shown = f"{value:,}" if isinstance(value, int) else f"{value:g}"
        self.error(key, f"{what} = {shown} is over the limit of {limit:,} ({limit_name})",
                   "docs/sweep-format.md lists every limit")


def is_type(value: object, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in types
    if float in types and isinstance(value, int):
        return True
    return isinstance(value, types)


_TYPE_NAMES: dict[type, str] = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
                                list: "an array", dict: "a table"}


def type_name(value: object) -> str:
    return _TYPE_NAMES.get(type(value), f"a TOML {type(value).__name__}")


def types_text(types: tuple[type, ...]) -> str:
    return " or ".join(dict.fromkeys(_TYPE_NAMES.get(t, t.__name__) for t in types))


def short_repr(value: object) -> str:
    text = repr(value)
    return f"({text[:40]}…)" if len(text) > 40 else f"({text})"


def resolve_path(base_dir: Path, value: str) -> Path:
    """A user path: ``~`` expanded, relative ones taken from the sweep file's folder."""
    return (base_dir / Path(value).expanduser()).resolve()


def sort_issues(issues: list[SweepIssue]) -> list[SweepIssue]:
    """Issues in file order, each reported once; past :data:`MAX_ISSUES` the rest are counted in one more."""
    unique = sorted(dict.fromkeys(issues), key=lambda issue: issue.line or 0)
    if len(unique) <= MAX_ISSUES:
        return unique
    rest = unique[MAX_ISSUES:]
    return [*unique[:MAX_ISSUES], SweepIssue(rest[0].path, rest[0].line, "", f"and {len(rest):,} more problems "
                                             "from this line on", "fix the ones above first")]
