"""tools/gpu_probe.py --faults --record: what the device check saw, as JSON: here (no GPU) that it saw none and
why; on the fake box the energy counter of every GPU and the injected Xid with the time placement would show."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PROBE = ROOT / "tools" / "gpu_probe.py"


def _probe(record: Path, *args: str) -> tuple[str, dict]:
    done = subprocess.run([sys.executable, str(PROBE), *args, "--faults", "--watch-s", "0.1", "--record", str(record)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    seen: dict = json.loads(record.read_text())
    return done.stdout, seen


def test_the_record_says_no_gpu_here_and_what_the_fake_box_gave(tmp_path: Path) -> None:
    out, seen = _probe(tmp_path / "here.json")
    assert "faults: no GPU (" in out
    assert seen["gpu_seen"] is False and seen["hint"] and seen["energy"] is None and seen["xid_events"] == []
    assert seen["xid_registration"].startswith(("not registered: ", "the backend gives no Xid events"))
    assert seen["kernel_log_watch"].startswith(("readable", "the kernel log is not readable ("))
    out, seen = _probe(tmp_path / "fake.json", "--fake")
    assert seen["gpu_seen"] is True and set(seen["energy"]) == {str(i) for i in range(8)}
    assert all(cell["end_mj"] > cell["start_mj"] and cell["mean_w"] > 0 for cell in seen["energy"].values())
    assert seen["xid_registration"] == "the fake box: Xid 79 injected on GPU 0"
    assert "energy counter: GPU 0: " in out and "Xid events: Xid 79 on GPU 0 (fell off the bus)" in out
    [event] = seen["xid_events"]
    assert (event["gpu"], event["xid"]) == (0, 79)
    assert re.fullmatch(r"GPU 0: Xid 79 at \d\d:\d\d \(fell off the bus\) \N{EM DASH} not placed", event["as_placement_says"])
