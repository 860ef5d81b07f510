"""core.analysis: the rules a decision rests on, on hand-built runs and on the synthetic run directory."""

from __future__ import annotations

import statistics
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from narrowing import present

from repo_paths import TESTS
from specbench_tui.core.analysis import analyse
from specbench_tui.core.cells import acceptance, spread_of
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    CrashDetected,
    Notice,
    WorkloadFinished,
    WorkloadNotRun,
)
from specbench_tui.core.records import Measurement
from specbench_tui.core.results import (
    ACCEPT_FROM_SERVER,
    FLAG_BURST,
    FLAG_IDLE,
    FLAG_MISMATCH,
    FLAG_NO_BASELINE,
    FLAG_ZERO_OUTPUT,
    LOSSLESS_MISMATCH,
    LOSSLESS_NA,
    LOSSLESS_PASS,
    to_json,
)
from specbench_tui.report.load import load_run

RUN_A = TESTS / "data" / "report_run_a"


def config(cid: str, name: str, algorithm: str = "ddtree", tp: int = 1, budget: int | None = 16,
           baseline: str | None = "ar", skip: str | None = None) -> dict[str, Any]:
    argv = ["--tp-size", str(tp)]
    if algorithm != "autoregressive":
        argv += ["--speculative-algorithm", algorithm.upper()]
    return {"id": cid, "name": name, "algorithm": algorithm, "tp": tp, "argv": argv,
            "params": {"budget": budget} if budget else {}, "baseline": baseline, "skip_reason": skip}


def plan(*configs: dict[str, Any], temperature: float = 0.0) -> dict[str, Any]:
    return {"sweep": "unit", "configs": list(configs),
            "workloads": [{"name": "w", "kind": "code", "temperature": temperature, "repeats": 2}]}


AR = config("a0", "ar", "autoregressive", budget=None, baseline=None)


def m(cid: str, name: str, item: str, repeat: int, tps: float | None = 100.0, status: str = "ok",
      **kw: Any) -> Measurement:
    return Measurement(config_id=cid, config=name, workload="w", item=item, repeat=repeat, status=status,
                       decode_tps=tps if status == "ok" else None, **kw)


def test_acceptance_is_weighted_by_verify_steps_and_falls_back_to_the_mean() -> None:
    ok = [m("s", "s", "i", 0, accept_length=4.0, verify_ct=30), m("s", "s", "j", 0, accept_length=2.0, verify_ct=10)]
    assert acceptance(ok) == (3.5, "verify-weighted")
    plain = [m("s", "s", "i", 0, accept_length=4.0), m("s", "s", "j", 0, accept_length=2.0)]
    assert acceptance(plain) == (3.0, "mean")
    assert acceptance([m("s", "s", "i", 0)]) == (None, None)


def test_zero_output_and_errors_are_counted_but_never_averaged() -> None:
    spec = config("s1", "spec")
    ms = [m("a0", "ar", "i", r, 50.0) for r in range(2)] + [
        m("s1", "spec", "i", 0, 150.0), m("s1", "spec", "i", 1, 100.0),
        m("s1", "spec", "j", 0, status="zero_output"), m("s1", "spec", "j", 1, status="error", error="boom")]
    row = analyse(plan(AR, spec), ms).row("s1", "w")
    assert row is not None
    assert (row.n_ok, row.n_zero_output, row.n_error) == (2, 1, 1)
    assert row.decode_tps is not None and row.decode_tps.median == 125.0
    assert (row.decode_tps.low, row.decode_tps.high, row.decode_tps.repeats) == (100.0, 150.0, 2)
    assert row.speedup is not None and row.speedup.median == 2.5
    assert (row.speedup.low, row.speedup.high) == (2.0, 3.0)  # per-repeat ratios 150/50 and 100/50
    assert FLAG_ZERO_OUTPUT in row.flags and row.errors == ("boom",)


def test_missing_baseline_is_said_never_guessed() -> None:
    orphan = config("s2", "orphan", baseline="ar-tp2")
    undeclared = config("s3", "lonely", baseline=None)
    ms = [m("a0", "ar", "i", 0, 50.0), m("s2", "orphan", "i", 0, 90.0), m("s3", "lonely", "i", 0, 90.0)]
    analysis = analyse(plan(AR, orphan, undeclared), ms)
    row = analysis.row("s2", "w")
    assert row and row.speedup is None and row.speedup_note == "no baseline: 'ar-tp2' is not in this run"
    assert FLAG_NO_BASELINE in row.flags
    lonely = analysis.row("s3", "w")
    assert lonely and lonely.speedup is None and lonely.speedup_note == "no baseline declared"
    assert any("ar-tp2" in note for note in analysis.notes)


def test_answers_sent_in_one_burst_have_no_rate_and_say_why() -> None:
    """A server that sends each answer in one piece (vLLM's CPU build on a busy box): no decode rate, no speedup,
    and the row says so instead of blaming a missing baseline."""
    spec = config("s5", "ngram-k4", "ngram", budget=None)
    burst = [m("s5", "ngram-k4", i, 0, None, ttft_s=0.5, e2e_s=0.5, completion_tokens=128) for i in ("i", "j")]
    row = analyse(plan(AR, spec), [m("a0", "ar", "i", 0, 50.0), *burst]).row("s5", "w")
    assert row and row.decode_tps is None and row.speedup is None and row.speedup_note == "no decode rate"
    assert FLAG_BURST in row.flags and FLAG_NO_BASELINE not in row.flags
    # One streamed answer among them is enough for a rate: no flag then.
    streamed = m("s5", "ngram-k4", "k", 0, 90.0, ttft_s=0.02, e2e_s=0.5, completion_tokens=128)
    # (the speedup pairs items: the baseline measured "k" too)
    base = [m("a0", "ar", "i", 0, 50.0), m("a0", "ar", "k", 0, 50.0)]
    row = analyse(plan(AR, spec), [*base, *burst, streamed]).row("s5", "w")
    assert row and FLAG_BURST not in row.flags and row.speedup is not None


def test_the_servers_workload_acceptance_stands_in_for_a_missing_per_request_one() -> None:
    spec = config("s6", "ngram-k2", "ngram", budget=None)
    events = [WorkloadFinished(config_id="s6", workload="w", measured=1, errors=0, zero_output=0,
                               server_log={"source": "metrics", "accept_length": 2.45})]
    row = analyse(plan(AR, spec), [m("a0", "ar", "i", 0, 50.0), m("s6", "ngram-k2", "i", 0, 60.0)], events).row("s6", "w")
    assert row and row.accept_length == 2.45 and row.accept_method == ACCEPT_FROM_SERVER
    # A per-request figure wins; the server's stays beside it.
    ms = [m("a0", "ar", "i", 0, 50.0), m("s6", "ngram-k2", "i", 0, 60.0, accept_length=1.45, verify_ct=88)]
    row = analyse(plan(AR, spec), ms, events).row("s6", "w")
    assert row and row.accept_length == 1.45 and row.accept_method == "verify-weighted"
    assert row.server_log_accept_length == 2.45


def test_speculation_at_acceptance_one_is_flagged() -> None:
    idle = config("s4", "ngram", "ngram", budget=None)
    ms = [m("a0", "ar", "i", 0, 50.0), m("s4", "ngram", "i", 0, 49.0, accept_length=1.01, verify_ct=100)]
    row = analyse(plan(AR, idle), ms).row("s4", "w")
    assert row and FLAG_IDLE in row.flags
    baseline_row = analyse(plan(AR, idle), ms).row("a0", "w")
    assert baseline_row and FLAG_IDLE not in baseline_row.flags and baseline_row.speedup_note == "baseline"


def test_lossless_mismatch_bars_the_fastest_from_best() -> None:
    fast = config("s5", "fast-wrong", budget=64)
    slow = config("s6", "slow-right", budget=8)
    ms = [m("a0", "ar", "i", r, 50.0, output_sha="x") for r in range(2)]
    ms += [m("s5", "fast-wrong", "i", 0, 200.0, output_sha="x"), m("s5", "fast-wrong", "i", 1, 200.0, output_sha="y")]
    ms += [m("s6", "slow-right", "i", r, 120.0, output_sha="x") for r in range(2)]
    analysis = analyse(plan(AR, fast, slow), ms)
    wrong = analysis.row("s5", "w")
    assert wrong and wrong.lossless.status == LOSSLESS_MISMATCH and FLAG_MISMATCH in wrong.flags
    assert [(x.item, x.repeat, x.output_sha, x.baseline_sha) for x in wrong.lossless.mismatches] == [("i", 1, "y", "x")]
    right = analysis.row("s6", "w")
    assert right and right.lossless.status == LOSSLESS_PASS and right.lossless.checked == 2
    best = analysis.best_for("w")
    assert best and best.config == "slow-right"
    assert [(b.config, b.why) for b in best.barred] == [("fast-wrong", "lossless mismatch (1/2)")]


def test_lossless_is_not_applicable_when_sampling() -> None:
    spec = config("s1", "spec")
    ms = [m("a0", "ar", "i", 0, 50.0, output_sha="x"), m("s1", "spec", "i", 0, 90.0, output_sha="y")]
    row = analyse(plan(AR, spec, temperature=0.7), ms).row("s1", "w")
    assert row and row.lossless.status == LOSSLESS_NA
    assert row.lossless.note == "not applicable: sampled at temperature 0.7" and FLAG_MISMATCH not in row.flags


def test_states_reasons_and_crashes_come_from_events() -> None:
    crashed = config("c1", "crashy")
    skipped = config("k1", "skippy", skip="does not fit")
    events = [
        CrashDetected(config_id="c1", signature="cuda_illegal_instruction", line="CUDA error", excerpt=("a", "b")),
        WorkloadNotRun(config_id="c1", workload="w", reason="server crashed"),
        ConfigFinished(config_id="c1", name="crashy", state=ConfigState.CRASHED, reason="exit -6",
                       signature="cuda_illegal_instruction"),
        Notice(level="warning", text="something odd", config_id="c1"),
    ]
    analysis = analyse(plan(AR, crashed, skipped), [m("a0", "ar", "i", 0)], events)
    problems = {c.name: c for c in analysis.problems()}
    assert set(problems) == {"crashy", "skippy"}
    assert problems["crashy"].signature == "cuda_illegal_instruction"
    assert problems["crashy"].excerpt == ("a", "b")
    assert problems["crashy"].workloads_not_run == (("w", "server crashed"),)
    assert problems["skippy"].state == "skipped" and problems["skippy"].reason == "does not fit"
    assert "warning: something odd (crashy)" in analysis.notes
    assert analysis.config("a0") and present(analysis.config("a0")).state == "incomplete"  # measured, no ConfigFinished


def test_without_a_plan_configurations_come_from_results() -> None:
    analysis = analyse({}, [m("zz", "mystery", "i", 0, 42.0)])
    assert [c.name for c in analysis.configs] == ["mystery"]
    row = analysis.row("zz", "w")
    assert row and row.decode_tps and row.decode_tps.median == 42.0 and row.speedup is None
    assert any("plan.json" in n for n in analysis.notes)


def test_synthetic_run_reads_as_designed() -> None:
    analysis = load_run(RUN_A).analysis
    states = {c.name: c.state for c in analysis.configs}
    assert states["ddtree-b8-tp1"] == states["ddtree-b12-tp1"] == "crashed"
    assert states["ddtree-b64-tp4"] == "skipped"
    code_tp1 = analysis.best_for("code", 1)
    assert code_tp1 and code_tp1.config == "ddtree-b32-tp1"
    assert [b.config for b in code_tp1.barred] == ["ddtree-b64-tp1"]
    haiku = analysis.best_for("haiku")
    assert haiku and [b.why for b in haiku.barred] == ["1 zero-output"]
    ngram = analysis.row(next(c.id for c in analysis.configs if c.name == "ngram-tp1"), "code")
    assert ngram and FLAG_IDLE in ngram.flags
    assert all(b.config not in ("ddtree-b8-tp1", "ddtree-b12-tp1") for b in analysis.best)
    data = to_json(analysis)
    assert "_rows_by_key" not in data and len(data["rows"]) == len(analysis.configs) * len(analysis.workloads)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(1, 1000)), min_size=1, max_size=30))
def test_median_lies_within_the_spread_of_repeats(values: list[tuple[int, float]]) -> None:
    ms = [m("s", "s", f"i{k}", repeat, tps) for k, (repeat, tps) in enumerate(values)]
    spread = spread_of(ms, "decode_tps")
    assert spread is not None
    assert spread.low - 1e-9 <= spread.median <= spread.high + 1e-9
    assert spread.median == statistics.median(v for _, v in values)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(1, 10), st.integers(1, 500)), min_size=1, max_size=20))
def test_weighted_acceptance_is_between_the_extremes(pairs: list[tuple[float, int]]) -> None:
    ms = [m("s", "s", f"i{k}", 0, accept_length=a, verify_ct=v) for k, (a, v) in enumerate(pairs)]
    value, method = acceptance(ms)
    assert method == "verify-weighted" and value is not None
    assert min(a for a, _ in pairs) - 1e-9 <= value <= max(a for a, _ in pairs) + 1e-9


def test_analysis_and_reports_import_no_textual() -> None:
    """The TUI uses analysis.py, but analysis and the report layer must work without Textual."""
    import subprocess
    import sys

    code = ("import sys, specbench_tui.core.analysis, specbench_tui.report.cli, specbench_tui.report.charts\n"
            "assert 'textual' not in sys.modules, 'textual imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
