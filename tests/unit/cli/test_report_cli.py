"""specbench report / compare through the CLI: formats, exit codes, damaged run directories, charts."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest
from narrowing import present

from repo_paths import TESTS
from specbench_tui.cli import main
from specbench_tui.report.charts import ChartSeries, budget_charts, budget_series, render_chart
from specbench_tui.report.compare import compare_runs
from specbench_tui.report.formats import CSV_COLUMNS, latex_escape
from specbench_tui.report.load import load_run

DATA = TESTS / "data"
RUN_A = DATA / "report_run_a"
RUN_B = DATA / "report_run_b"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_txt_report_shows_what_a_decision_needs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "report", str(RUN_A))
    assert code == 0 and err == ""
    assert "Best configuration per workload" in out
    assert "4.09x [4.02-4.10]" in out  # speedup with its spread over repeats
    assert "cuda_illegal_instruction" in out and "RuntimeError: CUDA error: an illegal instruction" in out
    assert "does not fit the CUDA-graph memory" in out  # the skip reason
    assert "faster ddtree-b64-tp1 barred: lossless mismatch" in out
    assert "SPEC-IDLE" in out and "ZERO-OUTPUT" in out
    assert "no baseline" in out
    assert "ddtree: speedup over baseline (x) vs draft budget" in out


def test_csv_has_one_row_per_config_and_workload(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "report", str(RUN_A), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and tuple(rows[0]) == CSV_COLUMNS
    analysis = load_run(RUN_A).analysis
    assert len(rows) == len(analysis.configs) * len(analysis.workloads)
    crashed = [r for r in rows if r["config"] == "ddtree-b8-tp1"]
    assert {r["state"] for r in crashed} == {"crashed"} and crashed[0]["signature"] == "cuda_illegal_instruction"
    assert sum(1 for r in rows if r["best_for_workload"] == "yes") == len(analysis.workloads)


def test_json_is_loadable_and_complete(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "report", str(RUN_A), "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["schema"] == "specbench-report/1" and data["run"] == "report_run_a"
    assert {b["workload"] for b in data["analysis"]["best"]} == {"code", "haiku", "long-context"}


def test_latex_is_booktabs_and_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "report", str(RUN_A), "--format", "latex")
    assert code == 0
    assert out.count(r"\toprule") == out.count(r"\bottomrule") == out.count(r"\begin{table}") == 6
    assert r"cuda\_illegal\_instruction" in out and "cuda_illegal" not in out.replace(r"\_", "")
    assert latex_escape("50% of #1_b & {x} ~ ^ $ \\") == (
        r"50\% of \#1\_b \& \{x\} \textasciitilde{} \textasciicircum{} \$ \textbackslash{}")


def test_markdown_and_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "report.md"
    code, out, err = run_cli(capsys, "report", str(RUN_A), "--format", "md", "-o", str(target))
    assert code == 0 and out == "" and "wrote" in err
    assert target.read_text().startswith("# specbench report: report-fixture")
    code, _, err = run_cli(capsys, "report", str(RUN_A), "-o", str(tmp_path / "missing" / "x.txt"))
    assert code == 1 and "cannot write" in err


@pytest.mark.parametrize("make", ["missing", "file", "empty"])
def test_not_a_run_directory_exits_2_with_a_message(make: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "thing"
    if make == "file":
        path.write_text("hello")
    elif make == "empty":
        path.mkdir()
    code, out, err = run_cli(capsys, "report", str(path))
    assert code == 2 and out == "" and str(path) in err and "Traceback" not in err
    code, _, err = run_cli(capsys, "compare", str(RUN_A), str(path))
    assert code == 2 and str(path) in err


def test_damaged_run_directory_still_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN_A, run)
    with open(run / "results.jsonl", "a") as handle:
        handle.write('{"config_id": "330ff5b8fe8f", "config": "ar-tp1", "work')  # torn by a crash
    with open(run / "events.jsonl", "a") as handle:
        handle.write('{"type": "NoSuchEvent"}\n[1, 2]\n')
    (run / "env.json").write_text("{not json")
    code, out, err = run_cli(capsys, "report", str(run))
    assert code == 0 and "Traceback" not in err
    assert "results.jsonl:213: unreadable line skipped" in err and "env.json is unreadable" in err
    assert "read: results.jsonl:213" in out  # the report itself says what it skipped
    (run / "plan.json").unlink()
    for fmt in ("txt", "md", "csv", "json", "latex"):
        code, out, err = run_cli(capsys, "report", str(run), "--format", fmt)
        assert code == 0 and "plan.json is missing" in err


def test_run_with_only_a_plan_reports_nothing_measured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(RUN_A / "plan.json", run / "plan.json")
    code, out, err = run_cli(capsys, "report", str(run))
    assert code == 0 and "results.jsonl is missing" in err and "(no data to chart)" in out


def test_compare_matches_by_id_and_marks_significant_changes(capsys: pytest.CaptureFixture[str]) -> None:
    comparison = compare_runs(load_run(RUN_A), load_run(RUN_B))
    assert [c.name for c in comparison.only_a] == ["ngram-tp1"]
    assert {c.name for c in comparison.only_b} == {"ddtree-b24-tp1", "ddtree-b24-tp4"}
    assert ("ddtree-b12-tp1", "crashed", "done") in comparison.state_changes
    tp4 = [r for r in comparison.rows if r.config.endswith("-tp4") and r.decode_tps.relative is not None]
    assert tp4 and all(present(r.decode_tps.relative) > 0.05 for r in tp4 if r.config.startswith("ddtree-b32"))
    assert any(r.decode_tps.significant for r in tp4)
    tp1_tps = [r for r in comparison.rows if r.config == "ddtree-b16-tp1"]
    assert not any(r.decode_tps.significant for r in tp1_tps)  # same speed, inside the noise
    assert all(r.ttft_s.significant and (r.ttft_s.relative or 0) > 0.2 for r in tp1_tps)  # TTFT 1.3x at TP1
    code, out, _ = run_cli(capsys, "compare", str(RUN_A), str(RUN_B))
    assert code == 0 and "driver 575.51.03 -> 580.65.06" in out and " *" in out and "Only in A" in out


def test_chart_fits_its_box_and_marks_gaps() -> None:
    series = [ChartSeries("TP1", ((8, None), (16, 2.0), (32, 3.0))), ChartSeries("TP4", ((8, 1.5), (16, 2.5)))]
    lines = render_chart(series, width=40, height=6, title="t")
    assert lines[0] == "t" and all(len(line) <= 40 for line in lines)
    assert len(lines) == 1 + 6 + 3
    assert "no value at 8" in lines[-1] and "o" in "".join(lines[1:7]) and "+" in "".join(lines[1:7])
    assert render_chart([], 40, 6) == ["(no data to chart)"]


def test_budget_series_drops_points_missing_a_workload() -> None:
    analysis = load_run(RUN_A).analysis
    tp1 = next(s for s in budget_series(analysis, "speedup", "ddtree") if s.label == "TP1")
    points = dict(tp1.points)
    assert points[8] is None and points[12] is None  # crashed
    assert points[32] is not None and points[64] is not None
    code_only = next(s for s in budget_series(analysis, "accept_length", "ddtree", "code") if s.label == "TP4")
    assert dict(code_only.points)[64] is None  # skipped
    assert any("acceptance length vs draft budget" in line for line in budget_charts(analysis, 60, 8))
    with pytest.raises(ValueError):
        budget_series(analysis, "bogus", "ddtree")


def test_hostile_text_in_a_run_is_neutralised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    shutil.copytree(RUN_A, run)
    events = (run / "events.jsonl").read_text().replace(
        "RuntimeError: CUDA error", "\\u001b[31m[/crash] 100% #1 \\u0000RuntimeError").replace(
        "during decode", "during \\u001b[1mdecode 100% #1_x")
    (run / "events.jsonl").write_text(events)
    for fmt in ("txt", "md", "latex"):
        code, out, _ = run_cli(capsys, "report", str(run), "--format", fmt)
        assert code == 0 and "\x1b" not in out and "\x00" not in out
    code, out, _ = run_cli(capsys, "report", str(run), "--format", "latex")
    assert r"decode 100\% \#1\_x" in out
