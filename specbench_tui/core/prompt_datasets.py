"""Prompt datasets by category from local JSONL files: Spec-Bench, MT-Bench and SPEED-Bench, and the check that
a workload's prompts are text, not random tokens.

Formats (one JSON object per line; blank and ``#`` lines are skipped):

- ``spec_bench``: Spec-Bench's ``question.jsonl``: ``question_id`` (int), ``category`` (``mt_bench``,
  ``translation``, ``summarization``, ``qa``, ``math_reasoning``, ``rag``), ``turns`` (a list of user turns;
  MT-Bench questions have two).
- ``mt_bench``: FastChat's MT-Bench ``question.jsonl``: ``question_id``, ``category`` (writing, roleplay,
  reasoning, math, coding, extraction, stem, humanities), ``turns`` (two turns; a later turn sees the answers);
  ``reference`` is ignored.
- ``speed_bench``: SPEED-Bench rows as JSONL: ``question_id`` (a string), ``category``, ``sub_category``,
  ``turns``, ``multiturn`` (bool: only the first turn is sent when false); ``category_field = "sub_category"``
  groups by the sub-category instead.

Nothing is downloaded: the file is local (the package ships a small sample of its own writing,
:data:`SAMPLE_PATH`). Random-token prompts overstate speedups (a drafter guesses a random continuation as badly
as the target, but an n-gram drafter copies it): :func:`random_token_warning` says so.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from specbench_tui.core.prompts import PromptItem, PromptsFileError, jsonl_records
from specbench_tui.core.sweep.limits import MAX_ITEMS

FORMATS = ("spec_bench", "mt_bench", "speed_bench")
SAMPLE_PATH = Path(__file__).resolve().parent.parent / "_data" / "prompts" / "spec_bench_sample.jsonl"
"""Three to four prompts per Spec-Bench category, written for this project (``path`` left empty uses it)."""

_ID_TYPES: dict[str, tuple[type, ...]] = {"spec_bench": (int, str), "mt_bench": (int,), "speed_bench": (str, int)}


def dataset_path(path: str) -> Path:
    """The file a ``prompt_dataset`` workload reads: ``path``, or the shipped sample when it is empty."""
    return Path(path) if path else SAMPLE_PATH


def _turns(data: Mapping[str, object], fmt: str, where: str) -> tuple[str, tuple[str, ...]]:
    turns = data.get("turns")
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise PromptsFileError(f"{where}: 'turns' must be a non-empty list of non-empty strings "
                               f"({fmt} format)")
    if fmt == "speed_bench" and data.get("multiturn") is False:
        return turns[0], ()
    return turns[0], tuple(turns[1:])


def parse_line(data: object, fmt: str, where: str, category_field: str = "category") -> tuple[str, PromptItem]:
    """One line's (raw id, prompt); ``PromptsFileError`` naming ``where`` (``file:line``) and the fix."""
    if not isinstance(data, dict):
        raise PromptsFileError(f"{where}: expected a JSON object")
    missing = [k for k in ("question_id", category_field, "turns") if k not in data]
    if missing:
        raise PromptsFileError(f"{where}: missing {', '.join(repr(k) for k in missing)} ({fmt} format needs "
                               f"question_id, {category_field} and turns)")
    raw_id = data["question_id"]
    if isinstance(raw_id, bool) or not isinstance(raw_id, _ID_TYPES[fmt]):
        raise PromptsFileError(f"{where}: 'question_id' must be "
                               + " or ".join("an integer" if t is int else "a string" for t in _ID_TYPES[fmt]))
    category = data[category_field]
    if not isinstance(category, str) or not category.strip():
        raise PromptsFileError(f"{where}: {category_field!r} must be a non-empty string")
    text, more = _turns(data, fmt, where)
    item = f"q{raw_id}" if isinstance(raw_id, int) else str(raw_id)
    return item, PromptItem(item, text, category.strip(), more)


def load_dataset(path: str | Path, fmt: str = "spec_bench", categories: Sequence[str] = (), limit: int = 0,
                 per_category: int = 0, category_field: str = "category") -> list[PromptItem]:
    """The prompts of a local dataset file in ``fmt``, in file order; ``categories`` keeps only those,
    ``per_category`` at most that many of each, ``limit`` at most that many in all (reading stops there: the file
    is read as a stream, at most ``MAX_PROMPTS_FILE_BYTES`` of it, :func:`~specbench_tui.core.prompts.jsonl_records`)."""
    if fmt not in FORMATS:
        raise PromptsFileError(f"unknown dataset format {fmt!r} (one of {', '.join(FORMATS)})")
    out: list[PromptItem] = []
    seen: set[str] = set()
    counts: dict[str, int] = {}
    for number, data in jsonl_records(path):
        where = f"{path}:{number}"
        item, prompt = parse_line(data, fmt, where, category_field)
        if item in seen:
            raise PromptsFileError(f"{where}: question_id {item!r} appears twice (each question needs its own id)")
        seen.add(item)
        if categories and prompt.category not in categories:
            continue
        if per_category and counts.get(prompt.category, 0) >= per_category:
            continue
        counts[prompt.category] = counts.get(prompt.category, 0) + 1
        out.append(prompt)
        if (limit and len(out) >= limit) or len(out) > MAX_ITEMS:
            break
    return out


# ---------------------------------------------------------------------------------------------- random tokens

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)
_COMMON = frozenset(
    "the a an of to and in is it that for on with as are be this was by or at from you your what how which "
    "not can i we they he she his her its if then than so do does write explain give make please about "
    "der die das und ist nicht ein eine zu den mit von le la les et est un une des du pour que qui el los las "
    "es en y por para una del que".split())
"""Function words of English, German, French and Spanish: any real prompt of a sentence or more holds some."""

RANDOM_WORDS_MIN = 20
"""Prompts shorter than this many words in all are not judged."""
COMMON_SHARE_MIN = 0.04
"""Below this share of function words among the words, text reads as random tokens."""


def common_word_share(texts: Sequence[str]) -> tuple[float, int]:
    """(share of function words among all words, words counted) over ``texts``."""
    words = [w.lower() for text in texts for w in _WORD.findall(text)]
    if not words:
        return 0.0, 0
    return sum(1 for w in words if w in _COMMON) / len(words), len(words)


def random_token_warning(name: str, texts: Sequence[str]) -> str | None:
    """A warning when workload ``name``'s prompts look like random tokens (almost no function words, or
    almost no words at all), else None: random tokens overstate speculative speedups."""
    joined = [t for t in texts if t.strip()]
    if not joined:
        return None
    share, words = common_word_share(joined)
    chars = sum(len(t) for t in joined)
    letters = sum(len(w) for t in joined for w in _WORD.findall(t))
    if words < RANDOM_WORDS_MIN and chars < 200:
        return None
    if share < COMMON_SHARE_MIN or (chars and letters / chars < 0.4):
        return (f"workload '{name}': its prompts look like random tokens ({share:.0%} function words over "
                f"{words} words): random tokens overstate speculative speedups; use real prompts "
                "(a prompt_dataset workload)")
    return None
