"""Bootstrap confidence intervals (core/intervals.py): held against scipy.stats.bootstrap itself on the same data
and seed, paired as the analysis pairs, quiet and explicit where there can be none, and shown in every report."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import warnings
import zlib
from typing import Any

import numpy as np
import pytest
from scipy import stats

from repo_paths import TESTS
from specbench_tui.core.analysis import analyse
from specbench_tui.core.intervals import (
    LEVEL,
    METHOD,
    MIN_UNITS,
    N_RESAMPLES,
    SEED,
    IntervalAnalysis,
    seed_for,
    with_intervals,
)
from specbench_tui.core.records import Measurement
from specbench_tui.core.results import RunAnalysis

DATA = TESTS / "data"


def _plan(configs: int = 2) -> dict[str, Any]:
    listed: list[dict[str, Any]] = [
        {"id": "base", "name": "ar", "algorithm": "autoregressive", "tp": 1, "argv": [], "params": {},
         "baseline": None, "speculative": False}]
    listed += [{"id": f"s{i}", "name": f"spec{i}", "algorithm": "eagle3", "tp": 1, "argv": [], "params": {},
                "baseline": "ar", "speculative": True} for i in range(1, configs)]
    return {"sweep": "t", "configs": listed,
            "workloads": [{"name": "code", "kind": "code", "temperature": 0.0, "repeats": 2}]}


def _runs(items: int = 8, repeats: int = 2, seed: int = 1, configs: int = 2) -> list[Measurement]:
    """Items of very different speeds (50..500 tok/s); each speculative configuration is ~2x its baseline on
    every item, with a few per cent of noise: the pairing is what makes the speedup precise."""
    rngs = [random.Random(seed * 1000 + i) for i in range(configs)]  # one per configuration: adding one moves none
    out = []
    for k in range(items):
        speed = 50.0 * (1 + k * 9 / max(items - 1, 1))
        for r in range(1, repeats + 1):
            rng = rngs[0]
            out.append(Measurement("base", "ar", "code", f"i{k}", r, "ok", decode_tps=speed * rng.uniform(0.97, 1.03),
                                   completion_tokens=100))
            for i in range(1, configs):
                rng = rngs[i]
                steps = rng.randint(30, 50)
                out.append(Measurement(f"s{i}", f"spec{i}", "code", f"i{k}", r, "ok",
                                       decode_tps=2.0 * speed * rng.uniform(0.97, 1.03), completion_tokens=100,
                                       verify_ct=steps, accept_length=100 / steps, correct_drafts=100 - steps,
                                       proposed_drafts=3 * steps))
    return out


def _analysed(ms: list[Measurement], configs: int = 2) -> RunAnalysis:
    return with_intervals(analyse(_plan(configs), ms), ms)


def _intervals(analysis: RunAnalysis) -> IntervalAnalysis:
    assert isinstance(analysis.intervals, IntervalAnalysis)
    return analysis.intervals


def test_the_speedup_interval_is_scipys_bootstrap_over_the_analysis_pairs() -> None:
    ms = _runs()
    analysis = _analysed(ms)
    row = analysis.row("s1", "code")
    assert row is not None and row.speedup is not None
    cell = _intervals(analysis).cell("s1", "code")
    assert cell is not None and cell.speedup is not None and cell.speedup.ok
    # The same pairs, in key order, and scipy called directly with the stated seed, level and method.
    keys = sorted((m.item, m.repeat) for m in ms if m.config_id == "base")
    mine = {(m.item, m.repeat): m.decode_tps for m in ms if m.config_id == "s1"}
    theirs = {(m.item, m.repeat): m.decode_tps for m in ms if m.config_id == "base"}
    x = np.array([mine[k] for k in keys])
    y = np.array([theirs[k] for k in keys])
    rng = np.random.default_rng([27, zlib.crc32(b"s1\0code\0speedup")])
    expected = stats.bootstrap((x, y), lambda a, b, axis: np.median(a, axis=axis) / np.median(b, axis=axis),
                               paired=True, vectorized=True, n_resamples=2000, confidence_level=0.95,
                               method="percentile", rng=rng).confidence_interval
    assert (SEED, N_RESAMPLES, LEVEL, METHOD) == (27, 2000, 0.95, "percentile")
    assert cell.speedup.low == pytest.approx(float(expected.low), rel=1e-12)
    assert cell.speedup.high == pytest.approx(float(expected.high), rel=1e-12)
    assert cell.speedup.estimate == row.speedup.median and cell.speedup.n == len(keys) == 16
    assert (cell.speedup.low or 0) < row.speedup.median < (cell.speedup.high or 0)


def test_acceptance_intervals_are_ratios_of_sums_over_requests() -> None:
    """The three acceptance figures of a cell are over the same requests: one scipy call resamples them once for
    all three (a statistic giving the three ratios of sums), seeded by the cell."""
    ms = _runs()
    analysis = _analysed(ms)
    cell = _intervals(analysis).cell("s1", "code")
    row = analysis.row("s1", "code")
    assert cell is not None and row is not None
    spec = [m for m in ms if m.config_id == "s1"]
    columns = [[(m.accept_length or 0) * (m.verify_ct or 0) for m in spec], [m.verify_ct for m in spec],
               [m.completion_tokens for m in spec], [m.verify_ct for m in spec],
               [m.correct_drafts for m in spec], [m.proposed_drafts for m in spec]]

    def ratios(*arrays: Any, axis: int) -> Any:
        return np.stack([arrays[i].sum(axis=axis) / arrays[i + 1].sum(axis=axis) for i in (0, 2, 4)])

    expected = stats.bootstrap(tuple(np.array(c, dtype=float) for c in columns), ratios, paired=True,
                               vectorized=True, n_resamples=2000, method="percentile",
                               rng=np.random.default_rng(seed_for("s1", "code", "acceptance"))).confidence_interval
    for k, interval in enumerate((cell.accept_length, cell.acceptance_length, cell.draft_acceptance_rate)):
        assert interval is not None and interval.ok and interval.n == 16
        assert (interval.low, interval.high) == pytest.approx((float(expected.low[k]), float(expected.high[k])),
                                                              rel=1e-12)
    assert cell.accept_length is not None and cell.accept_length.estimate == pytest.approx(row.accept_length)
    # a figure over other requests than the rest is resampled on its own, seeded by its name
    fewer = [m if m.config_id == "base" or m.item != "i0" else
             Measurement(m.config_id, m.config, m.workload, m.item, m.repeat, "ok", decode_tps=m.decode_tps,
                         completion_tokens=100, verify_ct=m.verify_ct, accept_length=m.accept_length) for m in ms]
    alone = _intervals(_analysed(fewer)).cell("s1", "code")
    assert alone is not None and alone.draft_acceptance_rate is not None and alone.draft_acceptance_rate.n == 14
    drafts = [m for m in fewer if m.config_id == "s1" and m.correct_drafts is not None]
    own = stats.bootstrap((np.array([m.correct_drafts for m in drafts], dtype=float),
                           np.array([m.proposed_drafts for m in drafts], dtype=float)),
                          lambda a, b, axis: a.sum(axis=axis) / b.sum(axis=axis), paired=True, vectorized=True,
                          n_resamples=2000, method="percentile",
                          rng=np.random.default_rng(seed_for("s1", "code", "draft_acceptance_rate")))
    assert alone.draft_acceptance_rate.low == pytest.approx(float(own.confidence_interval.low), rel=1e-12)


def test_breaking_the_pairing_widens_the_interval() -> None:
    """The speedup is precise because each item is compared with itself: resampling the two sides apart (what a
    broken pairing does) gives an interval many times wider, and so does pairing the wrong items."""
    ms = _runs(items=12)
    paired = _intervals(_analysed(ms)).cell("s1", "code")
    assert paired is not None and paired.speedup is not None and paired.speedup.ok
    width = (paired.speedup.high or 0) - (paired.speedup.low or 0)
    assert width < 0.2, width
    x = np.array(sorted(m.decode_tps or 0 for m in ms if m.config_id == "s1"))
    y = np.array(sorted(m.decode_tps or 0 for m in ms if m.config_id == "base"))
    apart = stats.bootstrap((x, y), lambda a, b, axis: np.median(a, axis=axis) / np.median(b, axis=axis),
                            paired=False, vectorized=True, n_resamples=2000, method="percentile",
                            rng=np.random.default_rng(0)).confidence_interval
    assert apart.high - apart.low > 5 * width
    # Pairs of the wrong items (the baseline's items shifted by one): the same two medians, a far wider interval.
    shifted = [Measurement("base", "ar", "code", f"i{(int(m.item[1:]) + 1) % 12}", m.repeat, "ok",
                           decode_tps=m.decode_tps) if m.config_id == "base" else m for m in ms]
    broken = _intervals(_analysed(shifted)).cell("s1", "code")
    assert broken is not None and broken.speedup is not None and broken.speedup.ok
    assert (broken.speedup.high or 0) - (broken.speedup.low or 0) > 3 * width


def test_too_few_units_and_no_variation_have_no_interval_and_no_warning() -> None:
    few = _runs(items=2)  # 4 pairs
    flat = [m if m.config_id == "base" else Measurement(m.config_id, m.config, m.workload, m.item, m.repeat, "ok",
                                                        decode_tps=m.decode_tps, completion_tokens=100,
                                                        verify_ct=25, accept_length=4.0)
            for m in _runs()]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        small = _intervals(_analysed(few)).cell("s1", "code")
        same = _intervals(_analysed(flat)).cell("s1", "code")
    assert small is not None and small.speedup is not None and small.accept_length is not None
    assert not small.speedup.ok and small.speedup.why == f"n<{MIN_UNITS}" and small.speedup.n == 4
    assert not small.accept_length.ok and small.accept_length.why == f"n<{MIN_UNITS}"
    assert same is not None and same.accept_length is not None and same.speedup is not None
    assert same.accept_length.why == "no variation" and same.accept_length.low == same.accept_length.high == 4.0
    assert same.speedup.ok and same.speedup.why is None
    baseline = _intervals(_analysed(_runs())).cell("base", "code")
    assert baseline is not None and baseline.speedup is None and baseline.accept_length is None


def test_intervals_are_reproducible_and_one_cell_does_not_move_another() -> None:
    ms = _runs(configs=2)
    first = _intervals(_analysed(ms)).cell("s1", "code")
    again = _intervals(_analysed(ms)).cell("s1", "code")
    more = _intervals(_analysed(_runs(configs=3), configs=3)).cell("s1", "code")
    assert first == again == more


def test_reports_show_the_interval_and_json_holds_its_fields() -> None:
    from specbench_tui.report.formats import render
    from specbench_tui.report.load import load_run

    run = load_run(DATA / "report_run_a")
    md = render(run, "md")
    assert "4.02x [3.86-4.05] +0.02/-0.19" in md and "4.83 ±0.06" in md and "(n<5)" in md
    assert "95% bootstrap confidence interval (percentile, 2000 resamples, seed 27" in md
    data = json.loads(render(run, "json"))["analysis"]["intervals"]
    assert (data["level"], data["method"], data["n_resamples"], data["seed"]) == (0.95, "percentile", 2000, 27)
    cell = next(c for c in data["cells"] if c["speedup"] and c["speedup"]["low"] is not None)
    assert set(cell["speedup"]) == {"estimate", "low", "high", "n", "why", "level", "method"}
    assert cell["speedup"]["low"] <= cell["speedup"]["estimate"] <= cell["speedup"]["high"]
    csv_text = render(run, "csv")
    assert "speedup_ci_low,speedup_ci_high,accept_length_ci_low,accept_length_ci_high,temperature" in \
        csv_text.splitlines()[0]


def test_the_acceptance_table_shows_the_interval_of_each_named_figure() -> None:
    from specbench_tui.report.formats import render
    from specbench_tui.report.load import load_run

    md = render(load_run(DATA / "acceptance_demo_run"), "md")
    assert "| eagle3-s2-d3 | 1.95 ±0.03 | 1.95 | 0.470 +0.016/-0.017 |" in md  # client length, draft rate
    assert "| eagle3-s2-d3 | 2.21 (n<5) | 2.21 | 0.604 (n<5) |" in md  # two prompts x two repeats


def test_whiskers_are_the_interval_where_there_is_one() -> None:
    from specbench_tui.report.figdata import bar_panels
    from specbench_tui.report.load import load_run

    analysis = load_run(DATA / "report_run_a").analysis
    _, panels = bar_panels(analysis, "speedup")
    bars = {b.config: b for b in next(p for p in panels if p.workload == "code").bars}
    assert bars["dflash-b16-tp1"].has_ci and bars["dflash-b16-tp1"].ci_low == pytest.approx(3.8372, abs=1e-4)
    assert not bars["ar-tp1"].has_ci and not bars["ddtree-b12-tp1"].has_ci  # the baseline; 3 pairs
    _, accept = bar_panels(analysis, "accept_length")
    names = [b.config for b in accept[0].bars]
    assert "ar-tp1" not in names and next(b for b in accept[0].bars if b.config == "dflash-b16-tp1").has_ci


def test_the_live_analysis_and_help_never_import_scipy() -> None:
    probe = ("import sys, contextlib, io\nfrom specbench_tui import cli\n"
             "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
             "    cli.main(['--help'])\n"
             "from specbench_tui.core.ledger import Ledger\n"
             "from specbench_tui.core.records import Measurement\n"
             "ms = [Measurement('c', 'c', 'w', f'i{k}', 1, 'ok', decode_tps=10.0 + k) for k in range(9)]\n"
             "Ledger.from_run({}, ms, []).analyse()\n"
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'numpy')))\n")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_compare_calls_an_acceptance_change_inside_both_intervals_noise() -> None:
    from dataclasses import replace

    from specbench_tui.core.intervals import Interval
    from specbench_tui.report.compare import _accept_change

    row = _analysed(_runs()).row("s1", "code")
    assert row is not None and row.accept_length is not None
    a, b = replace(row, accept_length=3.0), replace(row, accept_length=3.3)  # +10 %, over the 5 % threshold
    wide = (Interval(3.0, 2.7, 3.35, 16), Interval(3.3, 3.0, 3.6, 16))
    narrow = (Interval(3.0, 2.95, 3.05, 16), Interval(3.3, 3.25, 3.35, 16))
    assert _accept_change(a, b, 0.05).significant  # no intervals: the threshold alone
    assert not _accept_change(a, b, 0.05, wide).significant
    assert _accept_change(a, b, 0.05, narrow).significant
    assert _accept_change(a, b, 0.05, (Interval(3.0, None, None, 3, "n<5"), wide[1])).significant


def test_a_large_cell_is_resampled_in_batches_of_bounded_size() -> None:
    """100,000 requests (MAX_REQUESTS) would be 1.6 GB an array resampled at once; in batches the interval is the
    same kind of figure, drawn from the same seed."""
    import tracemalloc

    from specbench_tui.core.intervals import MAX_BATCH_VALUES, _sum_ratio, bootstrap

    rng = np.random.default_rng(5)
    n = 40_000
    num, den = [float(v) for v in rng.uniform(2, 4, n)], [1.0] * n
    tracemalloc.start()
    interval = bootstrap(sum(num) / sum(den), (num, den), _sum_ratio, ("c", "w", "big"))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert interval.ok and (interval.low or 0) < interval.estimate < (interval.high or 0)
    assert peak < 12 * 8 * MAX_BATCH_VALUES, peak  # a few arrays of one batch, never 2000 x 40,000 at once
