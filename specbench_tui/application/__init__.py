"""The application layer, between the command line (or the TUI) and the engine.

It turns what a user asked for (:class:`~specbench_tui.application.session.RunRequest`: a sweep to start or a
run directory to resume, built by the command line, serialisable) into an owned run, its orchestrator, its stop
signals and its ending, in one place (:mod:`.host`), for the three hosts: headless (:mod:`.headless`), the
engine process (:mod:`.daemon`) and a thread for the TUI (:mod:`.runner`). It imports no argparse
(``tests/meta/test_static_checks.py``). The engine never imports it or the CLI; it imports the engine, the
run-directory package (:mod:`specbench_tui.rundir`) and the core.
"""
