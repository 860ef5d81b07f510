"""The theme key's answer comes in the frame that restyles the screen, read from the terminal's own bytes.

The real app (``bench/_flood_app.py``: the sweep screen over a stand-in plan, a log flood keeping frames coming) runs
on Textual's Linux driver in a pseudo-terminal that answers the driver's synchronized-output query, so every frame
arrives between ``ESC[?2026h`` and ``ESC[?2026l``. After ``t`` the first frame that draws the new theme's background
must also hold the toast "Theme: <name>": the answer neither comes before its effect nor a repaint after it.
"""

from __future__ import annotations

import re
import sys

from textual.color import Color

from repo_paths import REPO

sys.path.insert(0, str(REPO / "bench"))

from _pty import PtyProcess

from specbench_tui.tui.themes import DEFAULT_THEME, load_themes

SYNC_QUERY = b"\x1b[?2026$p"
SYNC_SUPPORTED = b"\x1b[?2026;2$y"
"""The terminal's reply: mode 2026 (synchronized output) known and reset."""
FRAME = re.compile(rb"\x1b\[\?2026h(.*?)\x1b\[\?2026l", re.S)


def background_sgr(theme_name: str) -> bytes:
    """The truecolor background parameter of ``theme_name``'s ``$background``, as the driver writes it."""
    theme = next(theme for theme in load_themes(None)[0] if theme.name == theme_name)
    red, green, blue = Color.parse(theme.to_color_system().generate()["background"]).rgb
    return f"48;2;{red};{green};{blue}".encode()


def frames_after_theme_key(app: PtyProcess) -> tuple[list[bytes], str]:
    names = [theme.name for theme in load_themes(None)[0]]
    new = names[(names.index(DEFAULT_THEME) + 1) % len(names)]
    sent = app.send(b"t")
    answered = app.wait_for(f"Theme: {new}".encode(), sent, 20)
    assert answered is not None, "the answer never came"
    app.wait_for(b"\x1b[?2026l", answered, 10)  # the end of the answer's frame
    return FRAME.findall(app.output_since(sent)), new


def test_the_theme_and_its_answer_are_drawn_in_one_frame(tmp_path) -> None:  # noqa: ANN001
    argv = [sys.executable, str(REPO / "bench" / "_flood_app.py"), "--table", "40x4", "--rate", "200",
            "--run-dir", str(tmp_path / "run")]
    with PtyProcess(argv, cols=140, rows=40, cwd=str(REPO)) as app:
        assert app.wait_for(SYNC_QUERY, 0.0, 60) is not None, "the driver never asked for synchronized output"
        app.send(SYNC_SUPPORTED)
        assert app.wait_for(b"2 Results", 0.0, 60) is not None, "the sweep screen never came"
        app.wait_for(b"\x00never\x00", app.send(b""), 2.0)  # the first analysis and the flood's frames settle
        frames, new = frames_after_theme_key(app)
        restyled = [i for i, frame in enumerate(frames) if background_sgr(new) in frame]
        answered = [i for i, frame in enumerate(frames) if f"Theme: {new}".encode() in frame]
        assert restyled and answered, (len(frames), restyled, answered)
        assert restyled[0] == answered[0], (
            f"the new theme came in frame {restyled[0]}, its answer in frame {answered[0]} of {len(frames)}")
