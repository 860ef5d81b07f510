"""The ``sgl_kernel`` stand-in (tools/sgl_kernel_cpu, a test fixture that lets SGLang's real server run on CPU)
against the Triton kernels with the same role in SGLang 0.5.23's own files, run by Triton's interpreter: each of
its ten functions must give exactly what SGLang's kernel gives on random inputs (tools/sgl_kernel_cpu/check_against_triton.py)."""

from __future__ import annotations

import subprocess

import pytest
from sglang_kernel_check_names import CHECK_NAMES
from sglang_real import sglang_paths
from repo_paths import REPO

pytestmark = [pytest.mark.sglang_real]



@pytest.fixture(scope="module")
def sglang() -> dict[str, str]:
    return sglang_paths()


def test_every_standin_function_is_checked():
    """Every public function of the stand-in has its check (a new one cannot go unchecked)."""
    source = (REPO / "tools/sgl_kernel_cpu/sgl_kernel/__init__.py").read_text()
    functions = {line.split("(")[0][4:] for line in source.splitlines() if line.startswith("def ")
                 and not line.startswith("def _")}
    spec = (REPO / "tools/sgl_kernel_cpu/sgl_kernel/speculative.py").read_text()
    functions |= {line.split("(")[0][4:] for line in spec.splitlines() if line.startswith("def ")}
    assert {name.removesuffix("_cpu") for name in functions} == set(CHECK_NAMES)


def test_standin_matches_sglangs_triton_kernels(sglang):
    done = subprocess.run([sglang["SGLANG_PYTHON"], str(REPO / "tools/sgl_kernel_cpu/check_against_triton.py")], cwd=REPO,
                          capture_output=True, text=True, timeout=600, check=False)
    report = done.stdout + done.stderr[-3000:]
    assert done.returncode == 0, report
    assert sorted(line[3:] for line in done.stdout.splitlines() if line.startswith("ok ")) == sorted(CHECK_NAMES), \
        report
