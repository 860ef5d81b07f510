"""A Spec-Bench-format file with three categories runs as a ``prompt_dataset`` workload against the simulator
subprocess; the category × configuration matrices (speedup, acceptance length) appear in the md report and the
JSON; a workload of random-token prompts gets a warning; a bad dataset line is refused by the sweep loader with
its file and line."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest
from engine_helpers import plan_for, run_plan, write_sweep
from sweep_builder import dumps, sim_profile, sim_sweep

from specbench_tui.core.errors import SweepError
from specbench_tui.report.formats import render
from specbench_tui.report.load import load_run

QUESTIONS = [
    {"question_id": 1, "category": "coding", "turns": ["Write a Python function that reverses a list in place."]},
    {"question_id": 2, "category": "coding", "turns": ["Write a Python function that counts the vowels in a string."]},
    {"question_id": 3, "category": "math", "turns": ["What is 17 times 23? Show the steps of the calculation."]},
    {"question_id": 4, "category": "math", "turns": ["Solve for x: 3x + 7 = 31. Explain each step."]},
    {"question_id": 5, "category": "writing", "turns": ["Write a short poem about a lighthouse in the fog.",
                                                        "Now give the poem a title and explain it."]},
    {"question_id": 6, "category": "writing", "turns": ["Write a short story about a cat who learns to sail."]},
]


def _sweep(folder: Path, workloads: list[dict], *, repeats: int = 1, time_scale: float = 0.05,
           server_args: dict | None = None) -> Path:
    sweep = sim_sweep("cats", sweep={"baseline": "ar", "repeats": repeats}, workloads=workloads,
                      server_args=server_args, configs=[
        {"name": "ar", "algorithm": "autoregressive"},
        {"name": "eagle3", "algorithm": "eagle3",
         "args": {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "X/EAGLE3",
                  "speculative-num-steps": 3, "speculative-eagle-topk": 1, "speculative-num-draft-tokens": 4}}])
    profile = sim_profile(tok_s=None, time_scale=time_scale, seed=5)
    return write_sweep(folder, dumps(sweep).replace('"{port}"', "{port}"), dumps(profile))


def test_a_spec_bench_file_gives_category_matrices_and_random_tokens_warn(tmp_path: Path) -> None:
    (tmp_path / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n")
    rng = random.Random(1)
    vocab = ["".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(rng.randint(3, 6))) for _ in range(300)]
    (tmp_path / "random.jsonl").write_text("\n".join(
        json.dumps({"id": f"r{i}", "prompt": " ".join(rng.choice(vocab) for _ in range(80))}) for i in range(2)) + "\n")
    path = _sweep(tmp_path, [
        {"name": "specbench", "kind": "prompt_dataset", "path": "questions.jsonl", "max_new_tokens": 48},
        {"name": "random", "kind": "prompts_file", "path": "random.jsonl", "max_new_tokens": 16}],
        # the speedups are timed: three repeats and two writing questions (a cell is the median of its pairs),
        # steps five times longer than the other tests' and stream-interval 4 (as the demo), so a loaded box's
        # stalls cannot flip a category (2 cores under two busy loops read writing's one pair at 0.96x with one
        # repeat at time_scale 0.05); the truth holds with margin: each category's acceptance (>= 1.6) times the
        # step cost ratio (15.1/19.6 ms) is >= 1.2
        repeats=3, time_scale=0.25, server_args={"stream-interval": 4})
    plan = plan_for(path)
    _outcome, _events, run_dir, _ = asyncio.run(run_plan(plan, tmp_path / "runs", timeout_s=600))
    run = load_run(run_dir.path)
    md = render(run, "md")
    assert "## Speedup by category: specbench" in md and "## Acceptance length by category: specbench" in md
    section = md.split("## Speedup by category: specbench", 1)[1].split("##", 1)[0]
    assert all(f"| {c} |" in section for c in ("coding", "math", "writing")) and "eagle3" in section
    data = json.loads(render(run, "json"))
    (matrix,) = data["analysis"]["acceptance"]["categories"]
    assert matrix["workload"] == "specbench" and matrix["categories"] == ["coding", "math", "writing"]
    assert all(matrix["speedup"][c]["eagle3"] > 1.0 for c in matrix["categories"])
    assert all(matrix["acceptance_length"][c]["eagle3"] > 1.0 for c in matrix["categories"])
    notes = " ".join(run.analysis.notes)
    assert "workload 'random': its prompts look like random tokens" in notes
    assert "workload 'specbench'" not in notes


def test_a_bad_dataset_line_is_refused_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "questions.jsonl").write_text(json.dumps(QUESTIONS[0]) + "\n" + '{"question_id": 2, "turns": ["x"]}\n')
    path = _sweep(tmp_path, [{"name": "specbench", "kind": "prompt_dataset", "path": "questions.jsonl"}])
    with pytest.raises(SweepError, match=r"questions\.jsonl:2: missing 'category'"):
        plan_for(path)


def test_the_shipped_sample_is_the_default_path(tmp_path: Path) -> None:
    path = _sweep(tmp_path, [{"name": "sample", "kind": "prompt_dataset", "per_category": 1}])
    plan = plan_for(path)
    (workload,) = plan.sweep.workloads
    assert workload.item_count == 6


def test_validate_warns_about_random_token_prompts_with_file_and_line(tmp_path: Path) -> None:
    rng = random.Random(2)
    (tmp_path / "random.jsonl").write_text("\n".join(
        json.dumps({"question_id": i, "category": "x", "turns": [" ".join(
            "".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(5)) for _ in range(40))]}) for i in range(3)))
    (tmp_path / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS) + "\n")
    path = _sweep(tmp_path, [{"name": "noise", "kind": "prompt_dataset", "path": "random.jsonl"},
                             {"name": "real", "kind": "prompt_dataset", "path": "questions.jsonl"}])
    notes = [n for n in plan_for(path).notes if "random tokens" in n]
    line = next(i for i, text in enumerate(path.read_text().splitlines(), start=1) if "random.jsonl" in text)
    assert len(notes) == 1 and f":{line}: warning: workload 'noise'" in notes[0], notes
