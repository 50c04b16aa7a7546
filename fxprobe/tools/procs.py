"""Processes a run started, found again after a crash: by pid AND exact command line, never by name.

A load (fio) is recorded with its pid and argv when it starts. After a ``kill -9`` of fxprobe the
load keeps running; ``stop_load`` stops the processes that still run exactly that command line -
the recorded pid (only if it still runs that command: a reused pid is left alone) and the job
processes fio forked (same argv; a fault run's argv is unique, it names the run's log folder).

Runs on this host (``stop_load``) or in a node through ``python -m fxprobe.tools.procs stop ARGV_JSON PID``
(``stop_load_on``), which prints one JSON line that ``parse_stop`` reads.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from fxprobe.core.errors import ParseError

if TYPE_CHECKING:
    from fxprobe.core.runner import Runner


STARTLINE = Path(__file__).with_name("startline.sh")
ERE_SPECIAL = ".[]()*+?{}|$"


def with_start_line(argv: list[str]) -> list[str]:
    """argv that runs ``argv`` as the same process after a first line "<epoch> <pid>" (startline.sh, shipped
    beside this module: a lab guest runs it by path)."""
    return ["sh", str(STARTLINE), *argv]


def exact_command_line(argv: list[str]) -> str:
    """A POSIX extended regular expression that matches exactly ``argv``'s command line, for ``pkill -f -x`` on a
    node where fxprobe is not installed (each special character in a bracket of its own)."""
    return "".join(f"[{c}]" if c in ERE_SPECIAL else "\\" + c if c in "^\\" else c for c in " ".join(argv))


def pkill_argv(argv: list[str]) -> list[str]:
    """``pkill`` (procps) of every process whose command line is exactly ``argv`` (TERM; exit 1: none ran)."""
    return ["pkill", "-f", "-x", "--", exact_command_line(argv)]


def own_start_time() -> float | None:
    """This process's start time (epoch s), recorded beside its pid so a reused pid is not taken for it."""
    return start_time(os.getpid())


def start_time(pid: int) -> float | None:
    import psutil
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def alive(pid: int | None, started: float | None = None) -> bool:
    """Whether ``pid`` still runs and (when ``started`` is known) is the same process."""
    import psutil
    if not pid:
        return False
    try:
        process = psutil.Process(int(pid))
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return started is None or abs(process.create_time() - float(started)) <= 1.0
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def children(pid: int) -> list[int]:
    """The pids of ``pid``'s children, from the kernel's own list (``/proc/PID/task/TID/children``, one per thread):
    psutil's ``children()`` reads the stat file of every process on the machine to find them, which a lab guest,
    whose every read of /proc runs under emulation, took 1.5 s for. A kernel without that list (no
    CONFIG_PROC_CHILDREN) is asked through psutil. [] once ``pid`` has ended."""
    tasks = Path(f"/proc/{pid}/task")
    try:
        lists = [task / "children" for task in tasks.iterdir()]
    except (FileNotFoundError, ProcessLookupError):
        return []
    if lists and not lists[0].exists():
        import psutil
        try:
            return [child.pid for child in psutil.Process(pid).children()]
        except psutil.NoSuchProcess:
            return []
    found: list[int] = []
    for listed in lists:
        try:
            found += [int(number) for number in listed.read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue     # the thread ended meanwhile
    return sorted(set(found))


def wait_gone(processes: list, timeout: float) -> list:
    """Those of ``processes`` (psutil.Process) still running after up to ``timeout`` s. A zombie has stopped: the
    process that inherited an orphan (init) reaps it when it does, which psutil's wait would wait for."""
    import psutil
    deadline = time.monotonic() + timeout
    while True:
        live = []
        for process in processes:
            try:
                if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                    live.append(process)
            except psutil.NoSuchProcess:
                pass
        if not live or time.monotonic() >= deadline:
            return live
        time.sleep(0.05)


def matching(argv: list[str], pid: int | None = None) -> dict:
    """{"pid_runs_it": bool|None, "pids": [...]}: processes whose command line is exactly ``argv``."""
    import psutil
    pids, pid_runs_it = [], None
    for process in psutil.process_iter(["pid", "cmdline", "status"]):
        info = process.info
        if info.get("status") == psutil.STATUS_ZOMBIE or info.get("pid") == os.getpid():
            continue
        if info.get("cmdline") == list(argv):
            pids.append(info["pid"])
    if pid:
        pid_runs_it = int(pid) in pids if psutil.pid_exists(int(pid)) else None
    return {"pid_runs_it": pid_runs_it, "pids": sorted(pids)}


def stop_load(argv: list[str], pid: int | None = None, grace_s: float = 5.0) -> dict:
    """Stop every process that runs exactly ``argv`` (TERM, then KILL after ``grace_s``).

    Returns {"found": [pids], "stopped": [pids], "left": [pids], "pid_runs_it": bool|None}:
    ``pid_runs_it`` False means the recorded pid now runs another program (it was not touched)."""
    import psutil
    seen = matching(argv, pid)
    found = seen["pids"]
    processes = []
    for number in found:
        try:
            processes.append(psutil.Process(number))
        except psutil.NoSuchProcess:
            continue
    live = wait_gone(processes, 0)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not live:
            break
        for process in live:
            try:
                if process.cmdline() == list(argv):      # checked again right before the signal
                    process.send_signal(sig)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        live = wait_gone(live, grace_s)
    left = matching(argv)["pids"]
    return {"found": found, "stopped": [p for p in found if p not in left], "left": left,
            "pid_runs_it": seen["pid_runs_it"]}


def parse_stop(text: str, source: str = "procs stop") -> dict:
    """The JSON line ``python -m fxprobe.tools.procs stop`` prints."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except json.JSONDecodeError:
                break
            if isinstance(data, dict) and isinstance(data.get("found"), list):
                return data
            break
    raise ParseError(source, "(output)", f"no result line in {text.strip()[-200:]!r}")


def stop_args(argv: list[str], pid: int | None) -> list[str]:
    """Arguments of ``python -m fxprobe.tools.procs`` that stop this load in a node."""
    return ["stop", json.dumps(list(argv)), str(pid or 0)]


def stop_load_on(runner: "Runner", host, command: list[str]) -> dict:
    """``stop_load`` in a node (a lab guest or an SSH host): ``command`` runs this module there with
    ``stop_args`` (e.g. ``lab.python("fxprobe.tools.procs", *stop_args(argv, pid))``)."""
    result = runner.run(command, timeout=90, host=host, check=True, label="stop-orphan")
    return parse_stop(result.stdout)


def describe(load: dict, result: dict, kind: str = "orphaned") -> str:
    """One line: what was found and stopped of a recorded load (``kind``: "orphaned", "hung")."""
    where = load.get("where") or "this host"
    name = (load.get("argv") or ["?"])[0]
    if result["found"]:
        text = (f"{kind} {name} on {where} stopped (pid {load.get('pid')}, "
                f"{len(result['stopped'])} process(es): {', '.join(map(str, result['stopped']))})")
        return text + (f"; STILL RUNNING: {', '.join(map(str, result['left']))}" if result["left"] else "")
    if result.get("lab_down"):
        return f"no {kind} {name} on {where}: lab {result['lab_down']} is down (its guests' processes went with it)"
    if result.get("pid_runs_it") is False:
        return f"no {kind} {name} on {where}: pid {load.get('pid')} now runs another program (left alone)"
    return f"no {kind} {name} on {where} (pid {load.get('pid')} had ended)"


def main(args: list[str]) -> int:
    if len(args) != 3 or args[0] != "stop":
        print("usage: python -m fxprobe.tools.procs stop ARGV_JSON PID", file=sys.stderr)
        return 2
    argv, pid = json.loads(args[1]), int(args[2]) or None
    started = time.time()
    result = stop_load(argv, pid)
    print(json.dumps({**result, "seconds": round(time.time() - started, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
