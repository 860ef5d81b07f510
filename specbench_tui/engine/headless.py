"""Moved to :mod:`specbench_tui.application.headless` (the application layer between the CLI and the engine). This
name stays an alias of that same module for code written against the old path while the branches that use it
land; new code imports the new one. (An exception to the layer contract, listed in pyproject.toml.)"""

import sys

from specbench_tui.application import headless as _module
from specbench_tui.application.headless import *  # noqa: F403 - the same public names, for type checkers

sys.modules[__name__] = _module
