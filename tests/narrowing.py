"""Typed narrowing for tests: a lookup that returns ``X | None`` where the test knows it found one."""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def present(value: T | None) -> T:
    """``value``, asserted not None (a failed lookup fails the test here, not as an AttributeError later)."""
    assert value is not None, "expected a value, got None"
    return value


def plain(rendered: object) -> str:
    """The plain text of what a widget rendered (a ``rich.text.Text`` or a Textual ``Content``: both have
    ``.plain``; ``Widget.render`` is typed as any renderable)."""
    text = getattr(rendered, "plain", None)
    assert isinstance(text, str), f"expected rendered text, got {type(rendered).__name__}"
    return text
