"""Detach and attach: the sweep runs in an engine process of its own; terminals come and go.

Real subprocesses against the simulator (a tiny deterministic sweep of 3 configurations, a few seconds each).
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from engine_helpers import write_sweep
from reliability_helpers import PROFILE, marker_env, new_marker, records, sweep_text, wait_for, wait_gone
from test_reliability_processes import _tui_in_a_pty

from specbench_tui.core.events import ConfigState, Notice
from specbench_tui.core.ledger import Ledger
from specbench_tui.core.state import RunState
from specbench_tui.engine.attached import AttachedEngine, AttachError
from specbench_tui.engine.control_socket import SOCKET_NAME

pytestmark = pytest.mark.e2e

MAX_NEW_TOKENS = 700
"""About half a second a request at the profile's 1500 tok/s."""
MATH_ITEMS = 6
"""8 requests a configuration (2 code, 6 math): about 4 s each, so a pause lands inside one."""
DETERMINISTIC = ("config_id", "workload", "item", "repeat", "status", "prompt_tokens", "completion_tokens",
                 "finish_reason")


def _env(tmp_path: Path, marker: str) -> dict[str, str]:
    return marker_env(marker, {"SPECBENCH_ENGINES_DIR": str(tmp_path / "engines")})


def _cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench_tui", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def _run_dir(runs: Path, timeout: float = 30) -> Path:
    wait_for(lambda: any(runs.glob(f"*/{SOCKET_NAME}")), timeout, what="the engine's socket")
    return next(runs.glob(f"*/{SOCKET_NAME}")).parent


def _sweep(tmp_path: Path, max_new_tokens: int = MAX_NEW_TOKENS, *, gpu: int) -> Path:
    """The reliability sweep, longer, on a simulated GPU of its own: tests in parallel workers share the
    machine-wide GPU leases, and GPU 0 is everybody's."""
    text = sweep_text(max_new_tokens=max_new_tokens).replace("count = 1", f"count = {MATH_ITEMS}")
    text = text.replace("gpus = 1\n", f"gpus = [{gpu}]\n")
    assert f"count = {MATH_ITEMS}" in text and f"gpus = [{gpu}]" in text
    return write_sweep(tmp_path, text, PROFILE)


def _start_detached(tmp_path: Path, env: dict[str, str], max_new_tokens: int = MAX_NEW_TOKENS,
                    runs: Path | None = None, *, gpu: int) -> Path:
    sweep = _sweep(tmp_path, max_new_tokens, gpu=gpu)
    runs = runs or tmp_path / "runs"
    result = _cli(env, "run", str(sweep), "--headless", "--detach", "--runs-dir", str(runs))
    assert result.returncode == 0, result.stderr
    assert "specbench attach" in result.stdout
    return _run_dir(runs)


def _fold(run_dir: Path) -> Ledger:
    plan = json.loads((run_dir / "plan.json").read_text())
    from specbench_tui.rundir.store import RunDir

    stored = RunDir.open(run_dir)
    return Ledger.from_run(plan, stored.read_measurements(), stored.read_events())


def _states(run_dir: Path) -> dict[str, str]:
    """Each configuration's last state in events.jsonl."""
    states: dict[str, str] = {}
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["type"] in ("ConfigStateChanged", "ConfigFinished"):
            states[event["config_id"]] = event["state"]
    return states


async def _until(predicate, timeout: float, what: str, pilot=None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        if pilot is not None:
            await pilot.pause(0.05)
        else:
            await asyncio.sleep(0.05)


def _deterministic(run_dir: Path) -> dict[tuple, tuple]:
    return {tuple(r[k] for k in DETERMINISTIC[:4]): tuple(r.get(k) for k in DETERMINISTIC[4:])
            for r in records(run_dir)}


async def test_an_ssh_drop_leaves_the_sweep_running_and_a_new_client_takes_over(tmp_path: Path) -> None:
    """The terminal dies mid-sweep (SIGHUP to the client's session): measurements keep arriving; a new client
    shows every state and count so far, pauses and skips, detaches; `specbench stop` ends the engine; no server
    survives; every measurement equals an uninterrupted run's."""
    from specbench_tui.tui.app import SpecbenchApp

    marker = new_marker()
    env = _env(tmp_path, marker)
    sweep = _sweep(tmp_path, gpu=5)
    run_dir, seen, _ = _lose_the_terminal(sweep, tmp_path / "runs", env, nohup=False)
    try:
        engine = AttachedEngine(run_dir)
        app = SpecbenchApp(engine, drain_interval_s=0.05)
        async with app.run_test(size=(120, 36)) as pilot:
            await _until(lambda: app.panels_ready, 20, "the panels", pilot)
            await pilot.press("p")
            await _until(lambda: app.state.paused and app.pause_requested is None, 20, "the pause to be confirmed", pilot)
            # Paused: the request in flight ends (half a second), then the run directory stops growing.
            await _until(_settled(run_dir), 60, "the run directory to stop growing", pilot)
            folded, on_disk = _fold(run_dir), _states(run_dir)
            assert app.state.measurements == folded.counts.total > seen
            assert all(view.gpus for view in app.state.active()), "a running configuration shown without its GPUs"
            for config_id, state in on_disk.items():
                assert app.state.configs[config_id].state.value == state, config_id
                assert app.state.configs[config_id].measurements == folded.config_counts(config_id).total
            running = [v.config_id for v in app.state.active()]
            pending = [v.config_id for v in app.state.configs.values() if v.state == ConfigState.PENDING]
            if running:  # paused between two requests: S stops it at once
                skipped = running[0]
                await pilot.press("S")
            else:  # paused between two configurations (a loaded machine): a pending one is dropped when the queue
                skipped = pending[-1]  # moves on; the queue stays paused, so the row shows what was asked
                app.skip_config(skipped)
            await _until(lambda: any(a.get("cmd") == "skip" and a.get("ok") for a in engine.acks), 10, "the skip's ack",
                         pilot)
            if running:
                await _until(lambda: app.state.configs[skipped].state == ConfigState.SKIPPED and not app.optimistic, 20,
                             "the skip to be confirmed", pilot)
            await pilot.press("q")
            await pilot.press("d")
            await _until(lambda: engine.closed.is_set(), 10, "the detach", pilot)
        assert app.detached and not engine.finished

        follower = subprocess.Popen([sys.executable, "-m", "specbench_tui", "logs", str(run_dir), "--follow"], env=env,  # noqa: ASYNC220
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        first_line = follower.stdout.readline()  # type: ignore[union-attr]  # attached: the past is printed first
        result = _cli(env, "stop", str(run_dir))
        assert result.returncode == 0, result.stderr
        rest = follower.stdout.read()  # type: ignore[union-attr]  # (communicate() would skip what readline buffered)
        follower.wait(30)
        lines = [first_line.rstrip("\n"), *rest.splitlines()]
        assert follower.returncode == 0
        # Every line carries the progress and an ETA; the past came from the run directory, the end from the stream.
        assert all(re.match(r"^\[\d\d:\d\d:\d\d \d+/[23] ran(, 1 skipped)?, [\d,]+ meas, ETA (learning|~?[\d:]+( ?\(?[\d:–]+\)?)?)\] ", line)
                   for line in lines), lines
        text = "\n".join(lines)
        assert "skipped" in text and "stopped the sweep" in text and "sweep aborted" in lines[-1], text
        assert "continue with specbench run --resume" in result.stdout
        assert wait_gone(marker, timeout_s=10) == [], "a server or the engine outlived `specbench stop`"
        meta = json.loads((run_dir / "run.json").read_text())
        assert meta["exit_code"] == 130 and meta["state"] == "aborted"
        if running:
            assert _states(run_dir)[skipped] == "skipped"

        # The same sweep, uninterrupted (headless, in the foreground): every measurement of the interrupted run is
        # the same, request for request.
        reference = tmp_path / "reference"
        done = _cli(env, "run", str(sweep), "--headless", "--runs-dir", str(reference), timeout=180)
        assert done.returncode == 0, done.stdout
        uninterrupted = _deterministic(next(reference.glob("*/results.jsonl")).parent)
        interrupted = _deterministic(run_dir)
        assert interrupted and all(v[0] == "ok" for v in interrupted.values())
        assert {k: uninterrupted[k] for k in interrupted} == interrupted
        assert len(records(run_dir)) == len(interrupted), "a measurement was recorded twice"
    finally:  # a failure above must not leave the engine (and its servers) running
        if run_dir.joinpath(SOCKET_NAME).exists():
            _cli(env, "stop", str(run_dir), "--now")
        wait_gone(marker, timeout_s=10)


def test_a_client_under_nohup_leaves_when_its_terminal_hangs_up(tmp_path: Path) -> None:
    """`nohup specbench run …`: SIGHUP is ignored, so the SSH drop sends the client no signal it sees; it still
    leaves once its terminal has hung up, as it would have without nohup (Textual alone spins on the dead terminal
    at most of a core, forever), and the sweep goes on in its engine."""
    marker = new_marker()
    env = _env(tmp_path, marker)
    runs = tmp_path / "runs"
    try:
        _, _, status = _lose_the_terminal(_sweep(tmp_path, gpu=3), runs, env, nohup=True)
        assert status == -signal.SIGHUP  # ended as SIGHUP would have ended it
    finally:
        for socket_path in runs.glob(f"*/{SOCKET_NAME}"):
            _cli(env, "stop", str(socket_path.parent), "--now")
        assert wait_gone(marker, timeout_s=10) == []


def _lose_the_terminal(sweep: Path, runs: Path, env: dict[str, str], *, nohup: bool) -> tuple[Path, int, int | None]:
    """Run the TUI (a client of its engine) on a terminal, lose the terminal after the first measurement, and
    see the sweep go on: the run directory, the measurements when the client was gone, its exit status.
    The SSH session drops: the whole session is sent SIGHUP, then the terminal's other side is gone; under
    ``nohup`` (SIGHUP ignored) only the terminal hangs up."""
    proc, master = _tui_in_a_pty(sweep, runs, env, extra=(), sighup=signal.SIG_IGN if nohup else signal.SIG_DFL)
    try:
        run_dir = _run_dir(runs)
        wait_for(lambda: len(records(run_dir)) >= 1, 60, what="a first measurement")
        if not nohup:
            os.killpg(proc.pid, signal.SIGHUP)
        os.close(master)
        master = -1
        status = proc.wait(timeout=30)
        seen = len(records(run_dir))
        wait_for(lambda: len(records(run_dir)) > seen, 30, what="measurements after the terminal died")
        return run_dir, seen, status
    finally:
        if proc.poll() is None:
            proc.kill()
        if master >= 0:
            os.close(master)


QUIET_S = 3.0
"""How long results.jsonl must not grow to count as settled: several times a request (half a second quiet), so a
request in flight that a loaded machine slows is not taken for the end."""


def _settled(run_dir: Path):
    """A predicate: results.jsonl has not grown for :data:`QUIET_S`."""
    seen = {"size": -1, "since": time.monotonic()}

    def check() -> bool:
        size = (run_dir / "results.jsonl").stat().st_size
        if size != seen["size"]:
            seen.update(size=size, since=time.monotonic())
        return time.monotonic() - seen["since"] > QUIET_S

    return check


def _collect(engine: AttachedEngine, run_dir: Path) -> RunState:
    measurements, events = engine.history()
    state = RunState.from_history(engine.plan, str(run_dir), measurements, events)
    engine.subscribe(state.apply)
    return state


def test_two_clients_share_state_and_each_others_actions_then_a_killed_engine_reads_crashed(tmp_path: Path) -> None:
    marker = new_marker()
    env = _env(tmp_path, marker)
    os.environ["SPECBENCH_ENGINES_DIR"] = env["SPECBENCH_ENGINES_DIR"]
    try:
        run_dir = _start_detached(tmp_path, env, gpu=6)
        first = AttachedEngine(run_dir, name="first")
        state_first = _collect(first, run_dir)
        notices_first: list[str] = []
        first.subscribe(lambda e: notices_first.append(e.text) if isinstance(e, Notice) else None)
        first.start()
        wait_for(lambda: state_first.measurements >= 1, 30, what="a measurement")
        second = AttachedEngine(run_dir, name="second")
        state_second = _collect(second, run_dir)
        notices_second: list[str] = []
        second.subscribe(lambda e: notices_second.append(e.text) if isinstance(e, Notice) else None)
        second.start()

        first.pause()
        wait_for(lambda: state_second.paused and state_first.paused, 10, what="both to see the pause")
        wait_for(lambda: any("first paused the queue" in n for n in notices_second), 10, what="who paused")
        pending = [v.config_id for v in state_first.configs.values() if v.state == ConfigState.PENDING]
        target = ([v.config_id for v in state_first.active()] + pending)[0]  # the running one, else the next
        assert len(pending) >= 1
        second.skip(target)
        wait_for(lambda: any("second skipped" in n for n in notices_first), 10, what="who skipped")
        wait_for(_settled(run_dir), 60, what="the request in flight to end")
        assert {k: v.state for k, v in state_first.configs.items()} == \
            {k: v.state for k, v in state_second.configs.items()}
        assert state_first.measurements == state_second.measurements == _fold(run_dir).counts.total
        assert all(a.get("ok") for a in first.acks + second.acks), first.acks + second.acks

        ps = _cli(env, "ps")
        assert "reliability" in ps.stdout and "PAUSED" in ps.stdout, ps.stdout
        assert ps.stdout.splitlines()[1].split()[-4] == "2", ps.stdout  # two clients attached
        second.resume()
        wait_for(lambda: state_first.configs[target].state == ConfigState.SKIPPED
                 and state_second.configs[target].state == ConfigState.SKIPPED, 10, what="both to see the skip")
        wait_for(lambda: state_first.active(), 10, what="the next configuration to launch")
        wait_for(lambda: any("second resumed the queue" in n for n in notices_first), 10, what="who resumed")

        pid = json.loads((run_dir / "run.json").read_text())["engine_pid"]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: first.closed.is_set() and second.closed.is_set(), 10, what="the clients to notice")
        assert state_first.outcome is not None  # the client says the sweep is over, and why
        assert any("stopped without finishing" in n for n in notices_first)
        assert wait_gone(marker, timeout_s=10) == [], "a server outlived its SIGKILLed engine"
        ps = _cli(env, "ps")
        assert "CRASHED" in ps.stdout and f"specbench run --resume {run_dir}" in ps.stdout, ps.stdout
        attach = _cli(env, "attach", str(run_dir))
        assert attach.returncode == 1 and "gone without finishing" in attach.stderr, attach.stderr
        assert f"specbench run --resume {run_dir}" in attach.stderr
    finally:
        os.environ.pop("SPECBENCH_ENGINES_DIR", None)
        wait_gone(marker, timeout_s=5)


def test_the_socket_refuses_strangers_and_other_versions(tmp_path: Path) -> None:
    """Mode 0600 and a same-uid check: another user cannot connect; a client of another protocol is refused
    with a message that says what to do."""
    marker = new_marker()
    env = _env(tmp_path, marker)
    # Runs in a folder every user may traverse, so that only the socket's own mode and the engine's check stand
    # between another user and the engine (pytest's temporary folders are private to their owner).
    runs = Path(tempfile.mkdtemp(prefix="specbench-detach-"))
    runs.chmod(0o755)
    try:
        run_dir = _start_detached(tmp_path, env, runs=runs, gpu=7)
        path = run_dir / SOCKET_NAME
        assert path.stat().st_mode & 0o777 == 0o600 and run_dir.stat().st_mode & 0o005

        with socket.socket(socket.AF_UNIX) as raw:  # speaks protocol 99
            raw.connect(str(path))
            raw.sendall(b'{"hello": "specbench-control", "protocol": 99, "version": "9.9", "role": "view"}\n')
            answer = json.loads(raw.makefile("rb").readline())
        assert "protocol mismatch" in answer["refused"] and "speaks 99" in answer["refused"]

        view = AttachedEngine(run_dir, role="view", name="a view")  # a browser tab opened without --control
        view.start()
        ident = view._send("pause")
        ack = view.wait_ack(ident)
        assert ack is not None and not ack["ok"] and "read-only" in str(ack["error"])
        view.detach()

        other = _other_user()
        if other is not None:
            _a_stranger_is_refused(other, path)

        # SIGTERM ends the engine as a stop does: its servers gone, the exit code and the ending in run.json.
        pid = json.loads((run_dir / "run.json").read_text())["engine_pid"]
        os.kill(pid, signal.SIGTERM)
        wait_for(lambda: "exit_code" in json.loads((run_dir / "run.json").read_text()), 20, what="the engine's end")
        assert json.loads((run_dir / "run.json").read_text())["exit_code"] == 130
        assert wait_gone(marker, timeout_s=10) == [], "a server outlived the engine's SIGTERM"
        assert not path.exists()
        if other is None:
            pytest.skip("no second uid to test with (needs root and setpriv): the other user's refusal is untested")
    finally:
        _cli(env, "stop", "latest", "--now")
        wait_gone(marker, timeout_s=10)
        shutil.rmtree(runs, ignore_errors=True)


def _a_stranger_is_refused(other: list[str], path: Path) -> None:
    """Another uid cannot connect (the mode), and with the mode opened up the engine refuses it (the uid check)."""
    probe = ("import socket, sys\n"
             "s = socket.socket(socket.AF_UNIX)\n"
             "try:\n    s.connect(sys.argv[1])\nexcept OSError as e:\n    print('DENIED', e.errno); sys.exit(0)\n"
             "print('ANSWER', s.makefile('rb').readline().decode().strip())\n")  # refused before any hello
    first = subprocess.run([*other, "/usr/bin/python3", "-c", probe, str(path)], capture_output=True, text=True,
                           timeout=30)
    assert "DENIED 13" in first.stdout, first.stdout + first.stderr  # the file mode stops it
    os.chmod(path, 0o666)  # even with the mode opened up, the engine checks the peer's uid
    second = subprocess.run([*other, "/usr/bin/python3", "-c", probe, str(path)], capture_output=True, text=True,
                            timeout=30)
    os.chmod(path, 0o600)
    assert "ANSWER" in second.stdout and "permission denied" in second.stdout, second.stdout + second.stderr
    assert "welcome" not in second.stdout


def _other_user() -> list[str] | None:
    """A command prefix that runs as another uid (nobody), or None."""
    if os.getuid() != 0 or shutil.which("setpriv") is None or not Path("/usr/bin/python3").exists():
        return None
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_attach_without_an_engine_says_why(tmp_path: Path) -> None:
    from specbench_tui.engine.attached import connect

    with pytest.raises(AttachError, match="no engine is running"):
        connect(tmp_path, "view", "test")


def textual_js_socket_url(page: str, cols: int, rows: int) -> str:
    """The websocket URL textual-serve's page script opens: the page's ``data-session-websocket-url`` with the
    suffix its installed ``textual.js`` appends (read from that file, so a new version's shape is followed)."""
    import textual_serve

    script = (Path(textual_serve.__file__).parent / "static" / "js" / "textual.js").read_text(encoding="utf-8")
    shape = re.search(r'new WebSocket\(this\.websocket_url\+"([^"]*)"\+e\.cols\+"([^"]*)"\+e\.rows\)', script)
    assert shape, "textual.js no longer opens its websocket as this test reads it: read its connect() again"
    url = re.search(r'data-session-websocket-url="([^"]+)"', page)
    assert url, page
    return f"{html.unescape(url.group(1))}{shape.group(1)}{cols}{shape.group(2)}{rows}"


def test_the_page_query_and_terminal_sizes_are_read_as_the_page_meant() -> None:
    pytest.importorskip("textual_serve")
    from specbench_tui.tui.web import MAX_COLUMNS, MAX_ROWS, clamp_size, page_query

    page = '<div data-session-websocket-url="ws://127.0.0.1:1/ws?token=T-_x"></div>'
    query = dict(parse_qsl(urlsplit(textual_js_socket_url(page, 155, 40)).query))
    assert page_query(query) == {"token": "T-_x", "width": "155", "height": "40"}
    assert page_query({"token": "T", "width": "9", "height": "8"}) == {"token": "T", "width": "9", "height": "8"}
    assert clamp_size(20000, 20000) == (MAX_COLUMNS, MAX_ROWS)
    assert clamp_size("155", 40.5) == (155, 40)
    absurd: object
    for absurd in (None, "x", float("inf"), "9" * 5000, [], {}, -5):
        width, height = clamp_size(absurd, absurd)
        assert 1 <= width <= MAX_COLUMNS and 1 <= height <= MAX_ROWS


def test_serve_on_a_busy_port_or_a_finished_run_says_so_without_a_traceback(tmp_path: Path) -> None:
    """A port given and taken: an error before anything is printed; 8765 taken without --port: the next free port,
    said; serve and attach on an ended sweep: nothing is live, with the report command."""
    pytest.importorskip("textual_serve")
    from specbench_tui.tui.web import DEFAULT_PORT

    marker = new_marker()
    env = _env(tmp_path, marker)
    run_dir = _start_detached(tmp_path, env, max_new_tokens=3000, gpu=42)
    with socket.socket() as taken, socket.socket() as default:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = _cli(env, "serve", str(run_dir), "--port", str(port), timeout=60)
        assert busy.returncode == 1 and busy.stdout == "", busy.stdout + busy.stderr
        assert f"port {port}" in busy.stderr and "--port" in busy.stderr and "Traceback" not in busy.stderr
        try:
            default.bind(("127.0.0.1", DEFAULT_PORT))
            default.listen()
        except OSError:
            pass  # another program has it: as taken for this test
        server = subprocess.Popen([sys.executable, "-m", "specbench_tui", "serve", str(run_dir)], env=env,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, start_new_session=True)
        try:
            printed = ""
            while "open:" not in printed:
                line = server.stdout.readline()  # type: ignore[union-attr]
                assert line, f"serve ended early: {printed}"
                printed += line
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(15)
        note = re.search(rf"port {DEFAULT_PORT} is in use .*serving on (\d+) instead", printed)
        assert note and f"127.0.0.1:{note.group(1)}/?token=" in printed, printed
    stopped = _cli(env, "stop", str(run_dir), "--now")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    wait_gone(marker, timeout_s=10)
    for command in ("serve", "attach"):
        ended = _cli(env, command, str(run_dir), timeout=60)
        said = ended.stdout + ended.stderr
        assert "nothing is live" in said and f"specbench report {run_dir}" in said, said
        assert "Traceback" not in said and "open:" not in said


async def test_the_browser_view_needs_the_token_checks_the_origin_and_is_read_only(tmp_path: Path) -> None:
    """`specbench serve`: no token, a wrong token or a foreign Origin gets 403; with the token, the page loads and
    its websocket runs the attached app, which shows the queue; a key that would pause is refused (read-only)."""
    import aiohttp

    pytest.importorskip("textual_serve")
    from specbench_tui.engine.attached import engine_status
    from specbench_tui.tui.web import free_port

    marker = new_marker()
    env = _env(tmp_path, marker)
    run_dir = _start_detached(tmp_path, env, max_new_tokens=3000, gpu=4)
    port = free_port("127.0.0.1")
    server = subprocess.Popen([sys.executable, "-m", "specbench_tui", "serve", str(run_dir), "--port", str(port)],  # noqa: ASYNC220
                              env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True)
    try:
        printed = ""
        while "ssh -L" not in printed:
            line = await asyncio.to_thread(server.stdout.readline)  # type: ignore[union-attr]
            assert line, f"serve ended early: {printed}"
            printed += line
        assert "read-only" in printed and "ssh -L" in printed
        token = re.search(r"\?token=(\S+)", printed).group(1)  # type: ignore[union-attr]
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as http:
            deadline = time.monotonic() + 60  # the server is up a moment after it printed the URL (later under load)
            while True:
                try:
                    async with http.get(f"{base}/") as response:
                        break
                except aiohttp.ClientConnectionError:
                    assert time.monotonic() < deadline, "serve printed its URL but never answered there"
                    await asyncio.sleep(0.05)
            assert response.status == 403
            async with http.get(f"{base}/?token=wrong") as response:
                assert response.status == 403
            async with http.get(f"{base}/static/js/textual.js") as response:
                assert response.status == 403
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                await http.ws_connect(f"{base}/ws")
            assert refused.value.status == 403
            with pytest.raises(aiohttp.WSServerHandshakeError) as foreign:
                await http.ws_connect(f"{base}/ws?token={token}", headers={"Origin": "http://evil.example"})
            assert foreign.value.status == 403
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{base}/?token={token}") as response:
                assert response.status == 200
                page = await response.text()
            assert f"/ws?token={token}" in page
            ws = await http.ws_connect(textual_js_socket_url(page, 120, 36), headers={"Origin": base})
            screen = ""

            async def read_until(needle: str, timeout: float) -> None:
                nonlocal screen
                deadline = time.monotonic() + timeout
                while needle not in screen:
                    left = deadline - time.monotonic()
                    assert left > 0, f"the view never showed {needle!r}: {screen[-2000:]!r}"
                    try:
                        message = await ws.receive(timeout=left)
                    except asyncio.TimeoutError:
                        continue
                    if message.type == aiohttp.WSMsgType.TEXT:
                        screen += message.data
                    elif message.type == aiohttp.WSMsgType.BINARY:
                        screen += message.data.decode("utf-8", errors="replace")
                    else:
                        raise AssertionError(f"the websocket closed: {message}")

            # each wait ends when the view shows it: generous, for an app started per websocket on a loaded box
            await read_until("Sweep queue", 60)
            for name in ("ar", "dflash-b8", "dflash-b16"):
                await read_until(name, 60)
            await ws.send_json(["stdin", "p"])
            await read_until("read-only", 60)
            assert engine_status(run_dir)["paused"] is False
            await ws.close()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(10)
        _cli(env, "stop", str(run_dir), "--now")
        wait_gone(marker, timeout_s=10)
