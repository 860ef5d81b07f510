"""GPU faults: NVIDIA's Xid error codes (the driver's critical-error events, also logged by the kernel as
``NVRM: Xid (PCI:...): 79, ...``) named as a crash cause: "Xid 79 on GPU 3 (fell off the bus)"."""

from __future__ import annotations

import re
from typing import Final

XID_MEANINGS: Final = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware error",
    43: "GPU stopped processing",
    45: "preemptive cleanup after an earlier error",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping",
    64: "ECC page retirement or row remapping failed",
    68: "video processor exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "fell off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    154: "GPU recovery action changed",
}
"""What each common Xid means, in a few words (NVIDIA's Xid catalogue)."""

KERNEL_XID: Final = re.compile(r"NVRM: Xid \(PCI:(?P<bus>[0-9A-Fa-f:.]+)\): (?P<code>\d+)")
"""The kernel log's Xid line (``dmesg``), the PCI bus id of the GPU and the code."""


def xid_cause(code: int, gpu: int) -> str:
    """The crash cause an Xid on ``gpu`` gives its configuration."""
    meaning = XID_MEANINGS.get(code)
    return f"Xid {code} on GPU {gpu}" + (f" ({meaning})" if meaning else " (see NVIDIA's Xid catalogue)")


def kernel_xids(text: str) -> list[tuple[str, int]]:
    """The (PCI bus id, Xid) of every ``NVRM: Xid`` line of a kernel log (``dmesg``'s output)."""
    return [(m.group("bus"), int(m.group("code"))) for m in KERNEL_XID.finditer(text)]


def kernel_xid_cause(bus: str, code: int, gpus_by_bus: dict[str, int]) -> str:
    """A kernel log's Xid as a cause: on the GPU whose PCI bus id it names, when known."""
    gpu = next((index for known, index in gpus_by_bus.items() if _bus_device(known) == _bus_device(bus)), None)
    if gpu is not None:
        return xid_cause(code, gpu)
    meaning = XID_MEANINGS.get(code)
    return f"Xid {code} on the GPU at PCI {bus}" + (f" ({meaning})" if meaning else "")


def _bus_device(pci: str) -> str:
    """``BB:DD`` of a PCI address, whatever its domain's width and function (NVML: ``00000000:38:00.0``, the
    kernel: ``0000:38:00``)."""
    parts = pci.lower().split(":")
    return ":".join(part.split(".")[0] for part in parts[-2:])
