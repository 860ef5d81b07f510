"""The context ladder on the simulator (issue 47, done-when): sweeps/context-ladder.toml, whose profile decays
acceptance with context (``acceptance.context_half_life_tokens``), finds each configuration's C* within one rung
of the closed form with at most half of the (configuration, rung) grid, each rung and repeat sent its own
filler, and the report says it in every format."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from repo_paths import REPO
from specbench_tui.core.context_ladder import rung_order
from specbench_tui.sim.speed import ground_truth_context_crossover

SWEEP = REPO / "sweeps" / "context-ladder.toml"


def truths() -> dict[str, float]:
    """C* of each speculative configuration from the sweep's own profile (not restated here)."""
    profile = tomllib.loads((REPO / "sweeps" / "sim-profiles" / "context-ladder.toml").read_text())
    half = float(profile["acceptance"]["context_half_life_tokens"])
    ar = next(r for r in profile["deterministic"]["config"] if r["algorithm"] == "NONE")["tok_s"]
    out = {}
    for rule in profile["deterministic"]["config"]:
        if rule["algorithm"] == "EAGLE3":
            out[f"eagle3-s{rule['num_steps']}"] = ground_truth_context_crossover(
                float(ar), float(rule["tok_s"]), float(rule["accept_length"]), half)
    return out


@pytest.mark.timing  # never beside a real server (tests/cpu_share.py)
@pytest.mark.e2e
@pytest.mark.xdist_group("default-port-30000")  # servers on the default port base: one xdist worker runs them
def test_the_ladder_finds_c_star_within_one_rung_with_at_most_half_the_grid(tmp_path: Path) -> None:
    truth = truths()
    assert len(truth) == 2
    run = subprocess.run([sys.executable, "-m", "specbench_tui", "run", str(SWEEP), "--headless", "--runs-dir",
                          str(tmp_path)], capture_output=True, text=True, timeout=500)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    run_dir = next(tmp_path.iterdir())
    report = subprocess.run([sys.executable, "-m", "specbench_tui", "report", str(run_dir), "--format", "json"],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr[-2000:]
    ladder = json.loads(report.stdout)["ladder"]
    rungs = rung_order(tomllib.loads(SWEEP.read_text())["workloads"][0]["prompt_tokens"])
    contexts = {r["rung"]: r["context"] for r in ladder["rungs"]}
    grid = [contexts.get(label, float(label) if label != "max" else None) for label in rungs]
    crossing = {c["config"]: c for c in ladder["c_star"]}
    assert set(crossing) == set(truth)
    for name, c_star in truth.items():
        low, high = crossing[name]["interval"]
        assert low is not None and high is not None and low < c_star <= high, (name, c_star, crossing[name])
        assert grid.index(high) == grid.index(low) + 1, (name, crossing[name])  # within one rung of the truth
    assert ladder["grid"] == 3 * len(rungs) == 36
    assert ladder["measured"] <= ladder["grid"] / 2, ladder["measured"]
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len({(m["config"], m["item"]) for m in records if m["workload"] == "ladder"}) == ladder["measured"]
    # the map: each configuration along load (B*, the code-load workload) and along context (C*)
    the_map = {row["config"]: row for row in ladder["map"]}
    assert set(the_map) == set(truth) and "code-load" in the_map["eagle3-s11"]["along_load"]
    assert "prompt tokens" in the_map["eagle3-s11"]["pays"]
    # per rung: acceptance length, per-position acceptance, decode tok/s and the speedup at that rung
    s11 = {r["rung"]: r for r in ladder["rungs"] if r["config"] == "eagle3-s11"}
    assert s11["1024"]["accept_length"] > s11["max"]["accept_length"] and s11["1024"]["conditional"]
    assert s11["1024"]["speedup"] > 1 > s11["max"]["speedup"]
    assert s11["1024"]["decode_tps"] > s11["max"]["decode_tps"]
    # the text report says C* as the JSON does
    text = subprocess.run([sys.executable, "-m", "specbench_tui", "report", str(run_dir)], capture_output=True,
                          text=True, timeout=120).stdout
    assert "C* ladder: eagle3-s11 (8192, 12288]" in text, text[-3000:]


@pytest.mark.e2e
@pytest.mark.xdist_group("default-port-30000")
def test_no_rung_or_repeat_is_drafted_from_another_ones_prompt(tmp_path: Path) -> None:
    """Warm caches (nothing flushed) and two repeats: no request finds more of its prompt cached than the words
    every filler starts with, as each (rung, repeat) has its own filler."""
    sweep = tmp_path / "ladder.toml"
    text = re.sub(r"^repeats = \d+", "repeats = 2", SWEEP.read_text().split("[[workloads]]                 #")[0],
                  flags=re.MULTILINE).replace(
        'prompt_tokens = [1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, "max"]',
        'prompt_tokens = [1024, 2048, 4096]\nsearch = "grid"').replace('search = "adaptive"\n', "")
    text = text.replace('[server.args]', '[measure]\ncache = "warm"\n\n[server.args]').replace(
        'sim_profile = "sim-profiles/context-ladder.toml"',
        f'sim_profile = "{REPO / "sweeps" / "sim-profiles" / "context-ladder.toml"}"')
    sweep.write_text(text)
    run = subprocess.run([sys.executable, "-m", "specbench_tui", "run", str(sweep), "--headless", "--runs-dir",
                          str(tmp_path / "runs")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    run_dir = next((tmp_path / "runs").iterdir())
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert len(records) == 3 * 3 * 2 and all(m["status"] == "ok" for m in records)
    assert max(m.get("cached_tokens") or 0 for m in records) <= 8, sorted(m.get("cached_tokens") for m in records)
