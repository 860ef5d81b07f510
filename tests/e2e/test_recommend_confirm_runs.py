"""The confirm sweep ``specbench recommend`` writes runs (issue 47): on the simulator, a two-band load sweep
(speculation wins at c1, autoregressive at c32), its confirm sweep run headless to completion, every
configuration done with the confirm's repeats at every point of its bands, and the confirm run's own
recommendation names the same winner per band."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from repo_paths import REPO

SWEEP = """
[sweep]
name = "bands"
baseline = "ar"
gpus = 1
repeats = 1
warmup = 0
[engine]
launcher = "simulator"
sim_profile = "PROFILE"
startup_timeout_s = 60
[measure]
cache = "warm"
[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096
max-running-requests = 64
decode-log-interval = 5
[[configs]]
name = "ar"
algorithm = "autoregressive"
[[configs]]
name = "eagle3-s7"
algorithm = "eagle3"
args = { speculative-algorithm = "EAGLE3", speculative-draft-model-path = "demo/Qwen3-8B-EAGLE3", speculative-num-steps = 7, speculative-eagle-topk = 1, speculative-num-draft-tokens = 8 }
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci"]
max_new_tokens = 13
concurrency = [1, 32]
waves = 1
search = "grid"
"""


def specbench(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench_tui", *args], capture_output=True, text=True,
                          timeout=timeout)


def winners(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^  (c[\d–c]+): (\S+) ", text, re.MULTILINE)


@pytest.mark.e2e
@pytest.mark.xdist_group("default-port-30000")  # servers on the default port base: one xdist worker runs them
def test_the_confirm_sweep_recommend_writes_runs_to_completion(tmp_path: Path) -> None:
    sweep = tmp_path / "bands.toml"
    sweep.write_text(SWEEP.replace("PROFILE", str(REPO / "sweeps" / "sim-profiles" / "crossover.toml")))
    first = specbench("run", str(sweep), "--headless", "--runs-dir", str(tmp_path / "runs"))
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    run_dir = next((tmp_path / "runs").iterdir())
    confirm = tmp_path / "confirm.toml"
    said = specbench("recommend", str(run_dir), "--confirm", str(confirm), timeout=60)
    assert said.returncode == 0, said.stderr[-2000:]
    assert winners(said.stdout) == [("c1", "eagle3-s7"), ("c32", "ar")], said.stdout
    assert specbench("validate", str(confirm), timeout=60).returncode == 0
    again = specbench("run", str(confirm), "--headless", "--runs-dir", str(tmp_path / "confirm-runs"))
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "sweep completed" in again.stdout, again.stdout[-2000:]
    confirm_dir = next((tmp_path / "confirm-runs").iterdir())
    records = [json.loads(line) for line in (confirm_dir / "results.jsonl").read_text().splitlines()]
    points = {(r["config"], r["load"]) for r in records}
    assert points == {(c, load) for c in ("ar", "eagle3-s7") for load in ("c1", "c32")}, points
    assert {r["repeat"] for r in records} == {1, 2, 3, 4, 5} and all(r["status"] == "ok" for r in records)
    settled = specbench("recommend", str(confirm_dir), "--confirm", str(tmp_path / "again.toml"), timeout=60)
    assert winners(settled.stdout) == winners(said.stdout), settled.stdout
