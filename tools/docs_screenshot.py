"""Makes docs/screenshot.svg, the README's screenshot, from the app's own snapshot of the demo mid-run.

    .venv/bin/python tools/docs_screenshot.py

The snapshot (``tests/tui/__snapshots__/test_tui_snapshots/test_mid_run_wide.svg``, written by Textual's own
screenshot through pytest-textual-snapshot) asks a CDN for its web font; the copy in docs/ names only the
local font and monospace, so the documentation fetches nothing (no link leaves the repository).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / "tests" / "tui" / "__snapshots__" / "test_tui_snapshots" / "test_mid_run_wide.svg"
TARGET = ROOT / "docs" / "screenshot.svg"


def without_remote_urls(svg: str) -> str:
    """The SVG with every ``url("http…")`` font source and the generator's web address taken out."""
    svg = re.sub(r',\s*url\("https?://[^"]*"\)\s*format\("[^"]*"\)', "", svg)
    return re.sub(r"<!-- Generated with Rich https?://\S+ -->", "<!-- Generated with Rich -->", svg)


def remote_references(svg: str) -> list[str]:
    """Addresses the SVG would fetch: ``url(…)`` sources and ``href`` attributes that name another host (text on
    the screen, such as a server's log line, fetches nothing)."""
    return re.findall(r'(?:url\(\s*["\']?|href=["\'])(https?://[^"\')\s]+)', svg)


def main() -> int:
    svg = without_remote_urls(SNAPSHOT.read_text(encoding="utf-8"))
    left = remote_references(svg)
    if left:
        print(f"{SNAPSHOT}: addresses left after the clean-up: {left}", file=sys.stderr)
        return 1
    TARGET.write_text(svg, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)} from {SNAPSHOT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
