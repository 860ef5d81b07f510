"""Every bound on a sweep file (``MAX_*``), each listed in ``docs/sweep-format.md``."""

from __future__ import annotations

# Limits: everything that scales with the input is bounded, so that validating any file takes well under a
# second and a few tens of MB, and a run cannot be made to exhaust the machine. docs/sweep-format.md names each.
MAX_SWEEP_BYTES = 1 << 20
"""A sweep file is at most 1 MiB (the largest shipped one is a few KB)."""
MAX_NESTING = 32
"""Tables, arrays and dotted-key parts nest at most this deep (a sweep needs 6)."""
MAX_CONFIGURATIONS = 10_000
"""The whole sweep expands to at most this many configurations (more is almost certainly a typo, and would
take months to run)."""
MAX_EXCLUDE_RULES = 10_000
"""Exclude rules per ``[[configs]]`` block."""
MAX_GPUS = 64
"""GPUs in the pool, and the largest GPU index + 1: more than one machine has."""
MAX_REPEATS = 1_000
"""Measured repeats of each item."""
MAX_WARMUP = 100
"""Unmeasured warm-up requests."""
MAX_ITEMS = 10_000
"""Items of one workload: ``count``, ``items``, ``prompt_tokens`` entries, prompts read from a file."""
MAX_WORKLOADS = 100
"""``[[workloads]]`` blocks."""
MAX_TEMPERATURES = 8
"""Temperatures one workload (or ``[measure]``) may list: each measures the workload again."""
MAX_REQUESTS = 100_000
"""Requests one configuration is sent (items × repeats + warm-up, over every workload)."""
MAX_NEW_TOKENS = 1 << 20
"""``max_new_tokens`` (before it is checked against the context length the server reports)."""
MAX_PROMPT_TOKENS = 10_000_000
"""A ``long_context`` prompt size."""
MAX_TURNS = 100
"""Turns of an agentic conversation."""
MAX_TIMEOUT_S = 7 * 24 * 3600.0
"""Any ``*_timeout_s`` or grace (a week)."""
MAX_SIGNATURES = 100
"""User crash signatures."""
MAX_PATTERN_CHARS = 1_000
"""Characters of one crash-signature pattern."""
MAX_NAME_CHARS = 200
"""Characters of a sweep, configuration or workload name."""
MAX_PROMPTS_FILE_BYTES = 32 << 20
"""A prompts file."""
MAX_LOAD_POINTS = 64
"""Values of one load axis (``concurrency`` or ``request_rate``) of a workload."""
MAX_CONCURRENCY = 4096
"""Requests in flight at one closed-loop point."""
MAX_REQUEST_RATE = 100_000.0
"""Requests per second of one open-loop point."""
MAX_WAVES = 1_000
"""``waves`` of a closed-loop point."""
MAX_ISSUES = 100
"""Issues listed for one file (the rest are counted)."""
