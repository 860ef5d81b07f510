"""Run the benchmark scripts one after the other and print one table: each figure, its target, PASS/FAIL, and the
load average the box ran at meanwhile. Exit status 1 when any script fails or misses a target.

Each script prints its own table, then ``FIGURE|name|value|target|pass`` lines that this collects
(``bench_placement.py`` prints its ratio in its own words, which are read instead). The scripts run one at a
time: they time things, and two of them at once on two cores would measure each other. The ``ui-busy`` run is
``bench_ui.py`` again with two busy loops (``python -c 'while 1: pass'``) running beside the app the whole time,
each in a session of its own as the engine starts each server, as a GPU box's tokenizer and scheduler threads
compete with it. The ``fidelity`` rows put ours beside SGLang's
``bench_serving`` on the simulator (error against its truth), the ``vllm`` rows beside vLLM's ``vllm bench serve``
on one real vLLM server (the ratio between the clients; info lines and exit 0 without ``.venv-vllm``). A bench
that does not exist in ``bench/`` prints SKIP with the reason. About 20 minutes for everything on 2 cores.

The load column is the 1-minute load average when the script started and when it ended (``os.getloadavg``):
figures measured at a load above the box's cores measure the box as much as the code.

    .venv/bin/python bench/run_all.py [--only crash,logpump,ui,ui-busy,...] [--quiet] [--record docs/bench-latest.md]

``--record PAGE`` writes the table as a documentation page (the date, the commit and the box at its head) and
puts its headline rows (:data:`HEADLINES`) into the README between its ``bench:start``/``bench:end`` markers, so
that the README's figures are those of the last recorded run; ``tests/meta/test_docs.py`` holds the two to each other.
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
sys.path.insert(0, str(HERE))

from _busy import LOOP, start_busy_loops  # noqa: E402

ROOT = HERE.parent
BUSY_LOOP = LOOP


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
    "client": Bench("bench/bench_client.py"),
    "client-llamacpp": Bench("bench/bench_client.py", ("--server", "llamacpp"), label="llama.cpp"),
    "client-sglang": Bench("bench/bench_client.py", ("--server", "sglang"), label="SGLang"),
    "vllm": Bench("bench/bench_vllm_clients.py"),
    "vllm-options": Bench("bench/bench_vllm_stream_options.py"),
    "crash": Bench("bench/bench_crash_dead_time.py"),
    "logpump": Bench("bench/bench_logpump.py"),
    "ui": Bench("bench/bench_ui.py", label="no busy loops"),
    "ui-busy": Bench("bench/bench_ui.py", ("--no-memory", "--busy", "2"), label="2 busy loops beside"),
    "histories": Bench("bench/bench_histories.py"),
    "placement": Bench("bench/bench_placement.py"),
    "cluster": Bench("bench/bench_cluster_placement.py"),
    "startup": Bench("bench/bench_startup.py"),
    "analysis": Bench("bench/bench_analysis.py"),
    "attach": Bench("bench/bench_attach.py"),
    "report-demo": Bench("bench/bench_report_demo.py"),
}
_PLACEMENT = re.compile(r"measured concurrent/lower-bound ratio ([0-9.]+)")
README = ROOT / "README.md"
README_START, README_END = "<!-- bench:start -->", "<!-- bench:end -->"
HEADLINES = ("crash line -> red row", "whole watch through a pipe", "slowest key p95", "runs_10k_s",
             "resume_latest_10k_s", "attach_64mb_events_first_s", "fidelity: worst decode tok/s error",
             "real vLLM c=1: tok/s ours / vLLM", "real vLLM c=8: tok/s ours / vLLM", "real vLLM c=64: tok/s ours / vLLM",
             "real vLLM: ours against the wire",
             "simulator c=64: our client's CPU", "simulator: ours against the wire", "llama.cpp: ours against the wire",
             "simulator c=8: tok/s with 128K")
"""The figures the README quotes: the rows whose name starts with one of these and that are judged (PASS or
FAIL, not info)."""
RECORD_COLUMNS = ("figure", "value", "target", "verdict", "load", "command")


@dataclass(frozen=True)
class Row:
    name: str
    value: str
    target: str
    verdict: str
    load: str
    command: str
    seconds: float


def _cell(text: str) -> str:
    return text.replace("|", "/").strip()


def record_page(rows: list[Row], when: str, commit: str, cores: int | None) -> str:
    """The documentation page of one run of everything: every row, with its verdict and the load it ran at."""
    lines = ["# The latest bench run", "",
             f"Written by `.venv/bin/python bench/run_all.py --record docs/bench-latest.md` on {when}, at commit "
             f"`{commit}`, on {cores} cores. Each figure, its target, its verdict and the 1-minute load average "
             "when its script started and ended; what each measures and how: "
             "[Figures and how they were measured](performance.md). The README quotes the headline rows.", "",
             "| " + " | ".join(RECORD_COLUMNS) + " |", "| " + " | ".join("---" for _ in RECORD_COLUMNS) + " |"]
    for row in rows:
        cells = (row.name, row.value, row.target, row.verdict, row.load, f"`{row.command}` ({row.seconds:.0f} s)")
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def recorded_rows(page: str) -> list[dict[str, str]]:
    """The rows of a page :func:`record_page` wrote, as {column: text}."""
    rows = []
    for line in page.splitlines():
        if line.startswith("| ") and not line.startswith(("| figure |", "| ---")):
            cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
            if len(cells) == len(RECORD_COLUMNS):
                rows.append(dict(zip(RECORD_COLUMNS, cells)))
    return rows


def headline_block(rows: list[dict[str, str]], when: str) -> str:
    """The README's table of headline figures, from a recorded page's rows."""
    chosen = [row for row in rows
              if row["figure"].startswith(HEADLINES) and row["verdict"] in ("PASS", "FAIL")]
    lines = [README_START,
             f"From the last recorded run of `bench/run_all.py` ({when}, 2 shared cores, no GPU; every figure and "
             "the load it ran at: [docs/bench-latest.md](docs/bench-latest.md)):", "",
             "| figure | value | target | | load |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {row['figure']} | {row['value']} | {row['target']} | {row['verdict']} | {row['load']} |"
              for row in chosen]
    return "\n".join([*lines, README_END])


def recorded_when(page: str) -> str:
    match = re.search(r" on (\d{4}-\d{2}-\d{2})", page)
    return match[1] if match else "?"


def with_headlines(readme: str, block: str) -> str:
    """``readme`` with the text between its bench markers replaced by ``block``."""
    start, end = readme.find(README_START), readme.find(README_END)
    if start < 0 or end < start:
        raise SystemExit(f"{README}: no {README_START} ... {README_END} block to write the figures into")
    return readme[:start] + block + readme[end + len(README_END):]


def record(rows: list[Row], page_path: Path) -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip() or "?"
    page = record_page(rows, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), commit, os.cpu_count())
    page_path.write_text(page, encoding="utf-8")
    README.write_text(with_headlines(README.read_text(encoding="utf-8"),
                                     headline_block(recorded_rows(page), recorded_when(page))), encoding="utf-8")
    print(f"recorded in {page_path} and the README's figures")


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


def command_of(bench: Bench) -> str:
    command = " ".join([".venv/bin/python", bench.script, *bench.args])
    if bench.busy_loops:
        command = f"{command}  (+{bench.busy_loops}x python -c '{BUSY_LOOP}')"
    return command


def merged(rows: list[Row], page_path: Path, chosen: list[str]) -> list[Row]:
    """``rows`` of the benches run now, in the recorded page's rows of the others (``--only`` with ``--record``
    updates those benches' rows and keeps the rest, each with the load it ran at)."""
    if not page_path.exists():
        return rows
    rerun = {_cell(command_of(SCRIPTS[key])) for key in chosen}
    out: list[Row] = []
    placed = False
    for cells in recorded_rows(page_path.read_text(encoding="utf-8")):
        match = re.fullmatch(r"`(.*)` \((\d+) s\)", cells["command"])
        command, seconds = (match[1], float(match[2])) if match else (cells["command"], 0.0)
        if command in rerun:
            if not placed:
                out.extend(rows)
                placed = True
            continue
        out.append(Row(cells["figure"], cells["value"], cells["target"], cells["verdict"], cells["load"], command,
                       seconds))
    return out if placed else [*out, *rows]


def run_one(key: str, bench: Bench, quiet: bool) -> tuple[list[Row], bool]:
    """Run one bench (with its busy loops beside it); its rows and whether it failed."""
    command = command_of(bench)
    if bench.skip is not None or not (ROOT / bench.script).exists():
        reason = bench.skip or f"{bench.script} does not exist"
        print(f"==> SKIP {key}: {reason}\n")
        return [Row(f"{key}: {reason}", "-", "-", "SKIP", "-", command, 0.0)], False
    # each loop in a session of its own, as the engine starts each server (with scheduler autogroups, CPU is
    # shared between sessions first: two loops in this one session would count as one beside the app)
    loops = start_busy_loops(bench.busy_loops)  # killed with this process too, should a timeout kill it
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
    parser.add_argument("--record", type=Path, metavar="PAGE",
                        help="write the table to PAGE (docs/bench-latest.md) and its headline rows into the README")
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
    if args.record is not None:
        record(merged(summary, args.record, chosen) if args.only else summary, args.record)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
