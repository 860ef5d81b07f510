"""Notifications (issue 48): the alerts a sweep raises for a person who is not watching, rate-limited and grouped;
the ``[notify]`` table; and Apprise's ``json://`` scheme against a local endpoint in a real simulator sweep with
crashes, a stall and a zero-output configuration: exactly the expected messages, no secret in the run directory,
and an endpoint that hangs or refuses changes nothing in the run."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from engine_helpers import plan_for, write_sweep
from notify_helpers import PROFILE, Endpoint, sweep_text

from specbench_tui.application.host import OwnedRun
from specbench_tui.core.alerts import (
    CRASH,
    END,
    PAUSED,
    Alert,
    AlertGate,
    AlertWatch,
    terminal_sequences,
)
from specbench_tui.core.errors import SweepError
from specbench_tui.core.events import (
    ConfigFinished,
    ConfigState,
    ConfigStateChanged,
    Event,
    MeasurementRecorded,
    Notice,
    QueuePaused,
    SweepFinished,
    WorkloadFinished,
)
from specbench_tui.core.sweep.loader import parse_sweep
from specbench_tui.engine import notify
from specbench_tui.rundir.store import RunDir


def _crash(name: str) -> Alert:
    return Alert(CRASH, f"specbench: {name} crashed", f"s: {name} crashed", "error", name)


def test_the_gate_sends_the_first_of_a_kind_and_groups_the_next_ones_per_window() -> None:
    gate = AlertGate(interval_s=300)
    assert [a.subject for a in gate.offer(_crash("a"), 0)] == ["a"]
    assert gate.offer(_crash("b"), 10) == []
    assert gate.offer(_crash("c"), 20) == []
    assert gate.next_due() == 300
    assert gate.due(299) == []
    released = gate.due(300)
    assert [a.title for a in released] == ["specbench: 2 more crashes or failures"]
    assert "b, c" in released[0].body
    assert gate.offer(_crash("d"), 310) == []  # the window restarted at 300
    end = Alert(END, "specbench: sweep completed", "s: sweep completed")
    assert [a.title for a in gate.offer(end, 320)] == ["specbench: d crashed", "specbench: sweep completed"]
    assert gate.offer(_crash("e"), 900) != []  # a quiet window later: sent at once again


def _finished(config_id: str, state: ConfigState, reason: str | None = None) -> ConfigFinished:
    return ConfigFinished(config_id=config_id, name=f"n-{config_id}", state=state, reason=reason)


def test_the_watch_says_each_reason_once_per_configuration() -> None:
    watch = AlertWatch(sweep="s")
    alerts: list[Alert] = []
    events: list[Event] = [
        ConfigStateChanged(config_id="a", name="n-a", state=ConfigState.RUNNING),
        WorkloadFinished(config_id="a", workload="code", measured=4, zero_output=4),
        _finished("a", ConfigState.DONE),
        _finished("b", ConfigState.CRASHED, "cuda_oom: CUDA out of memory\n\x1b[31mred"),
        _finished("c", ConfigState.FAILED, "stalled: no progress for 3 s"),
        _finished("d", ConfigState.DONE),
        SweepFinished(state="completed"),
    ]
    for event in events:
        alerts += watch(event)
    assert [(a.kind, a.subject) for a in alerts] == [("zero_output", "n-a"), ("crash", "n-b"), ("stall", "n-c"),
                                                    ("end", None)]
    assert alerts[0].body == "s: n-a: zero output on 4 of 4 requests"
    assert "\n" not in alerts[1].body
    assert alerts[3].body == "s: sweep completed (1 crashed, 2 done, 1 failed)"
    preflight = AlertWatch()(SweepFinished(state="failed", reason="pre-flight failed: no GPU"))
    assert [a.kind for a in preflight] == ["preflight"]


def test_a_paused_queue_calls_once_nothing_runs_any_more() -> None:
    watch = AlertWatch(sweep="s")
    assert watch(ConfigStateChanged(config_id="a", name="a", state=ConfigState.RUNNING)) == []
    assert watch(QueuePaused()) == []  # the request in flight finishes first
    waiting = watch(_finished("a", ConfigState.DONE))
    assert [a.kind for a in waiting] == [PAUSED]
    assert watch(_finished("b", ConfigState.SKIPPED)) == []  # said once per pause


def test_the_terminal_gets_a_bell_and_both_desktop_notifications_with_the_text_escaped() -> None:
    alert = Alert(CRASH, "specbench: a;b crashed", "reason \x1b]0;owned\x07 \x9c end")
    sequences = terminal_sequences(alert)
    assert sequences.startswith("\x07\x1b]9;specbench: a,b crashed: reason ")
    assert "\x1b]777;notify;specbench: a,b crashed;reason " in sequences
    assert sequences.count("\x1b") == 2 and sequences.count("\x07") == 3 and "\x9c" not in sequences
    wrapped = terminal_sequences(alert, tmux=True)
    assert wrapped.count("\x1bPtmux;") == 2 and wrapped.endswith("\x1b\\")


def _sweep_issues(tmp_path: Path, notify_table: str) -> list[str]:
    path = write_sweep(tmp_path, sweep_text(notify_table).replace("{port}", "31000"), PROFILE)
    with pytest.raises(SweepError) as caught:
        parse_sweep(path.read_text(), path)
    return [str(issue) for issue in caught.value.issues]


def test_the_notify_table_is_validated_with_file_line_and_fix(tmp_path: Path) -> None:
    issues = _sweep_issues(tmp_path, '[notify]\nurls = ["slack://T1/B2/abc", "json://me:hunter2@host", 7]\n'
                                     'on = ["crsh"]\nmin_interval_s = -1\nsound = true\n')
    text = "\n".join(issues)
    line = 1 + sweep_text('[notify]').replace("{port}", "31000").split("\n").index("[notify]")
    assert f"sweep.toml:{line + 1}: notify.urls[1]: this URL holds a password or token written out" in text
    assert "write ${NAME} in its place" in text
    assert "notify.urls[2]: expected an Apprise URL" in text
    assert f"sweep.toml:{line + 2}: notify.on[0]: unknown alert kind 'crsh'; did you mean 'crash'?" in text
    assert "notify.min_interval_s: expected a non-negative number" in text
    assert "unknown key 'sound' in notify" in text
    assert "slack" not in text.split("notify.urls[1]")[0]  # the first URL is fine


def _run(tmp_path: Path, notify_table: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
         ) -> tuple[list[Event], float, float, Path]:
    """The sweep run in-process through the run host (as every host runs it): its events, the sweep's own wall
    time (started to finished), the host's wall time, the run directory."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    path = write_sweep(tmp_path, sweep_text(notify_table), PROFILE)
    plan = plan_for(path)
    run_dir = RunDir.create(tmp_path / "runs", plan.sweep.name, plan.sweep.text, plan.to_json())
    owned = OwnedRun(plan, run_dir)
    events: list[Event] = []

    async def main() -> float:
        orchestrator = owned.orchestrator()
        orchestrator.subscribe(events.append)
        started = time.monotonic()
        await asyncio.wait_for(owned.run(orchestrator), 240)
        return time.monotonic() - started

    host_s = asyncio.run(main())
    owned.release()
    sweep_s = events[-1].ts - next(e.ts for e in events if type(e).__name__ == "SweepStarted")
    return events, sweep_s, host_s, run_dir.path


def _outcome(events: list[Event]) -> tuple[dict[str, str], list[tuple[Any, ...]]]:
    states = {e.name: e.state.value for e in events if isinstance(e, ConfigFinished)}
    records = sorted((e.config_id, e.record["workload"], e.record["item"], e.record["repeat"], e.record["status"],
                      e.record.get("output_tokens")) for e in events if isinstance(e, MeasurementRecorded))
    return states, records


EXPECTED_TITLES = [
    "specbench: ddtree-b8 crashed",
    "specbench: dflash-b8 returned no tokens",
    "specbench: dflash-b16 stalled",
    "specbench: 2 more crashes or failures",
    "specbench: sweep completed",
]


@pytest.mark.e2e
def test_a_sweep_with_crashes_and_a_stall_calls_the_endpoint_with_exactly_the_expected_messages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    endpoint = Endpoint("record")
    secret = "hook-5ecret-0f-the-test"
    try:
        events, _, _, run_dir = _run(tmp_path, '[notify]\nurls = ["json://127.0.0.1:${NT_PORT}/${NT_HOOK_TOKEN}"]\n'
                                     'min_interval_s = 3600\n',
                                     {"NT_PORT": str(endpoint.port), "NT_HOOK_TOKEN": secret}, monkeypatch)
    finally:
        endpoint.close()
    assert endpoint.titles == EXPECTED_TITLES, endpoint.received
    assert endpoint.paths == [f"/{secret}"] * len(EXPECTED_TITLES)
    bodies = [body["message"] for body in endpoint.received]
    assert bodies[3] == "2 more crashes or failures: ddtree-b16, ddtree-b32 (the notices screen, key n, has each)"
    assert bodies[4] == "unwatched: sweep completed (3 crashed, 3 done, 1 failed)"
    assert [body["type"] for body in endpoint.received] == ["failure", "warning", "failure", "failure", "warning"]
    assert not [e for e in events if isinstance(e, Notice) and e.text.startswith("notifications")]
    for file in run_dir.rglob("*"):  # the secret is in no file of the run (events, plan, sweep copy, logs)
        if file.is_file():
            assert secret not in file.read_text(errors="replace"), file


@pytest.mark.e2e
def test_an_endpoint_that_hangs_or_refuses_changes_nothing_in_the_run(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    quiet, quiet_s, _, _ = _run(tmp_path / "quiet", "", {}, monkeypatch)
    hanging, refusing = Endpoint("hang"), Endpoint("refuse")
    monkeypatch.setattr(notify, "CLOSE_WAIT_S", 4.0)
    monkeypatch.setattr(notify, "TIMEOUT_S", 2.0)
    try:
        events, sweep_s, host_s, _ = _run(
            tmp_path / "hung", f'[notify]\nurls = ["json://127.0.0.1:{hanging.port}", '
            f'"json://127.0.0.1:{refusing.port}"]\nmin_interval_s = 0\n', {}, monkeypatch)
    finally:
        hanging.close()
    assert _outcome(events) == _outcome(quiet)
    # each of the 6 alerts would hold a blocking sender 3 tries x 2 s on the hanging URL: the sweep took none of it
    assert sweep_s < quiet_s + 3.0, (sweep_s, quiet_s)
    assert host_s < sweep_s + 4.0 + 2.0, (host_s, sweep_s)  # the last alerts waited for at most CLOSE_WAIT_S
    failed = [e.text for e in events if isinstance(e, Notice) and "failed after 3 tries" in e.text]
    assert any("json://… (notification URL 2) failed" in text for text in failed), failed
    assert all(f"127.0.0.1:{refusing.port}" not in text for text in failed), failed


def test_a_url_whose_variable_is_unset_is_a_notice_that_names_the_variable_not_the_url() -> None:
    found, problems = notify.targets(["json://127.0.0.1:9/${NT_UNSET_TOKEN}", "nosuchscheme://x"], environ={})
    assert found == []
    assert problems[0].startswith("json://… (notification URL 1): ${NT_UNSET_TOKEN} is not set")
    assert problems[1].startswith("nosuchscheme://… (notification URL 2): not a URL Apprise can send to")


def test_a_sender_that_fails_reports_and_never_raises() -> None:
    reports: list[str] = []

    def broken(target: notify.Target, alert: Alert) -> bool:
        raise RuntimeError("plugin bug")

    sender = notify.NotificationSender([notify.Target("json://x", "json://… (notification URL 1)")],
                                       lambda level, text: reports.append(text), kinds=[END], interval_s=0,
                                       backoff_s=0.01, send=broken).start()
    sender(SweepFinished(state="completed"))
    assert sender.close(5)
    assert reports == ["json://… (notification URL 1) failed after 3 tries (specbench: sweep completed); "
                       "the sweep goes on"]


def test_run_request_carries_notify_urls_as_typed() -> None:
    from specbench_tui.application.session import RunRequest

    request = RunRequest(sweep="demo", notify=("ntfy://${TOPIC}",))
    assert RunRequest.from_json(json.loads(json.dumps(request.to_json()))) == request
    with pytest.raises(ValueError, match="notify must be a list of strings"):
        RunRequest.from_json({**request.to_json(), "notify": "ntfy://x"})


@pytest.mark.e2e
def test_notify_on_the_command_line_reads_its_secret_from_the_environment(tmp_path: Path) -> None:
    """``specbench run --headless --notify 'json://…/${VAR}'``: the engine expands the variable when it sends; the
    URL as typed (never the secret) is all the command line and its output hold."""
    from engine_helpers import headless_engine

    endpoint = Endpoint("record")
    secret = "cli-5ecret-hook"
    path = write_sweep(tmp_path, sweep_text().replace("{port}", "31600"), PROFILE)
    try:
        proc = headless_engine([str(path), "--runs-dir", str(tmp_path / "runs"), "--notify",
                                f"json://127.0.0.1:{endpoint.port}/${{NT_CLI_TOKEN}}"], tmp_path,
                               {**os.environ, "NT_CLI_TOKEN": secret})
        output, _ = proc.communicate(timeout=240)
    finally:
        endpoint.close()
    assert endpoint.titles == EXPECTED_TITLES, (endpoint.received, output.decode(errors="replace")[-2000:])
    assert endpoint.paths == [f"/{secret}"] * len(EXPECTED_TITLES)
    assert secret.encode() not in output
    for file in (tmp_path / "runs").rglob("*"):
        if file.is_file():
            assert secret not in file.read_text(errors="replace"), file
