"""The model of speed: verify-step time and accepted length per step.

A decode step verifies ``V`` tokens per running request (``V = speculative_num_draft_tokens``, 1 without
speculation) after the draft model proposed them. Its time, at tensor parallelism ``tp``, is::

    overhead_ms + (weights_ms + compute_ms_per_token * bs * V + verify_ms_per_token * (V - 1)
                   + kv_ms_per_1k_ctx * ctx / 1000 + draft) / tp ** tp_exponent

where ``draft`` depends on the algorithm (EAGLE family: per draft step; DFLASH: one block forward;
DDTree: a block forward plus ``tree_build_ms_per_node * budget``; NGRAM: CPU time, not parallelised).
Each step commits ``1 + accepted`` tokens per request, ``accepted`` being the run of successes of a
chain of at most ``depth`` Bernoulli trials, draft ``k`` with ``alpha · position_decay ** (k − 1)`` (later drafts
of a chain are accepted less often; :meth:`SpeedModel.expected_conditional_acceptance` is the truth). ``alpha`` depends on the prompt kind, the
algorithm and the temperature; trees (DDTree, EAGLE with topk > 1) raise it with their size.

With the defaults a 27B model decodes at about 65 tok/s autoregressively at TP1 and DDTree with budget 15
reaches about 140 tok/s on code. In deterministic mode both the step time and the accepted length are
fixed, so a client measures exactly the configured rate; with ``batch_ms_per_token`` = c the step grows
with the batch, ``step + c·(bs − 1)·V``, acceptance unchanged, so a speculative configuration's speedup over
autoregressive decoding at concurrency B is ``L·(s_ar + c(B−1)) / (s_sp + c(B−1)V)`` and falls below 1 at
``B* = 1 + (L·s_ar − s_sp) / (c·(V − L))`` (:func:`ground_truth_crossover`).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from specbench_tui.sim.args import Resolved
from specbench_tui.sim.profile import first_rule


@dataclass(frozen=True)
class Deterministic:
    """Fixed step time and accepted length (fractions are spread evenly over steps)."""

    step_s: float
    accept_length: float
    ttft_s: float
    batch_s_per_token: float = 0.0
    """Ground truth under load: each request beyond the first adds this × the verify width to a step."""
    verify_width: int = 1
    warm_accept_length: float = 1.0
    """NGRAM: tokens per step while the corpus holds the output (a warm repeat)."""

    def step_at(self, batch_size: int, verify_width: int | None = None) -> float:
        """A verify step's time at ``batch_size`` running requests: ``step_s + c·(bs − 1)·V``."""
        width = self.verify_width if verify_width is None else verify_width
        return self.step_s + self.batch_s_per_token * max(0, batch_size - 1) * width

    def committed(self, step_index: int, length: float | None = None) -> int:
        """Tokens committed by a request's ``step_index``-th verify step (0-based)."""
        length = self.accept_length if length is None else length
        return math.floor((step_index + 1) * length + 1e-9) - math.floor(step_index * length + 1e-9)


def config_facts(resolved: Resolved) -> dict[str, object]:
    """The facts profile rules match on, for a resolved configuration."""
    return {
        "algorithm": resolved.algorithm,
        "budget": resolved.budget if resolved.algorithm == "DDTREE" else (
            resolved.speculative_num_draft_tokens or 0),
        "num_draft_tokens": resolved.speculative_num_draft_tokens or 0,
        "num_steps": resolved.speculative_num_steps or 0,
        "topk": resolved.speculative_eagle_topk or 0,
        "tp": resolved.tp_size,
        "dp": resolved.dp_size,
        "model": resolved.model_path,
        "attention_backend": resolved.attention_backend,
    }


class SpeedModel:
    """Step times and accepted lengths for one resolved server configuration."""

    def __init__(self, profile: dict[str, Any], resolved: Resolved) -> None:
        self.speed = profile["speed"]
        self.acceptance = profile["acceptance"]
        self.time_scale = float(profile["time_scale"])
        self.algorithm = resolved.algorithm
        self.tp = resolved.tp_size * max(1, resolved.pp_size)
        self.num_steps = resolved.speculative_num_steps or 1
        draft_tokens = resolved.speculative_num_draft_tokens
        if resolved.spec_on and draft_tokens is None:  # FROZEN_KV_MTP keeps an unset draft shape: one chain
            draft_tokens = self.num_steps + 1
        self.verify_width = (draft_tokens or 1) if resolved.spec_on else 1
        self.topk = resolved.speculative_eagle_topk or 1
        self.budget = resolved.budget
        block = resolved.speculative_dflash_block_size or profile["model"]["draft_block_size"]
        if self.algorithm == "DDTREE":
            self.depth = min(self.budget, block - 1)
            self.tree_nodes = self.budget
        elif self.algorithm in ("EAGLE", "EAGLE3", "STANDALONE", "FROZEN_KV_MTP"):
            self.depth = self.num_steps
            self.tree_nodes = self.verify_width - 1 if self.topk > 1 else 0
        else:
            self.depth = max(0, self.verify_width - 1)
            self.tree_nodes = 0
        self.deterministic = self._deterministic(profile, resolved)

    def _deterministic(self, profile: dict[str, Any], resolved: Resolved) -> Deterministic | None:
        det = dict(profile["deterministic"])
        if not det["enabled"]:
            return None
        rule = first_rule(det["config"], config_facts(resolved))
        if rule:
            det.update({k: v for k, v in rule.items()
                        if k in ("tok_s", "step_ms", "accept_length", "ttft_ms", "batch_ms_per_token",
                                 "warm_accept_length")})
            if "tok_s" in rule and "step_ms" not in rule:
                det["step_ms"] = None
        accept = float(det["accept_length"]) if self.algorithm != "NONE" else 1.0
        accept = min(accept, float(self.depth + 1))
        step_s = det["step_ms"] / 1000.0 if det["step_ms"] else accept / float(det["tok_s"])
        warm = det.get("warm_accept_length")
        warm = float(self.depth + 1) if warm is None else min(float(warm), float(self.depth + 1))
        return Deterministic(step_s=step_s, accept_length=accept, ttft_s=float(det["ttft_ms"]) / 1000.0,
                             batch_s_per_token=float(det.get("batch_ms_per_token") or 0.0) / 1000.0,
                             verify_width=self.verify_width,
                             warm_accept_length=warm if self.algorithm == "NGRAM" else accept)

    @property
    def tp_factor(self) -> float:
        return float(self.tp ** float(self.speed["tp_exponent"]))

    def prefill_seconds(self, new_tokens: int) -> float:
        """Time of a prefill forward over ``new_tokens`` tokens."""
        if self.deterministic:
            return self.deterministic.ttft_s
        per_s = float(self.speed["prefill_tok_s"]) * self.tp_factor
        return (float(self.speed["overhead_ms"]) / 1000.0 + new_tokens / per_s) * self.time_scale

    def draft_ms(self, batch_size: int, steps: int | None = None) -> float:
        """Draft cost of one verify step at TP1 (NGRAM's is CPU time); ``steps`` overrides the draft steps
        (``--speculative-adaptive``; 0: no drafting)."""
        if self.algorithm == "NONE" or steps == 0:
            return 0.0
        base = float(self.speed["draft_ms"].get(self.algorithm, 1.0))
        if self.algorithm in ("EAGLE", "EAGLE3", "STANDALONE", "FROZEN_KV_MTP"):
            base *= (self.num_steps if steps is None else steps) * (1.0 + 0.1 * (self.topk - 1))
        if self.algorithm == "DDTREE":
            base += float(self.speed["tree_build_ms_per_node"]) * self.budget
        return base * (1.0 + 0.02 * (batch_size - 1))

    def step_seconds(self, batch_size: int, context_tokens: int, rng: random.Random | None = None,
                     steps: int | None = None) -> float:
        """Time of one decode (verify) step for ``batch_size`` requests holding ``context_tokens`` in all;
        ``steps`` (adaptive) verifies ``steps + 1`` tokens per request instead of the configured width."""
        width = self.verify_width if steps is None else steps + 1
        if self.deterministic:
            return self.deterministic.step_at(batch_size, width)
        s = self.speed
        draft = self.draft_ms(batch_size, steps)
        cpu_draft = draft if self.algorithm == "NGRAM" else 0.0
        parallel = (float(s["weights_ms"]) + float(s["compute_ms_per_token"]) * batch_size * width
                    + float(s["verify_ms_per_token"]) * (width - 1)
                    + float(s["kv_ms_per_1k_ctx"]) * context_tokens / 1000.0 + (draft - cpu_draft))
        ms = float(s["overhead_ms"]) + cpu_draft + parallel / self.tp_factor
        if rng is not None and float(s["jitter"]) > 0:
            ms *= max(0.5, rng.gauss(1.0, float(s["jitter"])))
        return ms / 1000.0 * self.time_scale

    def alpha(self, kind: str, temperature: float) -> float:
        """Per-draft acceptance probability for a prompt ``kind`` at ``temperature``."""
        a = self.acceptance
        alpha = float(a["alpha"].get(kind, a["alpha"]["chat"])) * float(a["algorithm_scale"].get(self.algorithm, 1.0))
        alpha *= 1.0 - float(a["temperature_penalty"]) * min(max(temperature, 0.0), 1.0)
        if self.tree_nodes > 1:
            alpha = 1.0 - (1.0 - alpha) / (1.0 + float(a["tree_gain"]) * math.log(self.tree_nodes))
        return min(max(alpha, 0.0), 0.999)

    def context_factor(self, prompt_tokens: int) -> float:
        """How much of the acceptance is left at a prompt of ``prompt_tokens``: ``2 ** (-prompt_tokens / H)`` with
        H = ``acceptance.context_half_life_tokens`` (1.0 when it is 0: no decay)."""
        half = float(self.acceptance.get("context_half_life_tokens") or 0.0)
        return 2.0 ** (-max(0, prompt_tokens) / half) if half > 0 else 1.0

    def deterministic_length(self, prompt_tokens: int) -> float | None:
        """Deterministic mode: tokens per verify step at a prompt of ``prompt_tokens``,
        ``1 + (accept_length − 1) · context_factor`` (None outside deterministic mode)."""
        if self.deterministic is None:
            return None
        return 1.0 + (self.deterministic.accept_length - 1.0) * self.context_factor(prompt_tokens)

    @property
    def warm_alpha(self) -> float:
        """NGRAM: the acceptance of a draft the corpus holds (``acceptance.ngram_warm_alpha``)."""
        return float(self.acceptance["ngram_warm_alpha"])

    @property
    def position_decay(self) -> float:
        """``acceptance.position_decay`` of this algorithm: draft ``k`` is accepted (given ``k − 1`` were) with
        ``alpha · decay ** (k − 1)``."""
        return float(self.acceptance.get("position_decay", {}).get(self.algorithm, 1.0))

    def position_alpha(self, alpha: float, position: int, warm: int = 0) -> float:
        """P(accept draft ``position`` | the ``position − 1`` before it accepted), 1-based; a position NGRAM's
        corpus holds (``position ≤ warm``) is accepted with :attr:`warm_alpha`."""
        if position <= warm:
            return self.warm_alpha
        return min(max(alpha * self.position_decay ** (position - 1), 0.0), 0.999)

    def draw_accepted(self, rng: random.Random, alpha: float, depth: int | None = None, warm: int = 0) -> int:
        """Accepted drafts in one verify step (0..depth), excluding the bonus token: a chain of Bernoulli trials,
        position ``k`` with :meth:`position_alpha`; the first ``warm`` positions are known to NGRAM's corpus."""
        depth = self.depth if depth is None else depth
        accepted = 0
        while accepted < depth and rng.random() < self.position_alpha(alpha, accepted + 1, warm):
            accepted += 1
        return accepted

    def expected_conditional_acceptance(self, kind: str, temperature: float = 0.0, *,
                                        steps: int | None = None) -> list[float]:
        """Truth: conditional acceptance at positions 1..depth, P(accept k | accepted k − 1), for ``kind``
        (stochastic mode; a cold request). What a histogram of many verify steps converges to."""
        depth = self.depth if steps is None else steps
        if self.algorithm == "NONE" or depth <= 0:
            return []
        alpha = self.alpha(kind, temperature)
        return [self.position_alpha(alpha, k) for k in range(1, depth + 1)]

    def expected_histogram(self, kind: str, temperature: float = 0.0, *, steps: int | None = None) -> list[float]:
        """Truth: the fraction of verify steps that accept exactly 0, 1, …, depth drafts (SGLang's
        ``spec_correct_drafts_histogram`` normalised)."""
        conditional = self.expected_conditional_acceptance(kind, temperature, steps=steps)
        out: list[float] = []
        reach = 1.0
        for p in conditional:
            out.append(reach * (1.0 - p))
            reach *= p
        out.append(reach)
        return out

    def expected_accept_length(self, kind: str, temperature: float = 0.0, *, warm: bool = False,
                               steps: int | None = None) -> float:
        """Mean tokens per verify step (bonus included) for ``kind``: what ``accept len`` converges to.
        ``warm``: NGRAM on a repeat whose output the corpus holds (not flushed since); ``steps``: an adaptive
        tier's steps (0: one token per step)."""
        depth = self.depth if steps is None else steps
        if self.deterministic:
            length = self.deterministic.warm_accept_length if warm else self.deterministic.accept_length
            return min(length, float(depth + 1))
        if warm and self.algorithm == "NGRAM":
            return 1.0 + sum(self.warm_alpha**i for i in range(1, depth + 1))
        histogram = self.expected_histogram(kind, temperature, steps=depth)
        return 1.0 + sum(k * share for k, share in enumerate(histogram))


def ground_truth_crossover(ar_tok_s: float, spec_tok_s: float, accept_length: float, verify_width: int,
                           batch_ms_per_token: float) -> float:
    """The concurrency B* at which a deterministic speculative configuration (per-request ``spec_tok_s`` at
    batch 1, ``accept_length`` tokens per step, ``verify_width`` tokens verified per request) stops beating the
    autoregressive one (``ar_tok_s`` at batch 1) when every step grows by ``batch_ms_per_token`` × (bs − 1) ×
    verify width. Closed form: speedup(B) = L(s_ar + c(B−1)) / (s_sp + c(B−1)V) = 1 at
    B* = 1 + (L·s_ar − s_sp) / (c(V − L)), with s_ar = 1/ar_tok_s and s_sp = L/spec_tok_s (seconds per step).
    ``inf`` when it never stops paying (V ≤ L); below 1 when it never pays."""
    c = batch_ms_per_token / 1000.0
    length = accept_length
    s_ar, s_sp = 1.0 / ar_tok_s, length / spec_tok_s
    if verify_width <= length or c <= 0:
        return math.inf
    return 1.0 + (length * s_ar - s_sp) / (c * (verify_width - length))


def ground_truth_context_crossover(ar_tok_s: float, spec_tok_s: float, accept_length: float,
                                   half_life_tokens: float) -> float:
    """The prompt length C* at which a deterministic speculative configuration (``spec_tok_s`` and
    ``accept_length`` L₀ at an empty context) stops beating the autoregressive one (``ar_tok_s``) when its
    acceptance decays with context (``acceptance.context_half_life_tokens`` H). Its step time is fixed
    (L₀ / spec_tok_s), the tokens per step are L(C) = 1 + (L₀ − 1)·2^(−C/H), so the speedup is
    S(C) = L(C)·spec_tok_s / (L₀·ar_tok_s) and S(C*) = 1 at C* = H·log2((L₀ − 1) / (r − 1)) with
    r = L₀·ar_tok_s / spec_tok_s. ``inf`` when it pays at every context (r ≤ 1), 0 when it never pays."""
    r = accept_length * ar_tok_s / spec_tok_s
    if r <= 1.0:
        return math.inf
    if r >= accept_length:
        return 0.0
    return half_life_tokens * math.log2((accept_length - 1.0) / (r - 1.0))
