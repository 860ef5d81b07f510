"""The CLI answers and the shipped sweeps validate."""

import subprocess
import sys

from specbench_tui.cli import main
from specbench_tui.paths import shipped_sweeps


def test_shipped_sweeps_validate(capsys):
    sweeps = shipped_sweeps()
    assert {p.name for p in sweeps} >= {"qwen-ddtree-sm120.toml", "eagle3.toml"}
    for path in sweeps:
        assert main(["validate", str(path)]) == 0, capsys.readouterr().err


def test_help_imports_nothing_heavy():
    code = (
        "import sys; from specbench_tui import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('textual', 'torch', 'triton', 'httpx', 'sglang') if m in sys.modules]\n"
        "print(heavy); assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
