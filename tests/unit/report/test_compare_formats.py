"""``specbench compare --format md|html`` (issue 46, point 6): the same content as the text, as Markdown tables that a
Markdown parser reads as tables and as one well-formed, self-contained HTML page (checked with the standard
library's ``html.parser``)."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from repo_paths import TESTS
from specbench_tui.cli import main
from specbench_tui.report.compare import Comparison, Listing, compare_doc, compare_runs, render_compare
from specbench_tui.report.load import load_run
from specbench_tui.report.tables import Table

RUN_A = TESTS / "data" / "report_run_a"
RUN_B = TESTS / "data" / "report_run_b"
VOID = {"meta", "br", "img", "hr", "link", "input", "wbr", "col", "source"}


@pytest.fixture(scope="module")
def comparison() -> Comparison:
    return compare_runs(load_run(RUN_A), load_run(RUN_B))


class Page(HTMLParser):
    """Every table's header and data cells, every text, and whether each tag closes in the order it opened."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.tables: list[list[list[str]]] = []
        self.text: list[str] = []
        self.tags: set[str] = set()
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag in VOID:
            return
        self.stack.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("th", "td"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()
        if tag in ("th", "td") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    page.close()
    return page


def _grids(comparison: Comparison) -> list[list[list[str]]]:
    """Each table of the comparison as its header row and data rows, as the text report prints them (a cell's
    padding, ``+2.1%  `` beside ``+9.9% *``, is no content)."""
    return [[[cell.strip() for cell in row] for row in (b.headers, *b.rows)]
            for b in compare_doc(comparison).blocks if isinstance(b, Table)]


def _listings(comparison: Comparison) -> list[Listing]:
    return [b for b in compare_doc(comparison).blocks if isinstance(b, Listing)]


def test_markdown_tables_parse_as_tables_with_the_texts_cells(comparison: Comparison) -> None:
    markdown = render_compare(comparison, "md")
    page = _parse(MarkdownIt("commonmark").enable("table").render(markdown))
    assert page.problems == []
    assert page.tables == _grids(comparison)  # every header, row and cell, unescaped back to what txt prints
    assert len(page.tables[0]) == len(comparison.rows) + 1
    text = "".join(page.text)
    for listing in _listings(comparison):
        assert listing.title in text and all(item in text for item in listing.items), listing.title
    assert "* significant" in text  # the table's note reads as written, not as a bullet
    assert "ul" in page.tags and "h1" in page.tags


def test_markdown_text_is_not_read_as_markup() -> None:
    from specbench_tui.report.compare import _md_text

    html = MarkdownIt("commonmark").render(_md_text("a*b* _x_ <b>c</b> [l](http://x) cuda_illegal_instruction"))
    assert html == "<p>a*b* _x_ &lt;b&gt;c&lt;/b&gt; [l](http://x) cuda_illegal_instruction</p>\n"


def test_html_is_one_well_formed_self_contained_page_with_the_texts_content(comparison: Comparison) -> None:
    html = render_compare(comparison, "html")
    page = _parse(html)
    assert page.problems == [] and page.stack == [], (page.problems, page.stack)
    assert html.startswith("<!DOCTYPE html>") and {"html", "head", "style", "body", "h1"} <= page.tags
    assert not {"script", "link", "iframe"} & page.tags and "@import" not in html
    assert page.tables == _grids(comparison)
    text = "".join(page.text)
    doc = compare_doc(comparison)
    assert doc.title in text and all(line in text for line in doc.summary)
    for listing in _listings(comparison):
        assert listing.title in text and all(item in text for item in listing.items), listing.title


def test_txt_stays_the_default_and_an_unknown_format_is_refused(comparison: Comparison) -> None:
    assert render_compare(comparison) == render_compare(comparison, "txt")
    with pytest.raises(ValueError, match="unknown format 'pdf'"):
        render_compare(comparison, "pdf")


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_the_cli_writes_each_format(fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    comparison: Comparison) -> None:
    out = tmp_path / f"compare.{fmt}"
    assert main(["compare", str(RUN_A), str(RUN_B), "--format", fmt, "-o", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == render_compare(comparison, fmt)
    assert f"wrote {out}" in capsys.readouterr().err
