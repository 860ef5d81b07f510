"""Hostile sweep files (tests/hostile_sweeps.py, plus the earlier corpus in tests/broken_sweeps): each is refused
with exit 2 at its line, without a traceback, within 5 s and 200 MB, and nothing is written.

The messages are checked in-process (fast); time and memory are measured in one child process that holds
an address-space limit (RLIMIT_AS) and forks once per file, so each file is timed and sized on its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hostile_sweeps import write_corpus
from specbench_tui.cli import main
from test_sweep_corpus import FILES as EARLIER_CORPUS
from test_sweep_corpus import expectation

TIME_LIMIT_S = 5.0
"""CPU seconds a file may cost (user + system, of the process that validates it): what a quadratic parse or an
exponential pattern would blow through. CPU time, not wall time, so a busy shared machine cannot fail it."""
WALL_LIMIT_S = 30.0
"""Wall seconds a file may take: a hang that spends no CPU (a wait, a sleep) is caught here."""
MEMORY_LIMIT = 200 << 20


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Path, int, str]]:
    return write_corpus(tmp_path_factory.mktemp("hostile"))


def test_the_corpus_covers_at_least_forty_files(corpus: list[tuple[Path, int, str]]) -> None:
    assert len(corpus) >= 40
    assert len({path.stem for path, _, _ in corpus}) == len(corpus)


def test_each_hostile_file_is_refused_at_its_line(corpus: list[tuple[Path, int, str]], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    failures = []
    for path, line, substring in corpus:
        code = main(["validate", str(path)])
        out, err = capsys.readouterr()
        wanted = [text for text in err.splitlines() if f"{path}:{line}:" in text and substring in text]
        if code != 2 or out or not wanted or "Traceback" in err:
            failures.append(f"{path.name}: exit {code}, wanted line {line} with {substring!r}, got:\n{err[:800]}")
    assert not failures, "\n\n".join(failures)
    assert list(tmp_path.iterdir()) == [], "validate must write nothing"


def test_run_refuses_each_hostile_file_before_any_run_directory(corpus: list[tuple[Path, int, str]],
                                                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    codes = {}
    for path, line, _ in corpus:
        codes[path.name] = main(["run", "--headless", str(path), "--runs-dir", str(tmp_path / "runs")])
        err = capsys.readouterr().err
        assert f"{path}:{line}:" in err and "Traceback" not in err, err[:800]
    assert set(codes.values()) == {2}, codes
    assert list(tmp_path.iterdir()) == [], "no run directory (nor runs folder) may be created"


_CHILD = textwrap.dedent('''
    import io, json, os, resource, sys, time
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from specbench_tui.cli import main
    results = []
    for path in sys.argv[2:]:
        read, write = os.pipe()
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            os.dup2(write, 2)
            os.dup2(write, 1)
            try:
                code = main(["validate", path])
            except BaseException as exc:
                import traceback
                traceback.print_exc()
                code = 99
            sys.stdout.flush(); sys.stderr.flush()
            os._exit(code)
        os.close(write)
        chunks = []
        while True:
            data = os.read(read, 65536)
            if not data:
                break
            chunks.append(data)
        os.close(read)
        _, status, usage = os.wait4(pid, 0)
        results.append({"path": path, "seconds": time.monotonic() - started, "status": status,
                        "cpu_seconds": usage.ru_utime + usage.ru_stime,
                        "code": os.waitstatus_to_exitcode(status), "maxrss_kb": usage.ru_maxrss,
                        "output": b"".join(chunks).decode("utf-8", "replace")[-2000:]})
    print(json.dumps(results))
''')


def test_each_file_takes_under_5_s_and_200_mb_and_writes_nothing(corpus: list[tuple[Path, int, str]],
                                                                 tmp_path: Path) -> None:
    paths = [str(path) for path, _, _ in corpus] + [str(path) for path in EARLIER_CORPUS]
    expected = {str(path): line for path, line, _ in corpus}
    expected.update({str(path): expectation(path)[0] for path in EARLIER_CORPUS})
    result = subprocess.run([sys.executable, "-c", _CHILD, str(MEMORY_LIMIT), *paths], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    failures = []
    for item in json.loads(result.stdout):
        name = Path(item["path"]).name
        if item["code"] != 2 or "Traceback" in item["output"] or "MemoryError" in item["output"]:
            failures.append(f"{name}: exit {item['code']}\n{item['output']}")
        elif f"{item['path']}:{expected[item['path']]}:" not in item["output"]:
            failures.append(f"{name}: no issue at line {expected[item['path']]}\n{item['output']}")
        if item["cpu_seconds"] > TIME_LIMIT_S:
            failures.append(f"{name}: took {item['cpu_seconds']:.1f} s of CPU")
        if item["seconds"] > WALL_LIMIT_S:
            failures.append(f"{name}: took {item['seconds']:.1f} s")
        if item["maxrss_kb"] * 1024 > MEMORY_LIMIT:
            failures.append(f"{name}: used {item['maxrss_kb'] // 1024} MB")
    assert not failures, "\n\n".join(failures)
    assert list(tmp_path.iterdir()) == [], "validate must write nothing (no run directory)"
