"""The keeper: a small process between specbench and each server, so that every server process is accounted for.

``python -I specbench_tui/keeper.py --parent PID --report-fd FD [--stop-signal N] -- ARGV...``

The engine launches this instead of the server itself (:func:`specbench_tui.engine.processes.keeper_argv`: by
path, in isolated mode, so that nothing is imported from the working directory, this folder or the user site;
the keeper needs only the standard library). The keeper

- becomes a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): a process of the server that double-forks and
  calls ``setsid()`` to escape (a daemonising launcher, a wrapper that does not ``exec``) is re-parented to
  the keeper when its parent dies, never to init, so it stays in the keeper's tree;
- dies with specbench: ``PR_SET_PDEATHSIG = SIGTERM``, handled like a stop request (even after specbench is
  SIGKILLed the keeper ends the tree);
- starts the server (``ARGV``) as its only direct child, in a process group of its own (the server's pid is
  its group id), with ``PR_SET_PDEATHSIG = SIGKILL`` towards the keeper, the same environment (which carries
  ``SPECBENCH_TREE``, the tree's identity, inherited by every descendant: leftover detection finds escaped
  processes by it) and the same stdout/stderr (the engine's log pipe);
- writes ``<server pid>`` (or ``error <errno>``, when the server could not be executed) as one line to
  ``FD`` and closes it;
- on ``SIGUSR1``: sends ``--stop-signal`` (default SIGTERM) to the server's process group (the polite stop);
- on ``SIGTERM``, ``SIGINT``, ``SIGHUP`` or ``SIGUSR2``: SIGKILLs every process of its subtree, escaped
  sessions included, and exits once none is left;
- when the server's main process exits by itself: ends what is left of the subtree the same way;
- exits only when its subtree is empty, with the server's status (its exit code, or the same signal with
  core dumps off), so the engine reads the server's exit from the keeper's and knows that once the keeper
  is gone, every process of that server is gone too.

Only direct children of the keeper are ever signalled (an unreaped child's pid cannot be reused), plus the
server's own process group while its leader is an unreaped child: the keeper can never signal a stranger.
A deeper descendant is killed once its parent died and it became the keeper's child. Linux only.

Its cost is one Python start-up per server launch (about 12 ms on the 2-core test machine; ``bench_crash_dead_time.py``
prints it).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
TREE_VAR = "SPECBENCH_TREE"
"""Environment variable naming the tree (run directory, configuration, attempt): set by the engine."""

_STOP_ALL = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR2)
_WATCHED = {*_STOP_ALL, signal.SIGUSR1, signal.SIGCHLD}


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _children() -> list[int]:
    """The keeper's direct children (living or not yet reaped)."""
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as handle:
            return [int(part) for part in handle.read().split()]
    except OSError:  # kernels without CONFIG_PROC_CHILDREN: ask psutil, which reads every /proc/<pid>/stat
        import psutil

        return [child.pid for child in psutil.Process(pid).children()]


class Keeper:
    def __init__(self, argv: list[str], report_fd: int, stop_signal: int, mask: set[int] | None = None) -> None:
        """``mask``: the signal mask the keeper was started with, which the server gets back (the keeper blocks
        the signals it waits for; a server started with them blocked would never see its stop signal)."""
        self.argv = argv
        self.mask = mask
        self.report_fd = report_fd
        self.stop_signal = stop_signal
        self.main: int | None = None
        self.main_status: int | None = None

    def start(self) -> bool:
        """Fork and exec the server; False when it could not be executed (reported on the fd)."""
        errors_r, errors_w = os.pipe2(os.O_CLOEXEC)
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
        if self.mask is not None:
            old_mask = self.mask
        pid = os.fork()
        if pid == 0:  # the server
            try:
                os.close(errors_r)
                os.setpgid(0, 0)
                _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
                for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # as subprocess does: Python ignores these
                    signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
                if self.report_fd >= 0:
                    os.close(self.report_fd)
                os.execvp(self.argv[0], self.argv)
            except OSError as exc:
                os.write(errors_w, str(exc.errno or 0).encode())
            finally:
                os._exit(127)
        os.close(errors_w)
        self.main = pid
        error = b""
        while chunk := os.read(errors_r, 64):
            error += chunk
        os.close(errors_r)
        self._report(f"error {int(error)}" if error else str(pid))
        return not error

    def _report(self, text: str) -> None:
        if self.report_fd < 0:
            return
        try:
            os.write(self.report_fd, (text + "\n").encode())
            os.close(self.report_fd)
        except OSError:
            pass
        self.report_fd = -1

    def _reap(self, block: bool) -> bool:
        """Reap children; False when there are none left."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            except ChildProcessError:
                return False
            except InterruptedError:
                continue
            if pid == 0:
                return True
            if pid == self.main:
                self.main_status = status
            if block:
                return True

    def stop_server(self) -> None:
        """The polite stop: the stop signal to the server's process group (only while its leader is ours)."""
        if self.main is not None and self.main_status is None:
            try:
                os.killpg(self.main, self.stop_signal)
            except OSError:
                pass

    def kill_all(self) -> None:
        """SIGKILL the whole subtree, generation by generation, until the keeper has no child left."""
        while True:
            if self.main is not None and self.main_status is None:
                try:
                    os.killpg(self.main, signal.SIGKILL)  # the group's leader is our unreaped child
                except OSError:
                    pass
            for pid in _children():
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if not self._reap(block=True):
                return

    def run(self) -> int:
        while True:
            info = signal.sigwaitinfo(_WATCHED)
            sig = info.si_signo
            if sig == signal.SIGCHLD:
                self._reap(block=False)
                if self.main_status is not None:
                    self.kill_all()
                    return self.main_status
            elif sig == signal.SIGUSR1:
                self.stop_server()
            elif sig in _STOP_ALL:
                self.kill_all()
                return self.main_status if self.main_status is not None else (signal.SIGKILL & 0x7F)


def _exit_like(status: int) -> None:
    """Exit the way the server did: its code, or its signal (without a core dump)."""
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (OSError, ValueError):
            pass
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught, blocked or reset
            try:
                signal.signal(sig, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
            except (OSError, ValueError):
                pass
        try:
            os.kill(os.getpid(), sig)
        except OSError:
            pass
        os._exit(128 + sig)
    os._exit(1)


def _parse(argv: list[str]) -> tuple[int, int, int, list[str]]:
    parent, report_fd, stop_signal = -1, -1, int(signal.SIGTERM)
    i = 0
    while i < len(argv) and argv[i] != "--":
        key, value = argv[i], argv[i + 1] if i + 1 < len(argv) else ""
        if key == "--parent":
            parent = int(value)
        elif key == "--report-fd":
            report_fd = int(value)
        elif key == "--stop-signal":
            stop_signal = int(value)
        else:
            raise SystemExit(f"specbench keeper: unknown option {key}")
        i += 2
    command = argv[i + 1:]
    if not command:
        raise SystemExit("usage: python -m specbench_tui.keeper [--parent PID] [--report-fd FD] "
                         "[--stop-signal N] -- ARGV...")
    return parent, report_fd, stop_signal, command


def main(argv: list[str] | None = None) -> None:
    parent, report_fd, stop_signal, command = _parse(sys.argv[1:] if argv is None else argv)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    original_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if parent > 0 and os.getppid() != parent:  # specbench died before the death signal was armed
        os._exit(1)
    keeper = Keeper(command, report_fd, stop_signal, original_mask)
    if not keeper.start():
        keeper._reap(block=True)
        os._exit(127)
    _exit_like(keeper.run())


if __name__ == "__main__":
    main()
