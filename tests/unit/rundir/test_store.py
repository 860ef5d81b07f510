"""The run directory store: torn lines, concurrent appends, reopening, last record wins, write failures."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest

from specbench_tui.core.records import Measurement
from specbench_tui.rundir.store import JsonlFile, ReadReport, RunDir, StoreError, safe_filename


def measurement(item: str = "fib", repeat: int = 0, tokens: int = 10, config_id: str = "abc123abc123") -> Measurement:
    return Measurement(config_id=config_id, config="ar-tp1", workload="code", item=item, repeat=repeat,
                       status="ok", completion_tokens=tokens)


def test_torn_last_line_is_skipped_with_a_warning_and_next_append_starts_fresh(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text('{"a": 1}\n{"a": 2, "b": "cut by a cra')
    jsonl = JsonlFile(path)
    report = ReadReport()
    with caplog.at_level(logging.WARNING):
        assert list(jsonl.read(report)) == [{"a": 1}]
    assert report.skipped == ["results.jsonl:2: unreadable line skipped (torn by a crash?)"]
    assert "results.jsonl:2: unreadable line skipped" in caplog.text
    jsonl.append({"a": 3})
    jsonl.close()
    lines = path.read_text().splitlines()
    assert lines[-1] == '{"a":3}' and lines[-2].endswith("cut by a cra")
    assert list(JsonlFile(path).read()) == [{"a": 1}, {"a": 3}]


def test_non_object_lines_and_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    path.write_text('[1, 2]\n\n{"ok": true}\n\xff\n')
    report = ReadReport()
    assert list(JsonlFile(path).read(report)) == [{"ok": True}]
    assert len(report.skipped) == 2


def test_concurrent_appends_from_threads_are_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    files = [JsonlFile(path), JsonlFile(path)]  # two handles on one file share the lock
    big = "x" * 20_000  # larger than any buffer, so a split write would show

    def writer(number: int) -> None:
        for i in range(50):
            files[number % 2].append({"thread": number, "i": i, "pad": big if i % 10 == 0 else ""})

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for jsonl in files:
        jsonl.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 400
    records = [json.loads(line) for line in lines]  # every line parses: none interleaved
    for number in range(8):
        assert [r["i"] for r in records if r["thread"] == number] == list(range(50))


def test_run_dir_create_reopen_and_read(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "runs", "seed campaign", "[sweep]\n", {"configs": []})
    assert run.path.parent == tmp_path / "runs"
    assert run.path.name.endswith("_seed_campaign")
    assert (run.path / "sweep.toml").read_text() == "[sweep]\n"
    assert json.loads((run.path / "plan.json").read_text()) == {"configs": []}
    assert (run.path / "logs").is_dir()
    run.append_measurement(measurement("fib", 0))
    run.append_measurement(measurement("fib", 1))
    run.close()

    reopened = RunDir.open(run.path)
    keys = {m.key for m in reopened.read_measurements()}
    assert keys == {("abc123abc123", "code", "fib", 0), ("abc123abc123", "code", "fib", 1)}
    reopened.append_measurement(measurement("sort", 0))
    reopened.close()
    assert len(RunDir.open(run.path).read_measurements()) == 3


def test_second_run_in_the_same_second_gets_its_own_directory(tmp_path: Path) -> None:
    first = RunDir.create(tmp_path, "s", "", {})
    second = RunDir.create(tmp_path, "s", "", {})
    assert first.path != second.path


def test_last_record_wins_for_a_retried_key(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "s", "", {})
    run.append_measurement(measurement("fib", 0, tokens=0))
    run.append_measurement(measurement("other", 0, tokens=5))
    run.append_measurement(measurement("fib", 0, tokens=42))  # the retry
    run.close()
    found = {m.item: m.completion_tokens for m in RunDir.open(run.path).read_measurements()}
    assert found == {"fib": 42, "other": 5}


def test_malformed_record_is_reported_not_fatal(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path, "s", "", {})
    run.results.append({"config_id": "x"})  # missing fields
    run.append_measurement(measurement())
    report = ReadReport()
    assert len(run.read_measurements(report)) == 1
    assert any("malformed record" in line for line in report.skipped)


def test_unwritable_location_raises_store_error(tmp_path: Path) -> None:
    # A path under a regular file cannot be a directory, even for root (chmod does not bind root).
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot create a run directory"):
        RunDir.create(blocker / "runs", "s", "", {})
    with pytest.raises(StoreError, match="cannot write"):
        JsonlFile(blocker / "events.jsonl").append({"a": 1})


def test_open_rejects_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a run directory"):
        RunDir.open(tmp_path)


def test_reading_a_missing_file_yields_nothing(tmp_path: Path) -> None:
    assert list(JsonlFile(tmp_path / "none.jsonl").read()) == []


@pytest.mark.parametrize(("name", "safe"), [("ddtree-b8-tp1", "ddtree-b8-tp1"), ("a/b c", "a_b_c"), ("", "config")])
def test_safe_filename(name: str, safe: str) -> None:
    assert safe_filename(name) == safe
