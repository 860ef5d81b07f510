"""GPU faults: NVIDIA's Xid error codes (the driver's critical-error events, also logged by the kernel as
``NVRM: Xid (PCI:...): 79, ...``) named as a crash cause: "Xid 79 on GPU 3 (fell off the bus)"."""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
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

RESET_XIDS: Final = frozenset({48, 62, 64, 74, 79, 92, 94, 95, 119, 120, 154})
"""Xids that say the GPU itself is faulted and needs a reset (or a reboot) before it is trusted again, from
NVIDIA's Xid catalogue: 48 (double-bit ECC), 62 (micro-controller halt), 64 (page retirement / row remapping
failed), 74 (NVLink), 79 (fell off the bus), 92/94/95 (ECC rate, contained, uncontained), 119/120 (GSP timeout,
GSP error), 154 (the driver's recovery action changed: reset or reboot required). A configuration that such an
Xid crashed leaves its GPU fenced off for the rest of the sweep (and on resume). Every other Xid, the
application-level ones above all (13 graphics engine exception, 31 memory page fault, 43 GPU stopped processing:
the program's own fault, which the driver cleans up), crashes the configuration and leaves the GPU in the pool."""


def needs_reset(code: int) -> bool:
    """Whether an Xid that crashed a configuration fences its GPU off (:data:`RESET_XIDS`)."""
    return code in RESET_XIDS


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


@dataclass(frozen=True)
class GpuFault:
    """An Xid a GPU reported while no configuration held it (between configurations): the GPU is placed on no
    more in this sweep."""

    gpu: int
    code: int
    seen_at: float | None = None
    """When it was seen (Unix time); None: unknown."""
    config: str | None = None
    """The configuration it crashed (None: it came while no configuration held the GPU)."""

    def reason(self) -> str:
        """``GPU 3: Xid 79 at 12:04 (fell off the bus) — not placed``."""
        at = f" at {time.strftime('%H:%M', time.localtime(self.seen_at))}" if self.seen_at is not None else ""
        meaning = XID_MEANINGS.get(self.code, "see NVIDIA's Xid catalogue")
        crashed = f", crashed {self.config}" if self.config else ""
        return f"GPU {self.gpu}: Xid {self.code}{at} ({meaning}{crashed}) \N{EM DASH} not placed"


FENCE_FILE: Final = "gpu_faults.json"
"""The run directory's record of its fenced GPUs (kept across a resume; deleting it places on them again)."""

FAULT_FIX: Final = ("reset the GPU or reboot (nvidia-smi -q shows its state), delete gpu_faults.json in the run "
                    "directory, then specbench run --resume RUN --retry-crashed")
"""What a person does about a GPU fenced off by a fault."""


def fence_notice(fault: GpuFault, healthy: Iterable[int]) -> str:
    """The pre-flight notice when a fault fences a GPU off: the reason, what the sweep goes on with, the fix."""
    left = ",".join(str(gpu) for gpu in healthy)
    goes_on = f"the sweep goes on with GPU {left}" if left else "no GPU is left to place on"
    return f"pre-flight: {fault.reason()}; {goes_on} ({FAULT_FIX})"


def replaced_reason(faults: Iterable[GpuFault], gpus: Iterable[int]) -> str:
    """A configuration that the faults moved: ``placed on GPU 0,1,2,4: GPU 3: Xid 79 at 12:04 (...) — not placed``."""
    return f"placed on GPU {','.join(str(gpu) for gpu in gpus)}: " + "; ".join(f.reason() for f in faults)


def refused_reason(faults: Iterable[GpuFault], needed: int, healthy: int) -> str:
    """A configuration that cannot be placed once the faults fenced their GPUs off, and what to do."""
    reasons = "; ".join(f.reason() for f in faults)
    return (f"{reasons}: needs {needed} GPU{'s' if needed != 1 else ''}, {healthy} left without a fault "
            f"({FAULT_FIX})")
