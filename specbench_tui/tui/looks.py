"""How a configuration's outcome looks: a glyph and a word for each class, readable without colour.

Crashed, zero output and partial are three different troubles and never share a look: ``✖ crashed`` (the server
died), ``▲ zero-out`` (it answered, with no tokens, on some workload), ``◐ partial`` (a workload was cut short,
its figures cover only the items it reached). The classes are decided in core (:mod:`specbench_tui.core.verdicts`);
this module only gives each a glyph.
"""

from __future__ import annotations

from collections.abc import Iterable

from specbench_tui.core.state import ConfigView
from specbench_tui.core.verdicts import PARTIAL, ZERO_OUTPUT, config_verdict, partial_configs

__all__ = ["GLYPHS", "PARTIAL", "ZERO_OUTPUT", "glyph", "outcome_word", "partial_configs"]

GLYPHS = {
    "pending": "·", "paused": "⏸", "launching": "◔", "ready": "◑", "running": "▶", "done": "✔",
    "crashed": "✖", "failed": "✖", "skipped": "↷", "node_lost": "⚠", ZERO_OUTPUT: "▲", PARTIAL: "◐",
}


def outcome_word(view: ConfigView, shown_state: str, partial: Iterable[str] | frozenset[str]) -> str:
    """The state word for ``view``: core's verdict (:func:`~specbench_tui.core.verdicts.config_verdict`)."""
    return config_verdict(shown_state, zero_output=bool(view.zero_output), partial=view.config_id in partial)


def glyph(word: str) -> str:
    return GLYPHS.get(word, "?")
