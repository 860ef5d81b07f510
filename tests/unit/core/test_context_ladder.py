"""The context ladder (issue 47): a distinct filler per rung and repeat, per rung figures (acceptance length,
per-position acceptance, decode tok/s, speedup at the same rung), C* with its bracket, and the adaptive search
along context held to the simulator's closed form with at most half the grid's points."""

from __future__ import annotations

import itertools
import math
import os
from typing import Any

import pytest

from specbench_tui.core.analysis import analyse
from specbench_tui.core.context_ladder import LADDER_QUESTION, filler_seed, ladder_text, rung_order
from specbench_tui.core.crossover.ladder import ladder_needs
from specbench_tui.core.crossover.results import ALWAYS_PAYS, CROSSES, NEVER_PAYS, NOT_MONOTONIC, UNDETERMINED
from specbench_tui.core.records import Measurement
from specbench_tui.sim.speed import ground_truth_context_crossover

RUNGS: list[int | str] = [1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, "max"]
MAX_TOKENS = 40000
"""What the ``max`` rung measures in these tests (the model's limit less the output)."""
HALF_LIFE = 6000.0
TRUTH = {"s3": (200.0, 3.5), "s5": (300.0, 4.0), "s2": (60.0, 1.5), "s9": (900.0, 4.0)}
"""config id → (tok/s at an empty context, accept length there) against 100 tok/s autoregressive: s3 and s5
cross inside the ladder, s2 never pays, s9 pays at every rung."""


def cfg(cid: str, speculative: bool = True) -> dict[str, Any]:
    return {"id": cid, "name": cid, "algorithm": "eagle3" if speculative else "autoregressive", "tp": 1,
            "argv": ["--speculative-algorithm", "EAGLE3"] if speculative else [], "params": {},
            "baseline": "ar" if speculative else None, "skip_reason": None}


AR = {**cfg("ar", speculative=False)}


def plan(*configs: dict[str, Any], rungs: list[int | str] = RUNGS, search: str = "adaptive",
         repeats: int = 1) -> dict[str, Any]:
    return {"sweep": "ladder", "configs": list(configs),
            "workloads": [{"name": "ladder", "kind": "context_ladder", "temperature": 0.0, "repeats": repeats,
                           "params": {"prompt_tokens": list(rungs), "search": search}}]}


def context_of(rung: str) -> int:
    return MAX_TOKENS if rung == "max" else int(rung)


def truth_speedup(cid: str, context: float, truth: dict[str, tuple[float, float]] = TRUTH,
                  half_life: float = HALF_LIFE) -> float:
    """The simulator's deterministic mode with ``acceptance.context_half_life_tokens``: a fixed step time, the
    tokens per step decaying as 1 + (L₀ − 1)·2^(−C/H)."""
    tok_s, length = truth[cid]
    left = float(2.0 ** (-context / half_life))  # the share of the excess acceptance left at this context
    return (1.0 + (length - 1.0) * left) * tok_s / (length * 100.0)


DEMO_HALF_LIFE = 3200.0
DEMO_TRUTH = {"s11": (500.0, 10.0), "s15": (264.0, 16.0)}
"""sweeps/sim-profiles/context-ladder.toml's deep drafts: their speedup falls steeply along context."""


def rung_ms(cid: str, rung: str, repeat: int, tps: float, **extra: Any) -> Measurement:
    return Measurement(config_id=cid, config=cid, workload="ladder", item=rung, repeat=repeat, status="ok",
                       decode_tps=tps, completion_tokens=64, prompt_tokens=context_of(rung), **extra)


# ------------------------------------------------------------------------------------------------ filler


def word_grams(text: str, n: int = 4) -> set[tuple[str, ...]]:
    words = text.split()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def test_each_rung_and_repeat_has_a_filler_of_its_own() -> None:
    """No prefix beyond the first word and no word 4-gram but the question's is shared between any two
    (rung, repeat) prompts: nothing a prefix cache or an n-gram corpus kept from one helps the next."""
    texts = {(rung, repeat): ladder_text(30_000, filler_seed("ladder", rung, repeat), 10**7)
             for rung in ("1024", "2048", "max") for repeat in (1, 2)}
    question = word_grams(LADDER_QUESTION)
    for a, b in itertools.combinations(texts, 2):
        shared = word_grams(texts[a]) & word_grams(texts[b])
        assert shared <= question, (a, b, sorted(shared - question)[:3])
        assert len(os.path.commonprefix([texts[a], texts[b]])) < len("Ledger ") + 4, (a, b)
    # the same (rung, repeat) is the same text for every configuration (their speedups pair)
    assert ladder_text(30_000, filler_seed("ladder", "1024", 1), 10**7) == texts[("1024", 1)]


def test_rungs_are_ordered_smallest_first_with_max_last() -> None:
    assert rung_order([4096, "max", 1024]) == ["1024", "4096", "max"]


# ------------------------------------------------------------------------------------------ rung figures


def test_a_rung_has_its_acceptance_per_position_tok_s_and_the_speedup_at_that_same_rung() -> None:
    ms = [rung_ms("ar", r, 1, 100.0) for r in ("1024", "8192")]
    ms += [rung_ms("s3", "1024", 1, 180.0, accept_length=3.0, verify_ct=10, accept_histogram=(2, 2, 6)),
           rung_ms("s3", "8192", 1, 90.0, accept_length=1.5, verify_ct=10, accept_histogram=(6, 3, 1))]
    ladder = analyse(plan(AR, cfg("s3"), rungs=[1024, 8192]), ms, []).ladder
    low, high = ladder.rung("s3", "ladder", "1024"), ladder.rung("s3", "ladder", "8192")
    assert low.point.speedup.median == pytest.approx(1.8) and high.point.speedup.median == pytest.approx(0.9)
    assert low.point.per_user_tps.median == 180.0 and low.point.accept_length == 3.0
    assert low.conditional == pytest.approx((0.8, 0.75)) and high.conditional == pytest.approx((0.4, 0.25))
    c = ladder.crossover("s3", "ladder")
    assert c.status == CROSSES and (c.low, c.high) == (1024.0, 8192.0) and 1024 < c.estimate < 8192
    assert c.axis == "context"


@pytest.mark.parametrize(("curve", "status", "bracket"), [
    ({"1024": 1.5, "4096": 1.1, "max": 0.8}, CROSSES, (4096.0, float(MAX_TOKENS))),
    ({"1024": 0.9, "max": 0.5}, NEVER_PAYS, (None, 1024.0)),
    ({"1024": 2.0, "max": 1.2}, ALWAYS_PAYS, (float(MAX_TOKENS), None)),
    ({"1024": 1.5, "4096": 0.9, "max": 1.3}, NOT_MONOTONIC, (1024.0, 4096.0)),
])
def test_c_star_status_and_bracket(curve: dict[str, float], status: str, bracket: tuple) -> None:
    ms = [m for rung, s in curve.items() for m in (rung_ms("ar", rung, 1, 100.0), rung_ms("s3", rung, 1, 100.0 * s))]
    c = analyse(plan(AR, cfg("s3"), rungs=[1024, 4096, "max"]), ms, []).ladder.crossover("s3", "ladder")
    assert c.status == status and (c.low, c.high) == bracket


def test_a_clamped_rung_is_shown_but_never_decides_c_star() -> None:
    ms = [rung_ms("ar", r, 1, 100.0) for r in ("1024", "4096")]
    ms += [rung_ms("s3", "1024", 1, 150.0), rung_ms("s3", "4096", 1, 80.0, clamped=True)]
    ladder = analyse(plan(AR, cfg("s3"), rungs=[1024, 4096]), ms, []).ladder
    rung = ladder.rung("s3", "ladder", "4096")
    assert rung.clamped and rung.point.noisy and rung.point.speedup.median == pytest.approx(0.8)
    c = ladder.crossover("s3", "ladder")
    assert c.status == UNDETERMINED and c.high is None and "not usable" in c.note


# ------------------------------------------------------------------------------------------ adaptive search


def search_against_the_truth(p: dict[str, Any], truth: dict[str, tuple[float, float]] = TRUTH,
                             half_life: float = HALF_LIFE) -> dict[tuple[str, str], Measurement]:
    """The search loop as the engine runs it (refresh, measure the rungs wanted, repeat), each wanted rung
    measured at the closed-form speedup (the baseline, ar, at 100 tok/s)."""
    measured: dict[tuple[str, str], Measurement] = {}
    for _ in range(30):
        a = analyse(p, list(measured.values()), [])
        needs, _ = ladder_needs(a.ladder, list(a.configs))
        new = [(cid, rung) for cid, ws in needs.items() for rung in ws["ladder"] if (cid, rung) not in measured]
        if not new:
            break
        for cid, rung in new:
            tps = 100.0 if cid == "ar" else 100.0 * truth_speedup(cid, context_of(rung), truth, half_life)
            measured[(cid, rung)] = rung_ms(cid, rung, 1, tps)
    return measured


@pytest.mark.parametrize(("truths", "half_life"), [(TRUTH, HALF_LIFE), (DEMO_TRUTH, DEMO_HALF_LIFE)])
def test_the_adaptive_search_finds_c_star_within_one_rung_with_at_most_half_the_grid(
        truths: dict[str, tuple[float, float]], half_life: float) -> None:
    configs = [AR, *(cfg(cid) for cid in truths)]
    p = plan(*configs)
    measured = search_against_the_truth(p, truths, half_life)
    ladder = analyse(p, list(measured.values()), []).ladder
    grid = [float(context_of(str(r))) for r in RUNGS]
    for cid, (tok_s, length) in truths.items():
        truth = ground_truth_context_crossover(100.0, tok_s, length, half_life)
        c = ladder.crossover(cid, "ladder")
        low = c.low if c.low is not None else -math.inf
        high = c.high if c.high is not None else math.inf
        assert low < truth <= high, (cid, truth, c)
        if c.status == CROSSES:  # bracketed between neighbouring rungs: within one rung of the truth
            assert grid.index(c.high) == grid.index(c.low) + 1, (cid, c)
    statuses = {"s3": CROSSES, "s5": CROSSES, "s2": NEVER_PAYS, "s9": ALWAYS_PAYS, "s11": CROSSES, "s15": CROSSES}
    assert {c.config: c.status for c in ladder.crossovers} == {cid: statuses[cid] for cid in truths}
    assert len(measured) <= len(configs) * len(RUNGS) / 2, len(measured)
    assert ladder.measured == len(measured) and ladder.grid == len(configs) * len(RUNGS)


def test_the_closed_form_is_where_the_truth_speedup_crosses_one() -> None:
    for cid, (tok_s, length) in TRUTH.items():
        c_star = ground_truth_context_crossover(100.0, tok_s, length, HALF_LIFE)
        if 0 < c_star < math.inf:
            assert truth_speedup(cid, c_star) == pytest.approx(1.0, abs=1e-12)


def test_the_search_starts_with_the_ends_and_grid_measures_every_rung() -> None:
    a = analyse(plan(AR, cfg("s3")), [], [])
    needs, _ = ladder_needs(a.ladder, list(a.configs))
    assert needs["s3"]["ladder"] == {"1024", "max"} == needs["ar"]["ladder"]
    a = analyse(plan(AR, cfg("s3"), search="grid"), [], [])
    needs, _ = ladder_needs(a.ladder, list(a.configs))
    assert needs["s3"]["ladder"] == {str(r) for r in RUNGS} == needs["ar"]["ladder"]
