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


def interrupted(exc: BaseException | None) -> bool:
    """Whether ``exc`` is a Ctrl-C, as raised or as Python 3.11 wraps it: an exception raised inside a descriptor's
    ``__set_name__`` (a dataclass field, while a module that defines one is imported) becomes the cause of a
    ``RuntimeError("Error calling __set_name__ ...")``, and SIGINT can land there."""
    while exc is not None:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            return True
        exc = exc.__cause__
    return False


def run() -> int:
    signal.signal(signal.SIGINT, quiet_interrupt)
    try:
        from specbench_tui.cli import main

        return main()
    except KeyboardInterrupt:  # a handler that was already replaced (an embedding interpreter)
        return INTERRUPTED
    except RuntimeError as exc:  # a Ctrl-C inside a class body's __set_name__, wrapped by the interpreter
        if not interrupted(exc):
            raise
        return INTERRUPTED


if __name__ == "__main__":
    sys.exit(run())
