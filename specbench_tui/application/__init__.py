"""The application layer, between the command line (or the TUI) and the engine.

It turns what a user asked for (:class:`~specbench_tui.application.session.RunRequest`: a sweep to start or a
run directory to resume) into a loaded plan, an owned run directory and an open GPU backend, then runs the
engine headless (:mod:`.headless`) or in a thread for the TUI (:mod:`.runner`). The engine never imports it
or the CLI; it imports the engine, the run-directory format (:mod:`specbench_tui.rundir.store`) and the core.
"""
