"""How a configuration's outcome looks: a glyph and a word for each class, readable without colour.

Crashed, zero output and partial are three different troubles and never share a look: ``✖ crashed`` (the server
died), ``▲ zero-out`` (it answered, with no tokens, on some workload), ``◐ partial`` (a workload was cut short,
its figures cover only the items it reached). The classes are decided in core (:mod:`specbench_tui.core.verdicts`);
this module only gives each a glyph.
"""

from __future__ import annotations


from specbench_tui.core.verdicts import PARTIAL, ZERO_OUTPUT

__all__ = ["GLYPHS", "PARTIAL", "ZERO_OUTPUT", "glyph"]

GLYPHS = {
    "pending": "·", "paused": "⏸", "launching": "◔", "ready": "◑", "running": "▶", "done": "✔",
    "crashed": "✖", "failed": "✖", "skipped": "↷", "node_lost": "⚠", ZERO_OUTPUT: "▲", PARTIAL: "◐",
}


def glyph(word: str) -> str:
    return GLYPHS.get(word, "?")
