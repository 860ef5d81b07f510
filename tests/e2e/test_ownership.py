"""Owned runs on a shared box, each against real subprocesses: one owner per run directory, ports and GPUs
leased across specbench instances, readiness that proves the answering server is ours, and every server
process (escaped daemons and the children of a wrapper that does not exec included) ended with specbench."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_helpers import plan_for, write_sweep
from narrowing import present
from reliability_helpers import (
    events,
    headless,
    make_sweep,
    marked,
    marker_env,
    new_marker,
    records,
    the_run_dir,
    wait_for,
    wait_gone,
)

from specbench_tui.core.events import ConfigFinished, ConfigState, Notice, ServerLaunching, ServerReady
from specbench_tui.engine.leases import Leases, describe_holder, lease_port
from specbench_tui.engine.orchestrator import Orchestrator
from specbench_tui.rundir.lock import RunDirBusy, acquire
from specbench_tui.rundir.store import RunDir

pytestmark = pytest.mark.e2e

GONE_WITHIN_S = 5.0

ESCAPING_WRAPPER = """#!{python}
import os, signal, sys, time
{ignore_term}
# A daemonising helper: double fork and setsid, holding the log pipe (stdout) open, sleeping forever.
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            time.sleep(1)
    os._exit(0)
os.wait()
# The server itself, started by a wrapper that does not exec it (and waits for it).
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
_, status = os.waitpid(pid, 0)
{after}
sys.exit(os.waitstatus_to_exitcode(status) if os.waitstatus_to_exitcode(status) >= 0 else 1)
"""


def _wrapper(folder: Path, *, ignore_sigterm: bool = False) -> Path:
    path = folder / "wrapper.py"
    path.write_text(ESCAPING_WRAPPER.format(
        python=sys.executable,
        ignore_term="signal.signal(signal.SIGTERM, signal.SIG_IGN)" if ignore_sigterm else "",
        after="while 'specbench_tui.sim' in sys.argv:  # the server's main process never ends by itself\n"
              "    time.sleep(1)" if ignore_sigterm else ""))
    path.chmod(0o755)
    return path


def _escapees(marker: str, engine_pid: int | None) -> list[int]:
    """Marked processes outside the engine's own pid and outside the process group of any recorded server."""
    return list(marked(marker, {engine_pid} if engine_pid else set()))


def _wait_ready(runs: Path) -> None:
    """Until the first server is ready: the wrapped server, its daemon and the simulator's children are up
    (counting processes is not enough: the env.json probe runs the wrapper too)."""
    wait_for(lambda: the_run_dir(runs) and any(e.get("type") == "ServerReady" for e in events(present(the_run_dir(runs)))),
             60, what="a ready server")


def _sessions(pids: list[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            out.add(os.getsid(pid))
        except OSError:
            pass
    return out


# ------------------------------------------------------------------------------ every process accounted for


@pytest.mark.parametrize("ending", ["done", "quit", "sigterm", "sighup", "sigkill"])
def test_escaping_daemons_and_a_non_exec_wrapper_leave_nothing_after_any_ending(tmp_path, ending):
    """The server's launcher forks a ``setsid`` daemon (double fork: it escapes the process group and the
    session) and runs the server without exec. Whatever ends specbench, 5 s later no process of it is left."""
    marker = new_marker()
    wrapper = _wrapper(tmp_path)
    sweep = make_sweep(tmp_path, engine_extra=f'python = "{wrapper}"')
    runs = tmp_path / "runs"
    if ending == "quit":  # the TUI's quit: the engine thread aborted now and stopped
        _quit_in_process(sweep, runs, marker)
        survivors = wait_gone(marker, None, timeout_s=GONE_WITHIN_S)
        assert survivors == [], f"quit: processes outlived the engine: {survivors}"
        return
    engine = headless([str(sweep), "--runs-dir", str(runs)], tmp_path, marker_env(marker))
    try:
        if ending == "done":
            engine.wait(timeout=120)
            output = engine.stdout.read().decode(errors="replace") if engine.stdout else ""
            assert engine.returncode == 0, output
        else:
            _wait_ready(runs)
            pids = _escapees(marker, engine.pid)
            assert len(_sessions(pids)) >= 2, "the daemon escaped into a session of its own"
            engine.send_signal({"sigterm": signal.SIGTERM, "sighup": signal.SIGHUP,
                                "sigkill": signal.SIGKILL}[ending])
            engine.wait(timeout=30)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(5)
    survivors = wait_gone(marker, engine.pid, timeout_s=GONE_WITHIN_S)
    assert survivors == [], f"{ending}: processes outlived the engine: {survivors}"
    if ending == "done":
        run_dir = the_run_dir(runs)
        stops = [e for e in events(run_dir) if e.get("type") == "ServerStopped"]
        assert len(stops) == 3 and all(e["leftover_pids"] == [] for e in stops)
        # Teardown never waits on the log pipe the daemon holds: a 3 s grace, 0.2 s teardowns.
        assert max(e["teardown_s"] for e in stops) < 2.0, stops


def _quit_in_process(sweep: Path, runs: Path, marker: str) -> None:
    import argparse

    from specbench_tui.application.runner import EngineThread, make_engine

    previous = os.environ.get("SPECBENCH_TEST_MARKER")
    os.environ["SPECBENCH_TEST_MARKER"] = marker
    try:
        args = argparse.Namespace(sweep=str(sweep), resume=None, retry_crashed=False, headless=False,
                                  runs_dir=str(runs), no_mouse=True, theme=None, port_base=None)
        engine = make_engine(args)
        assert isinstance(engine, EngineThread)
        engine.start()
        _wait_ready(runs)
        engine.abort(now=True)
        assert engine.stop(timeout=30)
    finally:
        if previous is None:
            os.environ.pop("SPECBENCH_TEST_MARKER", None)
        else:
            os.environ["SPECBENCH_TEST_MARKER"] = previous


def test_sigterm_beats_a_long_shutdown_grace_of_a_server_that_ignores_sigterm(tmp_path):
    """``shutdown_grace_s = 60`` and a server that ignores SIGTERM: a SIGTERM to specbench ends every process
    of it within seconds (abort-now cuts the grace wait short and SIGKILLs the whole tree), long before the grace."""
    marker = new_marker()
    wrapper = _wrapper(tmp_path, ignore_sigterm=True)
    sweep = make_sweep(tmp_path, engine_extra=f'python = "{wrapper}"')
    text = sweep.read_text().replace("shutdown_grace_s = 3", "shutdown_grace_s = 60")
    sweep.write_text(text)
    runs = tmp_path / "runs"
    engine = headless([str(sweep), "--runs-dir", str(runs)], tmp_path, marker_env(marker))
    try:
        wait_for(lambda: any(e.get("type") == "ServerReady" for e in events(the_run_dir(runs)))
                 if the_run_dir(runs) else False, 60, what="a ready server")
        engine.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        # Well under a second quiet; 15 s leaves a loaded 2-core box room and still fails a 60 s grace waited out.
        survivors = wait_gone(marker, engine.pid, timeout_s=15.0)
        took = time.monotonic() - sent
        engine.wait(timeout=30)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait(5)
        wait_gone(marker, engine.pid, timeout_s=5)
    assert survivors == [], f"still alive 15 s after SIGTERM: {survivors}"
    assert took < 15.0
    assert engine.returncode == 130


def test_an_escaped_daemon_is_found_by_the_keepers_record_when_the_keeper_itself_was_killed(tmp_path):
    """A keeper SIGKILLed on its own takes the server's main process with it (parent-death signal), but
    nothing can end the daemon that escaped: the next start finds it, outside any recorded process group, by
    the tree identity the keeper gave it, and names it in the command that ends it."""
    from specbench_tui.engine.leftovers import find_leftovers

    marker = new_marker()
    wrapper = _wrapper(tmp_path)
    sweep = make_sweep(tmp_path, engine_extra=f'python = "{wrapper}"')
    runs = tmp_path / "runs"
    engine = headless([str(sweep), "--runs-dir", str(runs)], tmp_path, marker_env(marker))
    try:
        _wait_ready(runs)
        launch = next(e for e in events(the_run_dir(runs)) if e.get("type") == "ServerLaunching")
        assert launch["keeper_pid"] and launch["tree_id"]
        os.kill(launch["keeper_pid"], signal.SIGKILL)
        engine.kill()
        engine.wait(5)
        time.sleep(1.0)
        found = find_leftovers([runs])
        alive = set(marked(marker, {engine.pid}))
        assert alive, "the daemon outlives a SIGKILLed keeper"
        assert found and alive <= {pid for item in found for pid in item.pids}
        assert any(item.outside_group for item in found), "escaped processes are named outside the group"
    finally:
        if engine.poll() is None:
            engine.kill()
        wait_gone(marker, engine.pid, timeout_s=0.1)


# ----------------------------------------------------------------------------------- one owner per run dir


def _snapshot(run_dir: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(run_dir)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(run_dir.rglob("*"))}


def test_a_second_resume_of_a_run_directory_is_refused_naming_the_owner_and_writes_nothing(tmp_path):
    marker = new_marker()
    sweep = make_sweep(tmp_path, max_new_tokens=400)
    runs = tmp_path / "runs"
    env = marker_env(marker)
    first = headless([str(sweep), "--runs-dir", str(runs)], tmp_path, env)
    try:
        wait_for(lambda: the_run_dir(runs) and records(the_run_dir(runs)), 60, what="a first measurement")
        first.kill()
        first.wait(5)
    finally:
        if first.poll() is None:
            first.kill()
    assert wait_gone(marker, first.pid, timeout_s=GONE_WITHIN_S) == []
    run_dir = the_run_dir(runs)
    owner = headless(["--resume", str(run_dir)], tmp_path, env)
    try:
        wait_for(lambda: sum(e.get("type") == "SweepStarted" for e in events(run_dir)) == 2, 60,
                 what="the first resume to start")
        os.kill(owner.pid, signal.SIGSTOP)  # frozen: whatever changes in the directory now is the second one's
        try:
            before = _snapshot(run_dir)
            started = time.monotonic()
            second = subprocess.run([sys.executable, "-m", "specbench_tui", "run", "--resume", str(run_dir),
                                     "--headless"], cwd=tmp_path, env=env, capture_output=True, text=True,
                                    timeout=60)
            took = time.monotonic() - started
            after = _snapshot(run_dir)
        finally:
            os.kill(owner.pid, signal.SIGCONT)
        assert second.returncode == 2, second.stdout + second.stderr
        message = second.stderr
        assert f"pid {owner.pid}" in message and socket.gethostname() in message and "started" in message
        assert f"kill -INT {owner.pid}" in message and f"specbench logs {run_dir} --follow" in message
        assert after == before, "the refused resume wrote nothing"
        assert took < 30  # at once (Python starting: seconds on a loaded box); one that waited for the lock hangs
        assert not [p for p in marked(marker) if p not in _tree_of(owner.pid)], "it launched nothing"
        owner.wait(timeout=180)
        assert owner.returncode == 0, owner.stdout.read().decode(errors="replace") if owner.stdout else ""
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait(5)
        wait_gone(marker, None, timeout_s=5)
    keys = [(r["config_id"], r["workload"], r["item"], r["repeat"]) for r in records(run_dir)]
    assert len(keys) == len(set(keys)) == 9, "every measurement once"


def _tree_of(pid: int) -> set[int]:
    import psutil

    try:
        proc = psutil.Process(pid)
        return {pid, *(c.pid for c in proc.children(recursive=True))}
    except psutil.Error:
        return set()


def test_the_run_lock_dies_with_its_holder(tmp_path):
    """An OS lock: the kernel releases it when the holder dies, even by SIGKILL; no stale lock is left."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from specbench_tui.rundir.lock import acquire\n"
        f"lock = acquire(Path({str(tmp_path)!r})); print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"held"
        with pytest.raises(RunDirBusy) as busy:
            acquire(tmp_path)
        assert busy.value.owner["pid"] == holder.pid
        holder.kill()
        holder.wait(5)
        lock = acquire(tmp_path)
        lock.release()
    finally:
        if holder.poll() is None:
            holder.kill()


# -------------------------------------------------------------------------------------------------- leases


def test_a_port_leased_by_another_process_is_passed_over_and_named(tmp_path):
    leases = Leases(tmp_path, note={"run_dir": "runs/a"})
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time; from pathlib import Path; from specbench_tui.engine.leases import Leases\n"
        f"lease = Leases(Path({str(tmp_path)!r}), note={{'run_dir': 'runs/other'}}).take('port-{_free_port()}')\n"
        "print('held', flush=True); time.sleep(60)")], stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == b"held"
        held = int(next(p.name.split("-")[1].split(".")[0] for p in tmp_path.glob("port-*.lease")))
        choice = lease_port(leases, "127.0.0.1", held, config="ar")
        assert choice.port > held
        assert choice.skipped[0][0] == held and f"specbench pid {holder.pid}" in choice.skipped[0][1]
        assert "runs/other" in choice.skipped[0][1]
        assert describe_holder(leases.holder(f"port-{choice.port}")).startswith(f"specbench pid {os.getpid()}")
        assert oct((tmp_path / f"port-{held}.lease").stat().st_mode & 0o777) == oct(0o666)
        choice.lease.release()
        assert leases.holder(f"port-{choice.port}") is None
    finally:
        holder.kill()
        holder.wait(5)
    assert leases.holder(f"port-{held}") is None, "the kernel released the dead holder's lease"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


GPU_SWEEP = """
[sweep]
name = "NAME"
gpus = 8
concurrent = true
repeats = 1
warmup = 0

[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = 31000
startup_timeout_s = 60
shutdown_grace_s = 2
gpu_release_timeout_s = 2

[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = 4096

[[configs]]
name = "ar-tp{tp}-s{seed}"
algorithm = "autoregressive"
matrix = { tp = [2, 4], seed = [1, 2] }
args = { tp-size = "{tp}", random-seed = "{seed}" }

[[workloads]]
name = "math"
kind = "arithmetic"
count = 6
max_new_tokens = 64
"""

GPU_PROFILE = """
[deterministic]
enabled = true
tok_s = 400.0
accept_length = 1.0
ttft_ms = 5.0
[output]
eos = false
[shutdown]
poll_s = 0.05
"""


def test_two_sweeps_sharing_the_8_gpu_fake_box_never_place_on_the_same_gpu(tmp_path):
    """Two specbench processes, the same GPU pool and the same port base: at no moment do two servers of
    either sweep share a GPU or a port, and the one that waits says who holds the GPUs."""
    marker = new_marker()
    env = marker_env(marker)
    engines = []
    for name in ("one", "two"):
        folder = tmp_path / name
        write_sweep(folder, GPU_SWEEP.replace("NAME", name), GPU_PROFILE)
        engines.append(headless([str(folder / "sweep.toml"), "--runs-dir", str(folder / "runs")], folder, env))
    try:
        for engine in engines:
            engine.wait(timeout=240)
    finally:
        for engine in engines:
            if engine.poll() is None:
                engine.kill()
                engine.wait(5)
        wait_gone(marker, None, timeout_s=5)
    outputs = [e.stdout.read().decode(errors="replace") if e.stdout else "" for e in engines]
    assert [e.returncode for e in engines] == [0, 0], outputs
    spans = []
    for name in ("one", "two"):
        run_dir = the_run_dir(tmp_path / name / "runs")
        evs = events(run_dir)
        stops = {e["config_id"]: e["ts"] for e in evs if e.get("type") == "ServerStopped"}
        for e in evs:
            if e.get("type") == "ServerLaunching":
                spans.append((name, e["ts"], stops[e["config_id"]], set(e["gpus"]), e["port"]))
    across = 0
    for i, (sa, a0, a1, ga, pa) in enumerate(spans):
        for sb, b0, b1, gb, pb in spans[i + 1:]:
            if a0 < b1 and b0 < a1:
                assert not ga & gb, f"{sa} on {sorted(ga)} and {sb} on {sorted(gb)} at the same time"
                assert pa != pb
                across += sa != sb
    assert across >= 1, "the two sweeps never ran side by side: the test proved nothing"
    assert any("held elsewhere" in out and "specbench pid" in out for out in outputs), outputs


# -------------------------------------------------------------------------------------- readiness identity

SLOW_BIND_PROFILE = GPU_PROFILE + """
[startup]
extra_delay_s = 2.5
"""

ID_SWEEP = """
[sweep]
name = "NAME"
gpus = 2
repeats = 1
warmup = 0

[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = PORT
startup_timeout_s = 60
shutdown_grace_s = 2
gpu_release_timeout_s = 2

[server.args]
model-path = "Qwen/Qwen3-8B"
context-length = CONTEXT

[[configs]]
name = "ar"
algorithm = "autoregressive"

[[workloads]]
name = "math"
kind = "arithmetic"
count = 8
max_new_tokens = 200
"""


def _health_only(orchestrator: Orchestrator) -> None:
    """llama.cpp's and vLLM's readiness rule: no ready line, ``/health`` alone."""
    orchestrator.profile = dataclasses.replace(orchestrator.profile, ready_line=None)


async def _two_sweeps(tmp_path: Path, *, shared_leases: bool, delay_s: float) -> list[tuple]:
    port = _free_port()
    runs = []
    for name, context in (("a", 4096), ("b", 8192)):
        folder = tmp_path / name
        write_sweep(folder, ID_SWEEP.replace("NAME", name).replace("PORT", str(port))
                    .replace("CONTEXT", str(context)), SLOW_BIND_PROFILE)
        plan = plan_for(folder / "sweep.toml")
        run_dir = RunDir.create(folder / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
        lease_dir = tmp_path / ("leases" if shared_leases else f"leases-{name}")
        lease_dir.mkdir(exist_ok=True)
        orchestrator = Orchestrator(plan, run_dir, write_env=False, lease_dir=lease_dir)
        _health_only(orchestrator)
        seen: list = []
        orchestrator.subscribe(seen.append)
        runs.append((name, context, orchestrator, run_dir, seen))

    async def one(index: int):
        await asyncio.sleep(index * delay_s)
        try:
            return await asyncio.wait_for(runs[index][2].run(), 120)
        finally:
            runs[index][3].close()

    outcomes = await asyncio.gather(one(0), one(1))
    return [(*r, outcome) for r, outcome in zip(runs, outcomes)]


async def test_two_sweeps_with_the_same_port_base_each_measure_their_own_server(tmp_path):
    """Readiness on ``/health`` alone and the same ``port_base``: each sweep's server is the one measured (its
    own context length is what the engine read from the answering server), on ports of its own."""
    results = await _two_sweeps(tmp_path, shared_leases=True, delay_s=0.3)
    ports = set()
    for name, context, _, _, seen, outcome in results:
        assert outcome.state == "completed", (name, outcome)
        ready = [e for e in seen if isinstance(e, ServerReady)]
        assert [e.context_length for e in ready] == [context], f"{name} measured another server"
        ports |= {e.port for e in seen if isinstance(e, ServerLaunching)}
        finished = [e for e in seen if isinstance(e, ConfigFinished)]
        assert [e.state for e in finished] == [ConfigState.DONE]
    assert len(ports) == 2
    moved = [e for _, _, _, _, seen, _ in results for e in seen
             if isinstance(e, Notice) and "is taken" in e.text and "specbench pid" in e.text]
    assert moved, "the second sweep said its port_base was taken and by whom"


async def test_a_stranger_answering_on_our_port_is_never_taken_for_our_server(tmp_path):
    """The two sweeps do not see each other's leases (another lease directory: say, another user whose
    specbench fell back to a private one), so both pick the same free port, and both servers take 2.5 s to
    bind: the first to bind answers ``/health`` for both. The other sweep must not call that ready: it names
    the stranger, and once its own server failed to bind, launches it again on another port; each sweep
    measures only its own server."""
    results = await _two_sweeps(tmp_path, shared_leases=False, delay_s=0.3)
    launches = {name: [e for e in seen if isinstance(e, ServerLaunching)] for name, *_, seen, _ in results}
    assert launches["a"][0].port == launches["b"][0].port, "the setup did not make the ports collide"
    for name, context, _, _, seen, outcome in results:
        assert outcome.state == "completed", (name, outcome)
        ready = [e for e in seen if isinstance(e, ServerReady)]
        assert [e.context_length for e in ready] == [context], f"{name} measured another server"
        assert [e.state for e in seen if isinstance(e, ConfigFinished)] == [ConfigState.DONE]
    loser = [name for name, lst in launches.items() if len(lst) == 2]
    assert len(loser) == 1, launches
    (_, _, _, _, seen, _) = next(r for r in results if r[0] == loser[0])
    said = [e.text for e in seen if isinstance(e, Notice) and "launched again on another port" in e.text]
    winner = next(name for name in launches if name != loser[0])
    assert said and f"pid {launches[winner][0].pid} " in said[0], said  # the stranger, named
    assert launches[loser[0]][1].port != launches[loser[0]][0].port


# -------------------------------------------------------------------------------------------- quick start

BLOCKER_SWEEP = """
[sweep]
name = "blocker"
gpus = 1
repeats = 1
warmup = 0

[engine]
launcher = "simulator"
sim_profile = "sim_profile.toml"
port_base = 30000
startup_timeout_s = 60
shutdown_grace_s = 2

[server.args]
model-path = "Qwen/Qwen3-8B"

[[configs]]
name = "ar"
algorithm = "autoregressive"

[[workloads]]
name = "math"
kind = "arithmetic"
count = 50
max_new_tokens = 4000
"""


@pytest.mark.xdist_group("default-port-30000")  # servers on the default port base: one xdist worker runs them
def test_the_quick_start_works_while_another_specbench_holds_port_30000(tmp_path):
    """The README's quick start (``specbench run sweeps/demo.toml``) while another specbench's server holds
    port 30000: the demo's first server starts on another port with a notice, becomes ready and is measured."""
    from specbench_tui.paths import data_dir

    marker = new_marker()
    env = marker_env(marker)
    blocker_dir = tmp_path / "blocker"
    write_sweep(blocker_dir, BLOCKER_SWEEP, GPU_PROFILE)
    blocker = headless([str(blocker_dir / "sweep.toml"), "--runs-dir", str(blocker_dir / "runs")], blocker_dir, env)
    demo = None
    try:
        wait_for(lambda: the_run_dir(blocker_dir / "runs") and any(
            e.get("type") == "ServerReady" for e in events(the_run_dir(blocker_dir / "runs"))), 60,
            what="the blocker's server")
        blocked = next(e["port"] for e in events(the_run_dir(blocker_dir / "runs"))
                       if e.get("type") == "ServerLaunching")
        demo_dir = tmp_path / "demo"
        demo_dir.mkdir()
        demo = headless([str(data_dir("sweeps") / "demo.toml"), "--runs-dir", str(demo_dir / "runs")], demo_dir, env)
        wait_for(lambda: the_run_dir(demo_dir / "runs") and records(the_run_dir(demo_dir / "runs")), 90,
                 what="the demo's first measurement")
        demo_events = events(the_run_dir(demo_dir / "runs"))
        launch = next(e for e in demo_events if e.get("type") == "ServerLaunching")
        assert launch["port"] != blocked
        if blocked == 30000:
            assert launch["port"] > 30000
            notices = [e["text"] for e in demo_events if e.get("type") == "Notice" and "is taken" in e.get("text", "")]
            assert notices and "30000" in notices[0] and "specbench pid" in notices[0]
        assert not any(e.get("type") == "SweepFinished" and e.get("state") == "failed" for e in demo_events)
    finally:
        for proc in (demo, blocker):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.send_signal(signal.SIGINT)
        for proc in (demo, blocker):
            if proc is not None:
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        wait_gone(marker, None, timeout_s=5)


def test_port_base_on_the_command_line_overrides_the_sweep(tmp_path):
    from specbench_tui.cli import _parser

    args = _parser().parse_args(["run", "sweeps/demo.toml", "--port-base", "31234"])
    assert args.port_base == 31234
    with pytest.raises(SystemExit):
        _parser().parse_args(["run", "sweeps/demo.toml", "--port-base", "80"])



# ------------------------------------------------------------------------------------------------- the keeper


def _keeper(argv: list[str]) -> subprocess.Popen[bytes]:
    from specbench_tui.engine.server import KEEPER_PATH

    return subprocess.Popen([sys.executable, "-s", str(KEEPER_PATH), "--parent", str(os.getpid()), "--", *argv],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_the_server_starts_with_the_signal_mask_of_specbench_not_the_keepers():
    """The keeper blocks the signals it waits for; the server must not inherit that, or a server without
    handlers of its own (llama-server) never sees its stop signal."""
    proc = _keeper(["grep", "SigBlk", "/proc/self/status"])
    out, _ = proc.communicate(timeout=10)
    own = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("SigBlk"))
    assert out.decode().strip() == own.strip()


def test_the_keeper_forwards_the_polite_stop_and_mirrors_the_exit():
    """SIGUSR1 to the keeper: the stop signal (SIGTERM) to the server's group; a server that dies of it makes
    the keeper exit the same way, at once (not after a grace period)."""
    proc = _keeper(["sleep", "60"])
    try:
        # The keeper blocks its signals before it forks the server: once the server is up, SIGUSR1 is the
        # keeper's to handle (before that it would end the keeper; a fixed 0.3 s was not always enough under load).
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        wait_for(lambda: proc.poll() is not None or children.read_text().split(), 60, what="the keeper's server")
        started = time.monotonic()
        proc.send_signal(signal.SIGUSR1)
        assert proc.wait(timeout=30) == -signal.SIGTERM
        assert time.monotonic() - started < 5.0  # at once: ~10 ms quiet; a grace period would be seconds more
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV, signal.SIGTERM])
def test_the_keeper_exits_like_its_server(sig):
    """The engine reads the server's exit from the keeper's: a server killed by a signal (SIGSEGV is a crash
    signature, SIGKILL is what a kill -9 or the OOM killer sends) makes the keeper end by the same signal."""
    proc = _keeper([sys.executable, "-c", f"import os, signal; os.kill(os.getpid(), {int(sig)})"])
    assert proc.wait(timeout=10) == -sig
    proc = _keeper(["sh", "-c", "exit 3"])
    assert proc.wait(timeout=10) == 3


def test_the_keeper_reports_a_server_that_cannot_be_executed():
    from specbench_tui.engine.server import KEEPER_PATH

    read, write = os.pipe()
    proc = subprocess.Popen([sys.executable, "-s", str(KEEPER_PATH), "--report-fd", str(write), "--",
                             "/nonexistent/server"], pass_fds=(write,))
    os.close(write)
    assert proc.wait(timeout=10) == 127
    with os.fdopen(read, "rb") as handle:
        assert handle.read().decode().strip() == f"error {2}"  # ENOENT


# ------------------------------------------------------------------------------------------- GPUs held elsewhere


async def test_a_gpu_holding_another_jobs_memory_is_not_placed_on_and_the_wait_names_it(tmp_path):
    """A GPU with more than FOREIGN_MEMORY_MIB of other processes' memory is passed over; when every free GPU
    is like that, the configuration waits and says who holds them; our own servers' pids never count."""
    from specbench_tui.engine.gpus import GpuSample
    from specbench_tui.engine.leases import FOREIGN_MEMORY_MIB, LeasedGpuPool

    stranger = 999_999
    samples = [GpuSample(index=0, pids=((stranger, FOREIGN_MEMORY_MIB * 4),)),
               GpuSample(index=1, pids=((4242, FOREIGN_MEMORY_MIB * 4),)),  # our own server's
               GpuSample(index=2, pids=((stranger, 10.0),))]  # below the threshold
    pool = LeasedGpuPool((0, 1, 2), Leases(tmp_path), {i: f"gpu-index-{i}" for i in range(3)},
                         samples=lambda: samples, ours=lambda: {4242})
    assert await pool.acquire(2) == (1, 2)
    said: list[str] = []
    waiting = asyncio.ensure_future(pool.acquire(1, on_wait=said.append))
    await asyncio.sleep(0.3)
    assert not waiting.done() and said and "GPU 0 by other processes (4096 MiB)" in said[0]
    samples[0] = GpuSample(index=0)  # the other job ended
    assert await asyncio.wait_for(waiting, 5) == (0,)
    pool.close()


def _hold_two_gpus(leases: Path) -> subprocess.Popen[bytes]:
    """Another specbench, as far as leases go: a process holding GPUs 0 and 1 (returns once it holds them)."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import time; from pathlib import Path; from specbench_tui.engine.leases import Leases\n"
        f"l = Leases(Path({str(leases)!r}), note={{'run_dir': 'runs/theirs'}})\n"
        "held = [l.take('gpu-index-0'), l.take('gpu-index-1')]\n"
        "print('held', flush=True); time.sleep(60)")], stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
    return holder


async def test_the_pre_flight_says_when_the_whole_gpu_pool_is_taken(tmp_path):
    """Another specbench holds both GPUs of the pool: the sweep starts, says so naming the holder, and waits."""
    leases = tmp_path / "leases"
    leases.mkdir()
    holder = _hold_two_gpus(leases)
    try:
        folder = tmp_path / "sweep"
        write_sweep(folder, ID_SWEEP.replace("NAME", "x").replace("PORT", str(_free_port()))
                    .replace("CONTEXT", "4096"), GPU_PROFILE)
        plan = plan_for(folder / "sweep.toml")
        run_dir = RunDir.create(folder / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
        orchestrator = Orchestrator(plan, run_dir, write_env=False, lease_dir=leases)
        seen: list = []
        orchestrator.subscribe(seen.append)
        task = asyncio.ensure_future(orchestrator.run())
        deadline = time.monotonic() + 60  # the sweep says it waits (late on a loaded box), and launches nothing
        while not any(isinstance(e, Notice) and "waiting for 1 GPU" in e.text for e in seen):
            assert time.monotonic() < deadline and not task.done(), "the sweep never said it waits for a GPU"
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)
        assert not [e for e in seen if isinstance(e, ServerLaunching)], "nothing is placed on a taken GPU"
        orchestrator.abort(now=True)
        await asyncio.wait_for(task, 30)
        run_dir.close()
        texts = [e.text for e in seen if isinstance(e, Notice)]
        whole = [t for t in texts if "the whole GPU pool [0, 1] is taken" in t]
        assert whole and f"specbench pid {holder.pid}" in whole[0] and "runs/theirs" in whole[0]
        assert any("waiting for 1 GPU" in t for t in texts)
    finally:
        holder.kill()
        holder.wait(5)


async def test_a_server_crashing_while_its_port_is_looked_at_is_not_a_stranger(tmp_path, monkeypatch):
    """A server that dies before ready is looked at for a stranger on its port; when it crashes during that look
    (the socket table still lists its listening socket, its process is already gone from the tree), it is our
    own server, not a stranger (that mistake relaunched a crashing configuration on port after port)."""
    from types import SimpleNamespace

    from specbench_tui.core.engines.registry import get_profile
    from specbench_tui.core.signatures import SignatureSet
    from specbench_tui.engine import server as server_module
    from specbench_tui.engine.server import ServerProcess

    profile = get_profile("sglang")
    server = ServerProcess("c", ["true"], {}, tmp_path / "c.log", profile,
                           SignatureSet(builtins=profile.crash_signatures), lambda e: None, port=30123)
    server._proc = SimpleNamespace(pid=4242)  # the keeper
    server._server_pid = 4243  # our server, listed as listening, gone from the tree by the time it is read
    monkeypatch.setattr(server_module, "process_tree", lambda root: set())
    monkeypatch.setattr(server_module, "listening_pids", lambda port: {4243})
    await server.look_for_stranger()
    assert server.stranger is None
    stranger = os.getpid()  # a live process outside the server's tree: a stranger, named
    monkeypatch.setattr(server_module, "listening_pids", lambda port: {4243, stranger})
    await server.look_for_stranger()
    assert server.stranger is not None and f"pid {stranger} " in server.stranger
