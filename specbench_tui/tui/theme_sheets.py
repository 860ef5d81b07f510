"""One parsed stylesheet per theme, so that a theme seen before is not parsed again.

Textual's :meth:`~textual.app.App.refresh_css` gives its one stylesheet the new theme's variables and parses every
CSS source again: substituting the variables happens while tokenizing, so setting them empties the parse cache. On
the sweep screen that is ~15 ms of each ``t`` press, every time, for the same three themes. :class:`ThemeSheets`
keeps a :class:`~textual.css.stylesheet.Stylesheet` per set of variables (each with its own parse cache, filled
once) and hands the app the one for the new theme, brought up to date with the sources registered since it last
served (a widget class mounted for the first time adds its default CSS; only those are parsed). Textual does the
same swap itself when a CSS file changes on disk (``App._on_css_change``: a copy, parsed, becomes
``app.stylesheet``); everything used here is public: :meth:`Stylesheet.copy`, :meth:`~Stylesheet.set_variables`,
:attr:`~Stylesheet.source`, :meth:`~Stylesheet.add_source`, :meth:`~Stylesheet.parse`.

The variables are the key, not the theme's name: a sheet serves exactly the variables it was parsed with, so a
theme edited, or variables worked out differently, is a new sheet and never stale colours.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from textual.css.stylesheet import Stylesheet

Variables = Mapping[str, str]
SHEETS_KEPT = 8
"""Stylesheets kept (the least recently used goes first): the shipped themes and a few picked from the palette."""


def _key(variables: Variables) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(variables.items()))


class ThemeSheets:
    """Parsed stylesheets by theme variables (owned by the UI thread)."""

    def __init__(self, kept: int = SHEETS_KEPT) -> None:
        self._sheets: OrderedDict[tuple[tuple[str, str], ...], Stylesheet] = OrderedDict()
        self._kept = kept
        self.parsed = 0
        """Sheets parsed from nothing so far (a theme's first use, or one primed ahead)."""

    def __len__(self) -> int:
        return len(self._sheets)

    def sheet_for(self, variables: Variables, current: Stylesheet) -> Stylesheet:
        """The stylesheet for ``variables``, holding every source of ``current`` (the app's sheet now), parsed.

        Raises what :meth:`Stylesheet.parse` raises for invalid CSS, as Textual's own refresh does.
        """
        key = _key(variables)
        sheet = self._sheets.get(key)
        if sheet is None:
            sheet = current.copy()
            sheet.set_variables(dict(variables))
            self.parsed += 1
        else:
            self._sheets.move_to_end(key)
            _take_sources(sheet, current)
        sheet.parse()  # from the sheet's own cache, but for sources it had not seen
        self._sheets[key] = sheet
        while len(self._sheets) > self._kept:
            self._sheets.popitem(last=False)
        return sheet

    def prime(self, variables: Variables, current: Stylesheet) -> None:
        """Parses the sheet for ``variables`` ahead of its first use (when kept already, it is only kept longer)."""
        key = _key(variables)
        if key in self._sheets:
            self._sheets.move_to_end(key)
        else:
            self.sheet_for(variables, current)


def _take_sources(sheet: Stylesheet, current: Stylesheet) -> None:
    """Adds to ``sheet`` every source of ``current`` it lacks or holds with other content."""
    for location, source in current.source.items():
        if sheet.source.get(location) != source:
            sheet.add_source(source.content, read_from=location, is_default_css=source.is_defaults,
                             tie_breaker=source.tie_breaker, scope=source.scope)
