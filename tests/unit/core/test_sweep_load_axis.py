"""The load axis in a sweep file: concurrency, request_rate and their keys, each error at its line."""

from __future__ import annotations

from pathlib import Path

import pytest
from narrowing import present

from repo_paths import REPO
from specbench_tui.core.errors import SweepError
from specbench_tui.core.load import LoadSpec
from specbench_tui.core.plan import build_plan
from specbench_tui.core.sweep.loader import load_sweep

HEAD = '[sweep]\nname = "s"\n\n[[configs]]\nname = "ar"\n\n[[workloads]]\nkind = "code"\n'


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(HEAD + body)
    return path


def issues(tmp_path: Path, body: str) -> list[str]:
    with pytest.raises(SweepError) as info:
        load_sweep(write(tmp_path, body))
    return [str(i) for i in info.value.issues]


def test_a_workload_without_a_load_axis_has_none(tmp_path: Path) -> None:
    assert load_sweep(write(tmp_path, "")).workloads[0].load is None


def test_concurrency_and_rate_with_their_defaults(tmp_path: Path) -> None:
    spec = load_sweep(write(tmp_path, "concurrency = [1, 8, 64]\nrequest_rate = [0.5, 2]\n")).workloads[0]
    load = spec.load
    assert load == LoadSpec(concurrency=(1, 8, 64), request_rate=(0.5, 2.0))
    assert load.points() == ["c1", "c8", "c64", "r0.5", "r2"]
    assert load.search == "adaptive" and load.waves == 4 and load.slo is None
    assert spec.requests == sum(load.requests_at(p) + load.warmup_requests(p, spec.warmup) for p in load.points())
    assert load.warmup_requests("c64", 1) == 64 and load.warmup_requests("r2", 1) == 1  # a wave, a request
    assert LoadSpec.from_json(load.to_json()) == load


def test_a_single_value_needs_no_brackets_and_slo_is_read(tmp_path: Path) -> None:
    load = load_sweep(write(tmp_path, "concurrency = 8\nrequests = 20\nsearch = \"grid\"\narrival_seed = 3\n"
                                      "slo = { ttft_ms = 500, itl_ms = 50, percentile = 90 }\n")).workloads[0].load
    assert load is not None and load.slo is not None
    assert load.concurrency == (8,) and load.requests == 20 and load.search == "grid" and load.arrival_seed == 3
    assert load.slo.ttft_ms == 500 and load.slo.itl_ms == 50 and load.slo.e2e_ms is None and load.slo.percentile == 90


def test_the_plan_carries_the_load_axis(tmp_path: Path) -> None:
    plan = build_plan(load_sweep(write(tmp_path, "concurrency = [1, 4]\n")))
    workloads = plan.to_json()["workloads"]
    assert isinstance(workloads, list) and isinstance(workloads[0], dict)
    load = workloads[0]["load"]
    assert isinstance(load, dict)
    assert load["concurrency"] == [1, 4]


@pytest.mark.parametrize(("body", "line", "text"), [
    ("concurrency = [1, 0]\n", 9, "expected a positive number"),
    ("concurrency = [1, 1]\n", 9, "listed twice"),
    ("concurrency = [1, 2.5]\n", 9, "expected an integer"),
    ("concurrency = []\n", 9, "no load point"),
    ("request_rate = [-1]\n", 9, "expected a positive number"),
    ("requests = 10\n", 9, "belongs to a load axis"),
    ("concurrency = [1]\nsearch = \"bisect\"\n", 10, "unknown search"),
    ("request_rate = [1]\nwaves = 2\n", 10, "waves counts closed-loop rounds"),
    ("concurrency = [1]\nslo = { ttft = 5 }\n", 10, "unknown key 'ttft'"),
    ("concurrency = [1]\nslo = { percentile = 99 }\n", 10, "needs at least one limit"),
    ("concurrency = [1]\nnoise_threshold = 0\n", 10, "relative spread"),
])
def test_bad_load_keys_are_refused_at_their_line(tmp_path: Path, body: str, line: int, text: str) -> None:
    found = issues(tmp_path, body)
    assert any(f"s.toml:{line}:" in i and text in i for i in found), found


def test_an_agentic_workload_cannot_be_put_under_load(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(HEAD.replace('kind = "code"', 'kind = "agentic"') + "concurrency = [4]\n")
    with pytest.raises(SweepError) as info:
        load_sweep(path)
    assert "cannot be put under load" in str(info.value)


def test_the_shipped_crossover_demo_validates() -> None:
    sweep = load_sweep(REPO / "sweeps" / "crossover-demo.toml")
    assert present(sweep.workloads[0].load).concurrency == (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def test_validate_prints_the_load_axis(tmp_path: Path) -> None:
    from specbench_tui.core.planview import format_plan

    text = format_plan(build_plan(load_sweep(write(tmp_path, "concurrency = [1, 8]\nslo = { ttft_ms = 500 }\n"))))
    assert "under load: concurrency [1, 8] (closed loop); waves=4 × concurrency" in text
    assert "search adaptive" in text and "SLO TTFT ≤ 500 ms" in text
