"""Makes docs/screenshot.svg, the README's screenshot: the app's own screen at the end of the built-in demo.

    .venv/bin/python tools/docs_screenshot.py            # runs sweeps/demo.toml (about 3 minutes), then the shot

It runs the demo sweep as ``specbench run sweeps/demo.toml --foreground`` does (the engine in this process, the
SGLang simulator, no GPU), with the app in Textual's headless test driver at 160×48, waits until the sweep has
ended and the screen has settled, and writes Textual's own screenshot of it. The SVG asks a CDN for its web font;
the copy in docs/ names only the local font and monospace, so the documentation fetches nothing (no link leaves
the repository). tests/meta/test_docs.py checks that the screenshot is the demo's (its sweep and configurations).
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "sweeps" / "demo.toml"
TARGET = ROOT / "docs" / "screenshot.svg"
SIZE = (160, 48)
DEMO_LIMIT_S = 900.0
"""The demo takes about 3 minutes on 2 cores; this much and it is taken to be stuck."""
SETTLE_S = 3.0
"""After the sweep ends: the last events drawn, the analysis redone, the toasts shown."""


def without_remote_urls(svg: str) -> str:
    """The SVG with every ``url("http…")`` font source and the generator's web address taken out."""
    svg = re.sub(r',\s*url\("https?://[^"]*"\)\s*format\("[^"]*"\)', "", svg)
    return re.sub(r"<!-- Generated with Rich https?://\S+ -->", "<!-- Generated with Rich -->", svg)


def remote_references(svg: str) -> list[str]:
    """Addresses the SVG would fetch: ``url(…)`` sources and ``href`` attributes that name another host (text on
    the screen, such as a server's log line, fetches nothing)."""
    return re.findall(r'(?:url\(\s*["\']?|href=["\'])(https?://[^"\')\s]+)', svg)


async def demo_screenshot(runs_dir: Path) -> str:
    """The app's screenshot at the end of the demo sweep, run here into ``runs_dir``."""
    from specbench_tui.application.runner import make_engine
    from specbench_tui.cli import _parser
    from specbench_tui.tui.app import SpecbenchApp

    args = _parser().parse_args(["run", str(DEMO), "--foreground", "--runs-dir", str(runs_dir)])
    engine = make_engine(args)
    if isinstance(engine, int):
        raise SystemExit(f"{DEMO}: the demo cannot run (exit {engine})")
    app = SpecbenchApp(engine)
    async with app.run_test(size=SIZE) as pilot:
        deadline = time.monotonic() + DEMO_LIMIT_S
        while engine.outcome is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"{DEMO}: the demo did not end within {DEMO_LIMIT_S:.0f} s")
            await pilot.pause(0.5)
        await pilot.pause(SETTLE_S)
        return app.export_screenshot(title="specbench run sweeps/demo.toml")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="specbench-shot-") as scratch:
        os.chdir(scratch)  # the header names the run directory as a user's would: runs/<started>_demo
        svg = without_remote_urls(asyncio.run(demo_screenshot(Path("runs"))))
    left = remote_references(svg)
    if left:
        print(f"the screenshot still names addresses after the clean-up: {left}", file=sys.stderr)
        return 1
    TARGET.write_text(svg, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)} from a run of {DEMO.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
