"""The context ladder workload kind (pure): its rungs, their order, and a filler text that is distinct per rung
and per repeat.

A ``context_ladder`` workload sends one prompt per rung (``prompt_tokens``: token counts from about 1K up to
``"max"``, the model's limit as in ``long_context``), each repeat with a filler of its own: no two (rung, repeat)
prompts share a prefix beyond the first words, nor word n-grams beyond chance, so neither a prefix cache nor an
n-gram drafter's corpus carries anything from one rung or repeat to the next (people build these ladders by hand
with "a different filler per rung, so the prefix cache cannot leak"). What the rungs mean, C* and the adaptive
search along context are :mod:`specbench_tui.core.crossover.ladder`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence

KIND = "context_ladder"
DEFAULT_RUNGS: tuple[int | str, ...] = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, "max")
"""Rungs from 1K doubling to 128K, then the model's limit (``"max"``)."""
SEARCH_ADAPTIVE = "adaptive"
SEARCH_GRID = "grid"

_SYLLABLES = ("ka", "lo", "mi", "ren", "tas", "vor", "qui", "zel", "dan", "pha", "sor", "lin", "gru", "bek",
              "tio", "mar", "nex", "ula", "fen", "dro", "ith", "wes", "yan", "cor", "bla", "sti", "hum", "pe")
_VERBS = ("shipped", "inspected", "counted", "repaired", "delayed", "weighed", "sealed", "returned", "logged",
          "moved", "sorted", "priced")
_UNITS = ("crates", "barrels", "coils", "pallets", "drums", "sacks", "reels", "panels", "valves", "cases")
LADDER_QUESTION = ("\n\nQuestion: using only the ledger above, name the three entries with the largest counts, "
                   "then summarise the ledger in five bullet points.\nAnswer:")
LEXICON_SIZE = 512
"""Invented names per filler: three to four syllables each, drawn afresh for every (rung, repeat)."""


def filler_seed(workload: str, rung: str, repeat: int) -> int:
    """The seed of one (rung, repeat)'s filler: the same for every configuration (their speedups pair), another
    for every rung and repeat."""
    digest = hashlib.sha256(f"{workload}\x1f{rung}\x1f{repeat}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _lexicon(rng: random.Random) -> list[str]:
    words: dict[str, None] = {}
    while len(words) < LEXICON_SIZE:
        words["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(3, 4))).capitalize()] = None
    return list(words)


def ladder_text(chars: int, seed: int, max_chars: int) -> str:
    """A ledger of about ``chars`` characters (at most ``max_chars``) made of invented names drawn for ``seed``
    alone, followed by the question. Sizing it to tokens is the caller's."""
    chars = max(1, min(chars, max_chars))
    rng = random.Random(seed)
    names = _lexicon(rng)
    body: list[str] = []
    size = 0
    while size < chars:
        # every run of four words holds an invented name: no word 4-gram is shared with another filler but by chance
        sentence = (f"{rng.choice(names)} {rng.choice(_VERBS)} {rng.choice(names)} {rng.randint(2, 9999)} "
                    f"{rng.choice(_UNITS)} {rng.choice(names)}.")
        body.append(sentence)
        size += len(sentence) + 1
    return f"Ledger {names[0]} {names[1]}.\n" + " ".join(body)[:chars] + LADDER_QUESTION


def rung_label(rung: int | str) -> str:
    """The item a rung is recorded under: its token count, or ``max``."""
    return str(rung)


def rung_order(rungs: Sequence[int | str]) -> list[str]:
    """The rungs' labels from the smallest context to the largest (``max`` last)."""
    return [rung_label(r) for r in sorted(rungs, key=lambda r: (isinstance(r, str), r if isinstance(r, int) else 0))]


def is_ladder(workload: Mapping[str, object]) -> bool:
    """Whether a plan's workload (its JSON) is a context ladder."""
    return workload.get("kind") == KIND


def ladder_search(workload: Mapping[str, object]) -> str:
    """``adaptive`` (the default) or ``grid``, from a plan workload's params."""
    params = workload.get("params")
    search = params.get("search") if isinstance(params, Mapping) else None
    return SEARCH_GRID if search == SEARCH_GRID else SEARCH_ADAPTIVE


def ladder_rungs(workload: Mapping[str, object]) -> list[str]:
    """A plan workload's rung labels in ascending order (never trusted: anything else is dropped)."""
    params = workload.get("params")
    raw = params.get("prompt_tokens") if isinstance(params, Mapping) else None
    if not isinstance(raw, (list, tuple)):
        raw = list(DEFAULT_RUNGS)
    kept = [r for r in raw if (isinstance(r, int) and not isinstance(r, bool) and r > 0) or r == "max"]
    return list(dict.fromkeys(rung_order(kept)))
