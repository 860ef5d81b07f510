"""A planted fold checkpoint whose compressed body is a zlib bomb (issue 49, point 8) is refused as it inflates,
within INFLATED_LIMIT, never a MemoryError traceback: the run is folded from its files instead."""

from __future__ import annotations

import hashlib
import marshal
import os
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from specbench_tui.core.events import Notice, SweepStarted
from specbench_tui.paths import PRIVATE_DIR_VAR
from specbench_tui.rundir import checkpoint
from specbench_tui.rundir.checkpoint import attach_fold, checkpoint_path, restore, wait_for_writes
from specbench_tui.rundir.store import RunDir


@pytest.fixture(autouse=True)
def private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(PRIVATE_DIR_VAR, str(tmp_path / "state"))
    monkeypatch.setattr(checkpoint, "MIN_BYTES", 1)
    monkeypatch.setattr(checkpoint, "INFLATED_LIMIT", 4 << 20)  # the same rule at a size a test can afford
    yield tmp_path / "state"
    wait_for_writes()


def _plant(path: Path, body: bytes) -> None:
    digest = hashlib.blake2b(body, digest_size=checkpoint._DIGEST).digest()
    path.write_bytes(checkpoint.MAGIC + digest + body)
    os.chmod(path, 0o600)


def _run(tmp_path: Path) -> Path:
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    run.append_event(SweepStarted(sweep="s", run_dir=str(run.path), total_configs=1))
    run.close()
    return run.path


def test_a_zlib_bomb_body_is_refused_as_it_inflates(tmp_path: Path) -> None:
    run = _run(tmp_path)
    attach_fold(run)
    wait_for_writes()
    path = checkpoint_path(run)
    assert path is not None and path.is_file()
    bomb = zlib.compress(b"\0" * (64 << 20), 9)  # 64 KB that inflate to 64 MB, past the (test's) limit
    assert len(bomb) < 1 << 20
    _plant(path, bomb)
    assert restore(run) is None
    tracemalloc.start()
    try:
        with pytest.raises(zlib.error, match="INFLATED_LIMIT"):
            checkpoint._Inflater()(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"{peak:,} bytes held while refusing it"
    assert [type(e).__name__ for e in attach_fold(run).events] == ["SweepStarted"]


def test_bomb_chunks_are_refused_together(tmp_path: Path) -> None:
    run = _run(tmp_path)
    attach_fold(run)
    wait_for_writes()
    path = checkpoint_path(run)
    assert path is not None
    doc = checkpoint._load(path)
    assert doc is not None
    rows = checkpoint._rows([Notice(level="info", text=f"{i:06d}" + "x" * 1000) for i in range(1000)])
    doc["chunks"] = [zlib.compress(marshal.dumps(rows), 9)] * 8  # ~1 MB each inflated: 8 MB in all
    _plant(path, zlib.compress(marshal.dumps(dict(doc)), 1))
    assert restore(run) is None
