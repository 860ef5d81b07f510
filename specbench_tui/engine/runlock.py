"""The run directory's lock now lives in :mod:`specbench_tui.runlock`, beside the run-directory format
(:mod:`specbench_tui.store`): the engine takes it, reports and ``specbench runs`` read it. This name stays an
alias of that same module for code written against the old path while the branches that use it land."""

import sys

from specbench_tui import runlock as _module
from specbench_tui.runlock import *  # noqa: F403 - the same public names, for type checkers

sys.modules[__name__] = _module
