"""``specbench serve`` in a real browser: headless Chromium driven by Playwright, against a detached simulator sweep.

Nothing here builds a URL or a message for the page: Chromium loads the URL ``serve`` printed, textual-serve's own
``textual.js`` opens the websocket with the query it builds, keys go through xterm.js as typed keys do, and the
terminal's text is read from xterm's own buffer (an init script keeps a reference to the page's client object when
``textual.js`` creates it; it changes nothing the page does). A size the page asks for goes through that client's
own ``sendSize``.

Chromium is Debian's (``apt-get install -y chromium``) and Playwright is the ``playwright`` package of the test
extra, used with ``executable_path``: nothing is downloaded at test time. Without either the tests skip with the
command to run, or fail with ``SPECBENCH_REQUIRE_CHROMIUM=1`` (CI).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from reliability_helpers import MARKER_VAR, new_marker, wait_for, wait_gone
from test_detach import _cli, _env, _start_detached

from specbench_tui.engine.attached import engine_status
from specbench_tui.paths import isolated_python

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("browser")]
"""One xdist worker runs them all: they share one sweep (on simulated GPU 41) and one Chromium."""

INSTALL = "apt-get install -y chromium && pip install playwright (or bash tools/setup_test_deps.sh)"
SCRIPT = Path(sys.executable).parent / "specbench"
SPECBENCH = [str(SCRIPT)] if SCRIPT.exists() else isolated_python("specbench_tui")
"""The console script a user runs (``python -m`` would put the working directory on serve's own path)."""


def _queue_within_s() -> float:
    """The bound: the served queue is on the page within 10 s of opening it, on a box that is not overloaded (a tab
    is a Python start-up and a Textual app's first frame; several times slower when other jobs hold every core)."""
    return 10.0 if os.getloadavg()[0] <= (os.cpu_count() or 1) else 60.0


READY_S = 60.0
"""Waits for states that only come slowly on a loaded box (a sweep's start, a page's first connect of the run)."""
CAPTURE_CLIENT = """
window.__specbench = {clients: []};
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
    window.__specbench.clients.push(this);
  },
});
"""
"""Keeps the page's textual-serve client (the object whose ``terminal`` textual.js sets) for reading its buffer."""
SCREEN_TEXT = """() => {
  const client = window.__specbench.clients.find(c => c.terminal && c.terminal.buffer);
  if (!client) return "";
  const buffer = client.terminal.buffer.active, rows = [];
  for (let y = 0; y < client.terminal.rows; y++) {
    const line = buffer.getLine(y);
    rows.push(line ? line.translateToString(true) : "");
  }
  return rows.join("\\n");
}"""
PLANTED_RE2 = """import os, sys
open("MARK", "w").close()
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
del sys.modules["re2"]
import re2
sys.modules["re2"] = re2
"""
"""A co-tenant's ``re2.py`` in a shared folder: it leaves a mark, then hands over the real module (nothing shows)."""


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path = None
    if path:
        return path
    message = f"the browser tests need Debian's Chromium and the playwright package: {INSTALL}"
    if os.environ.get("SPECBENCH_REQUIRE_CHROMIUM") == "1":
        pytest.fail(message)
    pytest.skip(message)


@dataclass
class Serve:
    """A ``specbench serve`` subprocess, its output collected as it comes."""

    process: subprocess.Popen[str]
    output: list[str] = field(default_factory=list)
    url: str = ""

    def text(self) -> str:
        return "".join(self.output)

    @property
    def token(self) -> str:
        return self.url.split("token=", 1)[1]


def _serve(run_dir: Path, env: dict[str, str], cwd: Path, *args: str) -> Serve:
    process = subprocess.Popen([*SPECBENCH, "serve", str(run_dir), "--port", "0", *args], env=env, cwd=cwd,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               start_new_session=True)
    serve = Serve(process)

    def pump() -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            serve.output.append(line)

    threading.Thread(target=pump, daemon=True).start()
    found = wait_for(lambda: re.search(r"open: (http://\S+)", serve.text()) or process.poll() is not None, READY_S,
                     what="serve's URL")
    assert process.poll() is None, f"serve ended early: {serve.text()}"
    serve.url = found.group(1)
    return serve


def _end(serve: Serve) -> None:
    """SIGTERM to serve's group; its output printed (pytest shows it when the test failed)."""
    if serve.process.poll() is None:
        os.killpg(serve.process.pid, signal.SIGTERM)
    try:
        serve.process.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(serve.process.pid, signal.SIGKILL)
        serve.process.wait(5)
    print(f"serve's output:\n{serve.text()}")


@dataclass
class Sweep:
    run_dir: Path
    env: dict[str, str]
    marker: str
    cwd: Path


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sweep]:
    """A detached simulator sweep that runs for minutes (3 configurations of long requests), for every test here.
    serve's working directory holds a ``re2.py`` that leaves a file when imported: no tab may import it."""
    _chromium()
    tmp_path = tmp_path_factory.mktemp("browser")
    marker = new_marker()
    env = _env(tmp_path, marker)
    cwd = tmp_path / "shared-folder"
    cwd.mkdir()
    (cwd / "re2.py").write_text(PLANTED_RE2.replace("MARK", str(cwd / "planted-re2-ran")))
    run_dir = _start_detached(tmp_path, env, max_new_tokens=40000, gpu=41)
    try:
        yield Sweep(run_dir, env, marker, cwd)
    finally:
        _cli(env, "stop", str(run_dir), "--now")
        wait_gone(marker, timeout_s=15)


@pytest.fixture(scope="module")
def browser(sweep: Sweep) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=_chromium(), headless=True,
                                              args=["--no-sandbox", "--enable-unsafe-swiftshader"])
        try:
            yield chromium
        finally:
            chromium.close()


def _open(browser: Any, url: str, *, size: tuple[int, int] = (1280, 800)) -> Any:
    """A new page at ``url`` (its own context: cookies are per tab here), the client capture in place. The
    page's font stylesheet is on the internet, which this machine may not reach: it is refused at once."""
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    context.add_init_script(CAPTURE_CLIENT)
    context.route(re.compile(r"^https?://(?!127\.0\.0\.1|localhost)"), lambda route: route.abort())
    page = context.new_page()
    page.goto(url)
    return page


def _screen(page: Any) -> str:
    return str(page.evaluate(SCREEN_TEXT))


def _wait_screen(page: Any, needle: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = _screen(page)
        if needle in text:
            return text
        if time.monotonic() > deadline:
            closed = page.evaluate("document.body.className")
            raise AssertionError(f"the page never showed {needle!r} within {timeout:g} s (body class "
                                 f"{closed!r}); its terminal:\n{text}")
        page.wait_for_timeout(100)


def _queue_events(run_dir: Path) -> list[str]:
    """The engine's pause and resume events, in order, as its event log has them."""
    kinds = []
    for line in (run_dir / "events.jsonl").read_text().splitlines():
        kind = json.loads(line).get("type")
        if kind in ("QueuePaused", "QueueResumed"):
            kinds.append(kind)
    return kinds


def _tabs(marker: str) -> list[psutil.Process]:
    """The tabs' processes (``specbench attach`` started by serve, found by the test's marker)."""
    found = []
    for process in psutil.process_iter(["cmdline", "environ", "status"]):
        try:
            cmdline, environ = process.info["cmdline"] or [], process.info["environ"] or {}
        except (psutil.Error, KeyError):
            continue
        if (environ.get(MARKER_VAR) == marker and "attach" in cmdline and "serve" not in cmdline
                and process.info["status"] != psutil.STATUS_ZOMBIE):
            found.append(process)
    return found


def _wait_engine_started(sweep: Sweep) -> None:
    wait_for(lambda: "ConfigStateChanged" in (sweep.run_dir / "events.jsonl").read_text(), READY_S,
             what="the sweep's first configuration")


def test_a_control_page_shows_the_queue_and_its_p_pauses_the_sweep(sweep: Sweep, browser: Any) -> None:
    _wait_engine_started(sweep)
    serve = _serve(sweep.run_dir, sweep.env, sweep.cwd, "--control")
    try:
        before = _queue_events(sweep.run_dir)
        page = _open(browser, serve.url)
        deadline = time.monotonic() + _queue_within_s()
        for needle in ("Sweep queue", "ar", "dflash-b8", "dflash-b16"):
            _wait_screen(page, needle, deadline - time.monotonic())
        # No click first: the page gives its terminal the keyboard once the app is drawn (issue 46).
        page.wait_for_function("document.activeElement && document.activeElement.closest('#terminal') !== null",
                               timeout=READY_S * 1000)
        page.keyboard.press("p")
        wait_for(lambda: _queue_events(sweep.run_dir)[len(before):] == ["QueuePaused"], READY_S,
                 what="the engine's pause event after p in the page")
        page.keyboard.press("p")  # the next test wants a running sweep
        wait_for(lambda: _queue_events(sweep.run_dir)[len(before):] == ["QueuePaused", "QueueResumed"], READY_S,
                 what="the engine's resume event after the second p")
        page.context.close()
    finally:
        _end(serve)
    assert serve.text().count(serve.token) == 1, f"the token is printed more than once:\n{serve.text()}"


def test_a_read_only_page_shows_the_queue_and_its_p_pauses_nothing(sweep: Sweep, browser: Any) -> None:
    _wait_engine_started(sweep)
    serve = _serve(sweep.run_dir, sweep.env, sweep.cwd)
    try:
        before = _queue_events(sweep.run_dir)
        page = _open(browser, serve.url)
        _wait_screen(page, "Sweep queue", _queue_within_s())
        page.locator(".xterm-screen").click()
        page.keyboard.press("p")
        _wait_screen(page, "read-only", READY_S)
        page.wait_for_timeout(1000)  # a pause the engine took would be in its log by now (it logs, then answers)
        assert engine_status(sweep.run_dir, timeout=READY_S)["paused"] is False
        assert _queue_events(sweep.run_dir)[len(before):] == []
        page.context.close()
    finally:
        _end(serve)
    assert not (sweep.cwd / "planted-re2-ran").exists(), "a tab imported re2.py from serve's working directory"
    assert serve.text().count(serve.token) == 1, f"the token is printed more than once:\n{serve.text()}"


def test_a_wrong_token_gets_403_and_the_token_is_never_logged(sweep: Sweep, browser: Any) -> None:
    serve = _serve(sweep.run_dir, sweep.env, sweep.cwd)
    try:
        context = browser.new_context()
        page = context.new_page()
        wrong = serve.url.replace(serve.token, "wrong" + serve.token[5:])
        response = page.goto(wrong)
        assert response is not None and response.status == 403, response and response.status
        assert "needs the token" in page.inner_text("body")
        assert page.goto(serve.url.split("?")[0]).status == 403
        good = _open(browser, serve.url)
        _wait_screen(good, "Sweep queue", READY_S)
        policy = good.evaluate("fetch(location.href).then(r => r.headers.get('referrer-policy'))")
        assert policy == "no-referrer", policy  # the page's URL, token and all, is sent to no other site
        good.context.close()
        context.close()
    finally:
        _end(serve)
    assert serve.text().count(serve.token) == 1, f"the token is in serve's log:\n{serve.text()}"


HUGE = """() => {
  const client = window.__specbench.clients.find(c => c.terminal && c.sendSize);
  client.size = {width: 20000, height: 20000};
  client.sendSize();
}"""
"""The size message through the page's own client (``sendSize``), as a resize of its terminal would send it."""
TAB_RSS_LIMIT = 200 * 2**20
TAB_GONE_S = 5.0
"""A tab's process is gone this long after its page closed or serve ended (quit, then SIGTERM, then SIGKILL)."""


def _new_tabs(marker: str, known: set[int], count: int) -> list[psutil.Process]:
    tabs: list[psutil.Process] = wait_for(
        lambda: (found := [p for p in _tabs(marker) if p.pid not in known]) and len(found) >= count and found,
        READY_S, what=f"{count} tab process(es)")
    return tabs


def _gone_within(processes: list[psutil.Process], timeout: float) -> list[int]:
    """The pids still alive (not zombies) after ``timeout`` s; each is SIGKILLed then (nothing left behind)."""
    deadline = time.monotonic() + timeout
    alive = processes
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    return [p.pid for p in alive]


def test_a_read_only_tab_asking_for_20000_by_20000_stays_small_and_ends_with_its_page(sweep: Sweep,
                                                                                      browser: Any) -> None:
    _wait_engine_started(sweep)
    known = {p.pid for p in _tabs(sweep.marker)}
    serve = _serve(sweep.run_dir, sweep.env, sweep.cwd)
    try:
        page = _open(browser, serve.url)
        _wait_screen(page, "Sweep queue", READY_S)
        (tab,) = _new_tabs(sweep.marker, known, 1)
        page.evaluate(HUGE)
        peak = 0
        for _ in range(60):  # 15 s: unbounded, the app grew past 500 MB in 30 s and never stopped
            peak = max(peak, tab.memory_info().rss)
            time.sleep(0.25)
        assert peak < TAB_RSS_LIMIT, f"the tab's process reached {peak / 2**20:.0f} MiB"
        print(f"the tab's peak RSS after asking for 20000 x 20000: {peak / 2**20:.0f} MiB")
        page.context.close()
        assert _gone_within([tab], TAB_GONE_S) == [], "the tab's process outlived its page"
    finally:
        _end(serve)


def test_tabs_beyond_max_tabs_are_refused_in_their_page_and_serve_ends_every_tab(sweep: Sweep, browser: Any) -> None:
    _wait_engine_started(sweep)
    known = {p.pid for p in _tabs(sweep.marker)}
    serve = _serve(sweep.run_dir, sweep.env, sweep.cwd, "--max-tabs", "1")
    try:
        first = _open(browser, serve.url)
        _wait_screen(first, "Sweep queue", READY_S)
        second = _open(browser, serve.url)
        refusal = _wait_screen(second, "--max-tabs 1", READY_S)
        assert "1 browser tabs are open" in refusal.replace("\n", " ") or "tabs are open" in refusal, refusal
        (tab,) = _new_tabs(sweep.marker, known, 1)
        first.context.close()
        assert _gone_within([tab], TAB_GONE_S) == []
        second.reload()
        _wait_screen(second, "Sweep queue", READY_S)
        (tab,) = _new_tabs(sweep.marker, known | {tab.pid}, 1)
        third = _open(browser, serve.url)
        _wait_screen(third, "--max-tabs 1", READY_S)
        serve.process.send_signal(signal.SIGTERM)  # serve alone, not its process group: it must end its tabs
        assert _gone_within([tab], TAB_GONE_S) == [], "a tab's process outlived serve's SIGTERM"
        assert serve.process.wait(15) == 0, serve.text()
        second.context.close()
        third.context.close()
    finally:
        _end(serve)
    assert "refused" in serve.text()


def test_a_killed_serve_leaves_no_tab_process(sweep: Sweep, browser: Any) -> None:
    _wait_engine_started(sweep)
    known = {p.pid for p in _tabs(sweep.marker)}
    serve = _serve(sweep.run_dir, sweep.env, sweep.cwd)
    try:
        pages = [_open(browser, serve.url) for _ in range(2)]
        for page in pages:
            _wait_screen(page, "Sweep queue", READY_S)
        tabs = _new_tabs(sweep.marker, known, 2)
        serve.process.kill()  # SIGKILL to serve alone: nothing of it runs any more to end its tabs
        serve.process.wait(15)
        assert _gone_within(tabs, TAB_GONE_S) == [], "a tab's process outlived a SIGKILLed serve"
        for page in pages:
            page.context.close()
    finally:
        _end(serve)


def test_ctrl_c_ends_serve_and_every_tab_without_a_traceback(sweep: Sweep, browser: Any) -> None:
    """Ctrl-C in serve's terminal: SIGINT to its whole foreground process group, as the terminal sends it."""
    _wait_engine_started(sweep)
    known = {p.pid for p in _tabs(sweep.marker)}
    serve = _serve(sweep.run_dir, sweep.env, sweep.cwd)
    try:
        page = _open(browser, serve.url)
        _wait_screen(page, "Sweep queue", READY_S)
        tabs = _new_tabs(sweep.marker, known, 1)
        os.killpg(serve.process.pid, signal.SIGINT)
        assert serve.process.wait(15) == 0, serve.text()
        assert _gone_within(tabs, TAB_GONE_S) == [], "a tab's process outlived serve's Ctrl-C"
        page.context.close()
    finally:
        _end(serve)
    time.sleep(0.5)  # the output thread's last lines
    assert "Traceback" not in serve.text() and "KeyboardInterrupt" not in serve.text(), serve.text()


def test_a_tab_whose_view_cannot_start_says_why_in_its_page(sweep: Sweep, browser: Any) -> None:
    """The engine stopped (SIGSTOP) after serve started: the tab's attach times out, and the page says so instead
    of staying blank."""
    _wait_engine_started(sweep)
    serve = _serve(sweep.run_dir, sweep.env, sweep.cwd)
    engine = int(engine_status(sweep.run_dir, timeout=READY_S)["pid"])
    os.kill(engine, signal.SIGSTOP)
    try:
        page = _open(browser, serve.url)
        said = _wait_screen(page, "could not start", READY_S)
        assert "did not answer" in said and "Reload the page" in said, said
        page.context.close()
    finally:
        os.kill(engine, signal.SIGCONT)
        _end(serve)


PASTE = """() => {
  const client = window.__specbench.clients.find(c => c.terminal && c.sendSize);
  client.terminal.paste("x".repeat(200000));
}"""
"""A large paste through the page's terminal (xterm sends it as one input message)."""


def test_a_tab_whose_app_stopped_reading_still_ends_after_its_page_closes(sweep: Sweep, browser: Any) -> None:
    """The tab's app is stopped (SIGSTOP) and the page pastes more than its input pipe holds: serve's write
    stalls, and still the tab's process is gone soon after the page closed (not only when serve ends)."""
    from specbench_tui.tui.web import INPUT_STALL_S

    _wait_engine_started(sweep)
    known = {p.pid for p in _tabs(sweep.marker)}
    serve = _serve(sweep.run_dir, sweep.env, sweep.cwd)
    try:
        page = _open(browser, serve.url)
        _wait_screen(page, "Sweep queue", READY_S)
        (tab,) = _new_tabs(sweep.marker, known, 1)
        tab.suspend()
        page.evaluate(PASTE)
        page.evaluate(PASTE)
        page.context.close()
        assert _gone_within([tab], INPUT_STALL_S + TAB_GONE_S) == [], "a stalled tab outlived its page"
        assert serve.process.poll() is None, "serve ended with its stalled tab"
    finally:
        _end(serve)
