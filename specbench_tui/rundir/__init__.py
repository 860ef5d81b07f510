"""The run-directory package: the only code that names, opens and reads a run directory's files.

Its modules are :mod:`~specbench_tui.rundir.store` (the append-only records and
:class:`~specbench_tui.rundir.store.RunDir`), :mod:`~specbench_tui.rundir.lock` (``.owner.lock``) and the rest of
this package (the small state files, the plan stored in the directory, who owns it, prefixes of the record files for
a client that attaches late). Everything else asks these modules; ``tests/meta/test_one_reader.py`` fails when a module outside them names one of the files.

Every reader applies the same rules: a regular file only (opened ``O_NONBLOCK``/``O_NOFOLLOW`` and checked, so
a FIFO never hangs a reader and a link to ``/dev/zero`` is refused), a size limit per file, and values checked
before they are used (a ``started`` of ``1e20`` is no time). A reader that cannot use a file says why in a
:class:`~specbench_tui.rundir.store.StoreError` naming the file; none raises a traceback at the user.
"""

from specbench_tui.rundir.files import (
    RUN_DIR_MARKERS,
    engine_owns,
    event_lines,
    file_size,
    has_file,
    held_locks,
    is_run_dir,
    load_plan,
    plausible_time,
    read_meta,
    read_object,
    read_prefix,
    read_text,
    records_mtime,
)
from specbench_tui.rundir.store import (
    ENGINE_LOG,
    ENGINE_SOCKET,
    ENV_JSON,
    EVENTS,
    OWNER_LOCK,
    PLAN_JSON,
    RESULTS,
    RUN_JSON,
    SUMMARY,
    SWEEP_TOML,
)

__all__ = [
    "ENGINE_LOG", "ENGINE_SOCKET", "ENV_JSON", "EVENTS", "OWNER_LOCK", "PLAN_JSON", "RESULTS", "RUN_DIR_MARKERS",
    "RUN_JSON", "SUMMARY", "SWEEP_TOML", "engine_owns", "event_lines", "file_size", "has_file", "held_locks", "is_run_dir",
    "load_plan", "plausible_time", "read_meta", "read_object", "read_prefix", "read_text",
    "records_mtime",
]
