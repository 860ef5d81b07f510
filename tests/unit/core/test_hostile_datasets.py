"""Datasets are read as a stream with a size cap, ``limit`` honoured while reading, lines split on ``\\n`` only and
a BOM accepted; a category holding terminal control bytes reaches no report raw (issue 49, point 5)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from repo_paths import TESTS
from specbench_tui.core.prompt_datasets import load_dataset
from specbench_tui.core.prompts import PromptsFileError, load_prompts_file
from specbench_tui.report.formats import render
from specbench_tui.report.load import load_run

DATA = TESTS / "data"
HOSTILE = "\x1b]0;owned\x07\x1b[2J\x1b[H\r[00:01.0] c0: DONE\x9b31m\u202e"


def _question(n: int, category: str = "qa", text: str = "What is the capital of France?") -> str:
    return json.dumps({"question_id": n, "category": category, "turns": [text]}, ensure_ascii=False)


def test_a_3_gib_dataset_is_refused_after_the_cap_not_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as handle:  # sparse: 3 GiB of one line that never ends, nothing on disk
        handle.write(_question(1).encode() + b"\n")
        handle.truncate(3 << 30)
    tracemalloc.start()
    start = time.monotonic()
    try:
        with pytest.raises(PromptsFileError, match="MAX_PROMPTS_FILE_BYTES"):
            load_dataset(path)
        with pytest.raises(PromptsFileError, match="set limit = N"):
            load_prompts_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 20
    assert peak < 200 << 20, peak


def test_the_limit_is_honoured_while_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("wb") as handle:  # five questions, then 200 MB that the limit never needs
        handle.write("".join(_question(n) + "\n" for n in range(1, 6)).encode())
        handle.truncate(200 << 20)
    tracemalloc.start()
    try:
        prompts = load_dataset(path, limit=5)
        from_file = load_prompts_file(path, limit=3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [p.item for p in prompts] == ["q1", "q2", "q3", "q4", "q5"] and len(from_file) == 3
    assert peak < 20 << 20, peak


def test_lines_split_on_newline_only_and_a_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "separators.jsonl"
    texts = ["one\u2028two", "three\u0085four", "five\u2029six\rseven"]
    body = "".join(_question(n, text=t) + "\n" for n, t in enumerate(texts, 1))
    path.write_bytes(b"\xef\xbb\xbf" + body.encode())
    assert [p.text for p in load_dataset(path)] == texts
    assert [p.text for p in load_prompts_file(path)] == texts


def _hostile_run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(DATA / "acceptance_demo_run", run)
    results = run / "results.jsonl"
    encoded = json.dumps(HOSTILE)
    results.write_text(results.read_text().replace('"category":"qa"', f'"category":{encoded}'))
    return run


@pytest.mark.parametrize("fmt", ["txt", "md", "html", "csv", "json", "latex"])
def test_a_category_with_control_bytes_prints_none_raw(tmp_path: Path, fmt: str) -> None:
    run = load_run(_hostile_run(tmp_path))
    text = render(run, fmt)
    assert "owned" in text or fmt in ("csv", "latex"), "the category is in the report"
    for raw in ("\x1b", "\x07", "\r", "\x9b", "\u202e"):
        assert raw not in text, (fmt, raw)
    if fmt == "json":
        assert HOSTILE in set(_strings(json.loads(text)))  # the same value once parsed: only escaped


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_specbench_report_on_a_terminal_gets_no_control_byte(tmp_path: Path) -> None:
    run = _hostile_run(tmp_path)
    for fmt in ("txt", "md"):
        out = subprocess.run([sys.executable, "-m", "specbench_tui", "report", str(run), "--format", fmt],
                             capture_output=True, timeout=120, check=False)
        assert out.returncode == 0, out.stderr[-2000:]
        assert b"owned" in out.stdout
        for raw in (b"\x1b", b"\x07", b"\r", b"\xc2\x9b"):
            assert raw not in out.stdout and raw not in out.stderr, (fmt, raw)
