"""The run-directory format now lives in :mod:`specbench_tui.store` (owned by neither the engine, its writer,
nor the report, its reader). This name stays an alias of that same module for code written against the old
path while the branches that use it land; new code imports :mod:`specbench_tui.store`."""

import sys

from specbench_tui import store as _module
from specbench_tui.store import *  # noqa: F403 - the same public names, for type checkers

sys.modules[__name__] = _module
