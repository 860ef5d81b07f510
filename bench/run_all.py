"""Run every benchmark script one after the other and print one summary table (figure, value, target, verdict)
with the command that reproduces each figure. Exit status 1 when any script fails or misses a target.

Each script prints its own table, then ``FIGURE|name|value|target|pass`` lines that this collects
(``bench_placement.py`` prints its ratio in its own words, which are read instead). The scripts run one at a
time: they time things, and two of them at once on two cores would measure each other. About 4 minutes.

    .venv/bin/python bench/run_all.py [--only fidelity,ui,...] [--quiet]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

SCRIPTS = {
    "fidelity": "bench/bench_engine_fidelity.py",
    "crash": "bench/bench_crash_dead_time.py",
    "placement": "bench/bench_placement.py",
    "cluster": "bench/bench_cluster_placement.py",
    "ui": "bench/bench_ui.py",
    "startup": "bench/bench_startup.py",
    "analysis": "bench/bench_analysis.py",
    "logpump": "bench/bench_logpump.py",
    "attach": "bench/bench_attach.py",
}
_PLACEMENT = re.compile(r"measured concurrent/lower-bound ratio ([0-9.]+)")
_UI_ROW = re.compile(r"^(UI CPU.*?|key-to-screen.*?|peak RSS.*?)\s{2,}(\S+)\s+(< \S+)\s+(PASS|FAIL)$", re.MULTILINE)


def figures_of(key: str, output: str, code: int) -> list[tuple[str, str, str, str]]:
    rows = []
    for line in output.splitlines():
        if line.startswith("FIGURE|"):
            _, name, value, target, verdict = line.split("|", 4)
            rows.append((name, value, target, verdict))
    if key == "placement" and (match := _PLACEMENT.search(output)):
        ratio = float(match[1])
        rows.append(("makespan / lower bound (8 GPUs, mixed TP)", f"{ratio:.3f}", "< 1.10",
                     "pass" if ratio <= 1.10 else "FAIL"))
    if key == "ui":
        for name, value, target, verdict in _UI_ROW.findall(output):
            rows.append((name.strip(), value, target, verdict.lower() if verdict == "PASS" else "FAIL"))
    if not rows:
        rows.append((f"{key}: no figure", "-", "-", f"FAIL (exit {code})"))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help=f"comma-separated subset of {','.join(SCRIPTS)}")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else list(SCRIPTS)
    summary: list[tuple[str, str, str, str, str, float]] = []
    failed = False
    for key in chosen:
        script = SCRIPTS[key]
        command = f".venv/bin/python {script}"
        started = time.monotonic()
        done = subprocess.run([sys.executable, str(ROOT / script)], cwd=ROOT, capture_output=True, text=True, check=False)
        seconds = time.monotonic() - started
        output = done.stdout + done.stderr
        if not args.quiet:
            print(f"==> {command}  (exit {done.returncode}, {seconds:.1f} s)")
            print(output.rstrip())
            print()
        failed |= done.returncode != 0
        for name, value, target, verdict in figures_of(key, output, done.returncode):
            failed |= verdict != "pass"
            summary.append((name, value, target, verdict, command, seconds))
    width = max(len(row[0]) for row in summary)
    print(f"{'figure':<{width}}  {'value':>10}  {'target':>10}  {'':4}  command (script's own seconds)")
    for name, value, target, verdict, command, seconds in summary:
        print(f"{name:<{width}}  {value:>10}  {target:>10}  {verdict:4}  {command} ({seconds:.0f} s)")
    print("\nALL PASS" if not failed else "\nSOME FIGURES MISS THEIR TARGET")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
