"""The documentation: the site builds with ``mkdocs build --strict`` (a broken link, anchor or snippet, a page
outside the navigation fail it, and a test below proves they do), no link leaves the repository, the README stays
a newcomer's page with the two commands that do all set-up, and every file, test and module the pages name
exists."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from markdown.extensions.toc import slugify  # type: ignore[import-untyped]  # mkdocs's own heading ids
from repo_paths import REPO

ROOT = REPO
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MAX_README_LINES = 150

DEMO_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/specbench run sweeps/demo.toml"
TEST_COMMAND = "bash tools/setup_test_deps.sh && .venv/bin/python -m pytest -q"

EXAMPLE_PATHS = {"sweeps/my.toml", "sweeps/my-campaign.toml", "tools/server/server.cpp"}
"""Paths the pages name that are not ours to have: a reader's own sweep, a file of llama.cpp's source tree."""



def _tool_module(name: str) -> ModuleType:
    """A script of tools/ imported by its path (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


remote_references = _tool_module("docs_screenshot").remote_references


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _prose(text: str) -> str:
    """The Markdown without its fenced code blocks and inline code (where a URL is an example, not a link)."""
    text = re.sub(r"^[ \t]*(```|~~~).*?^[ \t]*\1", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _mkdocs(config: Path, site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # Material's notice about its successor, on every build
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)


def _need_material() -> None:
    """The test extra installs MkDocs Material, so its absence is a failure, never a skip."""
    if importlib.util.find_spec("material") is None or importlib.util.find_spec("mkdocs") is None:
        pytest.fail("MkDocs Material is not installed: pip install -e '.[test]' (or bash tools/setup_test_deps.sh)")


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    _need_material()
    result = _mkdocs(ROOT / "mkdocs.yml", tmp_path / "site", ROOT)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    assert (tmp_path / "site" / "index.html").exists()
    home = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "Skip running" in home, "the home page lost the README's key table (the snippet)"


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The same build on a copy with one of each fault: every one of them is reported and the build fails."""
    _need_material()
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copy(README, tmp_path / "README.md")
    page = tmp_path / "docs" / "running.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n[a](no-such-page.md) [b](load.md#no-such-heading) "
                    "[c](../README.md)\n", encoding="utf-8")
    (tmp_path / "docs" / "orphan.md").write_text("# Not in the navigation\n", encoding="utf-8")
    result = _mkdocs(tmp_path / "mkdocs.yml", tmp_path / "site", tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode != 0, f"the build passed with broken links:\n{output}"
    for fault in ("no-such-page.md", "#no-such-heading", "../README.md", "orphan.md"):
        assert fault in output, f"the build did not report {fault}:\n{output}"


def test_no_link_leaves_the_repository() -> None:
    found = []
    for page in _pages():
        prose = _prose(page.read_text(encoding="utf-8"))
        for line in prose.splitlines():
            if re.search(r"(?i)\b(?:https?|ftp|mailto):|\]\(//|(?:href|src)=[\"']//", line):
                found.append(f"{page.relative_to(ROOT)}: {line.strip()[:120]}")
    for image in sorted(DOCS.rglob("*.svg")):
        found += [f"{image.relative_to(ROOT)}: fetches {url}" for url in remote_references(image.read_text("utf-8"))]
    assert not found, "links that leave the repository (say it in words, or point at a page here):\n" + "\n".join(found)


def test_the_link_check_sees_a_link() -> None:
    assert re.search(r"(?i)\b(?:https?|ftp|mailto):", _prose("see [Ray](https://docs.ray.io) for more"))
    assert not re.search(r"(?i)\b(?:https?|ftp|mailto):", _prose("the log says `Uvicorn running on http://h:1`"))


def _anchors(page: Path) -> set[str]:
    """The heading ids Python-Markdown's toc gives a page (the slug mkdocs links to)."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*#*$", re.sub(r"^```.*?^```", "", page.read_text("utf-8"), flags=re.S | re.M),
                          flags=re.M)
    return {slugify(re.sub(r"[`*]", "", heading), "-") for heading in headings}


def test_the_readmes_links_resolve() -> None:
    """The README is not part of the site (GitHub shows it): its links are checked here, anchors included."""
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", _prose(README.read_text(encoding="utf-8"))):
        path, _, anchor = target.partition("#")
        file = (ROOT / path).resolve()
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in _anchors(file):
            broken.append(f"{target}: no heading with that anchor in {path}")
    assert not broken, "README.md links:\n" + "\n".join(broken)


def test_the_readme_is_a_newcomers_page() -> None:
    text = README.read_text(encoding="utf-8")
    lines = len(text.splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES}: the rest goes in docs/)"
    for command in (DEMO_COMMAND, TEST_COMMAND):
        assert f"```bash\n{command}\n```" in text, f"README.md: the quick start's command changed: {command}"
    assert "docs/screenshot.svg" in text and (DOCS / "screenshot.svg").exists()


def test_the_readmes_figures_are_the_last_recorded_bench_run() -> None:
    """The README's figures are the headline rows of docs/bench-latest.md, which ``bench/run_all.py --record``
    wrote from one run of every bench: a figure edited by hand in either, or a headline row dropped, fails here."""
    spec = importlib.util.spec_from_file_location("run_all", ROOT / "bench" / "run_all.py")
    assert spec is not None and spec.loader is not None
    run_all = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("run_all", run_all)  # its dataclasses look their module up there
    spec.loader.exec_module(run_all)
    page = (DOCS / "bench-latest.md").read_text(encoding="utf-8")
    rows = run_all.recorded_rows(page)
    assert len(rows) >= 30, f"docs/bench-latest.md: {len(rows)} rows; a whole run of bench/run_all.py has more"
    assert {"crash", "watch", "key", "runs_10k", "resume_latest", "attach_64mb", "vLLM"} <= {
        word for row in rows for word in ("crash", "watch", "key", "runs_10k", "resume_latest", "attach_64mb", "vLLM")
        if word in row["figure"]}, "docs/bench-latest.md: a bench of the issue's table is missing"
    block = run_all.headline_block(rows, run_all.recorded_when(page))
    readme = README.read_text(encoding="utf-8")
    assert block in readme, ("README.md: its figures differ from docs/bench-latest.md's headline rows; "
                             "run .venv/bin/python bench/run_all.py --record docs/bench-latest.md")


def test_ci_runs_the_readmes_test_command_which_installs_the_docs_builder() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert TEST_COMMAND in ci.splitlines(), ".ci/run must run the README's test command verbatim"
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10
        import tomli as tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    test_extra = [re.split(r"[<>=!~;\[ ]", requirement)[0] for requirement in project["optional-dependencies"]["test"]]
    assert "mkdocs-material" in test_extra, "pyproject.toml: the test extra must install mkdocs-material"
    assert "-e '.[test" in (ROOT / "tools" / "setup_test_deps.sh").read_text(encoding="utf-8")


def test_every_file_test_and_module_a_page_names_exists() -> None:
    """Paths (``tests/…``, ``bench/…``, ``core/metrics.py``…) and tests (``test_x.py::test_y``, ``test_y``) named
    in the pages: a rename that leaves a page behind fails here."""
    sources = {path.name: path.read_text(encoding="utf-8") for path in (ROOT / "tests").rglob("test_*.py")}
    defined = set(re.findall(r"def (test_\w+)", "\n".join(sources.values())))
    stale = []
    for page in _pages():
        text = page.read_text(encoding="utf-8")
        name = page.relative_to(ROOT)
        for path in re.findall(r"(?<![\w/.-])((?:tests|bench|tools|sweeps|specbench_tui|themes|docs)/[\w./-]*\w)", text):
            if "*" not in path and path not in EXAMPLE_PATHS and not (ROOT / path).exists():
                stale.append(f"{name}: {path}")
        for path in re.findall(r"(?<![\w/.-])((?:core|engine|tui|application|report|sim)/[\w/-]*\.(?:py|tcss|tsv))", text):
            if not (ROOT / "specbench_tui" / path).exists():
                stale.append(f"{name}: {path} (under specbench_tui/)")
        for file, test in re.findall(r"(test_\w+\.py)::(test_\w+)", text):
            if f"def {test}" not in sources.get(file, ""):
                stale.append(f"{name}: {file}::{test}")
        for test in re.findall(r"`(test_\w+)`", text):
            if test not in defined:
                stale.append(f"{name}: {test}")
    assert not stale, "the pages name what is not there (renamed or removed?):\n" + "\n".join(stale)


def test_the_readme_and_the_testing_page_give_the_same_times() -> None:
    """The README and docs/testing.md once said 13 and 6 minutes for the same suite (issue 46): the README's set-up
    and suite times are the testing page's."""
    readme = " ".join(README.read_text(encoding="utf-8").split())
    testing = " ".join((DOCS / "testing.md").read_text(encoding="utf-8").split())
    setup = re.search(r"about (\d+) minutes the first time", readme)
    suite = re.search(r"the suite then took ([\d-]+) minutes", readme)
    assert setup and suite, "README.md: the quick start no longer says how long the set-up and the suite take"
    assert f"about {setup.group(1)} minutes the first time" in testing, "docs/testing.md: another set-up time"
    assert f"the whole suite then took {suite.group(1)} minutes" in testing, "docs/testing.md: another suite time"


def test_no_page_says_a_prompt_too_long_is_never_sent() -> None:
    """A long-context size too big for the context is cut to fit and sent (recorded as clamped): no page may say
    such a prompt is never sent (issue 46)."""
    wrong = re.compile(r"cannot fit(?: the context)? is never sent", re.IGNORECASE)
    said = [page.name for page in _pages() if wrong.search(" ".join(page.read_text().split()))]
    assert not said, f"these pages say a prompt that cannot fit is never sent: {said}"


def _svg_rows(svg: str) -> list[str]:
    """The screen's text rows of a Rich SVG screenshot (its ``<text>`` pieces joined by row, left to right)."""
    import html

    rows: dict[float, list[tuple[float, str]]] = {}
    for match in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>', svg):
        rows.setdefault(float(match.group(2)), []).append((float(match.group(1)), html.unescape(match.group(3))))
    return ["".join(text for _, text in sorted(pieces)).replace("\xa0", " ") for _, pieces in sorted(rows.items())]


def test_the_readme_screenshot_is_the_demos_own_screen() -> None:
    """docs/screenshot.svg is the app at the end of sweeps/demo.toml (tools/docs_screenshot.py runs the demo and
    takes it), not a test's stand-in sweep (issue 46): the header names the demo and every configuration of the
    demo's plan is in its queue, the skipped ones with the demo's own reasons."""
    from engine_helpers import plan_for

    screen = "\n".join(_svg_rows((DOCS / "screenshot.svg").read_text(encoding="utf-8")))
    plan = plan_for(ROOT / "sweeps" / "demo.toml")
    assert f"specbench {plan.sweep.name}" in screen, screen[:400]
    missing = [c.name for c in plan.configs if c.name not in screen]
    assert not missing, f"docs/screenshot.svg is not the demo's screen: no {missing} in it"
    reasons = {c.skip_reason for c in plan.configs if c.skip_reason}
    assert reasons and all(reason in screen for reason in reasons), reasons
