"""Where things are: the shipped sweeps and themes (from a wheel or a checkout), this user's private folder for
state kept outside run directories, and how an interpreter specbench starts finds its code (never in the working
directory)."""

from __future__ import annotations

import json
import os
import site
import stat
import sys
import tempfile
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


# ------------------------------------------------------------------------------------- private state, per user

PRIVATE_DIR_VAR = "SPECBENCH_STATE_DIR"
"""Overrides the private folder below (tests, or a box whose temporary folder is odd); it is verified the same way."""


class PrivateDirError(OSError):
    """A folder that should be this user's alone is not: who owns it, what is wrong and the fix."""


def _owner_name(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (KeyError, ImportError):
        return f"uid {uid}"


def verify_private(path: Path) -> Path:
    """``path`` as a directory of this user's alone, created (mode 0700) when missing, made 0700 when others could
    only read it; PrivateDirError when it is a symbolic link, not a directory, someone else's, or writable by
    others. Never follows a link at ``path``."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise PrivateDirError(f"specbench: cannot create the private folder {path}: {exc.strerror or exc}; set "
                              f"{PRIVATE_DIR_VAR} to a folder of yours (mode 0700)") from exc
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise PrivateDirError(f"specbench: cannot read the private folder {path}: {exc.strerror or exc}") from exc
    fix = (f"remove it (sudo rm -r {path}, after looking at what is in it) or set {PRIVATE_DIR_VAR} or "
           f"XDG_RUNTIME_DIR to a folder of yours with mode 0700")
    if stat.S_ISLNK(info.st_mode):
        raise PrivateDirError(f"specbench: {path} is a symbolic link, not this user's private folder "
                              f"(someone may have planted it); {fix}")
    if not stat.S_ISDIR(info.st_mode):
        raise PrivateDirError(f"specbench: {path} is not a folder; {fix}")
    if info.st_uid != os.getuid():
        raise PrivateDirError(f"specbench: {path} belongs to {_owner_name(info.st_uid)}, not to you "
                              f"({_owner_name(os.getuid())}): its files cannot be trusted; {fix}")
    if info.st_mode & 0o077 and not info.st_mode & 0o022:  # readable by others, never writable: made private
        _make_private(path)
    elif info.st_mode & 0o077:
        raise PrivateDirError(f"specbench: {path} is writable by other users (mode {stat.S_IMODE(info.st_mode):04o}): "
                              f"files in it may have been planted; make it private with chmod 700 {path} "
                              f"(after looking at what is in it), or set {PRIVATE_DIR_VAR} to another folder")
    return path


def _make_private(path: Path) -> None:
    """Mode 0700 on this user's own folder ``path`` that others could read but never write (nothing can have
    been planted in it; an earlier specbench made ``$XDG_RUNTIME_DIR/specbench`` 0755), through a descriptor."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def private_dir(*parts: str) -> Path:
    """This user's private folder for specbench's state outside run directories (the engines registry, leases
    of a user who cannot share them), or a sub-folder of it: ``$SPECBENCH_STATE_DIR``, else
    ``$XDG_RUNTIME_DIR/specbench`` (where the runtime folder is this user's, mode 0700, as systemd makes it),
    else ``<tmp>/specbench-<uid>``. Every level is verified by :func:`verify_private` (PrivateDirError)."""
    configured = os.environ.get(PRIVATE_DIR_VAR)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if configured:
        base = verify_private(Path(configured))
    elif runtime and _runtime_usable(Path(runtime)):
        base = verify_private(Path(runtime) / "specbench")
    else:
        base = verify_private(Path(tempfile.gettempdir()) / f"specbench-{os.getuid()}")
    for part in parts:
        base = verify_private(base / part)
    return base


def _runtime_usable(path: Path) -> bool:
    """Whether ``$XDG_RUNTIME_DIR`` is a folder of this user's alone (su and sudo may leave another user's)."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o077


# --------------------------------------------------------------------------- interpreters started by specbench

_BOOTSTRAP = (
    "import json, runpy, site, sys\n"
    "spec = json.loads(sys.argv[1])\n"
    "for folder in spec['sitedirs']:\n"
    "    site.addsitedir(folder)\n"
    "sys.path[:] = list(dict.fromkeys([*spec['path'], *sys.path]))\n"
    "module = sys.argv[2]\n"
    "sys.argv[:] = [module, *sys.argv[3:]]\n"
    "runpy._run_module_as_main(module)\n"
)
"""What ``python -m`` does (``runpy._run_module_as_main``, argv[0] the module's file), after putting back the
import path of the process that started it, less the working directory, before the isolated interpreter's
own (the standard library and site-packages, with the folders its ``.pth`` files add: an editable install's
checkout is found there even when it is the working directory)."""


def import_path(cwd: str | None = None) -> list[str]:
    """This process's ``sys.path`` as absolute folders, without the working directory (``''``, or the folder
    itself as ``python -m`` puts it first) nor anything that names it."""
    here = os.path.realpath(cwd or os.getcwd())
    out: list[str] = []
    for entry in sys.path:
        if not entry:
            continue
        absolute = os.path.abspath(entry)
        if os.path.realpath(absolute) == here or absolute in out:
            continue
        out.append(absolute)
    return out


def isolated_python(module: str, *args: str, python: str | None = None) -> list[str]:
    """The argv that runs ``python -m module args`` with no code from the working directory or the user's site
    folder: ``-I`` (isolated mode: neither the working directory nor the user site on ``sys.path``, no
    ``PYTHON*`` variable read; Python 3.4 and later, 3.10 included, unlike ``-P``) and a bootstrap that puts
    back this process's own import path (:func:`import_path`: an editable install, ``PYTHONPATH`` folders and
    the user site where this process had them, so that plugin engines still import), then runs the module the
    way ``-m`` does. For the engine process, the keeper and a browser tab's attach process; ``python``
    defaults to this interpreter (its path must be the same interpreter as this one, as the import path is)."""
    path = import_path()
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    sitedirs = [user_site] if user_site and user_site in path else []
    spec = json.dumps({"path": path, "sitedirs": sitedirs})
    return [python or sys.executable, *_runtime_flags(), "-I", "-c", _BOOTSTRAP, spec, module, *args]


def _runtime_flags() -> list[str]:
    """This interpreter's own options as flags (``-W`` warning filters, ``-X`` options, ``-B``, ``-O``), the way
    :mod:`multiprocessing` passes them on (isolated mode keeps the child from reading ``PYTHON*`` variables)."""
    import subprocess

    flags: list[str] = list(getattr(subprocess, "_args_from_interpreter_flags", list)())
    return [flag for flag in flags if flag not in ("-I", "-E", "-s", "-P", "-S")]


def isolated_script(script: Path | str, *args: str, python: str | None = None) -> list[str]:
    """The argv that runs a self-contained script (stdlib only, like the keeper) in isolated mode: ``-I``
    keeps the script's own folder, the working directory and the user site off ``sys.path``."""
    return [python or sys.executable, "-I", str(script), *args]
