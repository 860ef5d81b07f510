"""Rich styles taken from the current Textual theme, for text styled in Python (the header, log lines).

Widgets that build ``Text`` themselves cannot use TCSS variables, so they read the app's :class:`Palette` of the
current theme when they draw (:func:`palette_of`): crashes follow ``$error`` and zero-output results follow
``$warning``. The tables need none of it: their cells' looks are component classes (:mod:`.table_view`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.style import Style
from textual.color import Color, ColorParseError

if TYPE_CHECKING:
    from textual.dom import DOMNode


def _colour(variables: Mapping[str, str], *names: str) -> str | None:
    for name in names:
        value = variables.get(name)
        if not value:
            continue
        try:
            colour = Color.parse(value)
        except (ColorParseError, ValueError, TypeError):
            continue
        # An ANSI colour (Textual's ANSI themes: ``ansi_red``) is the terminal's own, named as Rich names it.
        return colour.hex if colour.ansi is None else colour.rich_color.name
    return None


@dataclass(frozen=True)
class Palette:
    """Styles for the meanings the app colours."""

    crash: Style
    zero_output: Style
    warning: Style
    error_line: Style
    """An error line that is not fatal (drawn like a warning: red is kept for crashes)."""
    success: Style
    accent: Style
    primary: Style
    muted: Style
    plain: Style

    @classmethod
    def from_variables(cls, variables: Mapping[str, str], *, no_color: bool = False) -> Palette:
        """Build from ``App.theme_variables`` (unknown or unparsable colours fall back to no colour).

        With ``no_color`` (``NO_COLOR`` set) meanings are carried by attributes instead of hues, which the
        monochrome filter would turn into greys dimmer than plain text: a crash is reversed and bold, zero output
        bold and underlined, an error line bold (their symbols and words say the rest).
        """
        if no_color:
            return cls(crash=Style(bold=True, reverse=True), zero_output=Style(bold=True, underline=True),
                       warning=Style(), error_line=Style(bold=True), success=Style(), accent=Style(bold=True),
                       primary=Style(), muted=Style(dim=True), plain=Style())
        error = _colour(variables, "error")
        warning = _colour(variables, "warning")
        return cls(
            crash=Style(color=error, bold=True),
            zero_output=Style(color=warning, bold=True),
            warning=Style(color=warning),
            error_line=Style(color=warning, bold=True),
            success=Style(color=_colour(variables, "success")),
            accent=Style(color=_colour(variables, "accent"), bold=True),
            primary=Style(color=_colour(variables, "primary")),
            muted=Style(color=_colour(variables, "foreground-darken-3", "foreground"), dim=True),
            plain=Style(),
        )


DEFAULT_PALETTE = Palette.from_variables({})
"""Colourless styles used before a theme is known."""


def palette_of(node: DOMNode) -> Palette:
    """The current theme's palette of the app ``node`` belongs to (:data:`DEFAULT_PALETTE` outside an app), read when
    ``node`` draws: a theme change is one refresh, nothing is pushed into the widgets."""
    try:
        palette = getattr(node.app, "palette", DEFAULT_PALETTE)
    except Exception:  # noqa: BLE001 - no active app (a widget drawn outside one)
        return DEFAULT_PALETTE
    return palette if isinstance(palette, Palette) else DEFAULT_PALETTE
