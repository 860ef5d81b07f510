"""Context budgeting: a prompt plus its output must fit the server's context, or we would cause the 400.

SGLang 0.5.23 (``managers/tokenizer_manager.py``) first adds the tokens it reserves for speculative decoding
(each engine's rule: ``EngineProfile.reserved_tokens``; vLLM and llama.cpp reserve none, since they shrink the
draft to fit) to the input, then rejects a request when ``input + reserved >=
context_length`` or ``input + reserved + max_new_tokens > context_length``. Its scheduler then aborts an input
of ``max_req_input_len`` tokens or more (``min(context - 1, kv_capacity - 1) - 5``, ``/server_info``) and
silently clips ``max_new_tokens`` to ``max_req_input_len + 4 - input``. We keep ``prompt + max_new_tokens +
margin`` within both limits; the margin absorbs a BOS token and any drift between a tokenizer count and what
the server finally feeds the model. A requested size that cannot fit is clamped, and the clamp is recorded.
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


def usable_context(context_length: int, reserved: int = 0, max_req_input_len: int | None = None) -> int:
    """What prompt + output may total on this server: the context less the reserved speculative tokens, and no
    more than the scheduler's ``max_req_input_len + 4`` (its ``max_req_len - 1``, beyond which the output is
    clipped and the input aborted)."""
    usable = context_length - max(0, reserved)
    if max_req_input_len is not None and max_req_input_len > 0:
        usable = min(usable, max_req_input_len + 4)
    return usable


def plan_budget(requested: int | str, context_length: int, max_new_tokens: int, margin: int = DEFAULT_MARGIN,
                min_prompt_tokens: int = 16, *, reserved: int = 0, max_req_input_len: int | None = None) -> Budget:
    """The prompt size and output length for ``requested`` within ``context_length``.

    ``"max"`` fills the context: ``context_length - reserved - max_new_tokens - margin`` (or less when the
    scheduler's ``max_req_input_len`` is smaller, see :func:`usable_context`). A number larger than that is
    clamped to it. When even ``max_new_tokens`` leaves no room for ``min_prompt_tokens``, the output is
    shortened too (and recorded as clamped).
    """
    if context_length <= 0:
        raise BudgetError(f"context length {context_length} is not positive")
    limit = usable_context(context_length, reserved, max_req_input_len)
    room = limit - margin
    output = max_new_tokens
    if output + min_prompt_tokens > room:
        output = room - min_prompt_tokens
        if output < 1:
            raise BudgetError(f"a context of {context_length} tokens{_less(context_length, limit, reserved)} "
                              f"cannot hold a {min_prompt_tokens}-token prompt, one output token and a {margin}-token "
                              "margin")
    largest = room - output
    if requested == MAX:
        clamped = output != max_new_tokens
        note = (f"max_new_tokens reduced from {max_new_tokens} to {output} to fit {context_length}"
                f"{_less(context_length, limit, reserved)}" if clamped else None)
        return Budget(requested, largest, output, clamped, note)
    if not isinstance(requested, int) or isinstance(requested, bool) or requested <= 0:
        raise BudgetError(f"a prompt size is a positive token count or \"max\", not {requested!r}")
    if requested <= largest and output == max_new_tokens:
        return Budget(requested, requested, output, False)
    prompt = min(requested, largest)
    note = (f"prompt of {requested} tokens + {max_new_tokens} output + {margin} margin exceeds the "
            f"{context_length}-token context{_less(context_length, limit, reserved)}: sent {prompt} prompt tokens "
            f"and {output} output tokens")
    return Budget(requested, prompt, output, True, note)


def _less(context_length: int, limit: int, reserved: int) -> str:
    """What the usable context leaves out of the context, for messages ("" when nothing)."""
    if limit == context_length:
        return ""
    parts = [f"{reserved} reserved for speculative decoding"] if reserved > 0 else []
    if limit < context_length - max(0, reserved):
        parts.append(f"the scheduler's input limit leaves {limit}")
    return f" ({'; '.join(parts)})"


def fits(prompt_tokens: int, max_new_tokens: int, context_length: int, margin: int = 0, reserved: int = 0) -> bool:
    """Whether the server will accept a request of this size (with ``margin`` to spare), counting the tokens it
    reserves for speculative decoding as SGLang's tokenizer manager does."""
    used = prompt_tokens + max(0, reserved)
    return used + max_new_tokens + margin <= context_length and used < context_length
