"""Histories that open at once (issue 32): an attaching view's fold checkpoint, and the fold's fast decoding.

- A fold that read enough is kept in this user's private folder; the next attach starts from it and reads only
  what was written since, and ends with what a fold from nothing makes.
- It is believed only while it describes the files: an events file rewritten in place, truncated or replaced, a
  checkpoint corrupt, cut short, planted (a link, writable by others) or for another directory, or one that read
  past where the caller must stop, is ignored, and the files are folded from nothing.
- A record of a layout the fold has seen is still refused when its float is not finite or its state unknown.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from specbench_tui.core.events import (ConfigFinished, ConfigState, ConfigStateChanged, LoadPointFinished, Notice,
                                       ServerLaunching, SweepFinished, SweepStarted)
from specbench_tui.core.records import Measurement
from specbench_tui.engine.attached import history_of
from specbench_tui.paths import PRIVATE_DIR_VAR
from specbench_tui.rundir import EVENTS, RESULTS
from specbench_tui.rundir import checkpoint
from specbench_tui.rundir.checkpoint import attach_fold, checkpoint_path, restore, wait_for_writes
from specbench_tui.rundir.history import RunFold
from specbench_tui.rundir.store import RunDir


@pytest.fixture(autouse=True)
def private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(PRIVATE_DIR_VAR, str(tmp_path / "state"))
    monkeypatch.setattr(checkpoint, "MIN_BYTES", 1)  # every fold is kept
    yield tmp_path / "state"
    wait_for_writes()  # a test's checkpoint is written into its own folder, never into the next test's


def _measurement(config_id: str, repeat: int, status: str = "ok") -> Measurement:
    return Measurement(config_id=config_id, config=config_id, workload="code", item="fibonacci", repeat=repeat,
                       status=status, completion_tokens=10, decode_tps=100.0 + repeat)


def _write(run: RunDir, configs: range, ended: bool = False) -> None:
    for number in configs:
        config = f"c{number}"
        run.append_event(ConfigStateChanged(config_id=config, name=config, state=ConfigState.RUNNING))
        run.append_event(ServerLaunching(config_id=config, name=config, argv=("--x", str(number)), gpus=(0,),
                                         port=1, pid=2, log_path="l"))
        run.append_event(LoadPointFinished(config_id=config, workload="code", load="c=1", repeat=1, wall_s=1.5,
                                           server_log={"lines": 2}))
        run.append_measurement(_measurement(config, 1, "error"))
        run.append_measurement(_measurement(config, 1))  # the same key: the last wins
        run.append_event(ConfigFinished(config_id=config, name=config, state=ConfigState.DONE))
    if ended:
        run.append_event(SweepFinished(state="completed"))


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    run.append_event(SweepStarted(sweep="s", run_dir=str(run.path), total_configs=20))
    _write(run, range(10))
    run.close()
    return run.path


def _cold(run_dir: Path) -> tuple[list[Measurement], list[object]]:
    fold = RunFold(run_dir, ledger_events=False).advance()
    return fold.measurements(), list(fold.events)


def _kept(run_dir: Path) -> RunFold:
    attach_fold(run_dir)
    wait_for_writes()
    path = checkpoint_path(run_dir)
    assert path is not None and path.is_file()
    restored = restore(run_dir)
    assert restored is not None
    return restored


def test_a_reattach_starts_from_the_checkpoint_and_reads_only_what_came_since(run_dir: Path) -> None:
    restored = _kept(run_dir)
    assert (restored.measurements(), restored.events) == _cold(run_dir)
    assert restored.events_tail.offset == (run_dir / EVENTS).stat().st_size
    assert isinstance(restored.events[1], ConfigStateChanged) and restored.events[1].state is ConfigState.RUNNING
    run = RunDir(run_dir)
    _write(run, range(10, 20), ended=True)  # the run went on
    run.close()
    read: list[int] = []
    real = checkpoint.RunFold.advance

    def advance(self: RunFold, events_upto: int | None = None, results_upto: int | None = None) -> RunFold:
        read.append(self.events_tail.offset)
        return real(self, events_upto, results_upto)

    checkpoint.RunFold.advance = advance  # type: ignore[method-assign]
    try:
        measurements, events = history_of(run_dir, None, None)
    finally:
        checkpoint.RunFold.advance = real  # type: ignore[method-assign]
    assert read == [restored.events_tail.offset]  # from where the checkpoint stopped, not from 0
    assert (measurements, events) == _cold(run_dir)
    assert len(measurements) == 20 and {m.status for m in measurements} == {"ok"}
    assert isinstance(events[-1], SweepFinished)


def _rewrite_same_length(path: Path) -> None:
    data = path.read_bytes()
    stat = path.stat()
    with path.open("r+b") as handle:  # the same inode and length, other bytes
        handle.write(data.replace(b'"c0"', b'"x0"'))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))


def _rewrite_same_length_same_time(path: Path) -> None:
    data = path.read_bytes()
    stat = path.stat()
    with path.open("r+b") as handle:
        handle.write(data.replace(b'"c0"', b'"x0"') + b'{"type":"Notice","ts":9.0,"level":"info","text":"later"}\n')
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2].rsplit(b"\n", 1)[0] + b"\n")


def _replace(path: Path) -> None:
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data.replace(b'"c0"', b'"x0"'))


@pytest.mark.parametrize("change", [_rewrite_same_length, _rewrite_same_length_same_time, _truncate, _replace])
def test_an_events_file_rewritten_truncated_or_replaced_is_folded_from_nothing(run_dir: Path, change: object) -> None:
    _kept(run_dir)
    change(run_dir / EVENTS)  # type: ignore[operator]
    assert restore(run_dir) is None
    assert history_of(run_dir, None, None) == _cold(run_dir)


def test_a_results_file_replaced_is_folded_from_nothing(run_dir: Path) -> None:
    _kept(run_dir)
    _replace(run_dir / RESULTS)
    assert restore(run_dir) is None


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-100])


def _loosen(path: Path) -> None:
    path.chmod(0o666)


def _link(path: Path) -> None:
    target = path.with_suffix(".real")
    path.rename(target)
    path.symlink_to(target)


def _garbage(path: Path) -> None:
    data = path.read_bytes()
    body = b"\x00not marshal"
    import hashlib
    path.write_bytes(data[:len(checkpoint.MAGIC)] + hashlib.blake2b(body, digest_size=32).digest() + body)


@pytest.mark.parametrize("spoil", [_flip, _cut, _loosen, _link, _garbage])
def test_a_checkpoint_corrupt_cut_or_planted_is_never_believed(run_dir: Path, spoil: object) -> None:
    _kept(run_dir)
    path = checkpoint_path(run_dir)
    assert path is not None
    spoil(path)  # type: ignore[operator]
    assert restore(run_dir) is None
    assert history_of(run_dir, None, None) == _cold(run_dir)


def test_a_checkpoint_of_another_directory_or_past_the_stream_is_not_used(run_dir: Path, tmp_path: Path) -> None:
    restored = _kept(run_dir)
    assert restore(run_dir, events_upto=restored.events_tail.offset - 1) is None  # a client's stream starts before
    assert restore(run_dir, results_upto=restored.results_tail.offset - 1) is None
    moved = tmp_path / "elsewhere"
    path = checkpoint_path(run_dir)
    assert path is not None
    run_dir.rename(moved)
    run_dir.mkdir()  # another directory at the same path
    (moved / EVENTS).rename(run_dir / EVENTS)
    (moved / RESULTS).rename(run_dir / RESULTS)
    assert restore(run_dir) is None


def test_only_the_checkpoints_used_last_are_kept(tmp_path: Path) -> None:
    paths = []
    for number in range(checkpoint.KEEP + 2):
        run = RunDir(tmp_path / f"run{number}")
        run.path.mkdir()
        _write(run, range(2))
        run.close()
        attach_fold(run.path)
        wait_for_writes()
        path = checkpoint_path(run.path)
        assert path is not None
        paths.append(path)
        os.utime(path, ns=(number * 10**9, number * 10**9))
    assert [p.exists() for p in paths] == [False] * 2 + [True] * checkpoint.KEEP


def test_a_known_layout_is_still_refused_when_its_float_or_state_is_wrong(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    for number in range(3):  # the layout is learnt from these
        run.append_event(ConfigStateChanged(config_id="a", name="a", state=ConfigState.RUNNING, ts=float(number)))
        run.append_event(Notice(level="info", text=f"n{number}", ts=float(number)))
    run.close()
    with (tmp_path / EVENTS).open("ab") as handle:
        handle.write(b'{"type":"ConfigStateChanged","ts":5.0,"config_id":"a","name":"a","state":"exploded",'
                     b'"reason":null}\n')
        handle.write(b'{"type":"Notice","ts":NaN,"level":"info","text":"x","config_id":null}\n')
        handle.write(b'{"type":"Notice","ts":1e999,"level":"info","text":"y","config_id":null}\n')
    fold = RunFold(tmp_path).advance()
    assert len(fold.events) == 6 and fold.report.counts == {EVENTS: 3}


def test_a_checkpoint_whose_body_is_not_the_one_its_digest_names_is_not_decoded(run_dir: Path) -> None:
    import marshal
    import zlib

    _kept(run_dir)
    path = checkpoint_path(run_dir)
    assert path is not None
    raw = path.read_bytes()
    head = raw[:len(checkpoint.MAGIC) + 32]
    doc = checkpoint._load(path)
    assert doc is not None
    del doc["events"][-2:]  # a sound document, of other events than the files hold
    path.write_bytes(head + zlib.compress(marshal.dumps(dict(doc))))
    assert restore(run_dir) is None


def test_a_long_events_file_changed_between_its_samples_is_caught_by_its_time(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    for number in range(4000):  # about 600 kB: most bytes lie between the sampled places
        run.append_event(Notice(level="info", text=f"notice {number:05d} " + "x" * 100, ts=float(number)))
    run.close()
    _kept(tmp_path)
    path = tmp_path / EVENTS
    data = path.read_bytes()
    at = data.index(b"notice 00100 ")
    stat = path.stat()
    with path.open("r+b") as handle:
        handle.seek(at)
        handle.write(b"notice 99999 ")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert restore(tmp_path) is None
    assert any(e.text.startswith("notice 99999") for e in history_of(tmp_path, None, None)[1]
               if isinstance(e, Notice))
