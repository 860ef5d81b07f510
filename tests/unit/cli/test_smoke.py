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


def test_a_ctrl_c_inside_a_class_body_is_still_a_quiet_interrupt(monkeypatch) -> None:
    """SIGINT landing in a dataclass field's ``__set_name__`` while a module is imported: Python 3.11 wraps the
    handler's exception in a RuntimeError (a CI run of tests/e2e/test_interrupts.py printed that traceback from
    ``validate``); the program still ends with 130 and no traceback. Any other RuntimeError is not swallowed."""
    import pytest

    from specbench_tui import __main__ as program
    from specbench_tui import cli

    class Field:
        def __set_name__(self, owner: type, name: str) -> None:
            raise SystemExit(program.INTERRUPTED)  # what quiet_interrupt raises, at that moment

    def interrupted_import() -> int:
        type("Measured", (), {"speedup": Field()})  # the interpreter calls __set_name__ and wraps what it raises
        return 0

    monkeypatch.setattr(program.signal, "signal", lambda signum, handler: None)  # this test process keeps its own
    monkeypatch.setattr(cli, "main", interrupted_import)
    assert program.run() == program.INTERRUPTED

    def broken() -> int:
        raise RuntimeError("a bug, not an interrupt")

    monkeypatch.setattr(cli, "main", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        program.run()
