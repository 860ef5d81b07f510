"""Run the benchmark scripts one after the other and print one table: each figure, its target, PASS/FAIL, and the
load average the box ran at meanwhile. Exit status 1 when any script fails or misses a target.

Each script prints its own table, then ``FIGURE|name|value|target|pass`` lines that this collects
(``bench_placement.py`` prints its ratio in its own words, which are read instead). The scripts run one at a
time: they time things, and two of them at once on two cores would measure each other. The ``ui-busy`` run is
``bench_ui.py`` again with two busy loops (``python -c 'while 1: pass'``) running beside the app the whole time,
as a GPU box's tokenizer and scheduler threads compete with it. The ``fidelity`` rows put ours beside SGLang's
``bench_serving`` on the simulator (error against its truth), the ``vllm`` rows beside vLLM's ``vllm bench serve``
on one real vLLM server (the ratio between the clients; info lines and exit 0 without ``.venv-vllm``). A bench
that does not exist in ``bench/`` prints SKIP with the reason. About 20 minutes for everything on 2 cores.

The load column is the 1-minute load average when the script started and when it ended (``os.getloadavg``):
figures measured at a load above the box's cores measure the box as much as the code.

    .venv/bin/python bench/run_all.py [--only crash,logpump,ui,ui-busy,...] [--quiet]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BUSY_LOOP = "while 1: pass"


@dataclass(frozen=True)
class Bench:
    script: str
    args: tuple[str, ...] = ()
    busy_loops: int = 0
    label: str = ""
    """Put after each figure's name (``with 2 busy loops``)."""
    skip: str | None = None
    """Why this bench is not run (it does not exist here)."""


SCRIPTS: dict[str, Bench] = {
    "fidelity": Bench("bench/bench_engine_fidelity.py"),
    "vllm": Bench("bench/bench_vllm_clients.py"),
    "crash": Bench("bench/bench_crash_dead_time.py"),
    "logpump": Bench("bench/bench_logpump.py"),
    "ui": Bench("bench/bench_ui.py", label="no busy loops"),
    "ui-busy": Bench("bench/bench_ui.py", ("--no-memory",), busy_loops=2, label="2 busy loops beside"),
    "histories": Bench("bench/bench_histories.py"),
    "placement": Bench("bench/bench_placement.py"),
    "cluster": Bench("bench/bench_cluster_placement.py"),
    "startup": Bench("bench/bench_startup.py"),
    "analysis": Bench("bench/bench_analysis.py"),
    "attach": Bench("bench/bench_attach.py"),
}
_PLACEMENT = re.compile(r"measured concurrent/lower-bound ratio ([0-9.]+)")


@dataclass(frozen=True)
class Row:
    name: str
    value: str
    target: str
    verdict: str
    load: str
    command: str
    seconds: float


def figures_of(key: str, output: str, code: int) -> list[tuple[str, str, str, str]]:
    rows = []
    for line in output.splitlines():
        if line.startswith("FIGURE|"):
            parts = line.split("|", 4)
            if len(parts) == 5:
                _, name, value, target, verdict = parts
                rows.append((name, value, target, verdict))
    if key == "placement" and (match := _PLACEMENT.search(output)):
        ratio = float(match[1])
        rows.append(("makespan / lower bound (8 GPUs, mixed TP)", f"{ratio:.3f}", "< 1.10",
                     "pass" if ratio <= 1.10 else "FAIL"))
    if not rows:
        rows.append((f"{key}: no figure", "-", "-", f"FAIL (exit {code})"))
    return rows


def _verdict(word: str) -> str:
    word = word.strip()
    return {"pass": "PASS", "fail": "FAIL", "info": "info"}.get(word.lower(), word)


def run_one(key: str, bench: Bench, quiet: bool) -> tuple[list[Row], bool]:
    """Run one bench (with its busy loops beside it); its rows and whether it failed."""
    command = " ".join([".venv/bin/python", bench.script, *bench.args])
    if bench.busy_loops:
        command = f"{command}  (+{bench.busy_loops}x python -c '{BUSY_LOOP}')"
    if bench.skip is not None or not (ROOT / bench.script).exists():
        reason = bench.skip or f"{bench.script} does not exist"
        print(f"==> SKIP {key}: {reason}\n")
        return [Row(f"{key}: {reason}", "-", "-", "SKIP", "-", command, 0.0)], False
    loops = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) for _ in range(bench.busy_loops)]
    try:
        if loops:
            time.sleep(2.0)  # the load average starts to show them
        load_start = os.getloadavg()[0]
        started = time.monotonic()
        done = subprocess.run([sys.executable, str(ROOT / bench.script), *bench.args], cwd=ROOT, capture_output=True,
                              text=True, check=False)
        seconds = time.monotonic() - started
        load_end = os.getloadavg()[0]
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    output = done.stdout + done.stderr
    if not quiet:
        print(f"==> {command}  (exit {done.returncode}, {seconds:.1f} s)")
        print(output.rstrip())
        print()
    load = f"{load_start:.1f}->{load_end:.1f}"
    suffix = f" [{bench.label}]" if bench.label else ""
    rows = [Row(name + suffix, value, target, _verdict(verdict), load, command, seconds)
            for name, value, target, verdict in figures_of(key, output, done.returncode)]
    failed = done.returncode != 0 or any(row.verdict not in ("PASS", "info") for row in rows)
    return rows, failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(SCRIPTS)}")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    parser.add_argument("--presses", type=int, default=None, help="presses per key for bench_ui.py (its default: 20)")
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else list(SCRIPTS)
    unknown = [key for key in chosen if key not in SCRIPTS]
    if unknown:
        parser.error(f"unknown bench {', '.join(unknown)}; choose from {','.join(SCRIPTS)}")
    summary: list[Row] = []
    failed = False
    for key in chosen:
        bench = SCRIPTS[key]
        if args.presses is not None and bench.script.endswith("bench_ui.py"):
            bench = Bench(bench.script, (*bench.args, "--presses", str(args.presses)), bench.busy_loops, bench.label)
        rows, bad = run_one(key, bench, args.quiet)
        summary.extend(rows)
        failed |= bad
    width = max(len(row.name) for row in summary)
    print(f"box: {os.cpu_count()} cores; load: 1-minute load average at the script's start->end")
    print(f"{'figure':<{width}}  {'value':>14}  {'target':>12}  {'':4}  {'load':>10}  command (its seconds)")
    for row in summary:
        print(f"{row.name:<{width}}  {row.value:>14}  {row.target:>12}  {row.verdict:4}  {row.load:>10}  "
              f"{row.command} ({row.seconds:.0f} s)")
    print("\nALL PASS" if not failed else "\nSOME FIGURES MISS THEIR TARGET")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
