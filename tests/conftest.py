"""Test-session set-up shared by every test module."""

from __future__ import annotations

import os
import tempfile

# Port and GPU leases are machine-wide (engine/leases.py): a test session keeps its own lease directory, so
# that test runs side by side (and a user's real sweeps) neither wait for each other's simulated GPUs nor see
# each other's ports. Subprocess engines inherit it through the environment. Tests that need two sweeps to
# contend share this one directory.
os.environ.setdefault("SPECBENCH_LEASE_DIR", tempfile.mkdtemp(prefix="specbench-test-leases-"))
