"""Where the shipped sweeps and themes live, whether installed from a wheel or run from a checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """The shipped ``sweeps`` or ``themes`` folder.

    A wheel carries them as ``specbench_tui/_data/<name>``; a checkout or editable install has them at the
    repository's top level, beside the package.
    """
    for candidate in (_PACKAGE / "_data" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    return _PACKAGE.parent / name


def resolve_sweep(argument: str) -> Path:
    """A user path if it exists, else a shipped sweep by file name or stem (``demo`` → ``sweeps/demo.toml``)."""
    given = Path(argument).expanduser()
    if given.exists():
        return given
    shipped = data_dir("sweeps")
    for candidate in (shipped / argument, shipped / f"{argument}.toml", shipped / given.name):
        if candidate.is_file():
            return candidate
    return given


def shipped_sweeps() -> list[Path]:
    return sorted(data_dir("sweeps").glob("*.toml"))
