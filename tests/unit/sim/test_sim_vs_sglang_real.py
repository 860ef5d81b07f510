"""The simulator held to SGLang 0.5.23's real server (issue 50).

tests/data/sglang_real/capture.json is what the real server on CPU says (its start-up sequence, the ``/server_info``
keys the product reads, ``/v1/models``, ``/flush_cache`` idle and busy, every ``/metrics`` family with its labels, the
crash lines); tests/real_servers/test_sglang_real.py checks a live real server against it. Here the simulator is captured the
same way and every difference must be one that tests/data/sglang_real/sim_differences.json explains; an explained
difference that is gone fails too, so the file stays the list of what is left. Needs no SGLang: the simulator
starts in seconds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from sglang_real import RawServer, capture

from repo_paths import TESTS
from specbench_tui.core.engines.sglang import SGLANG_SIGNATURES

DATA = TESTS / "data" / "sglang_real"


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> dict[str, Any]:
    server = RawServer(None, tmp_path_factory.mktemp("sim-capture"))
    try:
        server.wait_ready(120)
        return capture(server)
    finally:
        server.stop()


def differences(sim: dict[str, Any], real: dict[str, Any]) -> dict[str, Any]:
    """The simulator's capture against the real one, in sim_differences.json's shape."""
    found: dict[str, Any] = {
        "startup": {"sim_only": sorted(set(sim["startup"]) - set(real["startup"])),
                    "real_only": sorted(set(real["startup"]) - set(sim["startup"]))},
        "values": [],
        "metrics": {"sim_only": sorted(set(sim["metrics"]) - set(real["metrics"])),
                    "real_only": sorted(set(real["metrics"]) - set(sim["metrics"])),
                    "labels": sorted(name for name in set(sim["metrics"]) & set(real["metrics"])
                                     if sim["metrics"][name] != real["metrics"][name])},
    }
    shared = [line for line in sim["startup"] if line in real["startup"]]
    if shared != [line for line in real["startup"] if line in sim["startup"]]:
        found["values"].append("startup order")
    for key in ("server_info_keys", "internal_state_keys", "models_max_model_len", "flush_idle", "flush_busy"):
        if sim[key] != real[key]:
            found["values"].append(key)
    found["values"] += [f"server_info.{key}" for key in real["server_info"]
                        if sim["server_info"].get(key) != real["server_info"][key]]
    found["values"].sort()
    return found


def test_every_difference_from_the_real_server_is_explained(sim):
    real = json.loads((DATA / "capture.json").read_text())
    explained = json.loads((DATA / "sim_differences.json").read_text())
    found = differences(sim, real)
    expected = {
        "startup": {side: sorted(explained["startup"][side]) for side in ("sim_only", "real_only")},
        "values": sorted(explained["values"]),
        "metrics": {side: sorted(explained["metrics"][side]) for side in ("sim_only", "real_only", "labels")},
    }
    assert found == expected, (
        "the simulator and SGLang's real server differ otherwise than tests/data/sglang_real/sim_differences.json "
        f"explains:\nfound     {json.dumps(found, indent=1)}\nexplained {json.dumps(expected, indent=1)}")


def test_the_simulator_prints_the_real_crash_lines(tmp_path):
    """The real NGRAM crash (capture.json ``crash_sequence``, a crash in the server's own warm-up request): a
    simulator told to crash in its warm-up prints the same announcing lines in the same order, and the product's
    signatures name each real line. The exception line itself is the one difference, by nature: the simulator's
    is a CUDA error, the CPU server's an ``AttributeError`` in ``torch_native``."""
    real = json.loads((DATA / "capture.json").read_text())
    sequence = real["crash_sequence"]
    names = {line: {s.name for s in SGLANG_SIGNATURES if s.pattern.search(line)} for line in sequence}
    assert "scheduler_exception" in names[sequence[0]], names
    assert names[sequence[1]] == {"python_exception"}, names
    assert "sigquit_from_child" in names[sequence[2]], names
    (tmp_path / "crash.toml").write_text('[[crash]]\nwhen = "warmup"\n')
    server = RawServer(None, tmp_path / "server", env={"SPECBENCH_SIM_PROFILE": str(tmp_path / "crash.toml")})
    try:
        server.proc.wait(120)
    finally:
        server.stop()
    text = server.text()
    at = 0
    for line in (sequence[0], sequence[2], sequence[3]):
        assert line in text[at:], (line, text[-3000:])
        at = text.index(line, at)
    assert "CUDA error: an illegal instruction was encountered" in text
