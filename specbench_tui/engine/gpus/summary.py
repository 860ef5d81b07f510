"""A configuration's GPUs over its measured window: the summary stored with its results."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass

from specbench_tui.engine.gpus.backend import GpuSample


@dataclass(frozen=True)
class GpuSummary:
    """A configuration's GPUs over its measured window, stored with its results (None: no figure)."""

    gpus: tuple[int, ...]
    samples: int
    """How many sampling instants the window saw."""
    duration_s: float | None = None
    peak_mem_mib: float | None = None
    """Highest memory used on any one of the GPUs."""
    peak_mem_total_mib: float | None = None
    """Highest memory used on all of the GPUs together."""
    mean_util_pct: float | None = None
    max_util_pct: float | None = None
    mean_power_w: float | None = None
    """Mean draw per GPU."""
    mean_power_total_w: float | None = None
    """Mean draw of all of the GPUs together."""
    max_temp_c: float | None = None
    node: str | None = None
    """The cluster node of the GPUs (``ServerLaunching.node``); None: this machine (then left out of the JSON)."""

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["gpus"] = list(self.gpus)
        if self.node is None:
            del data["node"]
        return data


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class GpuSummariser:
    """Accumulates samples of some GPUs and summarises them; call :meth:`add` once per sampling instant."""

    def __init__(self, indices: Iterable[int], node: str | None = None) -> None:
        self.indices = tuple(indices)
        self.node = node
        self._wanted = set(self.indices)
        self._instants = 0
        self._first: float | None = None
        self._last: float | None = None
        self._mem: list[float] = []
        self._mem_total: list[float] = []
        self._util: list[float] = []
        self._power: list[float] = []
        self._power_total: list[float] = []
        self._temp: list[float] = []

    @property
    def instants(self) -> int:
        return self._instants

    def add(self, samples: Iterable[GpuSample], at: float | None = None) -> None:
        mine = [s for s in samples if s.index in self._wanted]
        if not mine:
            return
        self._instants += 1
        at = time.monotonic() if at is None else at
        self._first = at if self._first is None else self._first
        self._last = at
        mems = [s.mem_used_mib for s in mine if s.mem_used_mib is not None]
        self._mem.extend(mems)
        if len(mems) == len(mine):
            self._mem_total.append(sum(mems))
        self._util.extend(s.util_pct for s in mine if s.util_pct is not None)
        powers = [s.power_w for s in mine if s.power_w is not None]
        self._power.extend(powers)
        if len(powers) == len(mine):
            self._power_total.append(sum(powers))
        self._temp.extend(s.temp_c for s in mine if s.temp_c is not None)

    def summary(self) -> GpuSummary:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 2)

        duration = self._last - self._first if self._first is not None and self._last is not None else None
        return GpuSummary(
            gpus=self.indices, samples=self._instants, duration_s=rounded(duration),
            peak_mem_mib=max(self._mem, default=None), peak_mem_total_mib=max(self._mem_total, default=None),
            mean_util_pct=rounded(_mean(self._util)), max_util_pct=max(self._util, default=None),
            mean_power_w=rounded(_mean(self._power)), mean_power_total_w=rounded(_mean(self._power_total)),
            max_temp_c=max(self._temp, default=None), node=self.node,
        )


def summarise(series: Iterable[Iterable[GpuSample]], indices: Iterable[int]) -> GpuSummary:
    """Summarise a series of sampling instants restricted to ``indices`` (a pure helper for tests and reports)."""
    summariser = GpuSummariser(indices)
    for at, samples in enumerate(series):
        summariser.add(samples, at=float(at))
    return summariser.summary()
