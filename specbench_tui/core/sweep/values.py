"""What names and values a sweep may hold: usable names (they become parts of file names), how a name is
quoted in a message, TOML scalars, and equality that keeps TOML's types apart."""

from __future__ import annotations

import math
import re
from typing import TypeGuard

from specbench_tui.core.sweep.limits import MAX_NAME_CHARS
from specbench_tui.core.sweep.schema import Scalar

_NAME_OK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+\-]*")
"""Names are checked with ``fullmatch`` (``$`` would accept a trailing newline)."""


def shown_name(name: str) -> str:
    """A name quoted for a message: control characters escaped, a long one cut."""
    text = repr(name) if not name.isprintable() else f"'{name}'"
    return text if len(text) <= 80 else text[:60] + f"…' ({len(name):,} characters)"


def usable_name(name: str) -> bool:
    """Whether ``name`` may name a sweep, configuration or workload (it becomes part of file names)."""
    return len(name) <= MAX_NAME_CHARS and _NAME_OK.fullmatch(name) is not None


def is_scalar(value: object) -> TypeGuard[Scalar]:
    """A TOML string, integer, finite float or boolean (dates and times are not flag values)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int, bool))


def typed_key(value: Scalar) -> tuple[str, Scalar]:
    """A hashable key that is equal for two values exactly when :func:`same_value` says they are."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    return (type(value).__name__, value)


def same_value(a: object, b: object) -> bool:
    """Equality that keeps TOML's types apart: ``true`` is not ``1`` and ``"8"`` is not ``8``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b
