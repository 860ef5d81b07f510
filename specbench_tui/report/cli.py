"""``specbench report`` and ``specbench compare``: read run directories, print or write the result.

Exit codes: 0 written; 1 the output file could not be written; 2 a path is not a run directory. Problems
inside a run directory (torn lines, missing files) never stop a report: they are printed to stderr and listed
in the report's notes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specbench_tui.core.outcomes import ExitCode
from specbench_tui.core.safetext import document_safe
from specbench_tui.report.compare import compare_runs, render_compare
from specbench_tui.report.formats import render
from specbench_tui.report.load import LoadedRun, NotARunDir, load_run

EXIT_OK = ExitCode.OK
EXIT_WRITE_FAILED = ExitCode.FAILED
EXIT_NOT_A_RUN = ExitCode.INVALID


def _load(path: str, command: str) -> LoadedRun | None:
    try:
        run = load_run(path)
    except NotARunDir as exc:
        print(f"specbench {command}: {exc}", file=sys.stderr)
        return None
    for warning in run.warnings:
        print(document_safe(f"specbench {command}: {run.name}: {warning}"), file=sys.stderr)
    return run


def _emit(text: str, output: str | None, command: str) -> int:
    if not output or output == "-":
        sys.stdout.write(text)
        return EXIT_OK
    try:
        Path(output).expanduser().write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"specbench {command}: cannot write {output}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    print(f"specbench {command}: wrote {output}", file=sys.stderr)
    return EXIT_OK


def _write_figures(run: LoadedRun, directory: str) -> int:
    from specbench_tui.report.figures import INDEX, write_figures

    target = Path(directory).expanduser()
    try:
        entries = write_figures(run.analysis, target, run.name)
    except OSError as exc:
        print(f"specbench report: cannot write figures to {directory}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_WRITE_FAILED
    names = ", ".join(e["name"] for e in entries) or "none (nothing measured yet)"
    print(f"specbench report: wrote {len(entries)} figures (PDF, SVG, PNG) and {INDEX} to {directory}: {names}",
          file=sys.stderr)
    return EXIT_OK


def report_command(args: argparse.Namespace) -> int:
    """``specbench report RUN_DIR [--format txt|md|csv|json|latex|html] [-o FILE] [--figures DIR]``: with
    ``--figures`` alone only the figures are written; with ``--format`` or ``-o`` the report too."""
    run = _load(args.run_dir, "report")
    if run is None:
        return EXIT_NOT_A_RUN
    fmt, output, figures = (getattr(args, name, None) for name in ("format", "output", "figures"))
    if figures:
        code = _write_figures(run, figures)
        if code != EXIT_OK or (fmt is None and output is None):
            return code
    return _emit(render(run, fmt or "txt"), output, "report")


def compare_command(args: argparse.Namespace) -> int:
    """``specbench compare RUN_A RUN_B [--format txt|md|html] [-o FILE]``: per configuration (matched by id) and
    workload, what changed."""
    run_a = _load(args.run_a, "compare")
    run_b = _load(args.run_b, "compare")
    if run_a is None or run_b is None:
        return EXIT_NOT_A_RUN
    text = render_compare(compare_runs(run_a, run_b), getattr(args, "format", None) or "txt")
    return _emit(document_safe(text), getattr(args, "output", None), "compare")
