"""``--speculative-adaptive``: SGLang 0.5.23's per-batch-size step tiers (``speculative/adaptive_spec_params.py``).

Each batch-size slot (keys of the config: 1, 8, 32, 64 by default) has its candidate steps ({1,3,5,7},
{0,1,3}, {0,1}, {0}); a batch of ``bs`` requests is routed to the largest slot key ≤ ``bs`` (after padding
``bs`` up to a captured CUDA-graph size). Each slot starts at the configured steps if it is a candidate, else
at its middle candidate, and then follows an EMA of the accepted drafts per request (every
``update_interval`` verifies after ``warmup_batches``). Steps 0 means no speculation: one token per step.
The worker logs ``Switch adaptive runtime state: steps a -> b, draft_tokens x -> y`` when the running
state changes (``eagle_worker_v2.apply_runtime_state``) and ``Adaptive spec params updated: ...`` when a
slot's EMA moves it (``AdaptiveStepSlot._apply_target_steps``), both on rank 0 only.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from typing import Any

DEFAULT_ADAPTIVE_CONFIG: dict[str, Any] = {
    "1": {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25, "ceiling_coeff": 0},
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
}
"""SGLang's ``DEFAULT_ADAPTIVE_CONFIG``, verbatim."""


def bs_entries(cfg: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(k): e for k, e in cfg.items() if k.isdigit()}


def candidate_steps_of(cfg: dict[str, Any]) -> list[int]:
    """``resolve_candidate_steps_from_config``: the union of every slot's candidates, sorted."""
    return sorted({s for e in bs_entries(cfg).values() for s in e["candidate_steps"]})


def tier_steps(cfg: dict[str, Any], batch_size: int) -> list[int]:
    """The candidate steps of the slot a batch of ``batch_size`` is routed to (no CUDA-graph padding)."""
    keys = sorted(bs_entries(cfg))
    idx = bisect.bisect_right(keys, batch_size) - 1
    return sorted(set(bs_entries(cfg)[keys[max(0, idx)]]["candidate_steps"]))


class StepSlot:
    """``AdaptiveStepSlot``: the EMA of accepted drafts and the current steps of one batch-size slot."""

    def __init__(self, initial_steps: int, cfg: dict[str, Any], log: Callable[[str], None]) -> None:
        self.candidate_steps = sorted(set(cfg["candidate_steps"]))
        self.ema_alpha = cfg.get("ema_alpha", 0.2)
        self.update_interval = cfg.get("update_interval", 5)
        self.warmup_batches = cfg.get("warmup_batches", 10)
        self.down_hysteresis = cfg.get("down_hysteresis", -0.25)
        self.up_hysteresis = cfg.get("up_hysteresis", 0.0)
        self.ceiling_coeff = cfg.get("ceiling_coeff", 0)
        if initial_steps in self.candidate_steps:
            self.current_steps = initial_steps
        else:
            self.current_steps = self.candidate_steps[len(self.candidate_steps) // 2]
        self.ema_accept_len = float(self.current_steps - 1)
        self._batch_count = 0
        self._log = log

    def update(self, correct_per_req: list[int]) -> bool:
        if not correct_per_req:
            return False
        if self.current_steps > 0:
            avg = sum(correct_per_req) / len(correct_per_req)
            self.ema_accept_len = (1 - self.ema_alpha) * self.ema_accept_len + self.ema_alpha * avg
        self._batch_count += 1
        if self._batch_count <= self.warmup_batches:
            return False
        if (self._batch_count - self.warmup_batches) % self.update_interval != 0:
            return False
        return self._recompute()

    def _recompute(self) -> bool:
        old = self.current_steps
        idx = self.candidate_steps.index(old)
        if old == 0:
            idx = min(idx + 1, len(self.candidate_steps) - 1)
            target = self.candidate_steps[idx]
            if target > 0 and self.ema_accept_len < 0:
                self.ema_accept_len = float(target - 1)
            return self._apply(old, target)
        start = idx
        while idx > 0:
            prev = self.candidate_steps[idx - 1]
            threshold = (0.5 if prev == 0 else prev - 0.5) + self.down_hysteresis
            if self.ema_accept_len > threshold:
                break
            idx -= 1
        if idx >= start:
            while idx < len(self.candidate_steps) - 1:
                if self.ema_accept_len <= self.candidate_steps[idx] - 0.5 + self.up_hysteresis:
                    break
                idx += 1
        target = self.candidate_steps[idx]
        if self.ceiling_coeff > 0:
            ceiling = max(1, math.ceil(self.ema_accept_len * self.ceiling_coeff))
            if ceiling < target <= old:
                while idx > 0 and self.candidate_steps[idx] > ceiling:
                    idx -= 1
                target = self.candidate_steps[idx]
        return self._apply(old, target)

    def _apply(self, old: int, target: int) -> bool:
        if target == old:
            return False
        self.current_steps = target
        self._log(f"Adaptive spec params updated: steps {old} -> {target} (ema_accept_len={self.ema_accept_len:.2f})")
        return True


class AdaptiveSteps:
    """``AdaptiveSpeculativeParams`` + ``AdaptiveController``: routes a batch to its slot, switches the running
    state (logging SGLang's line) and feeds verify results back. ``steps`` is what the next verify runs."""

    def __init__(self, initial_steps: int, cfg: dict[str, Any], cuda_graph_bs: list[int] | None,
                 log: Callable[[str], None]) -> None:
        entries = bs_entries(cfg)
        self._keys = sorted(entries)
        self._slots = {bs: StepSlot(initial_steps, {**cfg, **entry}, log) for bs, entry in entries.items()}
        self._graph_bs = sorted(cuda_graph_bs) if cuda_graph_bs else None
        self._log = log
        self.steps = initial_steps
        self.steps_seen: dict[int, int] = {}
        """Verify steps run at each steps value since start (``/flush_cache`` does not reset it)."""
        first = self._slots[self._keys[0]]
        log(f"AdaptiveSpeculativeParams initialized: steps={first.current_steps}, "
            f"candidate_steps={first.candidate_steps}")

    def _route(self, batch_size: int) -> StepSlot:
        padded = batch_size
        if self._graph_bs is not None:
            idx = bisect.bisect_left(self._graph_bs, batch_size)
            padded = self._graph_bs[idx] if idx < len(self._graph_bs) else batch_size
        idx = bisect.bisect_right(self._keys, padded) - 1
        return self._slots[self._keys[max(0, idx)]]

    def _activate(self, steps: int) -> None:
        if steps != self.steps:
            self._log(f"Switch adaptive runtime state: steps {self.steps} -> {steps}, "
                      f"draft_tokens {self.steps + 1} -> {steps + 1}")
            self.steps = steps

    def activate_for_batch(self, batch_size: int) -> int:
        """``activate_step_by_batch``: the steps the coming verify of ``batch_size`` requests runs."""
        self._activate(self._route(batch_size).current_steps)
        self.steps_seen[self.steps] = self.steps_seen.get(self.steps, 0) + 1
        return self.steps

    def on_verify_complete(self, correct_per_req: list[int], batch_size: int) -> None:
        slot = self._route(batch_size)
        if slot.update(correct_per_req):
            self._activate(slot.current_steps)
