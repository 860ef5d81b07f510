"""Golden files pin every report format and the comparison on the synthetic runs in tests/data/.

Regenerate after an intended change with ``SPECBENCH_UPDATE_GOLDEN=1 pytest tests/unit/report/test_report_golden.py``
and review the diff; regenerate the run directories themselves with ``tests/data/make_report_runs.py``.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from repo_paths import TESTS
from specbench_tui.report.compare import compare_runs, render_compare
from specbench_tui.report.formats import FORMATS, render
from specbench_tui.report.load import load_run

DATA = TESTS / "data"
GOLDEN = TESTS / "golden"
RUN_A = DATA / "report_run_a"
RUN_B = DATA / "report_run_b"
EXTENSIONS = {"txt": "txt", "md": "md", "csv": "csv", "json": "json", "latex": "tex", "html": "html"}
UPDATE = os.environ.get("SPECBENCH_UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.exists(), f"no golden file {path}; create it with SPECBENCH_UPDATE_GOLDEN=1"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{name} differs from its golden file (SPECBENCH_UPDATE_GOLDEN=1 to accept)"


def _stable(fmt: str, text: str) -> str:
    """The HTML's figures are matplotlib's SVG, whose bytes follow its version: tests/real_servers/test_report_html.py and
    tests/unit/report/test_figures.py check them; the golden file pins the page around them."""
    return re.sub(r"base64,[A-Za-z0-9+/=]+", "base64,...", text) if fmt == "html" else text


@pytest.mark.parametrize("fmt", FORMATS)
def test_report_format_matches_golden(fmt: str) -> None:
    check_golden(f"report_run_a.{EXTENSIONS[fmt]}", _stable(fmt, render(load_run(RUN_A), fmt)))


def test_compare_matches_golden() -> None:
    check_golden("compare_a_b.txt", render_compare(compare_runs(load_run(RUN_A), load_run(RUN_B))))


def test_fixture_runs_are_what_the_generator_writes(tmp_path: Path) -> None:
    """The committed run directories are reproducible from tests/data/make_report_runs.py."""
    spec = importlib.util.spec_from_file_location("make_report_runs", DATA / "make_report_runs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for made in module.make_runs(tmp_path):
        committed = DATA / made.name
        for name in ("plan.json", "results.jsonl", "events.jsonl", "env.json"):
            assert (made / name).read_text() == (committed / name).read_text(), (
                f"{made.name}/{name} is stale (the plan or event format changed?): run "
                "tests/data/make_report_runs.py, then SPECBENCH_UPDATE_GOLDEN=1 pytest tests/unit/report/test_report_golden.py")
