"""Whether this process's Ray lost its head, and how the process then ends (a module of its own: the package's
``__init__`` and the Ray executor both use it, and neither imports the other for it)."""

from __future__ import annotations

import os
import sys

_head_lost = False


def mark_head_lost() -> None:
    """This process's Ray lost its head (the Ray executor says so): see :func:`end_process`."""
    global _head_lost
    _head_lost = True


def end_process(code: int) -> int:
    """``code``, or, when this process's Ray lost its head, the process ends here with ``code``: Ray's own
    teardown (``ray.shutdown``, at exit too) would end it with another code or crash it when the head took the
    engine's own Ray node with it. Called by the entry points once everything is written."""
    if _head_lost:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(int(code))
    return code
