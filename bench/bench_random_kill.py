"""Random-kill soak: SIGKILL ``specbench run --headless`` at N random moments of a sweep (default 20),
``--resume`` after each, and check that the end result equals an uninterrupted run of the same sweep.

The same soak as ``tests/e2e/test_reliability_data.py::test_random_sigkills_then_resume_equal_an_uninterrupted_run``
(which runs 5 kills in CI), against the simulator's deterministic mode: every measurement key exactly once,
the same statuses, token counts and output hashes, the same final configuration states, and no server
process surviving any kill. Prints one line per kill and exits 1 on any difference. ``--seed`` picks other
moments (also SPECBENCH_TEST_SEED). About 2 s per kill on 2 cores (~60 s in all).

    .venv/bin/python bench/bench_random_kill.py [--kills 20] [--seed S] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path[:0] = [str(TESTS), str(TESTS / "e2e")]  # the shared helpers, and the soak in tests/e2e/test_reliability_data.py


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=int(os.environ.get("SPECBENCH_RANDOM_KILLS", "20")))
    parser.add_argument("--seed", default=None, help="seed of the kill moments (default: SPECBENCH_TEST_SEED)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of the sweep (27 measurements at 3)")
    parser.add_argument("--keep", metavar="DIR", help="keep the run directories in DIR")
    args = parser.parse_args()
    if args.seed is not None:
        os.environ["SPECBENCH_TEST_SEED"] = args.seed
    from test_reliability_data import random_kill_soak

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="specbench-random-kill-"))
    started = time.monotonic()
    try:
        report = random_kill_soak(folder, args.kills, repeats=args.repeats, log=print)
    except AssertionError as exc:
        print(f"FAIL: {exc}")
        print(f"run directories kept in {folder}")
        return 1
    finally:
        if not args.keep and (folder.exists() and "report" in locals()):
            shutil.rmtree(folder, ignore_errors=True)
    landed = sum(1 for k in report["kills"] if not k["finished_first"])
    with_server = sum(1 for k in report["kills"] if k["servers_up"])
    print(f"OK: {args.kills} kills ({landed} while running, {with_server} with a server up), resumed after each; "
          f"the result equals the uninterrupted run ({report['reference_s']:.1f} s). "
          f"Took {time.monotonic() - started:.1f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
