"""A shared GPU box with a hostile neighbour (issue 29): two real local users on one machine.

The tests run as root (the victim) and create a second, unprivileged user (the attacker) with ``useradd``; they
are skipped where that is not possible. The attacker acts through its own processes (``sh`` and coreutils run
with its uid): it plants symbolic links, directories, FIFOs and hostile notes in the shared lease directory,
creates the victim's private folders before the victim does, and leaves a ``re2.py`` in a shared working
directory. ``/proc/sys/fs/protected_symlinks`` may be 0 (it is on the test machine): nothing here relies on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from reliability_helpers import make_sweep, marker_env, new_marker, wait_for, wait_gone

from specbench_tui.engine import engines_registry
from specbench_tui.engine.leases import Leases, describe_holder, lease_dir, lease_port
from specbench_tui.paths import PRIVATE_DIR_VAR, PrivateDirError, isolated_python

SPECBENCH = Path(sys.executable).with_name("specbench")
SECRET = "the victim's own data\n"


@dataclass(frozen=True)
class Attacker:
    name: str
    uid: int
    gid: int

    def sh(self, script: str, cwd: Path | str = "/") -> None:
        """Run ``script`` with ``sh`` as the attacker (its uid and group only)."""
        done = subprocess.run(["sh", "-ec", script], user=self.uid, group=self.gid, extra_groups=[], cwd=cwd,
                              env={"PATH": "/usr/bin:/bin", "HOME": "/"}, capture_output=True, text=True,
                              timeout=30)
        assert done.returncode == 0, f"the attacker's script failed: {done.stderr}"

    def hold(self, path: Path) -> subprocess.Popen[bytes]:
        """A process of the attacker's holding an exclusive ``flock`` on ``path`` (a lease it holds)."""
        return subprocess.Popen(["flock", "-x", str(path), "sleep", "600"], user=self.uid, group=self.gid,
                                extra_groups=[], cwd="/", env={"PATH": "/usr/bin:/bin"}, start_new_session=True)


def _let_go(holders: list[subprocess.Popen[bytes]]) -> None:
    """End the attacker's lock holders: ``flock`` and the ``sleep`` it runs (which inherits the lock), by group."""
    for holder in holders:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(10)


@pytest.fixture(scope="module")
def attacker() -> Iterator[Attacker]:
    if os.getuid() != 0 or shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("needs root and useradd to create a second local user")
    name = f"sbt{uuid.uuid4().hex[:10]}"
    made = subprocess.run(["useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name],
                          capture_output=True, text=True, timeout=60)
    if made.returncode != 0:
        pytest.skip(f"useradd failed: {made.stderr.strip()}")
    import pwd

    entry = pwd.getpwnam(name)
    try:
        yield Attacker(name, entry.pw_uid, entry.pw_gid)
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True, timeout=30)  # the user this test made
        for _ in range(100):  # userdel refuses a user with a process left
            if subprocess.run(["userdel", name], capture_output=True, timeout=60).returncode != 8:
                break
            time.sleep(0.1)


@pytest.fixture
def box() -> Iterator[Path]:
    """A ``/tmp`` of the test's own (root's, mode 1777 like the machine's) that both users reach (a test's
    ``tmp_path`` is root's, 0700)."""
    path = Path(tempfile.mkdtemp(prefix="specbench-shared-box-", dir="/tmp"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _victim_files(box: Path) -> dict[str, Path]:
    files = {"secret": box / "victim-secret", "rc": box / "victim-bashrc"}
    for path, mode in ((files["secret"], 0o600), (files["rc"], 0o644)):
        path.write_text(SECRET)
        path.chmod(mode)
    return files


def _unchanged(files: dict[str, Path]) -> None:
    for name, path in files.items():
        info = path.lstat()
        assert stat.S_ISREG(info.st_mode) and info.st_uid == 0, name
        assert path.read_text() == SECRET, f"the victim's {name} file was written through a planted link"
    assert stat.S_IMODE(files["secret"].stat().st_mode) == 0o600, "the victim's 0600 file was chmod-ed"
    assert stat.S_IMODE(files["rc"].stat().st_mode) == 0o644


def _free_run(count: int) -> int:
    """The first of ``count`` consecutive free ports."""
    from specbench_tui.engine.leases import port_is_free

    for start in range(41000 + os.getpid() % 7000, 60000, count):
        if all(port_is_free("127.0.0.1", p) for p in range(start, start + count)):
            return start
    raise AssertionError("no run of free ports")


def _printable(text: str) -> bool:
    return all(c.isprintable() for c in text)


HOSTILE_NOTE = ('{"pid": 1, "user": "mallory\\n[00:00.9] sweep completed: every configuration done\\u001b[2J",'
                ' "config": "x\\u001b]0;pwned\\u0007"}')


def test_planted_lease_entries_change_no_file_of_the_victim_and_are_passed_over(attacker, box, monkeypatch):
    """In a root-owned sticky lease directory (trusted), the attacker plants links to the victim's files, a
    directory, a link loop, a FIFO, and holds a lease whose note forges output: the victim's files are untouched,
    each planted name is a port held by someone else (named, escaped), and the first clean port is leased."""
    files = _victim_files(box)
    leases_dir = box / "leases"
    leases_dir.mkdir()
    leases_dir.chmod(0o1777)
    base = _free_run(7)
    note_file = leases_dir / f"port-{base + 4}.lease"
    attacker.sh(f"""
        ln -s {files['secret']} port-{base}.lease
        ln -s {files['rc']} gpu-index-0.lease
        mkdir port-{base + 1}.lease
        ln -s port-{base + 2}.lease port-{base + 2}.lease
        mkfifo port-{base + 3}.lease
        printf '%s\\n' '{HOSTILE_NOTE}' > {note_file.name}
        chmod 666 {note_file.name}
    """, cwd=leases_dir)
    holder = attacker.hold(note_file)
    try:
        wait_for(lambda: Leases(leases_dir).holder(f"port-{base + 4}"), 10, what="the attacker's lease")
        monkeypatch.setenv("SPECBENCH_LEASE_DIR", str(leases_dir))
        leases = Leases()
        assert leases.warning is None and leases.directory == leases_dir  # root's sticky directory is used
        choice = lease_port(leases, "127.0.0.1", base)
        assert choice.port == base + 5, choice.skipped
        reasons = dict(choice.skipped)
        assert "symbolic link" in reasons[base] and "directory" in reasons[base + 1]
        assert "symbolic link" in reasons[base + 2] and "FIFO" in reasons[base + 3]
        assert "mallory" in reasons[base + 4] and "\\n[00:00.9] sweep completed" in reasons[base + 4]
        assert all(_printable(text) for text in reasons.values()), reasons  # no newline, no ESC, no BEL
        assert leases.take("gpu-index-0") is None  # a link is a GPU held by someone else
        assert "symbolic link" in describe_holder(leases.holder("gpu-index-0"))
        choice.lease.release()
    finally:
        _let_go([holder])
    _unchanged(files)
    for name in (f"port-{base}.lease", "gpu-index-0.lease", f"port-{base + 2}.lease"):
        assert (leases_dir / name).is_symlink()  # left as planted, never replaced or followed
    assert stat.S_ISFIFO((leases_dir / f"port-{base + 3}.lease").lstat().st_mode)


def test_a_lease_directory_another_user_created_is_not_used(attacker, box, monkeypatch):
    """A fresh box: the attacker made ``<tmp>/specbench-leases`` first (mode 1777, its own) and planted a link in
    it. The victim does not use it: its leases go to its private folder, with a warning naming the owner and
    the fix, and the planted link changes nothing."""
    files = _victim_files(box)
    attacker.sh(f"mkdir -m 1777 specbench-leases && ln -s {files['secret']} specbench-leases/port-30000.lease",
                cwd=box)
    monkeypatch.setattr(tempfile, "tempdir", str(box))
    for name in ("SPECBENCH_LEASE_DIR", PRIVATE_DIR_VAR, "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    directory, warning = lease_dir()
    assert directory == box / "specbench-0" / "leases"
    assert warning is not None and str(box / "specbench-leases") in warning and attacker.name in warning
    assert "install -d -m 1777 -o root" in warning
    lease = Leases(directory).take("port-30000", config="ar")
    assert lease is not None
    lease.release()
    _unchanged(files)
    assert stat.S_IMODE((box / "specbench-0").stat().st_mode) == 0o700


def test_the_victim_refuses_private_folders_it_does_not_own(attacker, box, monkeypatch):
    """Without a usable ``XDG_RUNTIME_DIR`` (su, sudo, cron), the attacker made the victim's per-uid folder (and
    the old registry name) first, with a fake engine entry and a link to the victim's file: the victim refuses
    the folder, naming it, its owner and the fix; ``ps`` and ``stop``/``attach`` of a sweep name say so (exit 2, no traceback) and
    neither list nor contact the attacker's fake engine."""
    files = _victim_files(box)
    fake = {"pid": 1, "run_dir": str(box / "attacker-run"), "sweep": "fake\u001b[31m", "started": time.time()}
    attacker.sh(f"""
        mkdir -m 777 specbench-0 specbench-0/engines specbench-engines-0 attacker-run attacker-xdg
        chmod 700 attacker-xdg
        for d in specbench-0/engines specbench-engines-0; do
            printf '%s' '{json.dumps(fake)}' > $d/1.json
            ln -s {files['secret']} $d/{os.getpid()}.json
        done
    """, cwd=box)
    env = {k: v for k, v in os.environ.items() if k not in ("SPECBENCH_ENGINES_DIR", PRIVATE_DIR_VAR)}
    env.update({"TMPDIR": str(box), "XDG_RUNTIME_DIR": str(box / "attacker-xdg")})  # someone else's runtime dir
    monkeypatch.setattr(tempfile, "tempdir", str(box))
    for name in ("SPECBENCH_ENGINES_DIR", PRIVATE_DIR_VAR):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(box / "attacker-xdg"))
    with pytest.raises(PrivateDirError) as info:
        engines_registry.registry_dir()
    assert str(box / "specbench-0") in str(info.value) and attacker.name in str(info.value)
    with pytest.raises(PrivateDirError):
        engines_registry.register(box / "victim-run", "mine")
    for command in (["ps"], ["stop", "fake"], ["attach", "fake"]):  # a sweep name: looked up in the registry
        done = subprocess.run([str(SPECBENCH), *command], env=env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, cwd=box)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and str(box / "specbench-0") in done.stderr, done.stderr
        assert "belongs to" in done.stderr and "fake" not in done.stdout + done.stderr
    _unchanged(files)


def test_registry_entries_that_are_not_this_users_files_are_ignored(attacker, tmp_path, monkeypatch):
    """In the victim's own registry folder: a link, a FIFO, a folder, a file of another user's, an oversized file
    and a malformed entry are ignored (no hang on the FIFO), and registering replaces a link at the engine's
    name instead of writing through it."""
    box = tmp_path
    files = _victim_files(box)
    folder = box / "engines"
    monkeypatch.setenv("SPECBENCH_ENGINES_DIR", str(folder))
    assert engines_registry.registry_dir() == folder and stat.S_IMODE(folder.stat().st_mode) == 0o700
    good = {"pid": 4242, "run_dir": str(box / "run"), "sweep": "ok", "started": 1.0}
    (folder / "4242.json").write_text(json.dumps(good))
    (folder / "4243.json").symlink_to(folder / "4242.json")
    os.mkfifo(folder / "4244.json")
    (folder / "4245.json").mkdir()
    theirs = folder / "4246.json"
    theirs.write_text(json.dumps({**good, "pid": 4246}))
    os.chown(theirs, attacker.uid, attacker.gid)
    (folder / "4247.json").write_text(json.dumps({**good, "pid": 4247, "pad": "x" * 100000}))
    (folder / "4248.json").write_text(json.dumps({**good, "pid": 1}))  # names another engine than its file
    (folder / f"{os.getpid()}.json").symlink_to(files["secret"])
    assert [e["pid"] for e in engines_registry.entries()] == [4242]
    engines_registry.register(box / "victim-run", "mine")
    mine = folder / f"{os.getpid()}.json"
    assert not mine.is_symlink() and stat.S_IMODE(mine.stat().st_mode) == 0o600
    assert [e["pid"] for e in engines_registry.entries()] == [4242, os.getpid()]
    _unchanged(files)


PLANTED = """import os, sys
with open(os.path.join({markers!r}, "%s-%d" % (__name__, os.getpid())), "w") as out:
    out.write("uid %d ran the planted %s: %s" % (os.getuid(), __name__, " ".join(sys.argv)))
raise ImportError("planted")
"""


def test_a_module_planted_in_the_working_directory_is_not_imported_by_the_engine_or_servers(attacker, box, tmp_path):
    """The victim starts a real detached sweep (``specbench run --detach``, the simulator) from a shared working
    directory where the attacker left ``re2.py`` (which the engine imports) and ``tomllib.py`` (which the
    simulated servers import): neither runs, and the sweep completes."""
    shared, markers = box / "shared", box / "markers"
    attacker.sh("mkdir -m 1777 shared markers", cwd=box)
    for name in ("re2", "tomllib"):
        attacker.sh(f"cat > {name}.py <<'EOF'\n{PLANTED.format(markers=str(markers))}EOF\n", cwd=shared)
    assert (shared / "re2.py").stat().st_uid == attacker.uid
    sweep = make_sweep(tmp_path / "sweep")
    runs = tmp_path / "runs"
    marker = new_marker()
    env = marker_env(marker, {"SPECBENCH_ENGINES_DIR": str(tmp_path / "engines")})
    done = subprocess.run([str(SPECBENCH), "run", str(sweep), "--headless", "--detach", "--runs-dir", str(runs)],
                          cwd=shared, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    assert not [p.read_text() for p in markers.iterdir()], done.stderr  # the engine's start-up ran no planted code
    assert done.returncode == 0, done.stdout + done.stderr
    run_dir = next(p for p in runs.iterdir() if p.is_dir())

    def ended() -> dict | None:
        try:
            meta = json.loads((run_dir / "run.json").read_text())
        except (OSError, ValueError):
            return None
        return meta if "exit_code" in meta else None

    try:
        meta = wait_for(ended, 240, poll_s=0.2, what="the detached engine's end")
    finally:
        if ended() is None:
            with open(run_dir / "run.json") as handle:
                pid = json.load(handle).get("engine_pid")
            if pid:
                os.kill(pid, signal.SIGTERM)
    assert not [p.read_text() for p in markers.iterdir()]  # nor the sweep: the engine, the keepers, the servers
    assert meta["exit_code"] == 0, (run_dir / "engine.log").read_text()[-3000:]
    assert not wait_gone(marker)


def test_the_isolated_interpreter_keeps_the_import_path_but_not_the_working_directory(tmp_path):
    """The argv :func:`isolated_python` builds imports specbench as this process does (an editable install,
    ``PYTHONPATH`` folders this process had) and never from the working directory, on any Python 3.10+
    (``-I``, not ``-P``)."""
    (tmp_path / "json.py").write_text("raise SystemExit('the working directory was imported')\n")
    code = "import json, sys, specbench_tui; print(json.dumps([specbench_tui.__file__, sys.flags.isolated]))"
    probe = tmp_path / "probe_dir"
    probe.mkdir()
    (probe / "probe_mod.py").write_text(code + "\n")
    argv = isolated_python("probe_mod")
    at = argv.index("-c") + 2  # python [this interpreter's -W/-X flags] -I -c BOOTSTRAP SPEC MODULE ARGS
    spec = json.loads(argv[at])
    spec["path"].append(str(probe))
    argv[at] = json.dumps(spec)
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    where, isolated = json.loads(done.stdout)
    import specbench_tui

    assert where == specbench_tui.__file__ and isolated == 1
    assert argv[at - 3] == "-I" and "-P" not in argv and argv[at + 1] == "probe_mod"
    from specbench_tui.engine.processes import KEEPER_PATH, keeper_argv

    assert keeper_argv("--parent", "1")[1:] == ["-I", str(KEEPER_PATH), "--parent", "1"]  # stdlib only, isolated
    checkout = Path(specbench_tui.__file__).resolve().parent.parent  # an editable install, run from its checkout
    done = subprocess.run(argv, cwd=checkout, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and json.loads(done.stdout)[0] == specbench_tui.__file__, done.stderr


def test_the_server_python_probe_reads_nothing_planted_in_the_working_directory(attacker, box, monkeypatch):
    """The probe of the server's Python (``python -c``, which puts the working directory first on its path) runs
    no ``json.py`` and believes no ``sglang-*.dist-info`` that the attacker left in the shared folder."""
    from specbench_tui.engine.fingerprint import server_versions

    shared, markers = box / "shared", box / "markers"
    attacker.sh("mkdir -m 1777 shared markers", cwd=box)
    attacker.sh(f"cat > json.py <<'EOF'\n{PLANTED.format(markers=str(markers))}EOF\n"
                "mkdir sglang-9.9.9.dist-info\n"
                "printf 'Metadata-Version: 2.1\\nName: sglang\\nVersion: 9.9.9\\n' > sglang-9.9.9.dist-info/METADATA\n",
                cwd=shared)
    monkeypatch.chdir(shared)
    found = server_versions(refresh=True)
    assert found["error"] is None and found["python"], found
    assert found["packages"]["sglang"] != "9.9.9" and not list(markers.iterdir())


def test_another_users_leases_on_the_simulated_gpus_do_not_stall_a_simulated_sweep(attacker, box, monkeypatch):
    """The attacker holds the lease of every simulated GPU in the machine-wide directory: a simulated sweep's GPUs
    are leased in the victim's private folder instead, so it places at once; real GPU names stay machine-wide."""
    import asyncio

    from specbench_tui.engine.gpus import FakeBackend
    from specbench_tui.engine.leases import LeasedGpuPool, gpu_keys

    shared = box / "specbench-leases"
    shared.mkdir()
    shared.chmod(0o1777)
    keys = gpu_keys(FakeBackend(), range(2))
    holders = []
    for key in keys.values():
        attacker.sh(f"printf '{{}}' > {key}.lease", cwd=shared)
        holders.append(attacker.hold(shared / f"{key}.lease"))
    monkeypatch.setattr(tempfile, "tempdir", str(box))
    for name in ("SPECBENCH_LEASE_DIR", PRIVATE_DIR_VAR, "XDG_RUNTIME_DIR"):
        monkeypatch.delenv(name, raising=False)
    try:
        for key in keys.values():
            wait_for(lambda key=key: Leases(shared).holder(key) is not None, 10, what="the attacker's GPU leases")
        leases = Leases()
        assert leases.machine_wide and leases.directory == shared
        pool = LeasedGpuPool((0, 1), leases, keys)
        assert not pool.taken_elsewhere(), pool.taken_elsewhere()
        got = asyncio.run(asyncio.wait_for(pool.acquire(2), timeout=30))
        assert sorted(got) == [0, 1] and pool.leases.directory == box / "specbench-0" / "leases"
        pool.close()
        real = LeasedGpuPool((0,), leases, {0: "gpu-GPU-1234abcd"})
        assert real.leases is leases  # a real GPU is leased where every user's specbench sees it
    finally:
        _let_go(holders)


def test_a_private_folder_of_ones_own_is_made_private_or_refused_when_others_could_write_in_it(tmp_path):
    """An earlier specbench left ``$XDG_RUNTIME_DIR/specbench`` 0755 (readable, never writable by others): it is
    made 0700. A folder of one's own that others can write in may hold planted files: refused, with the fix."""
    from specbench_tui.paths import verify_private

    readable, writable = tmp_path / "readable", tmp_path / "writable"
    readable.mkdir(mode=0o755)
    readable.chmod(0o755)
    writable.mkdir()
    writable.chmod(0o777)
    assert verify_private(readable) == readable and stat.S_IMODE(readable.stat().st_mode) == 0o700
    with pytest.raises(PrivateDirError, match=r"writable by other users \(mode 0777\).*chmod 700"):
        verify_private(writable)
    link = tmp_path / "link"
    link.symlink_to(readable)
    with pytest.raises(PrivateDirError, match="is a symbolic link"):
        verify_private(link)


def test_a_simulated_sweep_runs_while_another_user_holds_every_simulated_gpu_lease(attacker, box, tmp_path):
    """End to end: ``specbench run --headless`` of a simulator sweep on a box where the attacker holds the
    machine-wide leases of the simulated GPUs, with notes that forge output: the sweep measures everything and
    prints none of the attacker's text."""
    from specbench_tui.engine.gpus import FakeBackend
    from specbench_tui.engine.leases import gpu_keys

    shared = box / "specbench-leases"
    shared.mkdir()
    shared.chmod(0o1777)
    holders = []
    for key in gpu_keys(FakeBackend(), range(8)).values():
        attacker.sh(f"printf '%s\\n' '{HOSTILE_NOTE}' > {key}.lease", cwd=shared)
        holders.append(attacker.hold(shared / f"{key}.lease"))
    marker = new_marker()
    env = marker_env(marker, {"TMPDIR": str(box)})
    for name in ("SPECBENCH_LEASE_DIR", PRIVATE_DIR_VAR, "XDG_RUNTIME_DIR"):
        env.pop(name, None)
    try:
        for key in gpu_keys(FakeBackend(), range(8)).values():
            wait_for(lambda key=key: Leases(shared).holder(key) is not None, 10, what="the attacker's GPU leases")
        done = subprocess.run([str(SPECBENCH), "run", str(make_sweep(tmp_path / "sweep")), "--headless",
                               "--runs-dir", str(tmp_path / "runs")], env=env, capture_output=True, text=True,
                              timeout=150, stdin=subprocess.DEVNULL, cwd=tmp_path)  # ~10 s; waits forever if stalled
    finally:
        _let_go(holders)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "mallory" not in output and "\x1b" not in output and "pwned" not in output
    assert not wait_gone(marker)
