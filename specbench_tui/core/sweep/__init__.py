"""Sweep files: TOML in, a frozen, validated :class:`~specbench_tui.core.sweep.schema.Sweep` out, or a
:class:`~specbench_tui.core.errors.SweepError` naming every problem.

The schema is documented in ``docs/sweep-format.md``. Validation collects all issues in one pass so a user
fixes a file in one edit, and each issue names the file, the line, the key, what was expected and, for a
misspelt key, the closest valid one. Where things live:

- :mod:`.loader` reads the file (size, encoding, nesting depth, TOML syntax) and is the entry point:
  :func:`~.loader.load_sweep` and :func:`~.loader.parse_sweep`;
- :mod:`.document` walks the parsed document: the top level, ``[sweep]``, ``[server]``, and the
  ``[[configs]]`` and ``[[workloads]]`` arrays with their sweep-wide totals;
- :mod:`.engine_table` checks ``[engine]`` (profile, launcher, timeouts, crash signatures);
- :mod:`.flags` checks the flag and environment tables (``args``, ``fork_args``, ``env``);
- :mod:`.configs` checks one ``[[configs]]`` block: its matrix and exclude rules (the matrix is expanded
  by :mod:`specbench_tui.core.plan`);
- :mod:`.workloads` checks one ``[[workloads]]`` block: common and kind-specific parameters, prompts files;
- :mod:`.load_axis` checks a workload's load axis (``concurrency`` / ``request_rate``, search, SLO);
- :mod:`.schema` holds the resulting dataclasses; :mod:`.limits` every ``MAX_*`` bound; :mod:`.values` the
  rules for names and scalar values; :mod:`.env` ``${NAME}`` references and secrets; :mod:`.reader` the
  issue-recording access to the parsed TOML that every checker uses.
"""
