"""Hostile input at run time: a catastrophic-backtracking signature, secrets in every spelling, names that would
share a log, a tampered run directory, type-confused records, umask 000, a daemon holding the log pipe, a
max_new_tokens past the context, a failed pre-flight."""

from __future__ import annotations

import json
import os
import shlex
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from narrowing import present
from reliability_helpers import events, headless, make_sweep, marker_env, new_marker, the_run_dir, wait_gone

from specbench_tui.cli import main
from specbench_tui.core.launch import launch_env, secret_redactor
from specbench_tui.core.plan import build_plan
from specbench_tui.core.records import Measurement
from specbench_tui.core.secrets import secret_forms
from specbench_tui.core.signatures import SignatureSet
from specbench_tui.core.sweep.loader import load_sweep
from specbench_tui.rundir.store import MAX_RECORD_BYTES, JsonlFile, ReadReport, RunDir, StoreError, log_file_name

# ------------------------------------------------------------------------------------------- signatures


def test_a_catastrophic_backtracking_signature_matches_in_linear_time() -> None:
    signatures = SignatureSet([("mine", r"(a+)+$")])
    for line in ("a" * 40 + "b", "a" * 16_000 + "b", "x" * 15_000 + "a" * 1_000 + "!"):
        started = time.thread_time()  # CPU seconds: a loaded box preempts a wall-clock window of 50 ms
        assert signatures.match(line) is None
        assert signatures.candidates(line.encode()) == set()
        assert time.thread_time() - started < 0.05, "the pattern backtracks"
    assert present(signatures.match("aaaa")).name == "mine"


def test_a_signature_re2_cannot_take_is_refused_at_its_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.toml"
    path.write_text('[sweep]\nname = "s"\n[engine.crash_signatures]\nlook = \'(?<=x)boom\'\n'
                    '[[configs]]\nname = "a"\n[[workloads]]\nkind = "code"\n')
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:4: engine.crash_signatures.look: invalid regular expression for RE2" in err


# ----------------------------------------------------------------------------------------------- secrets

NASTY_KEY = "sk-Nasty\\Key\twith'single\"double-0123456789"
TOKEN = "hf_EnvTokenAbCdEfGhIjKlMnOpQrSt012345"


@pytest.mark.parametrize("form", ["raw", "repr", "json", "json_ascii", "shell", "repr_of_repr"])
def test_every_spelling_of_a_secret_is_redacted(form: str) -> None:
    spelled = {"raw": NASTY_KEY, "repr": repr(NASTY_KEY), "json": json.dumps(NASTY_KEY, ensure_ascii=False),
               "json_ascii": json.dumps(NASTY_KEY), "shell": shlex.quote(NASTY_KEY),
               "repr_of_repr": repr(repr(NASTY_KEY))}[form]
    redact = secret_redactor([NASTY_KEY])
    assert redact is not None
    line = f"server_args=ServerArgs(api_key={spelled}, port=1)"
    out = redact(line)
    assert "Nasty" not in out and "0123456789" not in out, out
    assert out.endswith(", port=1)")


def test_secret_forms_cover_repr_with_either_quote() -> None:
    forms = secret_forms("a'b\"c\\d")
    assert repr("a'b\"c\\d")[1:-1] in forms
    assert "a\\'b\"c\\\\d" in forms and "a'b\\\"c\\\\d" in forms


def test_an_env_reference_for_a_secret_is_kept_in_the_plan_and_expanded_at_launch(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    path = tmp_path / "s.toml"
    path.write_text('[sweep]\nname = "s"\n[server.env]\nHF_TOKEN = "${HF_TOKEN}"\nPLAIN = "${HOME}"\n'
                    'AUTH_HEADER = "Bearer ${HF_TOKEN}"\nINNOCENT = "x${HF_TOKEN}"\n'
                    '[[configs]]\nname = "a"\n[[workloads]]\nkind = "code"\n')
    plan = build_plan(load_sweep(path))
    env = dict(plan.configs[0].env)
    assert env["HF_TOKEN"] == "${HF_TOKEN}" and env["PLAIN"] == os.environ["HOME"]
    assert env["INNOCENT"] == "x${HF_TOKEN}"
    assert TOKEN not in json.dumps(plan.to_json())
    launched = launch_env(plan.configs[0].env)
    assert launched["HF_TOKEN"] == TOKEN and launched["AUTH_HEADER"] == f"Bearer {TOKEN}"
    assert launched["INNOCENT"] == f"x{TOKEN}"
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(Exception, match=r"\$\{HF_TOKEN\} is not set"):
        load_sweep(path)


def _spellings(secret: str) -> list[bytes]:
    return [form.encode() for form in secret_forms(secret)] + [secret[4:20].encode()]


def test_secrets_reach_no_file_no_output_no_log(tmp_path: Path) -> None:
    """An API key with a backslash, a tab and both quotes, and an HF token passed as ${HF_TOKEN}: the simulator
    prints its ServerArgs with repr(), as SGLang does; neither secret is in any file of the run directory, in
    the output, in any spelling."""
    marker = new_marker()
    sweep = make_sweep(tmp_path, engine_extra='api_key_env = "SPECBENCH_NASTY_KEY"',
                       server_extra="").read_text()
    sweep = sweep.replace("[server.args]", '[server.env]\nHF_TOKEN = "${HF_TOKEN}"\n\n[server.args]')
    path = tmp_path / "sweep.toml"
    path.write_text(sweep)
    runs = tmp_path / "runs"
    proc = headless([str(path), "--runs-dir", str(runs)], tmp_path,
                    marker_env(marker, {"SPECBENCH_NASTY_KEY": NASTY_KEY, "HF_TOKEN": TOKEN}))
    out = proc.communicate(timeout=180)[0]
    assert wait_gone(marker, proc.pid) == []
    assert proc.returncode == 0, out.decode(errors="replace")
    run_dir = the_run_dir(runs)
    assert run_dir is not None
    logs = list((run_dir / "logs").iterdir())
    assert logs and any(b"ServerArgs(" in p.read_bytes() for p in logs), "the server printed no ServerArgs"
    assert any(b"api_key='***'" in p.read_bytes() or b'api_key="***"' in p.read_bytes() for p in logs)
    leaks = []
    for secret in (NASTY_KEY, TOKEN):
        for spelling in _spellings(secret):
            leaks += [f"{p.relative_to(run_dir)}: {spelling!r}" for p in run_dir.rglob("*")
                      if p.is_file() and spelling in p.read_bytes()]
            if spelling in out:
                leaks.append(f"<output>: {spelling!r}")
    assert leaks == []


def test_a_secret_reference_in_a_flag_is_refused_at_its_line(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    path = tmp_path / "s.toml"
    path.write_text('[sweep]\nname = "s"\n[server.args]\nserved-model-name = "${HF_TOKEN}"\n'
                    '[[configs]]\nname = "a"\n[[workloads]]\nkind = "code"\n')
    assert main(["validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert f"{path}:4: server.args.served-model-name: a secret in a flag" in err
    assert TOKEN not in out + err


def test_validate_never_prints_an_env_secret(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    path = tmp_path / "s.toml"
    path.write_text('[sweep]\nname = "s"\n[server.env]\nHF_TOKEN = "${HF_TOKEN}"\n'
                    '[[configs]]\nname = "a"\n[[workloads]]\nkind = "code"\n')
    assert main(["validate", str(path)]) == 0
    assert main(["validate", "--json", str(path)]) == 0
    out, err = capsys.readouterr()
    assert TOKEN not in out + err and "${HF_TOKEN}" in out


# --------------------------------------------------------------------------------------------------- names


def test_log_file_names_are_unique_by_construction() -> None:
    long = "x" * 130
    names = [("c0", "aaaaaaaaaaaa"), ("c0_", "bbbbbbbbbbbb"), ("c0/", "cccccccccccc"),
             (long + "1", "dddddddddddd"), (long + "2", "eeeeeeeeeeee")]
    files = [log_file_name(name, config_id) for name, config_id in names]
    assert len(set(files)) == len(files)
    assert all("/" not in f and len(f) < 140 for f in files)


def test_names_past_the_slug_length_get_their_own_logs(tmp_path: Path) -> None:
    base = "n" * 125
    text = (f'[sweep]\nname = "s"\n[[configs]]\nname = "{base}-{{b}}"\nmatrix = {{ b = [1, 2] }}\n'
            '[configs.env]\nB = "{b}"\n[[workloads]]\nkind = "code"\n')
    path = tmp_path / "s.toml"
    path.write_text(text)
    plan = build_plan(load_sweep(path))
    run = RunDir(tmp_path)
    assert len({run.log_path(c.name, c.id) for c in plan.configs}) == 2


# ----------------------------------------------------------------------------------------- run directories


def _copy_run(tmp_path: Path) -> Path:
    """A small run directory with a valid sweep, plan and one record."""
    sweep = tmp_path / "s.toml"
    sweep.write_text('[sweep]\nname = "s"\n[[configs]]\nname = "a"\n[[workloads]]\nkind = "code"\n')
    plan = build_plan(load_sweep(sweep))
    run = RunDir.create(tmp_path / "runs", "s", sweep.read_text(), plan.to_json())
    config = plan.configs[0]
    run.append_measurement(Measurement(config.id, config.name, "code", "fibonacci", 1, "ok", completion_tokens=9,
                                       e2e_s=1.0, decode_tps=10.0, ttft_s=0.1))
    run.close()
    return run.path


def _cli(args: list[str], timeout_s: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench_tui", *args], capture_output=True, text=True,
                          timeout=timeout_s, check=False)


@pytest.mark.parametrize("abuse", ["results_is_a_directory", "results_is_a_fifo", "events_is_dev_zero",
                                   "plan_is_a_fifo", "events_line_of_32_mb"])
def test_a_tampered_run_directory_is_refused_clearly(tmp_path: Path, abuse: str) -> None:
    run = _copy_run(tmp_path)
    if abuse == "results_is_a_directory":
        (run / "results.jsonl").unlink()
        (run / "results.jsonl").mkdir()
    elif abuse == "results_is_a_fifo":
        (run / "results.jsonl").unlink()
        os.mkfifo(run / "results.jsonl")
    elif abuse == "events_is_dev_zero":
        (run / "events.jsonl").unlink(missing_ok=True)
        (run / "events.jsonl").symlink_to("/dev/zero")
    elif abuse == "plan_is_a_fifo":
        (run / "plan.json").unlink()
        os.mkfifo(run / "plan.json")
    else:
        with open(run / "events.jsonl", "ab") as handle:
            handle.write(b'{"type": "Notice", "text": "' + b"x" * (2 * MAX_RECORD_BYTES) + b'"}\n')
    started = time.monotonic()
    results = [_cli(["report", str(run)]), _cli(["compare", str(run), str(run)])]
    if abuse != "events_line_of_32_mb":  # (a resume would run this toy sweep's server)
        results.append(_cli(["run", "--headless", "--resume", str(run)]))
    assert time.monotonic() - started < 60
    for result in results:
        text = result.stdout + result.stderr
        assert "Traceback" not in text and "MemoryError" not in text, text
    kind = {"results_is_a_directory": "is a directory", "results_is_a_fifo": "is a FIFO",
            "events_is_dev_zero": "is a device", "plan_is_a_fifo": "is a FIFO"}.get(abuse)
    if kind is None:  # an over-long line: skipped and counted, the rest reads
        assert results[0].returncode == 0 and "over 16,777,216 bytes" in results[0].stdout + results[0].stderr
        return
    assert results[0].returncode == 2 or kind in results[0].stdout + results[0].stderr, results[0]
    for result in (results[0], results[2]):
        assert kind in result.stdout + result.stderr, result


def test_reading_a_fifo_never_blocks(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "results.jsonl")
    started = time.monotonic()
    with pytest.raises(StoreError, match="is a FIFO"):
        list(JsonlFile(tmp_path / "results.jsonl").read())
    with pytest.raises(StoreError, match="is a FIFO"):
        JsonlFile(tmp_path / "results.jsonl").append({"a": 1})
    assert time.monotonic() - started < 10  # milliseconds quiet (an open() that waited for a writer never returns)


CONFUSED: list[dict[str, object]] = [{"repeat": "x"}, {"accept_length": [1, 2]}, {"e2e_s": "fast"}, {"status": "weird"},
            {"completion_tokens": True}, {"ttft_s": {"a": 1}}, {"config_id": 7}]


def test_type_confused_records_are_skipped_and_counted_everywhere(tmp_path: Path, capsys) -> None:
    run = _copy_run(tmp_path)
    good = json.loads((run / "results.jsonl").read_text().splitlines()[0])
    with open(run / "results.jsonl", "a") as handle:
        for change in CONFUSED:
            handle.write(json.dumps({**good, "item": f"other-{len(change)}", **change}) + "\n")
    with open(run / "events.jsonl", "a") as handle:
        handle.write(json.dumps({"type": "ServerReady", "config_id": "x", "startup_s": "soon"}) + "\n")
        handle.write(json.dumps({"type": "ConfigFinished", "config_id": "x", "name": [1], "state": "done"}) + "\n")
    report = ReadReport()
    measurements = RunDir(run).read_measurements(report)
    RunDir(run).read_events(report)
    assert len(measurements) == 1
    assert report.counts == {"results.jsonl": len(CONFUSED), "events.jsonl": 2}
    summary = report.summary()
    assert any(f"{len(CONFUSED)} in all" in line for line in summary), summary
    for args in (["report", str(run)], ["compare", str(run), str(run)]):
        code = main(args)
        out, err = capsys.readouterr()
        assert code == 0, err
        assert f"{len(CONFUSED)} in all" in out + err
    # Resume reads the same way, and says what it skipped (a skipped measurement is measured again).
    from specbench_tui.core.events import Notice
    from specbench_tui.engine.orchestrator import Orchestrator

    plan = build_plan(load_sweep(run / "sweep.toml"))
    orchestrator = Orchestrator(plan, RunDir.open(run), resumed=True, write_env=False)
    notices: list[str] = []
    orchestrator.subscribe(lambda e: notices.append(e.text) if isinstance(e, Notice) else None)
    orchestrator.load_previous()
    assert len(orchestrator.done_keys) == 1
    assert any(f"{len(CONFUSED)} in all" in text for text in notices), notices
    assert any("events.jsonl" in text for text in notices), notices


# ------------------------------------------------------------------------------------------------ modes


def test_umask_000_leaves_nothing_group_or_world_writable(tmp_path: Path) -> None:
    marker = new_marker()
    sweep = make_sweep(tmp_path)
    runs = tmp_path / "runs"
    probe = "import os, sys\nos.umask(0)\nfrom specbench_tui.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    proc = subprocess.run([sys.executable, "-c", probe, "run", str(sweep), "--headless", "--runs-dir", str(runs)],
                          cwd=tmp_path, env=marker_env(marker), capture_output=True, timeout=180, check=False)
    assert wait_gone(marker) == []
    assert proc.returncode == 0, proc.stdout.decode() + proc.stderr.decode()
    run_dir = the_run_dir(runs)
    assert run_dir is not None and any((run_dir / "logs").iterdir())
    wrong = [f"{p}: {oct(stat.S_IMODE(p.lstat().st_mode))}" for p in [runs, run_dir, *run_dir.rglob("*")]
             if stat.S_IMODE(p.lstat().st_mode) & (stat.S_IWGRP | stat.S_IWOTH)]
    assert wrong == []


# ---------------------------------------------------------------------------------------------- the engine

_DAEMON = textwrap.dedent(r'''
    import asyncio, sys, tempfile, time
    from pathlib import Path
    from specbench_tui.engine.server import ServerProcess
    from specbench_tui.core.engines.sglang import SGLANG
    from specbench_tui.core.signatures import SignatureSet
    CMD = """
    import os, sys, time
    print("hello", flush=True)
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(8); os._exit(0)
        os._exit(0)
    time.sleep(30)
    """
    servers = []
    async def main():
        server = ServerProcess("c", [sys.executable, "-c", CMD], {}, Path(sys.argv[1]) / "x.log", SGLANG,
                               SignatureSet(builtins=SGLANG.crash_signatures), lambda e: None)
        servers.append(server)
        await server.start()
        await asyncio.sleep(0.5)
        started = time.monotonic()
        await server.stop(1.0)
        print(f"stopped in {time.monotonic() - started:.1f}", flush=True)
    asyncio.run(main())
    import gc
    servers.clear()
    gc.collect()
    print("exit", flush=True)
''')


def test_a_daemon_holding_the_log_pipe_neither_blocks_the_stop_nor_spoils_the_exit(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", _DAEMON, str(tmp_path)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "Exception ignored" not in result.stderr and "Event loop is closed" not in result.stderr, result.stderr
    stopped = float(result.stdout.split("stopped in ")[1].split()[0])
    assert stopped < 5.0


def test_max_new_tokens_past_the_context_fails_before_any_request(tmp_path: Path) -> None:
    marker = new_marker()
    sweep = make_sweep(tmp_path, max_new_tokens=900_000)
    runs = tmp_path / "runs"
    proc = headless([str(sweep), "--runs-dir", str(runs)], tmp_path, marker_env(marker))
    out = proc.communicate(timeout=180)[0].decode(errors="replace")
    assert wait_gone(marker, proc.pid) == []
    assert proc.returncode == 1, out
    assert "asks for max_new_tokens = 900,000, but the server's context length is" in out
    run_dir = the_run_dir(runs)
    assert run_dir is not None
    assert not (run_dir / "results.jsonl").exists() or (run_dir / "results.jsonl").read_text() == ""
    finished = [e for e in events(run_dir) if e.get("type") == "ConfigFinished"]
    assert finished and all(e["state"] == "failed" for e in finished)


@pytest.mark.parametrize("engine", ['launcher = "command"\ncommand = ["/nonexistent/server"]',
                                    'launcher = "simulator"\npython = "/nonexistent/bin/python"'])
def test_a_failed_pre_flight_leaves_no_run_directory(tmp_path: Path, engine: str) -> None:
    sweep = make_sweep(tmp_path).read_text().replace('launcher = "simulator"', engine)
    path = tmp_path / "sweep.toml"
    path.write_text(sweep)
    runs = tmp_path / "runs"
    result = _cli(["run", "--headless", str(path), "--runs-dir", str(runs)], timeout_s=60)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "pre-flight" in result.stdout + result.stderr and "/nonexistent/" in result.stdout + result.stderr
    assert not runs.exists()
