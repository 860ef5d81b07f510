"""'The last record per key wins' is written once (core/fold.py) and every fold of measurements uses it."""

from __future__ import annotations

import re

from repo_paths import REPO
from specbench_tui.core.fold import last_per_key
from specbench_tui.core.ledger import Ledger
from specbench_tui.core.records import Measurement

PACKAGE = REPO / "specbench_tui"
SECOND_COPY = re.compile(r"\.pop\(\w*\.key, None\)")
"""How a hand-written copy of the rule reads (``latest.pop(measurement.key, None)``)."""


def _m(item: str, status: str) -> Measurement:
    return Measurement(config_id="c", config="c", workload="code", item=item, repeat=1, status=status)


def test_the_last_record_of_a_key_wins_in_its_first_place() -> None:
    folded = last_per_key([_m("a", "error"), _m("b", "ok"), _m("a", "ok")])
    assert [(m.item, m.status) for m in folded] == [("b", "ok"), ("a", "ok")]
    ledger = Ledger()
    for m in [_m("a", "error"), _m("b", "ok"), _m("a", "ok")]:
        ledger.add(m)
    assert list(ledger.measurements.values()) == folded
    assert (ledger.counts.ok, ledger.counts.errors) == (2, 0)


def test_no_module_writes_the_rule_again() -> None:
    copies = [f"{path.relative_to(PACKAGE)}:{n}" for path in sorted(PACKAGE.rglob("*.py"))
              if path.name != "fold.py"
              for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if SECOND_COPY.search(line)]
    assert not copies, f"fold measurements with specbench_tui.core.fold instead of a copy of its rule: {copies}"
    assert SECOND_COPY.search("        latest.pop(measurement.key, None)")
