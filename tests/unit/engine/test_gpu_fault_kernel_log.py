"""The kernel log as a GPU fault source (issue 48): ``dmesg``'s ``NVRM: Xid`` lines that came after the watch
began, tied to their GPU by PCI bus id; an unreadable log said once and never raised; which Xids fence a GPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specbench_tui.core.gpu_faults import RESET_XIDS, needs_reset
from specbench_tui.engine.gpus.faults import FaultLedger, KernelLog

LINE = "[ {t}] NVRM: Xid (PCI:0000:{bus}:00): {code}, pid=1234, name=python3, Ch 00000008\n"


class _Box:
    """A backend with no NVML events of its own: only the kernel log speaks."""


def _dmesg(log: Path) -> tuple[str, ...]:
    return ("sh", "-c", f"cat {log}")


def test_dmesg_lines_after_the_watch_began_become_faults_of_their_gpu(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("specbench_tui.engine.gpus.faults.DMESG_EVERY_S", 0.0)
    log = tmp_path / "dmesg.txt"
    log.write_text(LINE.format(t="1.0", bus="38", code=79))  # before the sweep: no fault of it
    box = FaultLedger(_Box())
    box.watch_kernel_log(KernelLog(kmsg=str(tmp_path / "no-kmsg"), dmesg=_dmesg(log)), {"00000000:38:00.0": 1})
    assert box.take_faults((0, 1)) == []
    log.write_text(log.read_text() + LINE.format(t="2.0", bus="38", code=48) + LINE.format(t="3.0", bus="99", code=79))
    [fault] = box.take_faults((0, 1))
    assert (fault.gpu, fault.code) == (1, 48)  # the unknown bus is no GPU of ours
    assert box.take_faults((0, 1)) == []  # taken once
    assert box.kernel_log_problem() is None


def test_an_unreadable_kernel_log_is_said_once_and_never_raises(tmp_path: Path) -> None:
    box = FaultLedger(_Box())
    box.watch_kernel_log(KernelLog(kmsg=str(tmp_path / "no-kmsg"), dmesg=("false",)), {})
    assert box.take_faults((0,)) == [] and box.take_faults((0,)) == []
    problem = box.kernel_log_problem()
    assert problem is not None and "no-kmsg" in problem and "false: exit 1" in problem
    assert box.kernel_log_problem() is None  # once


def test_kmsg_read_from_its_end(tmp_path: Path) -> None:
    fifo_like = tmp_path / "kmsg"
    fifo_like.write_text("6,1,1,-;NVRM: Xid (PCI:0000:38:00): 79, before\n")
    log = KernelLog(kmsg=str(fifo_like))
    assert log.read() == ""  # opened at its end: what came before is not read
    with fifo_like.open("a") as handle:
        handle.write("4,2,2,-;NVRM: Xid (PCI:0000:38:00): 79, pid=1\n")
    assert "NVRM: Xid (PCI:0000:38:00): 79" in log.read()
    log.close()


def _descriptors_on(path: Path) -> list[str]:
    """This process's open file descriptors on ``path``."""
    return [fd for fd in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{fd}") == str(path)]


def test_a_ledger_that_stops_watching_closes_its_kernel_log(tmp_path: Path) -> None:
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("")
    box = FaultLedger(_Box())
    box.watch_kernel_log(KernelLog(kmsg=str(kmsg)), {"00000000:38:00.0": 1})
    assert box.take_faults((1,)) == [] and box.can_watch()
    assert len(_descriptors_on(kmsg)) == 1  # read from its end, kept open
    box.stop_watching()
    assert _descriptors_on(kmsg) == [] and not box.can_watch()


def test_the_reset_table_fences_hardware_faults_not_the_programs_own() -> None:
    assert all(needs_reset(code) for code in (79, 48, 74, 92, 94, 95, 119, 120))
    assert not any(needs_reset(code) for code in (13, 31, 43))
    assert RESET_XIDS.isdisjoint({13, 31, 43, 45})
