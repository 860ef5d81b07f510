"""``[cluster]``: the executor and the Ray head's address, validated with file and line; ``--ray-address``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from narrowing import present

from repo_paths import REPO
from specbench_tui.core.cluster import ClusterSpec, with_address
from specbench_tui.core.errors import SweepError
from specbench_tui.core.sweep.loader import load_sweep, parse_sweep

BASE = """[sweep]
name = "c"

[[configs]]
name = "ar"
algorithm = "autoregressive"

[[workloads]]
kind = "code"
items = ["fibonacci"]
"""


def parse(cluster: str) -> ClusterSpec:
    return parse_sweep(BASE + "\n" + cluster, Path("/tmp/s.toml"), "s.toml").cluster


def issues(cluster: str) -> list[str]:
    with pytest.raises(SweepError) as info:
        parse(cluster)
    return [str(issue) for issue in info.value.issues]


def test_no_cluster_table_is_the_local_executor() -> None:
    spec = parse("")
    assert spec == ClusterSpec() and spec.executor == "local" and not spec.on_ray


@pytest.mark.parametrize("address", ["10.0.0.1:6379", "head-node.lan:6379", "ray://10.0.0.1:10001", "auto",
                                     "[fe80::1]:6379"])
def test_ray_with_an_address(address: str) -> None:
    spec = parse(f'[cluster]\nexecutor = "ray"\naddress = "{address}"\nnode_retries = 3\n')
    assert (spec.executor, spec.address, spec.node_retries, spec.on_ray) == ("ray", address, 3, True)


def test_ray_without_an_address_uses_rays_default() -> None:
    spec = parse('[cluster]\nexecutor = "ray"\n')
    assert spec.on_ray and spec.address is None and spec.node_retries == 2


def test_a_misspelt_executor_names_file_line_and_the_fix() -> None:
    (issue,) = issues('[cluster]\nexecutor = "rya"\n')
    assert issue.startswith("s.toml:13:") and "unknown executor 'rya'" in issue and "ray" in issue


def test_a_bad_address_names_its_line() -> None:
    (issue,) = issues('[cluster]\nexecutor = "ray"\n\naddress = "10.0.0.1"\n')
    assert issue.startswith("s.toml:15:") and "not a Ray address" in issue and "ray start --head" in issue
    (issue,) = issues('[cluster]\nexecutor = "ray"\naddress = "h:99999"\n')
    assert "not between 1 and 65535" in issue


def test_an_address_with_the_local_executor_is_a_mistake() -> None:
    (issue,) = issues('[cluster]\naddress = "10.0.0.1:6379"\n')
    assert issue.startswith("s.toml:13:") and 'add executor = "ray"' in issue


def test_unknown_key_and_bad_retries() -> None:
    found = issues('[cluster]\nexecutor = "ray"\nadress = "x:1"\nnode_retries = -1\n')
    assert any(i.startswith("s.toml:14:") and "unknown key 'adress'" in i and "address" in i for i in found)
    assert any(i.startswith("s.toml:15:") and "node_retries" in i for i in found)
    with pytest.raises(SweepError) as info:
        parse_sweep("cluster = 3\n" + BASE, Path("/tmp/s.toml"), "s.toml")
    (issue,) = info.value.issues
    assert str(issue).startswith("s.toml:1:") and "expected a table" in str(issue)


def test_head_timeout() -> None:
    assert parse('[cluster]\nexecutor = "ray"\n').head_timeout_s == 10.0
    assert parse('[cluster]\nexecutor = "ray"\nhead_timeout_s = 2.5\n').head_timeout_s == 2.5
    (issue,) = issues('[cluster]\nexecutor = "ray"\nhead_timeout_s = 0\n')
    assert issue.startswith("s.toml:14:") and "head_timeout_s" in issue and "positive" in issue
    (issue,) = issues('[cluster]\nexecutor = "ray"\nhead_timeout_s = 900\n')
    assert issue.startswith("s.toml:14:") and "MAX_HEAD_TIMEOUT_S" in issue


def test_ray_address_option_chooses_the_ray_executor() -> None:
    assert with_address(ClusterSpec(), None) == ClusterSpec()
    spec = with_address(ClusterSpec(node_retries=5), "10.1.2.3:6379")
    assert (spec.executor, spec.address, spec.node_retries) == ("ray", "10.1.2.3:6379", 5)
    with pytest.raises(ValueError, match="--ray-address: 'nohost' is not a Ray address"):
        with_address(ClusterSpec(), "nohost")


def test_shipped_sweeps_stay_local() -> None:
    for path in sorted(REPO.joinpath("sweeps").glob("*.toml")):
        assert load_sweep(path).cluster.executor == "local", path


def test_help_and_validate_never_import_ray(tmp_path: Path) -> None:
    """Ray is an optional extra: the CLI, validation (even of a sweep that chooses Ray) and the engine's modules
    load without it."""
    sweep = tmp_path / "s.toml"
    sweep.write_text(BASE + '\n[cluster]\nexecutor = "ray"\naddress = "10.0.0.1:6379"\n')
    probe = (
        "import contextlib, io, sys\n"
        "from specbench_tui import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        cli.main(['--help'])\n    except SystemExit:\n        pass\n"
        "    try:\n        cli.main(['run', '--help'])\n    except SystemExit:\n        pass\n"
        f"    assert cli.main(['validate', {str(sweep)!r}]) == 0\n"
        "import specbench_tui.engine.orchestrator, specbench_tui.application.runner\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ray'))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_run_ray_address_reaches_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from specbench_tui.application.session import RunRequest, give_up_ownership, prepare_run

    sweep = tmp_path / "s.toml"
    sweep.write_text(BASE)
    prepared = prepare_run(RunRequest(sweep=str(sweep), runs_dir=tmp_path / "runs", ray_address="10.0.0.1:6379"))
    assert not isinstance(prepared, int)
    plan, run_dir = prepared
    give_up_ownership(run_dir)
    assert plan.sweep.cluster == ClusterSpec(executor="ray", address="10.0.0.1:6379")
    assert prepare_run(RunRequest(sweep=str(sweep), runs_dir=tmp_path / "runs", ray_address="nohost")) == 2
    assert "--ray-address: 'nohost' is not a Ray address" in capsys.readouterr().err


def test_preflight_names_a_missing_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from specbench_tui.core.cluster import ClusterSpec as Spec
    from specbench_tui.engine import cluster

    assert cluster.cluster_problems(Spec()) == []
    monkeypatch.setattr(cluster, "ray_installed", lambda: False)
    assert cluster.cluster_problems(Spec(executor="ray")) == [cluster.RAY_MISSING]
    assert "pip install 'specbench-tui[ray]'" in cluster.RAY_MISSING


def test_an_unreachable_ray_head_fails_the_pre_flight_at_once(tmp_path: Path) -> None:
    """`specbench run --ray-address` to a head that is not there: a failed pre-flight naming the address and
    what to do, within seconds (Ray itself would retry for minutes), and no run directory left."""
    import time

    from specbench_tui.engine.server import find_free_port

    pytest.importorskip("ray")
    sweep = tmp_path / "s.toml"
    sweep.write_text(BASE)
    port = find_free_port("127.0.0.1", 41000)
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "specbench_tui", "run", str(sweep), "--headless",
                             "--runs-dir", str(tmp_path / "runs"), "--ray-address", f"127.0.0.1:{port}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in result.stdout + result.stderr
    assert "ray start --head" in result.stdout + result.stderr
    assert time.monotonic() - started < 60
    assert not list((tmp_path / "runs").glob("*"))


def test_load_axis_workloads_are_refused_on_ray(tmp_path: Path) -> None:
    from specbench_tui.core.plan import build_plan
    from specbench_tui.engine.cluster import cluster_workload_problems

    text = BASE.replace('items = ["fibonacci"]', 'items = ["fibonacci"]\nconcurrency = [1, 4]')
    plan = build_plan(parse_sweep(text + '\n[cluster]\nexecutor = "ray"\n', Path("/tmp/s.toml"), "s.toml"))
    (problem,) = cluster_workload_problems(plan)
    assert "load axis" in problem and "executor = 'local'" in problem


def test_the_start_notice_says_how_configurations_are_placed() -> None:
    from dataclasses import replace
    from types import SimpleNamespace

    from specbench_tui.engine.cluster import placement_note

    sweep = parse_sweep(BASE, Path("/tmp/s.toml"), "s.toml")
    local = SimpleNamespace(indices=(0, 1))
    cluster = SimpleNamespace(indices=tuple(range(12)), node_sizes=[8, 4])
    assert placement_note(sweep, local) is None  # one at a time on this machine: nothing to say
    assert "disjoint GPUs of the pool [0, 1]" in present(placement_note(replace(sweep, concurrent=True), local))
    on_ray = replace(sweep, cluster=ClusterSpec(executor="ray"))
    assert "set [sweep] concurrent = true" in present(placement_note(on_ray, cluster))
    note = present(placement_note(replace(on_ray, concurrent=True), cluster))
    assert "each on one node of the Ray cluster's 2 GPU nodes (8, 4 GPUs)" in note
