"""Themes are data: ``themes/*.toml`` files loaded into Textual themes at start-up.

A file that cannot be read or does not describe a valid theme is reported (by :func:`load_themes`'s list of
problems, shown once by the app) and skipped; it never stops the app.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from textual.color import Color, ColorParseError
from textual.theme import Theme

from specbench_tui.paths import data_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

DEFAULT_THEME = "specbench-dark"
FALLBACK_THEME = "textual-dark"
"""Built into Textual, used when no theme file could be loaded."""

COLOUR_KEYS = ("primary", "secondary", "warning", "error", "success", "accent", "foreground", "background",
               "surface", "panel", "boost")
OTHER_KEYS = {"name": str, "dark": bool, "luminosity_spread": float, "text_alpha": float, "variables": dict}


def themes_dir() -> Path:
    """The shipped ``themes`` folder."""
    return data_dir("themes")


class ThemeFileError(Exception):
    """A theme file that does not describe a valid theme (the message says why)."""


def _colour(key: str, value: object) -> str:
    """A colour key's value, checked to be a colour Textual parses."""
    if not isinstance(value, str):
        raise ThemeFileError(f"'{key}' must be a colour string such as \"#1e90ff\"")
    try:
        Color.parse(value)
    except ColorParseError:
        raise ThemeFileError(f"'{key}' = {value!r} is not a colour") from None
    return value


def _fraction(key: str, value: object) -> float:
    """A number between 0 and 1 (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ThemeFileError(f"'{key}' must be a number between 0 and 1")
    return float(value)


def _variables(value: object) -> dict[str, str]:
    """The ``[variables]`` table: names to strings."""
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ThemeFileError("[variables] must map names to strings")
    return dict(value)


def _name(data: Mapping[str, object]) -> str:
    """The theme's name, after the checks of what every theme file must have (known keys, a name, a primary)."""
    unknown = sorted(set(data) - set(COLOUR_KEYS) - set(OTHER_KEYS))
    if unknown:
        raise ThemeFileError(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ThemeFileError("'name' (a string) is required")
    if "primary" not in data:
        raise ThemeFileError("'primary' (a colour) is required")
    return name.strip()


def theme_from_data(data: Mapping[str, object]) -> Theme:
    """A Theme from a parsed TOML table; raises ThemeFileError naming the problem."""
    kwargs: dict[str, Any] = {"name": _name(data)}
    kwargs.update({key: _colour(key, data[key]) for key in COLOUR_KEYS if key in data})
    if "dark" in data:
        if not isinstance(data["dark"], bool):
            raise ThemeFileError("'dark' must be true or false")
        kwargs["dark"] = data["dark"]
    kwargs.update({key: _fraction(key, data[key]) for key in ("luminosity_spread", "text_alpha") if key in data})
    kwargs["variables"] = _variables(data.get("variables", {}))
    return Theme(**kwargs)


def load_themes(directory: Path | None = None) -> tuple[list[Theme], list[str]]:
    """Every valid theme of ``directory`` (sorted by file name) and one message per file that failed."""
    folder = directory if directory is not None else themes_dir()
    themes: list[Theme] = []
    problems: list[str] = []
    try:
        files = sorted(folder.glob("*.toml"))
    except OSError as exc:
        return [], [f"{folder}: {exc}"]
    seen: set[str] = set()
    for path in files:
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            theme = theme_from_data(data)
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ThemeFileError) as exc:
            problems.append(f"{path.name}: {exc}")
            continue
        if theme.name in seen:
            problems.append(f"{path.name}: theme name '{theme.name}' is already used by another file")
            continue
        seen.add(theme.name)
        themes.append(theme)
    return themes, problems
