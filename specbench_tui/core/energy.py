"""Energy per token: what a measured window's GPUs drew (:class:`EnergyWindow`, recorded with each workload and
load point) turned into joules per output token, per accepted token, and the energy speedup against the matched
baseline (:func:`energy_cells`). Pure: the engine's :mod:`specbench_tui.engine.gpus.energy` reads the counters.

Idle power is subtracted only where it was measured, and the figure says so (``net of idle``); otherwise the
joules are the GPUs' whole draw over the window (``gross``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from specbench_tui.core.records import STATUS_OK, Measurement

SOURCE_COUNTER = "nvml_total_energy"
NO_COUNTER = "no energy counter"
"""What a window without one says (no GPU, a GPU older than Volta, a backend without the counter)."""


@dataclass(frozen=True)
class EnergyWindow:
    """The energy of one measured window over the GPUs a configuration holds."""

    gpus: tuple[int, ...]
    window_s: float
    source: str | None
    """:data:`SOURCE_COUNTER`, or None: no counter (``note`` says so)."""
    joules: tuple[float, ...] = ()
    """Per GPU of ``gpus``, the counter's difference over the window."""
    idle_w: float | None = None
    """The GPUs' idle power (all of them together) measured before the sweep, or None when it was not."""
    note: str | None = None

    @property
    def total_j(self) -> float | None:
        return sum(self.joules) if self.source is not None else None

    @property
    def net_j(self) -> float | None:
        """The window's energy less the idle draw over its length (when the idle power is known)."""
        total = self.total_j
        if total is None or self.idle_w is None:
            return total
        return max(0.0, total - self.idle_w * self.window_s)

    def to_json(self) -> dict[str, object]:
        return {"gpus": list(self.gpus), "window_s": round(self.window_s, 6), "source": self.source,
                "joules": [round(j, 6) for j in self.joules], "idle_w": self.idle_w, "note": self.note}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EnergyWindow | None:
        try:
            return cls(gpus=tuple(int(g) for g in data.get("gpus", ())), window_s=float(data["window_s"]),
                       source=data.get("source"), joules=tuple(float(j) for j in data.get("joules", ())),
                       idle_w=None if data.get("idle_w") is None else float(data["idle_w"]), note=data.get("note"))
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class EnergyCell:
    """One configuration × workload's energy figures."""

    config: str
    workload: str
    joules: float | None
    basis: str
    """``gross`` (the whole draw) or ``net of idle`` (the idle power subtracted), or :data:`NO_COUNTER`."""
    output_tokens: int
    accepted_tokens: int | None
    j_per_output_token: float | None
    j_per_accepted_token: float | None
    energy_speedup: float | None = None
    """The matched baseline's joules per output token over this one's (> 1: fewer joules per token)."""


def accepted_tokens(measurement: Measurement) -> int | None:
    """Draft tokens the target accepted: the server's count where it gives one, else output tokens less the
    verify steps (each step emits one token of its own); None for a request without either."""
    if measurement.correct_drafts is not None:
        return measurement.correct_drafts
    if measurement.completion_tokens is not None and measurement.verify_ct is not None:
        return max(0, measurement.completion_tokens - measurement.verify_ct)
    return None


def energy_cells(windows: Iterable[tuple[str, str, str, EnergyWindow]], measurements: Iterable[Measurement],
                 baselines: Mapping[str, str | None]) -> list[EnergyCell]:
    """Per (config id, config name, workload): the windows' joules over the tokens of its ok measurements, and
    the energy speedup against ``baselines`` (config name -> its matched baseline's name)."""
    joules: dict[tuple[str, str], list[EnergyWindow]] = {}
    names: dict[str, str] = {}
    for config_id, name, workload, window in windows:
        joules.setdefault((config_id, workload), []).append(window)
        names[config_id] = name
    tokens: dict[tuple[str, str], list[int]] = {}
    for m in measurements:
        if m.status == STATUS_OK and (m.config_id, m.workload) in joules:
            out = tokens.setdefault((m.config_id, m.workload), [0, 0, 0])
            out[0] += m.completion_tokens or 0
            accepted = accepted_tokens(m)
            out[1] += accepted or 0
            out[2] += accepted is not None
    cells = [_cell(names[cid], workload, found, tokens.get((cid, workload), [0, 0, 0]))
             for (cid, workload), found in joules.items()]
    per_token = {(c.config, c.workload): c.j_per_output_token for c in cells}
    return [_with_speedup(c, per_token, baselines) for c in cells]


def _cell(name: str, workload: str, windows: list[EnergyWindow], tokens: list[int]) -> EnergyCell:
    output, accepted, counted = tokens
    if any(w.source is None for w in windows) or not windows:
        return EnergyCell(name, workload, None, NO_COUNTER, output, accepted if counted else None, None, None)
    net = all(w.idle_w is not None for w in windows)
    total = sum((w.net_j if net else w.total_j) or 0.0 for w in windows)
    return EnergyCell(name, workload, total, "net of idle" if net else "gross", output,
                      accepted if counted else None, total / output if output else None,
                      total / accepted if counted and accepted else None)


def _with_speedup(cell: EnergyCell, per_token: Mapping[tuple[str, str], float | None],
                  baselines: Mapping[str, str | None]) -> EnergyCell:
    base = baselines.get(cell.config)
    base_j = per_token.get((base, cell.workload)) if base else None
    if base_j is None or cell.j_per_output_token is None or cell.j_per_output_token <= 0:
        return cell
    return EnergyCell(**{**cell.__dict__, "energy_speedup": base_j / cell.j_per_output_token})


def energy_from_run(plan_json: Mapping[str, object] | None, events: Iterable[object],
                    measurements: Iterable[Measurement]) -> list[EnergyCell]:
    """The energy cells of a run: the windows its workload and load-point events carry (a run recorded before
    energy was measured has none, and no cell), over its measurements, with the plan's matched baselines."""
    listed = (plan_json or {}).get("configs")
    configs = [c for c in listed if isinstance(c, Mapping)] if isinstance(listed, list) else []
    names = {str(c.get("id")): str(c.get("name")) for c in configs}
    baselines = {str(c.get("name")): c.get("baseline") for c in configs}
    windows: list[tuple[str, str, str, EnergyWindow]] = []
    for event in events:
        data = getattr(event, "energy", None)
        window = EnergyWindow.from_json(data) if isinstance(data, Mapping) else None
        config_id = getattr(event, "config_id", None)
        if window is not None and isinstance(config_id, str):
            windows.append((config_id, names.get(config_id, config_id), str(getattr(event, "workload", "")),
                            window))
    if not windows:
        return []
    return sorted(energy_cells(windows, measurements, baselines), key=lambda c: (c.workload, c.config))
