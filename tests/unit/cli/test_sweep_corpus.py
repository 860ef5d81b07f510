"""Every broken sweep in tests/broken_sweeps/ fails validation with exit 2, at the right line, saying why.

Each file's first line states what is expected: ``# expect: line N: substring``. The test checks that one
reported issue names the file and line N and contains the substring, that the exit code is 2, and that
nothing was written (no runs/ directory appears in the working directory).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from repo_paths import TESTS
from specbench_tui.cli import main

CORPUS = TESTS / "broken_sweeps"
FILES = sorted(CORPUS.glob("*.toml"))
_EXPECT = re.compile(r"# expect: line (\d+): (.+)")


def expectation(path: Path) -> tuple[int, str]:
    """(line, substring) from the file's first line."""
    first = path.read_bytes().split(b"\n", 1)[0].decode("ascii")
    match = _EXPECT.fullmatch(first.strip())
    assert match, f"{path.name}: first line must be '# expect: line N: substring', got {first!r}"
    return int(match.group(1)), match.group(2)


def test_corpus_is_large_and_distinct() -> None:
    assert len(FILES) >= 30
    substrings = [expectation(path)[1] for path in FILES]
    assert len(set(substrings)) >= 30, "each broken file should test a different message"


def _matching_issue(stderr: str, shown: str, line: int, substring: str) -> str | None:
    for text in stderr.splitlines():
        if f"{shown}:{line}:" in text and substring in text:
            return text
    return None


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_broken_sweep_is_rejected_at_its_line(path: Path, capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    line, substring = expectation(path)
    monkeypatch.chdir(tmp_path)
    code = main(["validate", str(path)])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    assert "nothing was launched" in err
    assert _matching_issue(err, str(path), line, substring), (
        f"expected an issue at {path.name}:{line} containing {substring!r}, got:\n{err}")
    assert list(tmp_path.iterdir()) == [], "validate must write nothing"


def test_every_issue_line_names_file_line_and_key() -> None:
    """The shape of an issue: ``FILE:LINE: KEY: message; hint`` (TOML syntax errors have no key)."""
    path = CORPUS / "abbreviated_flag.toml"
    result = subprocess.run([sys.executable, "-m", "specbench_tui", "validate", str(path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0] == f"specbench: {path}: 1 problem; nothing was launched"
    assert lines[1].strip() == (
        f"{path}:16: configs[0].args.tp: --tp is an abbreviation of --tp-size; write the full flag name, "
        "tp-size = ...; an abbreviation breaks when sglang adds a flag")


def test_real_subprocess_writes_nothing(tmp_path: Path) -> None:
    path = CORPUS / "dflash_without_draft_model.toml"
    result = subprocess.run([sys.executable, "-m", "specbench_tui", "validate", str(path)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert f"{path}:17: configs[0].args.speculative-algorithm: --speculative-algorithm DFLASH needs " \
           "--speculative-draft-model-path" in result.stderr
    assert list(tmp_path.iterdir()) == []
