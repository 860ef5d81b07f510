"""The one rule every reader of measurements folds by: per key (config id, workload, item, repeat, load point),
the last recorded wins, and the key keeps the place of its first record.

A retried request (``--retry-crashed``, ``r``) records its key again: the new record replaces the error and the
key counts once. :class:`~specbench_tui.core.ledger.Ledger` applies the rule one measurement at a time
(:meth:`~specbench_tui.core.ledger.Ledger.add`); everything that folds a whole list (the store's reader, the
analysis) calls :func:`last_per_key`.
"""

from __future__ import annotations

from collections.abc import Iterable

from specbench_tui.core.records import Measurement, MeasurementKey


def replace(latest: dict[MeasurementKey, Measurement], measurement: Measurement) -> Measurement | None:
    """Fold one measurement into ``latest``; the one it replaced (same key), if any."""
    old = latest.pop(measurement.key, None)
    latest[measurement.key] = measurement
    return old


def last_per_key(measurements: Iterable[Measurement]) -> list[Measurement]:
    """One measurement per key, the last recorded."""
    latest: dict[MeasurementKey, Measurement] = {}
    for measurement in measurements:
        replace(latest, measurement)
    return list(latest.values())
