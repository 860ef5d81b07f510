"""A stylesheet that parses the app's CSS once per theme (``t`` cycles through three).

Textual substitutes CSS variables while it parses, so a theme change parses every CSS source of the app and its
widgets again (``App.refresh_css`` calls ``Stylesheet.reparse``): 6-9 ms of ``t`` on 2 shared cores. The rules
parsed for a set of variables and sources are kept and used again when the same theme comes back. Relies on
``Stylesheet.reparse``, ``_variables``, ``_rules``, ``_rules_map`` and ``_require_parse`` (Textual 8);
tests/test_tui_themes.py fails if Textual stops calling ``reparse`` on a theme change or the kept rules differ
from a fresh parse.

It also asks for each node's repaint once per update instead of once per changed rule: applying a theme sets
every colour rule of every node, and each setting asked the node to refresh (working out its region each time):
~500 requests per ``t``, 10-40 ms of CPU before the new theme's first frame. The requests are collected while
``Stylesheet.update`` applies the rules, then made once per node with the strongest of what was asked (a
relayout if any rule asked for one). Relies on ``Stylesheet.update_nodes``, on rules asking through the
node's ``refresh`` and on ``Widget._get_virtual_dom`` (a widget's scrollbars, styled with it) (Textual 8); tests/test_tui_themes.py checks that a theme change still repaints every panel.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from textual.css.model import RuleSet
from textual.css.stylesheet import Stylesheet
from textual.dom import DOMNode
from textual.widget import Widget

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

    def update(self, root: DOMNode, animate: bool = False) -> None:
        """Apply the rules to ``root`` and every node under it, then ask each node that wanted it to refresh once."""
        nodes = list(root.walk_children(with_self=True))
        wanted: dict[DOMNode, bool] = {}  # node -> relayout asked

        def collector(node: DOMNode) -> Callable[..., DOMNode]:
            def refresh(*_regions: Any, layout: bool = False, **_options: Any) -> DOMNode:
                wanted[node] = wanted.get(node, False) or layout
                return node

            return refresh

        collected = []
        scrollbars = [bar for node in nodes if isinstance(node, Widget) for bar in node._get_virtual_dom()]
        for node in [*nodes, *scrollbars]:  # (update_nodes styles a widget's scrollbars with it)
            if "refresh" not in vars(node):  # a node with a refresh of its own instance is left alone
                node.refresh = collector(node)  # type: ignore[method-assign]
                collected.append(node)
        try:
            self.update_nodes(nodes, animate=animate)
        finally:
            for node in collected:
                del node.refresh
            for node, layout in wanted.items():
                node.refresh(layout=layout)
