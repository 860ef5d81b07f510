"""A stylesheet that parses the app's CSS once per theme (``t`` cycles through three).

Textual substitutes CSS variables while it parses, so a theme change parses every CSS source of the app and its
widgets again (``App.refresh_css`` calls ``Stylesheet.reparse``): 6-9 ms of ``t`` on 2 shared cores. The rules
parsed for a set of variables and sources are kept and used again when the same theme comes back. Relies on
``Stylesheet.reparse``, ``_variables``, ``_rules``, ``_rules_map`` and ``_require_parse`` (Textual 8);
tests/test_tui_themes.py fails if Textual stops calling ``reparse`` on a theme change or the kept rules differ
from a fresh parse.
"""

from __future__ import annotations

from collections.abc import Hashable

from textual.css.model import RuleSet
from textual.css.stylesheet import Stylesheet

KEPT_THEMES = 8
"""Parsed rule sets kept (one per theme seen; the oldest goes first)."""


class ThemeStylesheet(Stylesheet):
    """A :class:`~textual.css.stylesheet.Stylesheet` that keeps the rules parsed for each set of variables."""

    def __init__(self, *, variables: dict[str, str] | None = None) -> None:
        super().__init__(variables=variables)
        self._kept: dict[Hashable, list[RuleSet]] = {}
        self.reused = 0
        """Reparses answered from the kept rules (tests read it)."""

    @classmethod
    def adopt(cls, stylesheet: Stylesheet) -> ThemeStylesheet:
        """A copy of ``stylesheet`` (its variables and sources) that keeps its parses."""
        adopted = cls(variables=dict(stylesheet._variables))
        adopted.source = stylesheet.source.copy()
        return adopted

    def prime(self, variables: dict[str, str]) -> None:
        """Parse the current sources with ``variables`` now (idle time) so that a change to that theme finds them."""
        sheet = Stylesheet(variables=variables)
        sheet.source = self.source.copy()
        sheet.reparse()
        key = (tuple(sorted(variables.items())), tuple(sheet.source.items()))
        self._kept.setdefault(key, sheet._rules)

    def _key(self) -> Hashable:
        return (tuple(sorted(self._variables.items())), tuple(self.source.items()))

    def reparse(self) -> None:
        key = self._key()
        rules = self._kept.get(key)
        if rules is None:
            super().reparse()  # raises on invalid CSS, keeping nothing
            self._kept.pop(key, None)
            self._kept[self._key()] = self._rules
            while len(self._kept) > KEPT_THEMES:
                del self._kept[next(iter(self._kept))]
            return
        self.reused += 1
        self._rules = rules
        self._rules_map = None
        self._require_parse = False
