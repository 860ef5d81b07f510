"""The KV pool's budget: prefill admission, decode-memory check and retraction, as SGLang 0.5.23 does them.

- The running-request cap (``kv_cache_configurator.resolve_max_num_reqs``): with ``--max-running-requests``
  set, ``min(max(1, requested // attn_dp_size), pool // 2)``; unset (the autoregressive baseline, UNO),
  ``min(max(min(int(pool / context_len * 512), 4096), 2048), pool // 2)``. Speculative algorithms other
  than UNO come here with 48 (``speculative_hook.py``).
- Admission (``PrefillAdder.add_one_req``): a waiting request is admitted when the pool holds its uncached
  input plus ``min(max_new_tokens − output, 4096)`` on top of what the running requests already use and are
  expected to add, ``min(remaining, 4096) × new_token_ratio`` each (``× 1`` with ``ignore_eos``).
- The ratio (``NewTokenRatioTracker``): starts at ``SGLANG_INIT_NEW_TOKEN_RATIO`` 0.7 ×
  ``--schedule-conservativeness``, decays to 0.14 × that over 600 decode steps, and after a retraction is
  re-estimated as ``min(1, (decoded + 20 × n) / (Σ max_new_tokens + 1))`` over the requests kept.
- Decode (``update_running_batch`` / ``retract_decode``): a running speculative request holds its tokens plus
  :func:`decode_reserve` slots (an autoregressive one needs one more per step); when that does not fit, requests are retracted, fewest output tokens first (then the longest input), until
  they fit, always keeping one; each goes back to the waiting queue, is prefilled again (input + output so
  far) and counts one ``num_retractions``. The scheduler logs ``KV cache pool is full. Retract requests.
  #retracted_reqs: N, #new_tokens_gained: G, #new_token_ratio: A -> B``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

CLIP_MAX_NEW_TOKENS = 4096
"""``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION`` (``schedule_policy.py``)."""
INIT_NEW_TOKEN_RATIO = 0.7
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
NEW_TOKEN_RATIO_DECAY_STEPS = 600
RETRACT_DECODE_STEPS = 20


class PoolRequest(Protocol):
    """What the budget reads of a request."""

    input_ids: list[int]
    output_ids: list[int]
    max_new_tokens: int
    ignore_eos: bool

    @property
    def context_tokens(self) -> int: ...


def decode_reserve(values: dict[str, Any], max_draft_tokens: int | None = None) -> int:
    """KV slots a running speculative request holds beyond its tokens (``get_alloc_reserve_per_decode``):
    twice ``max(topk × steps, max draft tokens)`` (UNO: its verify width + 1), 0 without speculation."""
    algorithm = values.get("speculative_algorithm")
    if algorithm is None:
        return 0
    widest = max(values.get("speculative_num_draft_tokens") or 0, max_draft_tokens or 0)
    if algorithm == "UNO":
        return 2 * (widest + 1)
    steps, topk = values.get("speculative_num_steps") or 1, values.get("speculative_eagle_topk") or 1
    return 2 * max(steps * topk, widest)


def max_running_requests(requested: int | None, pool_tokens: int, context_len: int, attn_dp_size: int = 1) -> int:
    """``resolve_max_num_reqs``: the scheduler's running-request cap per DP worker."""
    if requested is not None:
        return max(1, min(max(1, requested // max(1, attn_dp_size)), pool_tokens // 2))
    estimated = max(min(int(pool_tokens / max(1, context_len) * 512), 4096), 2048)
    return max(1, min(estimated, pool_tokens // 2))


class TokenRatio:
    """``NewTokenRatioTracker``: how much of its remaining ``max_new_tokens`` a running request is expected to use."""

    def __init__(self, conservativeness: float = 1.0) -> None:
        self.init = min(INIT_NEW_TOKEN_RATIO * conservativeness, 1.0)
        self.min = min(self.init * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        self.decay = (self.init - self.min) / NEW_TOKEN_RATIO_DECAY_STEPS
        self.current = self.init

    def decay_step(self) -> None:
        self.current = max(self.current - self.decay, self.min)

    def reset(self) -> None:
        self.current = self.init

    @staticmethod
    def after_retract(kept: Sequence[PoolRequest]) -> float:
        decoded = sum(len(r.output_ids) for r in kept)
        max_new = sum(r.max_new_tokens for r in kept)
        return min(1.0, (decoded + RETRACT_DECODE_STEPS * len(kept)) / (max_new + 1))


def _remaining(req: PoolRequest) -> int:
    return min(max(req.max_new_tokens - len(req.output_ids), 0), CLIP_MAX_NEW_TOKENS)


def running_offset(running: Sequence[PoolRequest], ratio: float) -> float:
    """``_get_running_request_total_token_offset`` summed: what the running requests are expected to add."""
    return sum(_remaining(r) * (1.0 if r.ignore_eos else ratio) for r in running)


def need(req: PoolRequest, extend: int) -> int:
    """What admitting ``req`` reserves: its uncached input and ``min(remaining new tokens, 4096)``."""
    return extend + _remaining(req)


def admits(pool_tokens: int, used: int, running: Sequence[PoolRequest], ratio: float, extend: int,
           req: PoolRequest, already: float = 0.0) -> bool:
    """Whether a waiting request fits next to the running ones (and ``already`` tokens admitted this round)."""
    return used + running_offset(running, ratio) + already + need(req, extend) <= pool_tokens


def retraction_order(reqs: Sequence[PoolRequest]) -> list[int]:
    """``_get_decode_retraction_order``: indices most-preferred-to-keep first (the end is retracted first)."""
    return sorted(range(len(reqs)), key=lambda i: (len(reqs[i].output_ids), -len(reqs[i].input_ids)), reverse=True)


def retract_message(retracted: int, gained: int, old_ratio: float, new_ratio: float) -> str:
    """``update_running_batch``'s warning, as SGLang formats it."""
    return (f"KV cache pool is full. Retract requests. #retracted_reqs: {retracted}, "
            f"#new_tokens_gained: {gained}, #new_token_ratio: {old_ratio:.4f} -> {new_ratio:.4f}")
