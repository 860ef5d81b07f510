"""Context budgeting: a prompt plus its output must fit the server's context, or we would cause the 400.

SGLang rejects a request when ``prompt_tokens >= context_length`` or ``prompt_tokens + max_new_tokens >
context_length`` (``reference/sglang.md`` §2.5). We keep ``prompt + max_new_tokens + margin <=
context_length``; the margin absorbs a BOS token and any drift between a tokenizer count and what the
server finally feeds the model. A requested size that cannot fit is clamped, and the clamp is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_MARGIN = 32
"""Tokens kept free beyond prompt + output."""
MAX = "max"


@dataclass(frozen=True)
class Budget:
    """What one long-context item will actually send."""

    requested: int | str
    """The size asked for: a token count or ``"max"``."""
    prompt_tokens: int
    """The prompt size to build (server tokens)."""
    max_new_tokens: int
    clamped: bool
    """The request could not fit as asked and was reduced (``"max"`` is never a clamp)."""
    note: str | None = None


class BudgetError(ValueError):
    """Nothing useful fits: the context cannot hold even a minimal prompt and one output token."""


def plan_budget(requested: int | str, context_length: int, max_new_tokens: int, margin: int = DEFAULT_MARGIN,
                min_prompt_tokens: int = 16) -> Budget:
    """The prompt size and output length for ``requested`` within ``context_length``.

    ``"max"`` fills the context: ``context_length - max_new_tokens - margin``. A number larger than that is
    clamped to it. When even ``max_new_tokens`` leaves no room for ``min_prompt_tokens``, the output is
    shortened too (and recorded as clamped).
    """
    if context_length <= 0:
        raise BudgetError(f"context length {context_length} is not positive")
    room = context_length - margin
    output = max_new_tokens
    if output + min_prompt_tokens > room:
        output = room - min_prompt_tokens
        if output < 1:
            raise BudgetError(f"a context of {context_length} tokens cannot hold a {min_prompt_tokens}-token "
                              f"prompt, one output token and a {margin}-token margin")
    largest = room - output
    if requested == MAX:
        clamped = output != max_new_tokens
        note = f"max_new_tokens reduced from {max_new_tokens} to {output} to fit {context_length}" if clamped else None
        return Budget(requested, largest, output, clamped, note)
    if not isinstance(requested, int) or isinstance(requested, bool) or requested <= 0:
        raise BudgetError(f"a prompt size is a positive token count or \"max\", not {requested!r}")
    if requested <= largest and output == max_new_tokens:
        return Budget(requested, requested, output, False)
    prompt = min(requested, largest)
    note = (f"prompt of {requested} tokens + {max_new_tokens} output + {margin} margin exceeds the "
            f"{context_length}-token context: sent {prompt} prompt tokens and {output} output tokens")
    return Budget(requested, prompt, output, True, note)


def fits(prompt_tokens: int, max_new_tokens: int, context_length: int, margin: int = 0) -> bool:
    """Whether the server will accept a request of this size (with ``margin`` to spare)."""
    return prompt_tokens + max_new_tokens + margin <= context_length and prompt_tokens < context_length
