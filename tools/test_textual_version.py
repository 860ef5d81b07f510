"""Run the TUI's behaviour tests (snapshots aside) against another Textual version, in a scratch virtual environment.

    .venv/bin/python tools/test_textual_version.py 8.0.0            # the oldest Textual 8 the screen supports
    .venv/bin/python tools/test_textual_version.py 8.2.8 -x -q      # the pinned one; extra arguments go to pytest

The scratch environment (``$TMPDIR/specbench-textual-VERSION``, kept between runs) holds only the Textual asked
for; everything else (the package, the test tools, rich…) comes from the project's ``.venv``, added after it on
the import path, so a run installs one package. pip resolves Textual's own requirements against what is there
and says so when the version needs others. CI keeps one pin (``pyproject.toml``); this is for checking an
upgrade, or that the screen still runs on an older Textual 8.

SVG snapshots are left out (a Textual release may draw a border or a scrollbar differently, which is not a
behaviour change): this module is also the pytest plugin that deselects every test using ``snap_compare``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tempfile
import venv
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = ("tests/tui/test_tui_*.py", "tests/e2e/test_tui_*.py", "tests/tui/test_red_first.py")
"""The TUI's tests (every ``test_tui_*.py`` of tests/tui and tests/e2e) and the crash-to-red path through the app."""


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    """Deselect the SVG snapshot tests (those that use ``snap_compare``)."""
    snapshots = [item for item in items if "snap_compare" in getattr(item, "fixturenames", ())]
    if snapshots:
        config.hook.pytest_deselected(items=snapshots)
        items[:] = [item for item in items if item not in snapshots]


def scratch_environment(version: str) -> Path:
    """A virtual environment with Textual ``version`` in front of the project's ``.venv`` (made once, then reused)."""
    home = Path(os.environ.get("TMPDIR", tempfile.gettempdir())) / f"specbench-textual-{version}"
    python = home / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=True, clear=True).create(home)
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 check=True, capture_output=True, text=True).stdout.strip()
        project = sysconfig.get_paths()["purelib"]  # this interpreter's: the project's .venv
        # A .pth line that imports runs at start-up: the project's site-packages (its own .pth files included, such
        # as the editable install of specbench_tui) come after the scratch one's, where the other Textual is.
        Path(purelib, "specbench_project.pth").write_text(f"import site; site.addsitedir({project!r})\n")
    installed = subprocess.run([str(python), "-c", "import textual; print(textual.__version__)"],
                               capture_output=True, text=True).stdout.strip()
    if installed != version:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"textual=={version}"], check=True)
    return python


def main(argv: list[str]) -> int:
    if not argv or argv[0].startswith("-"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    version, pytest_args = argv[0], argv[1:]
    python = scratch_environment(version)
    tests = sorted(str(path.relative_to(ROOT)) for pattern in TESTS for path in ROOT.glob(pattern))
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "tools"),
                                                                             os.environ.get("PYTHONPATH")])))
    shown = subprocess.run([str(python), "-c", "import textual; print(textual.__version__, textual.__file__)"],
                           capture_output=True, text=True, env=environment).stdout.strip()
    print(f"Textual {shown}", flush=True)
    command = [str(python), "-m", "pytest", "-p", "test_textual_version", "-n", "0", *pytest_args, *tests]
    return subprocess.run(command, cwd=ROOT, env=environment).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
