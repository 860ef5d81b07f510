"""Security of launching: loopback by default, the API key never written down, no shell, the umask respected."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import cast

import httpx
import pytest
from engine_helpers import plan_for
from reliability_helpers import (
    MARKER_VAR,
    events,
    headless,
    make_sweep,
    marker_env,
    new_marker,
    the_run_dir,
    wait_gone,
)

from specbench_tui.core.launch import redact_argv, server_argv
from specbench_tui.core.plan import Plan

pytestmark = pytest.mark.e2e

SECRET = "sk-TOPSECRET-4f1c9e77d2"
KEY_VAR = "SPECBENCH_TEST_API_KEY"


def _listening(port: int) -> list[str]:
    """Local addresses (hex, as in /proc/net/tcp*) listening on ``port``."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            address, port_hex = parts[1].rsplit(":", 1)
            if parts[3] == "0A" and int(port_hex, 16) == port:
                found.append(address)
    return found


async def test_servers_bind_loopback_and_shell_metacharacters_are_literal(tmp_path, monkeypatch):
    """The launched argv says 127.0.0.1, the socket is bound there only, and a served model name full of
    shell syntax reaches the server verbatim without running anything."""
    from specbench_tui.core.events import ServerLaunching, ServerReady
    from specbench_tui.engine.orchestrator import Orchestrator
    from specbench_tui.rundir.store import RunDir

    marker = new_marker()
    monkeypatch.setenv(MARKER_VAR, marker)
    monkeypatch.delenv("SPECBENCH_SIM_PROFILE", raising=False)
    pwned = [tmp_path / f"pwned{i}" for i in range(5)]
    hostile = (f"m$(touch {pwned[0]});touch {pwned[1]}`touch {pwned[2]}`'\"|touch {pwned[3]}&&"
               f"touch {pwned[4]} $HOME >x <y *")  # ${NAME} is the loader's own expansion
    toml_value = hostile.replace("\\", "\\\\").replace('"', '\\"')
    sweep = make_sweep(tmp_path, server_extra=f'served-model-name = "{toml_value}"')
    plan = plan_for(sweep)
    for config in plan.configs:
        assert hostile in config.argv
    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    orchestrator = Orchestrator(plan, run_dir)
    seen: dict[str, object] = {}
    loop = asyncio.get_running_loop()

    async def probe(port: int) -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            seen["model_info"] = (await client.get(f"http://127.0.0.1:{port}/model_info")).json()
        seen["listening"] = _listening(port)
        orchestrator.resume()

    def on_event(event) -> None:
        if isinstance(event, ServerLaunching) and "launch" not in seen:
            seen["launch"] = event
        if isinstance(event, ServerReady) and "probe" not in seen:
            orchestrator.pause()  # no request is sent until the probe has looked
            seen["probe"] = loop.create_task(probe(cast(ServerLaunching, seen["launch"]).port))

    orchestrator.subscribe(on_event)
    try:
        outcome = await asyncio.wait_for(orchestrator.run(), 90)
    finally:
        run_dir.close()
        survivors = wait_gone(marker)
    assert survivors == []
    assert outcome.state == "completed", outcome
    launch = seen["launch"]
    argv = list(launch.argv)
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert hostile in argv, "the value must be one argv element, unchanged"
    assert seen["listening"] and all(a in ("0100007F", "00000000000000000000000001000000") for a in seen["listening"]), \
        f"bound to {seen['listening']}, not loopback only"
    info = seen["model_info"]
    assert hostile in (info.get("served_model_name"), info.get("model_path"), info.get("id")) or \
        hostile in str(info), info
    assert not any(p.exists() for p in pwned), "a shell ran part of the sweep's value"


def test_another_host_only_when_the_sweep_says_so(tmp_path):
    plain = plan_for(make_sweep(tmp_path / "a"))
    config = plain.configs[0]
    argv = server_argv(plain.sweep.engine, config, sys.executable, 30000)
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    public = plan_for(make_sweep(tmp_path / "b", engine_extra='host = "0.0.0.0"'))
    argv = server_argv(public.sweep.engine, public.configs[0], sys.executable, 30000)
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    assert all(isinstance(part, str) for part in argv)


def test_redaction_of_the_api_key_in_argv():
    assert redact_argv(["x", "--api-key", SECRET, "--port", "1"]) == ("x", "--api-key", "***", "--port", "1")
    argv = server_argv(plan_for_key().sweep.engine, plan_for_key().configs[0], sys.executable, 1, api_key=SECRET)
    assert argv[-2:] == ["--api-key", SECRET]
    assert SECRET not in redact_argv(argv)


_KEY_PLAN: dict[str, Plan] = {}


def plan_for_key():
    if "plan" not in _KEY_PLAN:
        import tempfile

        _KEY_PLAN["plan"] = plan_for(make_sweep(Path(tempfile.mkdtemp(prefix="specbench-key-"))))
    return _KEY_PLAN["plan"]


def test_redaction_of_the_api_key_equals_form():
    assert SECRET not in " ".join(redact_argv(["server", f"--api-key={SECRET}"]))


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def _leaks(run_dir: Path, out: str) -> list[str]:
    found = [str(p.relative_to(run_dir)) for p in _files(run_dir) if SECRET.encode() in p.read_bytes()]
    if SECRET in out:
        found.append("<headless output>")
    return found


def _run_with_key(tmp_path: Path) -> tuple[Path, str]:
    marker = new_marker()
    sweep = make_sweep(tmp_path, engine_extra=f'api_key_env = "{KEY_VAR}"')
    runs = tmp_path / "runs"
    proc = headless([str(sweep), "--runs-dir", str(runs)], tmp_path, marker_env(marker, {KEY_VAR: SECRET}))
    out = proc.communicate(timeout=120)[0].decode(errors="replace")
    assert wait_gone(marker, proc.pid) == []
    assert proc.returncode == 0, out
    run_dir = the_run_dir(runs)
    assert run_dir is not None
    return run_dir, out


@pytest.fixture(scope="module")
def keyed_run(tmp_path_factory):
    return _run_with_key(tmp_path_factory.mktemp("apikey"))


def test_api_key_used_and_redacted_in_the_recorded_argv(keyed_run):
    run_dir, out = keyed_run
    launches = [e for e in events(run_dir) if e.get("type") == "ServerLaunching"]
    assert launches
    for launch in launches:
        argv = launch["argv"]
        assert argv[argv.index("--api-key") + 1] == "***"  # the key was passed, and is redacted
    assert all(e.get("state") == "done" for e in events(run_dir) if e.get("type") == "ConfigFinished")
    for name in ("events.jsonl", "results.jsonl", "plan.json", "env.json", "run.json", "sweep.toml"):
        path = run_dir / name
        if path.exists():
            assert SECRET not in path.read_text(errors="replace"), f"the API key is written in {name}"
    assert SECRET not in out, "the API key is in the headless output"


def test_api_key_is_in_no_file_of_the_run_directory(keyed_run):
    run_dir, out = keyed_run
    assert _leaks(run_dir, out) == []


# ---------------------------------------------------------------------------------------------------- umask

_UMASK_PROBE = r"""
import os, sys
os.umask(int(sys.argv[1], 8))
from specbench_tui.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("umask", ["002", "022"])
def test_run_directory_modes_follow_the_umask(tmp_path, umask):
    marker = new_marker()
    sweep = make_sweep(tmp_path)
    runs = tmp_path / f"runs-{umask}"
    mask = int(umask, 8)
    proc = subprocess.run([sys.executable, "-c", _UMASK_PROBE, umask, "run", str(sweep), "--headless",
                           "--runs-dir", str(runs)], cwd=tmp_path, env=marker_env(marker), capture_output=True,
                          timeout=120, check=False)
    assert wait_gone(marker) == []
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    run_dir = the_run_dir(runs)
    assert run_dir is not None and any((run_dir / "logs").iterdir())
    wrong = []
    for path in [runs, run_dir, *run_dir.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if mode & stat.S_IWOTH:
            wrong.append(f"{path}: world-writable {oct(mode)}")
        expected = (0o777 if path.is_dir() else 0o666) & ~mask
        if mode & ~expected:
            wrong.append(f"{path}: {oct(mode)} has bits the umask {umask} removes (expected at most {oct(expected)})")
    assert wrong == []
    # Files the user can read back, at least.
    assert all(os.access(p, os.R_OK) for p in run_dir.rglob("*"))
