"""What a newcomer reads in the reports (issue 46): an HTML table header never breaks inside a word ("T P",
"budge t"): it wraps between its words, each kept whole, and a table wider than the page scrolls sideways (the
rendered layout is checked in Chromium by tests/real_servers/test_report_html.py); the text report prints a section
only when it has content (a crossover run no longer opens with an empty list of crashes)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from test_report_html import load_run_fixture

from repo_paths import TESTS
from specbench_tui.core.analysis import analyse
from specbench_tui.report.compare import compare_runs, render_compare
from specbench_tui.report.formats import render_txt
from specbench_tui.report.html import CSS, render_html
from specbench_tui.report.load import LoadedRun, load_run

RUN_A = TESTS / "data" / "report_run_a"
RUN_B = TESTS / "data" / "report_run_b"
PROBLEMS = "Crashed, failed and skipped configurations"


def _rules(css: str) -> dict[str, dict[str, str]]:
    """Selector -> its declarations (a selector list gives each selector the block)."""
    rules: dict[str, dict[str, str]] = {}
    for selectors, body in re.findall(r"([^{}]+)\{([^}]*)\}", css):
        declarations = {k.strip(): v.strip() for k, v in (d.split(":", 1) for d in body.split(";") if ":" in d)}
        for selector in selectors.split(","):
            rules.setdefault(selector.strip(), {}).update(declarations)
    return rules


def test_table_headers_keep_their_words_whole_and_a_wide_table_scrolls() -> None:
    rules = _rules(CSS)
    th = rules["th"]
    assert th.get("word-break") == "normal" and th.get("overflow-wrap") == "normal" and th.get("hyphens") == "none"
    assert rules["th .w"].get("white-space") == "nowrap"  # each word of a header, "runner-up" with its hyphen
    assert rules["td .w"].get("white-space") == "nowrap"  # a cell's hyphenated word: "ddtree-b16-tp1"
    assert rules["div.scroll"].get("overflow-x") == "auto"
    for selector in ("th", "td", "table"):  # nothing lets a header or a cell break anywhere to fit the page
        assert rules[selector].get("overflow-wrap") != "anywhere" and rules[selector].get("word-break") not in (
            "break-all", "break-word"), selector


def test_each_header_word_and_each_hyphenated_cell_word_is_kept_whole_in_the_markup(tmp_path: Path) -> None:
    compare = render_compare(compare_runs(load_run(RUN_A), load_run(RUN_B)), "html")
    headers = re.findall(r"<th>(.*?)</th>", compare)
    assert "<th>" + " ".join(f'<span class="w">{w}</span>' for w in ("accept", "len", "A")) + "</th>" in compare
    assert headers and all(re.fullmatch(r'(<span class="w">[^<\s]+</span>( |$))*', h) for h in headers), headers
    assert '<td class="l"><span class="w">dflash-b16-tp1</span></td>' in compare  # a name kept whole
    assert '<td class="r">-</td>' in compare  # a lone dash needs no span


class Tables(HTMLParser):
    """Whether each ``<table>`` sits directly in a ``<div class="scroll">``."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, str]] = []
        self.tables: list[bool] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append(bool(self.stack) and self.stack[-1] == ("div", "scroll"))
        if tag not in ("meta", "img", "br"):
            self.stack.append((tag, dict(attrs).get("class") or ""))

    def handle_endtag(self, tag: str) -> None:
        while self.stack and self.stack.pop()[0] != tag:
            pass


def _wrapped(html: str) -> list[bool]:
    parser = Tables()
    parser.feed(html)
    return parser.tables


def test_every_table_of_the_report_and_of_compare_is_in_a_scrolling_box(tmp_path: Path) -> None:
    configs: list[dict[str, Any]] = [
        {"id": "a0", "name": "ar", "algorithm": "autoregressive", "argv": [], "params": {}, "baseline": None}]
    plan = {"sweep": "empty", "configs": configs, "workloads": [{"name": "w", "kind": "code", "repeats": 1}]}
    report = render_html(LoadedRun(path=tmp_path, env=None, analysis=analyse(plan, [], [])), "")
    compare = render_compare(compare_runs(load_run(RUN_A), load_run(RUN_B)), "html")
    for page in (report, compare):
        tables = _wrapped(page)
        assert tables and all(tables), tables


def test_a_crossover_runs_text_report_opens_with_what_it_measured(tmp_path: Path) -> None:
    run = load_run_fixture(tmp_path)
    assert not run.analysis.problems()
    text = render_txt(run)
    assert PROBLEMS not in text and "(none)" not in text
    head, first = text.split("\n\n", 2)[:2]
    assert head.startswith("specbench report:")
    assert first.startswith("w: where speculation stops paying"), first[:200]
    assert "\n\n\n" not in text  # no blank section between two others


def test_the_list_of_crashes_stays_where_there_are_some() -> None:
    text = render_txt(load_run(RUN_A))
    assert f"\n\n{PROBLEMS}\n" in text and "cuda_illegal_instruction" in text
    assert "\n\n\n" not in text
