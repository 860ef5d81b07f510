"""Never an artefact as the answer: per measured point the share of decode lines that ran a captured graph and
the batch sizes that ran eager, from the servers' own ``cuda graph: True|False`` lines (``cpu graph:`` on CPU);
a point that ran eager is marked in the report, and a winner that ran eager is said to have."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from narrowing import present

from repo_paths import REPO
from specbench_tui.core.engines.sglang import parse_batch_line
from specbench_tui.core.logparse import summarize_decode
from specbench_tui.report.formats import render
from specbench_tui.report.load import load_run


SWEEP = """
[sweep]
name = "eager"
baseline = "ar"
repeats = 1
warmup = 0
gpus = 1
[engine]
launcher = "simulator"
sim_profile = "PROFILE"
startup_timeout_s = 30
stall_timeout_s = 20
[measure]
cache = "warm"
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
max-running-requests = 8
cuda-graph-max-bs-decode = 4     # captured up to batch 4: at c8 the batch outgrows the graphs and runs eager
decode-log-interval = 1
[[configs]]
name = "ar"
algorithm = "autoregressive"
[[configs]]
name = "eagle3-s2"
algorithm = "eagle3"
args = { speculative-algorithm = "EAGLE3", speculative-draft-model-path = "demo/Qwen3-8B-EAGLE3", speculative-num-steps = 2, speculative-eagle-topk = 1, speculative-num-draft-tokens = 3 }
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci", "quicksort"]
max_new_tokens = 37
concurrency = [1, 8]
waves = 1
search = "grid"
"""


def test_the_decode_lines_say_whether_they_ran_a_graph_on_a_gpu_and_on_cpu() -> None:
    gpu = "[2026-01-01 10:00:00] Decode batch, #running-req: {bs}, #token: 90, token usage: 0.01, cuda graph: {g}, " \
          "gen throughput (token/s): 10.00, #queue-req: 0"
    cpu = ("[2026-01-01 10:00:00] Decode batch, #running-req: 1, #token: 90, token usage: 0.01, cpu graph: False, "
           "gen throughput (token/s): 10.00, #queue-req: 0")
    lines = [parse_batch_line(gpu.format(bs=bs, g=g)) for bs, g in ((4, True), (8, False), (6, False), (2, True))]
    summary = summarize_decode([line for line in lines if line is not None]).to_json()
    assert summary["graph_share"] == 0.5 and summary["eager_batches"] == [6, 8]
    parsed = parse_batch_line(cpu)
    assert parsed is not None and parsed.graph is False


@pytest.fixture(scope="module")
def eager_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("eager")
    sweep = folder / "eager.toml"
    sweep.write_text(SWEEP.replace("PROFILE", str(REPO / "sweeps" / "sim-profiles" / "crossover.toml")))
    run = subprocess.run([sys.executable, "-m", "specbench_tui", "run", str(sweep), "--headless", "--runs-dir",
                          str(folder / "runs")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return next((folder / "runs").iterdir())


@pytest.mark.e2e
@pytest.mark.xdist_group("default-port-30000")  # servers on the default port base: one xdist worker runs them
def test_points_above_the_captured_batch_are_marked_eager_from_the_decode_lines(eager_run: Path) -> None:
    load = present(load_run(eager_run).analysis.load)
    for config in ("ar", "eagle3-s2"):
        low = next(p for p in load.points if p.config == config and p.load == "c1")
        high = next(p for p in load.points if p.config == config and p.load == "c8")
        assert low.graph_share == 1.0 and low.eager_batches == ()
        assert high.graph_share is not None and high.graph_share < 1.0
        assert 8 in high.eager_batches and all(b > 4 for b in high.eager_batches), high.eager_batches
    text = render(load_run(eager_run), "txt")
    assert "eager at batch" in text and "without a CUDA graph" in text


@pytest.mark.e2e
@pytest.mark.xdist_group("default-port-30000")
def test_a_winner_that_ran_eager_is_said_to_have(eager_run: Path, tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "specbench_tui", "recommend", str(eager_run), "--confirm",
                          str(tmp_path / "confirm.toml")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "ran eager (no CUDA graph for some decode steps) at c8" in out.stdout, out.stdout
