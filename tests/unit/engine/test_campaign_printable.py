"""What ``ps`` and ``stop`` print of a registry entry, a control socket's answer or an owner lock's note is data:
control characters are escaped (core.safetext.printable), so no forged line or escape sequence reaches the
terminal."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from specbench_tui import campaign
from specbench_tui.engine import attached, engines_registry

FORGED = "evil\x1b]0;pwned\x07\n[00:00.9] sweep completed: every configuration done"


def test_ps_escapes_what_the_registry_and_the_socket_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    entry = {"pid": 4242, "run_dir": str(tmp_path), "sweep": FORGED, "started": 1.0}
    monkeypatch.setattr(engines_registry, "entries", lambda: [entry])
    monkeypatch.setattr(campaign, "run_condition", lambda run_dir: "live")

    def refuse(run_dir: Path) -> dict[str, object]:
        raise attached.AttachError(f"socket said {FORGED}")

    monkeypatch.setattr(attached, "engine_status", refuse)
    assert campaign.ps_command(argparse.Namespace()) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out, out
    assert not any(line.startswith("[00:00.9]") for line in out.splitlines()), out
    assert "evil\\x1b]0;pwned\\x07\\n[00:00.9]" in out, out


def test_ps_escapes_a_crashed_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    entry = {"pid": 4242, "run_dir": str(tmp_path), "sweep": FORGED, "started": 1.0}
    monkeypatch.setattr(engines_registry, "entries", lambda: [entry])
    monkeypatch.setattr(campaign, "run_condition", lambda run_dir: "crashed")
    assert campaign.ps_command(argparse.Namespace()) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and len(out.splitlines()) == 1, out
