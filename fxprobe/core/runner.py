"""The one place that starts subprocesses.

Argument lists only, a timeout on every call, retries only when the caller
asks, a dry-run mode, and a record of every call in the run directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import tenacity

from fxprobe.core.errors import NotRunnable, ToolError
from fxprobe.core.hosts import LOCAL, Host, LocalHost
from fxprobe.core.rundir import RunDir, utc_stamp

ORPHAN_GRACE_S = 10.0   # how long a finished command's own processes may keep its output open
DRAIN_S = 5.0           # after the kill: how long the output may take to end before its pipes' holders are killed


def _communicate(process: subprocess.Popen, input: str | None, timeout: float) -> tuple[str, str, bool]:
    """(stdout, stderr, timed out) of ``process``, bounded by ``timeout`` also when the command ended but
    processes it started live on holding its output open (fio's job processes, in sessions of their own,
    outlive a killed main process): after ORPHAN_GRACE_S they are killed, as a timed-out command's are."""
    deadline = time.monotonic() + timeout
    ended_at = None
    while True:
        try:            # the input goes with the first call only (communicate refuses it on a retry)
            out, err = process.communicate(input=input, timeout=max(0.01, min(1.0, deadline - time.monotonic())))
            return out, err, False
        except subprocess.TimeoutExpired:
            input = None
        now = time.monotonic()
        if ended_at is None and process.poll() is not None:
            ended_at = now
        timed_out = now >= deadline
        if timed_out or (ended_at is not None and now - ended_at >= ORPHAN_GRACE_S):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            out, err = _drain(process)
            return out, err, timed_out


def _drain(process: subprocess.Popen) -> tuple[str, str]:
    """What is left of the output once the command's group is killed; processes still holding its pipes
    (they left its session) are found by the pipes' inodes in /proc and killed too."""
    for attempt in range(3):
        try:
            return process.communicate(timeout=DRAIN_S)
        except subprocess.TimeoutExpired:
            for pid in _pipe_holders(process):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    return "", ""


def _pipe_holders(process: subprocess.Popen) -> set[int]:
    pipes = {f"pipe:[{os.fstat(s.fileno()).st_ino}]" for s in (process.stdout, process.stderr)
             if s is not None and not s.closed}
    holders = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if any(os.readlink(fd) in pipes for fd in (entry / "fd").iterdir()):
                holders.add(int(entry.name))
        except OSError:
            continue
    return holders


# Debian package that provides each wrapped command (for "how to fix" hints).
PACKAGE_OF = {
    "fio": "fio", "nvme": "nvme-cli", "ib_read_bw": "perftest", "ib_write_bw": "perftest",
    "iperf3": "iperf3", "ip": "iproute2", "tc": "iproute2", "rdma": "iproute2", "dcb": "iproute2",
    "mdadm": "mdadm", "blktrace": "blktrace", "blkparse": "blktrace",
    "qemu-system-x86_64": "qemu-system-x86", "ssh": "openssh-client", "sshd": "openssh-server",
    "ssh-keygen": "openssh-client", "busybox": "busybox-static", "cpio": "cpio",
    "depmod": "kmod", "modprobe": "kmod", "ethtool": "ethtool", "ping": "iputils-ping",
    "ibv_devinfo": "ibverbs-utils", "udevadm": "udev",
}

ENV_KEYS = ("PATH", "LANG", "LC_ALL", "TZ")


def install_hint(tool: str) -> str:
    package = PACKAGE_OF.get(Path(tool).name)
    return f"install it: apt-get install {package}" if package else f"install {tool}"


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    host: str
    returncode: int | None
    stdout: str
    stderr: str
    started: str
    ended: str
    seconds: float
    timed_out: bool = False
    dry_run: bool = False
    name: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def command_line(self) -> str:
        import shlex
        return shlex.join(self.argv)

    def failure(self, what: str = "") -> str:
        tail = (self.stderr.strip() or self.stdout.strip()).splitlines()[-1:] or [""]
        state = "timed out" if self.timed_out else f"exited {self.returncode}"
        where = f" on {self.host}" if self.host != "local" else ""
        return f"{what + ': ' if what else ''}`{self.command_line}`{where} {state}: {tail[0][:300]}".rstrip(": ")

    def check(self, what: str = "", hint: str | None = None) -> "CommandResult":
        if not self.ok and not self.dry_run:
            raise ToolError(self.failure(what), hint=hint)
        return self


@dataclass
class Background:
    """A long-running subprocess (a server, a VM); recorded when it ends."""

    runner: "Runner"
    argv: list[str]
    host: Host
    process: subprocess.Popen | None
    name: str
    started_at: float
    started: str
    stdout_path: Path | None
    stderr_path: Path | None
    env: dict = field(default_factory=dict)
    _recorded: bool = False

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 10.0, sig: int = signal.SIGTERM) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=timeout)
        return self.finish()

    def ended_within(self, timeout: float) -> bool:
        """Whether the process ends within ``timeout`` s; nothing is stopped either way."""
        if self.process is None:
            return True
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def wait(self, timeout: float) -> int | None:
        if self.process is None:
            return None
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise ToolError(f"`{' '.join(self.argv)}` did not finish within {timeout:.0f} s") from None
        return self.finish()

    def finish(self) -> int | None:
        code = self.process.poll() if self.process else None
        if not self._recorded:
            self._recorded = True
            self.runner._record(self.name, self.argv, self.host, self.started, utc_stamp(),
                                time.monotonic() - self.started_at, code, False,
                                self.process is None, self.stdout_path, self.stderr_path,
                                self.env, background=True)
        return code

    def output(self) -> tuple[str, str]:
        read = lambda p: p.read_text(errors="replace") if p and p.exists() else ""
        return read(self.stdout_path), read(self.stderr_path)


class Runner:
    """Runs argv lists, records each call in a RunDir (if any)."""

    def __init__(self, rundir: RunDir | None = None, *, dry_run: bool = False):
        self.rundir = rundir
        self.dry_run = dry_run

    # -- helpers -----------------------------------------------------------
    def _raw_paths(self, name: str) -> tuple[Path | None, Path | None]:
        if self.rundir is None:
            return None, None
        return self.rundir.raw_path(f"{name}.stdout"), self.rundir.raw_path(f"{name}.stderr")

    def _name(self, label: str | None, argv: Sequence[str]) -> str:
        label = label or Path(argv[0]).name
        return self.rundir.next_name(label) if self.rundir else label

    def _record(self, name, argv, host, started, ended, seconds, code, timed_out, dry_run,
                stdout_path, stderr_path, env, background=False, cwd=None) -> None:
        if self.rundir is None:
            return
        record = {
            "name": name, "argv": list(argv), "host": host.to_dict(), "cwd": str(cwd or os.getcwd()),
            "env": {k: v for k, v in {**{k: os.environ.get(k) for k in ENV_KEYS}, **env}.items() if v is not None},
            "started": started, "ended": ended, "seconds": round(seconds, 3),
            "exit_code": code, "timed_out": timed_out, "dry_run": dry_run,
            "background": background,
            "stdout": stdout_path.name if stdout_path else None,
            "stderr": stderr_path.name if stderr_path else None,
        }
        self.rundir.record_command(record)

    # -- foreground ----------------------------------------------------------
    def run(self, argv: Sequence[str], *, timeout: float, host: Host = LOCAL,
            label: str | None = None, input: str | None = None, env: dict | None = None,
            check: bool = False, what: str = "", retry_if: Callable[[CommandResult], bool] | None = None,
            attempts: int = 1, retry_wait: float = 1.0, always: bool = False,
            cwd: str | Path | None = None) -> CommandResult:
        """Run argv to completion. ``always`` runs even in dry-run (read-only probes); ``cwd``: the folder it
        runs in (this machine only; recorded in commands.jsonl)."""
        if isinstance(argv, (str, bytes)):
            raise TypeError("Runner.run takes an argument list, never a shell string")
        if cwd is not None and not isinstance(host, LocalHost):
            raise ValueError(f"cwd is for commands on this machine, not on {host.name}")
        argv = [str(a) for a in argv]
        if attempts > 1 and retry_if is not None:
            retrying = tenacity.Retrying(
                stop=tenacity.stop_after_attempt(attempts),
                wait=tenacity.wait_exponential(multiplier=retry_wait, max=30),
                retry=tenacity.retry_if_result(retry_if), reraise=True,
                retry_error_callback=lambda state: state.outcome.result())
            result = retrying(self._run_once, argv, timeout, host, label, input, env, always, cwd)
        else:
            result = self._run_once(argv, timeout, host, label, input, env, always, cwd)
        if check:
            result.check(what)
        return result

    def _run_once(self, argv, timeout, host, label, input, env, always, cwd=None) -> CommandResult:
        name = self._name(label, argv)
        full = host.wrap(argv)
        started_at, started = time.monotonic(), utc_stamp()
        stdout_path, stderr_path = self._raw_paths(name)
        if self.dry_run and not always:
            self._record(name, full, host, started, started, 0.0, None, False, True, None, None, env or {},
                         cwd=cwd)
            return CommandResult(tuple(full), host.name, None, "", "", started, started, 0.0,
                                 dry_run=True, name=name)
        process_env = {**os.environ, **(env or {})}
        try:
            process = subprocess.Popen(full, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       env=process_env, start_new_session=True, text=True,
                                       errors="replace", cwd=cwd)
        except FileNotFoundError:
            raise NotRunnable(f"`{full[0]}` is not installed on this machine",
                              hint=install_hint(full[0])) from None
        except PermissionError as exc:
            raise NotRunnable(f"`{full[0]}` cannot be executed: {exc.strerror}") from None
        try:
            out, err, timed_out = _communicate(process, input, timeout)
        except BaseException:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
            raise
        seconds = time.monotonic() - started_at
        ended = utc_stamp()
        if stdout_path:
            stdout_path.write_text(out)
            stderr_path.write_text(err)
        self._record(name, full, host, started, ended, seconds, process.returncode, timed_out,
                     False, stdout_path, stderr_path, env or {}, cwd=cwd)
        return CommandResult(tuple(full), host.name, None if timed_out else process.returncode,
                             out, err, started, ended, seconds, timed_out=timed_out, name=name)

    # -- background ----------------------------------------------------------
    def start(self, argv: Sequence[str], *, host: Host = LOCAL, label: str | None = None,
              env: dict | None = None, stdout_path: Path | None = None,
              stderr_path: Path | None = None, stdout_pipe: bool = False) -> Background:
        """Start argv in the background. ``stdout_pipe`` gives the caller ``process.stdout``
        (bytes) to read as it comes instead of a raw file (a stream too long to keep)."""
        if isinstance(argv, (str, bytes)):
            raise TypeError("Runner.start takes an argument list, never a shell string")
        argv = [str(a) for a in argv]
        name = self._name(label, argv)
        full = host.wrap(argv)
        default_out, default_err = self._raw_paths(name)
        stdout_path = None if stdout_pipe else (stdout_path or default_out)
        stderr_path = stderr_path or default_err
        started_at, started = time.monotonic(), utc_stamp()
        if self.dry_run:
            return Background(self, full, host, None, name, started_at, started, None, None, env or {})
        out = open(stdout_path, "w") if stdout_path else (subprocess.PIPE if stdout_pipe else subprocess.DEVNULL)
        err = open(stderr_path, "w") if stderr_path else subprocess.DEVNULL
        try:
            process = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                       env={**os.environ, **(env or {})}, start_new_session=True)
        except FileNotFoundError:
            raise NotRunnable(f"`{full[0]}` is not installed on this machine",
                              hint=install_hint(full[0])) from None
        finally:
            for handle in (out, err):
                if handle not in (subprocess.DEVNULL, subprocess.PIPE):
                    handle.close()
        return Background(self, full, host, process, name, started_at, started,
                          stdout_path, stderr_path, env or {})
