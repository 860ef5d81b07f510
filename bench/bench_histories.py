"""Histories that open at once: ``specbench runs`` and ``latest`` over 10,000 run directories, a 64 MB events file
attached, and an all-excluded 10,000-point sweep run.

- **runs**: 10,000 run directories under one runs folder, each written by the package's own writers
  (:class:`~specbench_tui.rundir.store.RunDir`: ``sweep.toml``, ``plan.json``, ``run.json``, ``events.jsonl``,
  ``results.jsonl``: 10 configurations, 20 measurements; a tenth of them interrupted). The template directories
  are written by the writers and their bytes copied to the other directories (so that writing 10,000 does not
  take minutes of fsyncs), each with its own ``run.json``. ``specbench runs --runs-dir DIR`` runs as a user runs
  it (a fresh process, imports included), first with no index (it builds one) and then three times with it
  (the figure is the median).
- **latest**: :func:`~specbench_tui.report.runs.find_run` ``("latest")`` as ``run --resume latest`` resolves it,
  in a fresh process, index fresh (the median of three); and the whole ``specbench run --resume latest
  --headless`` over the 10,000 (the newest run is an interrupted one whose configurations are all done: the
  resume runs nothing and ends it; its files are put back after each), beside the same command in a folder
  that holds that run alone (what the resume itself costs, whatever the folder holds).
- **attach**: a run directory whose ``events.jsonl`` holds 64 MB of the events a long sweep writes (state
  changes, launches, workloads, load points, notices), written as a run writes them: through the run
  directory's writer (:class:`~specbench_tui.rundir.store.RunDir`) with what a run's engine hangs on it
  (:func:`~specbench_tui.application.session.keep_index`: its index entry, and its fold checkpoint
  (:class:`~specbench_tui.rundir.checkpoint.RunCheckpoints`), written again each time the events grew 8 MB).
  It is read as an attaching client does before its first frame
  (:func:`~specbench_tui.engine.attached.history_of` and the ledger's fold), in a fresh process, the time until
  the ledger is ready, imports included: first (the figure ``attach_64mb_events_first_s``) with the checkpoint
  the run wrote as it ran, as the first attach to a long run finds it (the bytes written since it, under 8 MB,
  are folded); then with no checkpoint at all (printed, no target: a run directory written by a specbench
  without run checkpoints, or attached by another user, folds its 64 MB from nothing; the checkpoint it leaves
  is written after the figure); then three re-attaches that start from the attach's own checkpoint (the median
  of the whole process is the figure).
- **excluded**: a sweep of 10,000 points, every one excluded: ``specbench run SWEEP --headless`` as a user runs
  it (a fresh process), beside ``specbench validate SWEEP`` (building the plan, which any plan of 10,000 points
  costs, excluded or not), and the real orchestrator's run alone, in this process.

Each timed command's wall time is the figure, and its CPU time (user + system) is printed beside it as a
``*_cpu_s`` figure: on a shared box the wall stretches with the load (printed), the CPU time much less.

Each fresh process finds the package's modules compiled, as an installed package has them (pip compiles them
as it installs; a checkout's first run writes them): the bench compiles them once, before any timing, into a
cache of its own (``PYTHONPYCACHEPREFIX``), which its processes read and write whatever
``PYTHONDONTWRITEBYTECODE`` says here (a box that sets it, as this one does, would otherwise compile some 60
modules at every command, 0.2 s of CPU that no user's command spends).

    .venv/bin/python bench/bench_histories.py          # prints FIGURE|runs_10k_s|... and the others
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, figure, verdict

from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    LoadPointFinished,
    Notice,
    ServerLaunching,
    ServerReady,
    ServerStopped,
    SweepFinished,
    SweepStarted,
    WorkloadFinished,
    WorkloadStarted,
)
from specbench_tui.core.plan import build_plan
from specbench_tui.core.records import Measurement
from specbench_tui.core.sweep.loader import parse_sweep
from specbench_tui.rundir.store import RunDir

RUNS = 10_000
RUNS_TARGET_S = 1.0
LATEST_TARGET_S = 1.0
RESUME_TARGET_S = 1.0
"""The whole resume command (the issue's target): imports, resolving ``latest``, the resume of one run and the
look for servers left behind in its runs folder."""
ATTACH_TARGET_S = 2.0
EVENTS_BYTES = 64 << 20
EXCLUDED_POINTS = 10_000
EXCLUDED_TARGET_S = 1.0
"""The orchestrator's run of the all-excluded sweep; the whole command may take this beyond its plan's cost."""
PYTHON = sys.executable

SWEEP = """
[sweep]
name = "{name}"
gpus = 1
repeats = 2
[engine]
launcher = "simulator"
[server.args]
model-path = "Qwen/Qwen3-8B"
[[configs]]
name = "dflash-b{{budget}}"
algorithm = "dflash"
matrix = {{ budget = [{budgets}] }}
[configs.args]
speculative-algorithm = "DFLASH"
speculative-draft-model-path = "z-lab/Qwen3-8B-DFlash-b16"
speculative-num-draft-tokens = "{{budget}}"
[[workloads]]
name = "code"
kind = "code"
items = ["fibonacci"]
max_new_tokens = 64
"""


def _plan(name: str, configs: int) -> object:
    text = SWEEP.format(name=name, budgets=", ".join(str(b) for b in range(1, configs + 1)))
    return build_plan(parse_sweep(text, Path("sweep.toml"), "sweep.toml"))


def _measurement(config_id: str, name: str, repeat: int) -> Measurement:
    return Measurement(config_id=config_id, config=name, workload="code", item="fibonacci", repeat=repeat,
                       status="ok", prompt_tokens=80, completion_tokens=64, ttft_s=0.02, e2e_s=0.5,
                       decode_tps=120.0, accept_length=2.0)


def _template(folder: Path, ended: bool) -> Path:
    """One run directory written by the package's writers: 10 configurations, 20 measurements."""
    plan = _plan("history-bench", 10)
    run = RunDir.create(folder, plan.sweep.name, plan.sweep.text, plan.to_json())  # type: ignore[attr-defined]
    run.write_meta({"sweep_path": "sweep.toml", "started": time.time()})
    run.append_event(SweepStarted(sweep="history-bench", run_dir=str(run.path), total_configs=10))
    for config in plan.configs:  # type: ignore[attr-defined]
        run.append_event(ConfigStateChanged(config_id=config.id, name=config.name, state=ConfigState.RUNNING))
        for repeat in (1, 2):
            run.append_measurement(_measurement(config.id, config.name, repeat))
        run.append_event(ConfigFinished(config_id=config.id, name=config.name, state=ConfigState.DONE))
    if ended:
        run.append_event(SweepFinished(state="completed"))
    run.close()
    return run.path


def write_runs(runs: Path) -> None:
    """:data:`RUNS` run directories under ``runs`` (kept between bench runs: writing them takes a while)."""
    marker = runs / ".bench-complete"
    if marker.exists():
        return
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="specbench-template-") as tmp:
        templates = [_template(Path(tmp), ended=True), _template(Path(tmp), ended=False)]
        files = [{p.name: p.read_bytes() for p in t.iterdir() if p.is_file()} for t in templates]
        base = time.time() - RUNS * 60
        for number in range(RUNS):
            path = runs / f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(base + number * 60))}_history-bench"
            path.mkdir()
            (path / "logs").mkdir()
            for name, data in files[1 if number % 10 == 9 else 0].items():
                (path / name).write_bytes(data)
            RunDir(path).write_meta({"sweep_path": "sweep.toml", "started": base + number * 60})
    marker.write_text("")


def _events_run(folder: Path) -> Path:
    """A run directory whose ``events.jsonl`` holds :data:`EVENTS_BYTES` of a long sweep's events, written through
    the run directory's writer with what a run hangs on it (its index entry and fold checkpoints)."""
    from specbench_tui.application.session import keep_index

    plan = _plan("attach-64mb", 2000)
    run = RunDir.create(folder, plan.sweep.name, plan.sweep.text, plan.to_json())  # type: ignore[attr-defined]
    run.write_meta({"sweep_path": "sweep.toml", "started": time.time()})
    keep_index(run)
    run.append_event(SweepStarted(sweep="attach-64mb", run_dir=str(run.path), total_configs=2000))
    configs = plan.configs  # type: ignore[attr-defined]
    round_ = 0
    while (run.path / "events.jsonl").stat().st_size < EVENTS_BYTES:
        round_ += 1
        for config in configs:
            run.append_event(ConfigStateChanged(config_id=config.id, name=config.name, state=ConfigState.LAUNCHING))
            run.append_event(ServerLaunching(config_id=config.id, name=config.name, argv=tuple(config.argv),
                                             gpus=(0,), port=30000, pid=1234, log_path=f"logs/{config.id}.log",
                                             attempt=round_))
            run.append_event(ServerReady(config_id=config.id, startup_s=12.5, context_length=32768))
            run.append_event(ConfigStateChanged(config_id=config.id, name=config.name, state=ConfigState.RUNNING))
            run.append_event(WorkloadStarted(config_id=config.id, workload="code", expected=2))
            for load in range(8):
                run.append_event(LoadPointFinished(config_id=config.id, workload="code", load=f"c={1 << load}",
                                                   repeat=round_, wall_s=10.0, requests=64,
                                                   server_log={"lines": 40, "accept_length": 2.1,
                                                               "gen_throughput": 900.0}))
            run.append_event(Notice(level="info", text=f"{config.name}: cache flushed before the point",
                                    config_id=config.id))
            run.append_event(WorkloadFinished(config_id=config.id, workload="code", measured=2))
            run.append_event(ServerStopped(config_id=config.id, exit_code=0, teardown_s=1.5))
            run.append_event(ConfigFinished(config_id=config.id, name=config.name, state=ConfigState.DONE))
            if round_ == 1:
                for repeat in (1, 2):
                    run.results.append(_measurement(config.id, config.name, repeat).to_json())
    run.close()
    return run.path


RUN_CHECKPOINT = "run-checkpoint.bin"
"""The fold checkpoint the run wrote as it ran, kept beside the run directory between bench runs (an attach
replaces the checkpoint with its own: it is put back before the first attach)."""


def events_run(folder: Path) -> Path:
    """The run directory of :func:`_events_run` under ``folder`` (kept between bench runs, with the checkpoint
    its run wrote: :data:`RUN_CHECKPOINT`)."""
    from specbench_tui.rundir.checkpoint import checkpoint_path

    marker = folder / ".bench-complete-2"
    if marker.exists():
        return Path(marker.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    path = _events_run(folder)
    kept = checkpoint_path(path)
    if kept is None or not kept.is_file():
        raise SystemExit(f"the run wrote no fold checkpoint ({kept}): nothing to attach from")
    (folder / RUN_CHECKPOINT).write_bytes(kept.read_bytes())
    marker.write_text(str(path))
    return path


CPU: list[float] = []
"""CPU seconds (user + system) of each timed process, beside its wall time (a loaded box stretches the wall)."""


ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
"""The timed processes' environment: their modules' bytecode cached (:func:`compile_modules`)."""


def compile_modules(cache: Path) -> None:
    """The package compiled into ``cache``, which every timed process reads its bytecode from (an installed
    package's modules are compiled once, as it installs)."""
    ENV["PYTHONPYCACHEPREFIX"] = str(cache / "pycache")
    subprocess.run([PYTHON, "-m", "compileall", "-q", str(ROOT / "specbench_tui")], check=True, cwd=ROOT,
                   env=ENV, stdout=subprocess.DEVNULL)


def _timed(code: str, *args: str) -> float:
    """Seconds a fresh Python takes to run ``code`` (imports included), as a command would."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([PYTHON, "-c", code, *args], check=True, cwd=ROOT, stdout=subprocess.DEVNULL, env=ENV)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return elapsed


RUNS_CODE = "import sys; from specbench_tui.cli import main; sys.exit(main(['runs', '--runs-dir', sys.argv[1]]))"
LATEST_CODE = ("import sys; from specbench_tui.report.runs import find_run; "
               "print(find_run('latest', __import__('pathlib').Path(sys.argv[1])).path)")
ATTACH_CODE = ("import time; T0, C0 = time.perf_counter(), time.process_time(); "
               "import sys, pathlib; from specbench_tui.engine.attached import history_of; "
               "from specbench_tui.core.ledger import Ledger; from specbench_tui.rundir import read_object; "
               "p = pathlib.Path(sys.argv[1]); m, e = history_of(p, None, None); "
               "l = Ledger.from_run(read_object(p, 'plan.json', 1 << 28), m, e); "
               "print('READY', time.perf_counter() - T0, time.process_time() - C0); print(l.progress().text, len(e))")
RESUME_CODE = ("import sys; from specbench_tui.cli import main; "
               "sys.exit(main(['run', '--resume', 'latest', '--headless', '--runs-dir', sys.argv[1]]))")
CLI_CODE = "import sys; from specbench_tui.cli import main; sys.exit(main(sys.argv[1:]))"


def _ready(code: str, *args: str) -> tuple[float, float]:
    """Wall and CPU seconds a fresh Python running ``code`` took until it printed ``READY`` (imports included)."""
    out = subprocess.run([PYTHON, "-c", code, *args], check=True, cwd=ROOT, capture_output=True, text=True,
                         env=ENV).stdout
    wall, cpu = next(line for line in out.splitlines() if line.startswith("READY")).split()[1:]
    return float(wall), float(cpu)


def _median(code: str, *args: str, times: int = 3) -> tuple[float, list[float]]:
    """The median wall time of ``times`` runs (and the runs); their median CPU time goes to :data:`MEDIAN_CPU`."""
    runs = [_timed(code, *args) for _ in range(times)]
    MEDIAN_CPU.append(statistics.median(CPU[-times:]))
    print(f"  CPU {', '.join(f'{t:.2f}' for t in CPU[-times:])} s; wall:", end=" ")
    return statistics.median(runs), runs


MEDIAN_CPU: list[float] = []


def excluded_text() -> str:
    """A sweep of :data:`EXCLUDED_POINTS` points, every one excluded."""
    side = int(EXCLUDED_POINTS ** 0.5)
    return (SWEEP.format(name="all-excluded", budgets=", ".join(str(b) for b in range(1, side + 1)))
            .replace("matrix = { budget = [", f"matrix = {{ tp = [{', '.join(str(t) for t in range(1, side + 1))}],"
                     " budget = [").replace('name = "dflash-b{budget}"', 'name = "dflash-b{budget}-t{tp}"')
            .replace("[[workloads]]", '[configs.env]\nPOINT_TP = "{tp}"\n[[workloads]]')
            + "".join(f'[[configs.exclude]]\ntp = {t}\nreason = "not this one"\n' for t in range(1, side + 1)))


def excluded_sweep(folder: Path) -> float:
    """Seconds the real orchestrator takes to run a sweep of :data:`EXCLUDED_POINTS` points, all excluded (the
    run itself; the setup any sweep of that size has, writing its run directory and building the orchestrator,
    is printed apart)."""
    from specbench_tui.engine.orchestrator import Orchestrator

    plan = build_plan(parse_sweep(excluded_text(), folder / "sweep.toml", "sweep.toml"))
    assert len(plan.configs) == EXCLUDED_POINTS and all(c.skip_reason for c in plan.configs)
    started = time.perf_counter()
    run = RunDir.create(folder / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    created = time.perf_counter()
    orchestrator = Orchestrator(plan, run)
    built = time.perf_counter()
    try:
        asyncio.run(orchestrator.run())
    finally:
        run.close()
    ran = time.perf_counter()
    events = sum(1 for _ in (run.path / "events.jsonl").open("rb"))
    print(f"all-excluded sweep: run directory written in {created - started:.2f} s, orchestrator built in "
          f"{built - created:.2f} s (both scale with the plan, excluded or not), ran in {ran - built:.2f} s "
          f"writing {events} events")
    return ran - built


def excluded_command(folder: Path) -> tuple[float, float, float, float]:
    """Wall and CPU seconds of ``specbench run SWEEP --headless`` on the all-excluded sweep, and of
    ``specbench validate SWEEP`` (the plan alone), each in a fresh process."""
    sweep = folder / "sweep.toml"
    sweep.write_text(excluded_text())
    validate = _timed(CLI_CODE, "validate", str(sweep))
    validate_cpu = CPU[-1]
    run = _timed(CLI_CODE, "run", str(sweep), "--headless", "--runs-dir", str(folder / "cli-runs"))
    return run, CPU[-1], validate, validate_cpu


def resume_latest(runs: Path, folder: Path) -> tuple[float, float, float, float]:
    """Wall and CPU seconds of ``specbench run --resume latest --headless`` over ``runs`` (median of three), and
    of the same command in a folder holding the newest run alone; the newest run's files are put back after
    each resume (so that the next bench run resumes the same)."""
    newest = max(p for p in runs.iterdir() if p.is_dir() and not p.name.startswith("."))
    kept = {p.name: p.read_bytes() for p in newest.iterdir() if p.is_file()}

    def put_back(path: Path) -> None:
        for child in path.iterdir():
            if child.is_file() and child.name not in kept:
                child.unlink()
        for name, data in kept.items():
            (path / name).write_bytes(data)

    walls, cpus = [], []
    try:
        for _ in range(3):
            walls.append(_timed(RESUME_CODE, str(runs)))
            cpus.append(CPU[-1])
            put_back(newest)
        alone = folder / "alone"
        shutil.copytree(newest, alone / newest.name)
        one = _timed(RESUME_CODE, str(alone))
    finally:
        put_back(newest)
    return statistics.median(walls), statistics.median(cpus), one, CPU[-1]


def main() -> int:
    failures: list[str] = []
    cache = Path(os.environ.get("SPECBENCH_BENCH_CACHE", tempfile.gettempdir())) / f"specbench-histories-{os.getuid()}"
    runs = cache / "runs"
    t0 = time.perf_counter()
    compile_modules(cache)
    print(f"modules compiled into {cache / 'pycache'} in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    write_runs(runs)
    print(f"{RUNS:,} run directories under {runs} (written or kept in {time.perf_counter() - t0:.1f} s)")
    from specbench_tui.rundir.index import index_path

    index = index_path(runs)  # this user's index of the folder: the first listing builds it again
    if index is not None:
        index.unlink(missing_ok=True)
    cold = _timed(RUNS_CODE, str(runs))
    warm, all_warm = _median(RUNS_CODE, str(runs))
    print(f"specbench runs: {cold:.2f} s with no index (it builds one), then {', '.join(f'{t:.2f}' for t in all_warm)} s")
    latest, all_latest = _median(LATEST_CODE, str(runs))
    print(f"latest resolved in {', '.join(f'{t:.2f}' for t in all_latest)} s")
    with tempfile.TemporaryDirectory(prefix="specbench-resume-") as tmp:
        resume, resume_cpu, resume_one, resume_one_cpu = resume_latest(runs, Path(tmp))
    print(f"specbench run --resume latest over {RUNS:,} runs: {resume:.2f} s (CPU {resume_cpu:.2f} s, median of 3); "
          f"the same resume in a folder of that run alone: {resume_one:.2f} s (CPU {resume_one_cpu:.2f} s)")
    t0 = time.perf_counter()
    path = events_run(cache / "attach")
    size = (path / "events.jsonl").stat().st_size
    print(f"{size / 1e6:.1f} MB of events (written or kept in {time.perf_counter() - t0:.1f} s)")
    from specbench_tui.rundir.checkpoint import checkpoint_path

    kept = checkpoint_path(path)
    assert kept is not None
    kept.write_bytes((cache / "attach" / RUN_CHECKPOINT).read_bytes())  # the one the run wrote as it ran
    first, first_cpu = _ready(ATTACH_CODE, str(path))
    print(f"64 MB events file, first attach (the run's checkpoint): ledger ready in {first:.2f} s "
          f"(CPU {first_cpu:.2f} s)")
    kept.unlink(missing_ok=True)
    bare, bare_cpu = _ready(ATTACH_CODE, str(path))
    print(f"64 MB events file, attach with no checkpoint at all (a run written without them): ledger ready in "
          f"{bare:.2f} s (CPU {bare_cpu:.2f} s; no target)")
    attach, all_attach = _median(ATTACH_CODE, str(path))
    print(f"64 MB events file re-attached (from the checkpoint) in {', '.join(f'{t:.2f}' for t in all_attach)} s")
    with tempfile.TemporaryDirectory(prefix="specbench-excluded-") as tmp:
        excluded = excluded_sweep(Path(tmp))
        command, command_cpu, validate, validate_cpu = excluded_command(Path(tmp))
    print(f"all-excluded sweep, specbench run --headless: {command:.2f} s (CPU {command_cpu:.2f} s); specbench "
          f"validate of the same sweep (its plan): {validate:.2f} s (CPU {validate_cpu:.2f} s)")
    load = os.getloadavg()[0]
    print(f"load average {load:.1f}")
    runs_cpu, latest_cpu, attach_cpu = MEDIAN_CPU[-3:]
    for name, value, target in (("runs_10k_s", warm, RUNS_TARGET_S), ("runs_10k_cpu_s", runs_cpu, RUNS_TARGET_S),
                                ("latest_10k_s", latest, LATEST_TARGET_S),
                                ("latest_10k_cpu_s", latest_cpu, LATEST_TARGET_S),
                                ("resume_latest_10k_s", resume, RESUME_TARGET_S),
                                ("resume_latest_10k_cpu_s", resume_cpu, RESUME_TARGET_S),
                                ("attach_64mb_events_first_s", first, ATTACH_TARGET_S),
                                ("attach_64mb_events_first_cpu_s", first_cpu, ATTACH_TARGET_S),
                                ("attach_64mb_events_s", attach, ATTACH_TARGET_S),
                                ("attach_64mb_events_cpu_s", attach_cpu, ATTACH_TARGET_S),
                                ("all_excluded_10k_run_s", excluded, EXCLUDED_TARGET_S),
                                ("all_excluded_10k_command_s", command, validate + EXCLUDED_TARGET_S),
                                ("all_excluded_10k_command_cpu_s", command_cpu, validate_cpu + EXCLUDED_TARGET_S)):
        ok = value <= target
        figure(name, f"{value:.2f}", f"<= {target:.2f}", ok)
        if not ok:
            failures.append(f"{name} {value:.2f} s > {target:.2f} s (load {load:.1f})")
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
