"""A load point checks its concurrency against the open-file limit (issue 49, point 4): the soft limit is raised
to the hard one where allowed, else the point is refused with the numbers and the fix; a request that fails
outside the client's own handling is recorded per request, never a traceback."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from repo_paths import TESTS
from specbench_tui.core.records import Measurement
from specbench_tui.engine.loadrun import run_point
from specbench_tui.engine.workloads import Labels



def _python(code: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, cwd=TESTS,
                          timeout=timeout_s, check=False)


def test_a_concurrency_past_the_hard_limit_is_refused_with_the_numbers_and_the_fix() -> None:
    result = _python("""
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        from specbench_tui.engine.loadrun import open_files_refusal
        print(open_files_refusal(64))
        print(open_files_refusal(4096))
    """)
    assert result.returncode == 0, result.stderr
    fine, refused = result.stdout.splitlines()
    assert fine == "None"
    assert "concurrency 4,096" in refused and "may open 1,024" in refused and "ulimit -n" in refused, refused


def test_the_soft_limit_is_raised_to_what_the_point_needs() -> None:
    result = _python("""
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard < 8192:
            print("skip", hard)
            raise SystemExit
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        from specbench_tui.engine.loadrun import open_files_refusal
        print(open_files_refusal(4096), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    """)
    assert result.returncode == 0, result.stderr
    if result.stdout.startswith("skip"):
        pytest.skip(f"the hard open-file limit is {result.stdout.split()[1]}")
    refusal, soft = result.stdout.split()
    assert refusal == "None" and int(soft) >= 4096, result.stdout


def test_a_request_failing_outside_the_client_is_recorded_not_raised() -> None:
    class Workload:
        def items(self) -> list[str]:
            return ["a", "b"]

        async def run(self, item: str, repeat: int, session: object, labels: Labels) -> Measurement:
            await asyncio.sleep(0)
            raise OSError(24, "Too many open files")

    records: list[Measurement] = []
    labels = Labels("c1", "ar", "w")
    run = asyncio.run(run_point(Workload(), None, labels, "c8", 1, 16, 1, records.append, set()))  # type: ignore[arg-type]
    assert run.sent == 16 and run.errors == 16 and len(records) == 16
    assert all(r.status == "error" and "Too many open files" in (r.error or "") for r in records)


@pytest.mark.e2e
def test_concurrency_4096_under_ulimit_1024_is_refused_before_it_starts(tmp_path: Path) -> None:
    script = f"""
        import asyncio, json, resource, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024))
        sys.path.insert(0, {str(TESTS)!r})
        from engine_helpers import plan_for, run_plan, write_sweep
        from sweep_builder import dumps, sim_profile, sim_sweep
        from pathlib import Path
        tmp = Path({str(tmp_path)!r})
        sweep = sim_sweep("fds", configs=[{{"name": "ar", "algorithm": "autoregressive"}}],
                          workloads=[{{"name": "load", "kind": "code", "items": ["fibonacci"], "max_new_tokens": 4,
                                      "concurrency": [2, 4096], "waves": 1}}],
                          sweep={{"warmup": 0}}, engine={{"stall_timeout_s": 30}})
        path = write_sweep(tmp, dumps(sweep).replace('"{{port}}"', "{{port}}"), dumps(sim_profile()))
        outcome, events, run_dir, _ = asyncio.run(run_plan(plan_for(path), tmp / "runs", timeout_s=240))
        print(run_dir.path)
    """
    result = _python(script, timeout_s=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "never retrieved" not in result.stderr, result.stderr[-3000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    small = [r for r in records if r.get("load") == "c2"]
    big = [r for r in records if r.get("load") == "c4096"]
    assert small and all(r["status"] == "ok" for r in small), small[:2]
    assert len(big) == 4096 and all(r["error_kind"] == "open_files" for r in big), big[:2]
    assert "ulimit -n" in big[0]["error"] and "may open 1,024" in big[0]["error"]
