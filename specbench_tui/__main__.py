"""`python -m specbench_tui` runs the same CLI as the `specbench` command.

Ctrl-C at any moment ends it without a traceback: until the CLI's own handling is in place (its imports take a
few hundred milliseconds, in which a KeyboardInterrupt would surface inside whatever module was being imported),
SIGINT exits at once with status 130, as an interrupted shell command does."""

import signal
import sys
from types import FrameType

INTERRUPTED = 130


def quiet_interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGINT before the CLI handles it: exit 130, no traceback (nothing has started that needs stopping)."""
    raise SystemExit(INTERRUPTED)


def run() -> int:
    signal.signal(signal.SIGINT, quiet_interrupt)
    try:
        from specbench_tui.cli import main
    except KeyboardInterrupt:  # a handler that was already replaced (an embedding interpreter)
        return INTERRUPTED
    return main()


if __name__ == "__main__":
    sys.exit(run())
