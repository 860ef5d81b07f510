"""Counts agree: ``logs``, ``ps``, ``runs``, the TUI's header and ``report`` say the same configurations and
measurements for one run, mid-sweep and at its end.

One real sweep on the simulator (subprocesses, as a user runs it): an autoregressive baseline, a DFlash
configuration whose server crashes after one request, and one excluded by the sweep. The first run ends with the
crash; ``run --resume latest --retry-crashed --detach`` runs the crashed configuration again (its request cut by
the crash measured anew: the same key twice in ``results.jsonl``), is paused from a control client, and the five
views are read together while it is paused (``ps`` needs the live engine); then it runs to its end and the four
that read the run directory are read again.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from reliability_helpers import marker_env, new_marker, wait_for, wait_gone
from sweep_builder import inline, sim_profile, sim_sweep, write

from specbench_tui.cli import main
from specbench_tui.core.records import Measurement
from specbench_tui.core.state import RunState
from specbench_tui.engine.attached import AttachedEngine, history_of
from specbench_tui.rundir import load_plan

pytestmark = pytest.mark.e2e

COUNTS = re.compile(r"(\d+)/(\d+) ran(?:, (\d+) skipped)?, ([\d,]+) meas")
PROFILE = sim_profile(tok_s=400.0, crash=[{"algorithm": "DFLASH", "budget": 8, "when": "after_requests",
                                           "after_requests": 1, "signature": "cuda_illegal_instruction"}])
SWEEP = sim_sweep(
    "counts", sweep={"gpus": [5]},
    configs=[{"name": "ar", "algorithm": "autoregressive", "args": inline(**{"tp-size": 1})},
             {"name": "dflash-b{budget}", "algorithm": "dflash", "matrix": inline(budget=[8, 16]),
              "args": {"speculative-algorithm": "DFLASH", "speculative-draft-model-path": "z-lab/Qwen3-8B-DFlash-b16",
                       "speculative-num-draft-tokens": "{budget}"},
              "exclude": [{"budget": 16, "reason": "excluded by the sweep"}]}],
    workloads=[{"name": "code", "kind": "code", "items": ["fibonacci", "quicksort"], "max_new_tokens": 200},
               {"name": "math", "kind": "arithmetic", "count": 3, "max_new_tokens": 200}])

Counts = tuple[int, int, int, int]
"""ran, to run, skipped, measurements."""


def _parse(text: str, where: str) -> Counts:
    found = COUNTS.findall(text)
    assert found, f"no counts in {where}: {text!r}"
    ran, to_run, skipped, meas = found[-1]
    return int(ran), int(to_run), int(skipped or 0), int(meas.replace(",", ""))


def _cli(*args: str) -> str:
    out = io.StringIO()
    with redirect_stdout(out):
        main(list(args))
    return out.getvalue()


def _header(run_dir: Path) -> str:
    """The TUI's header text over the run directory, as an attaching TUI folds it (history, then live)."""
    from textual.app import App, ComposeResult

    from specbench_tui.tui.header import SweepHeader

    measurements, events = history_of(run_dir, None, None)
    state = RunState.from_history(load_plan(run_dir), str(run_dir), measurements, events, live=True)
    texts: list[str] = []

    class HeaderOnly(App[None]):
        def compose(self) -> ComposeResult:
            yield SweepHeader(state, time.time, id="header")

    async def draw() -> None:
        app = HeaderOnly()
        async with app.run_test(size=(200, 3)) as pilot:
            await pilot.pause()
            texts.append(app.query_one(SweepHeader).render().plain)

    import asyncio

    asyncio.run(draw())
    return texts[0]


def _header_counts(text: str) -> Counts:
    ran = re.search(r"(\d+)/(\d+) ran", text)
    meas = re.search(r"([\d,]+) meas", text)
    skipped = re.search(r"(\d+) skipped", text)
    assert ran and meas, text
    return int(ran[1]), int(ran[2]), int(skipped[1]) if skipped else 0, int(meas[1].replace(",", ""))


def _report(run_dir: Path) -> Counts:
    data = json.loads(_cli("report", str(run_dir), "--format", "json"))
    progress = data["progress"]
    states = [c["state"] for c in data["analysis"]["configs"]]
    ran = sum(1 for s in states if s in ("done", "crashed", "failed"))
    assert (progress["ran"], progress["skipped"]) == (ran, states.count("skipped")), (progress, states)
    return progress["ran"], progress["configs"] - progress["skipped"], progress["skipped"], progress["measurements"]


def _files(run_dir: Path) -> tuple[int, int]:
    return (run_dir / "events.jsonl").stat().st_size, (run_dir / "results.jsonl").stat().st_size


def _views(runs: Path, run_dir: Path, *, live: bool) -> dict[str, Counts]:
    """Every view's counts, read while the run directory did not change (read again until it did not)."""
    for _ in range(50):
        before = _files(run_dir)
        views = {"logs": _parse(_cli("logs", str(run_dir)), "logs"),
                 "runs": _parse(next(line for line in _cli("runs", str(runs)).splitlines() if run_dir.name in line),
                                "runs"),
                 "report": _report(run_dir),
                 "tui": _header_counts(_header(run_dir))}
        if live:
            views["ps"] = _parse(next(line for line in _cli("ps").splitlines() if str(run_dir) in line), "ps")
        if _files(run_dir) == before:
            return views
    raise AssertionError("the run directory kept changing while paused")


def _unique_keys(run_dir: Path) -> tuple[int, int]:
    lines = [json.loads(x) for x in (run_dir / "results.jsonl").read_text().splitlines() if x.strip()]
    return len({Measurement.from_json(x).key for x in lines}), len(lines)


def test_logs_ps_runs_tui_and_report_count_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = new_marker()
    env = marker_env(marker, {"SPECBENCH_ENGINES_DIR": str(tmp_path / "engines")})
    for key, value in env.items():
        monkeypatch.setenv(key, value)  # ps (in this process) finds the engines the subprocesses registered
    sweep = write(tmp_path, SWEEP, PROFILE)
    runs = tmp_path / "runs"
    try:
        first = subprocess.run([sys.executable, "-m", "specbench_tui", "run", str(sweep), "--headless",
                                "--runs-dir", str(runs)], env=env, capture_output=True, text=True, timeout=300,
                               stdin=subprocess.DEVNULL)
        assert first.returncode == 1, first.stdout + first.stderr  # a configuration crashed
        (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
        ended = _views(runs, run_dir, live=False)
        assert len(set(ended.values())) == 1, ended
        ran, to_run, skipped, meas = ended["logs"]
        assert (ran, to_run, skipped) == (2, 2, 1) and meas == _unique_keys(run_dir)[0]

        again = subprocess.run([sys.executable, "-m", "specbench_tui", "run", "--resume", "latest", "--retry-crashed",
                                "--detach", "--runs-dir", str(runs)], env=env, capture_output=True, text=True,
                               timeout=120, stdin=subprocess.DEVNULL)
        assert again.returncode == 0, again.stdout + again.stderr
        engine = AttachedEngine(run_dir, role="control", name="the counts test")
        engine.start()
        engine.wait_ack(engine._send("pause"))
        paused = _views(runs, run_dir, live=True)
        assert len(set(paused.values())) == 1, paused
        engine.wait_ack(engine._send("resume"))
        engine.detach()
        wait_for(lambda: "exit_code" in json.loads((run_dir / "run.json").read_text()), 240,
                 what="the resumed run's end")

        final = _views(runs, run_dir, live=False)
        assert len(set(final.values())) == 1, final
        unique, records = _unique_keys(run_dir)
        assert records > unique, "the retry measured the crashed request again (the same key twice on record)"
        assert final["logs"][3] == unique and final["logs"][:3] == (2, 2, 1)
    finally:
        subprocess.run([sys.executable, "-m", "specbench_tui", "stop", "--runs-dir", str(runs), "latest", "--now"],
                       env=env, capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        wait_gone(marker, timeout_s=10)
