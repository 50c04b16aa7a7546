"""Nothing left running after a crash: the loads a fault run starts are journaled (host, pid, argv);
``fault restore`` and the next ``fault run`` stop the ones whose run is gone, and say so.

A load is orphaned when the fxprobe process that started it (the journal entry's ``pid`` and
``owner_started``) no longer runs. It is stopped where it runs (this host or the lab guest), by
exact command line and pid (fxprobe.tools.procs), never by program name.
"""

from __future__ import annotations

from fxprobe.core.errors import FxprobeError
from fxprobe.faults.journal import Journal
from fxprobe.tools import procs


def start_line_pid(background) -> int | None:
    """The pid the load's wrapper printed on its first line ("<epoch> <pid>": tools/startline.sh, which execs fio)."""
    fields = background.output()[0].split("\n", 1)[0].split()
    return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None


def record_load(journal: Journal, entry_id: str, lab, guest: str | None, pid: int | None, argv: list[str],
                scenario: str = "", run_dir: str = "") -> dict:
    """Journal a load that now runs (before the fault is injected)."""
    if lab is not None:
        load = {"lab": lab.name, "guest": guest, "where": f"lab {lab.name} {guest}", "pid": pid, "argv": argv}
    else:
        load = {"where": "this host", "pid": pid, "argv": argv}
    journal.add_load(entry_id, load, scenario, run_dir)
    return load


def stop(load: dict, runner) -> dict:
    """Stop a recorded load where it runs; the tools.procs result."""
    if load.get("lab"):
        from fxprobe.lab.vm import Lab
        if not Lab.is_up(load["lab"]):      # its guests went down with it, and every process in them
            return {"found": False, "stopped": [], "left": [], "lab_down": load["lab"]}
        lab = Lab.load(load["lab"], runner)
        return procs.stop_load_on(runner, lab.guest(load["guest"]),
                                  lab.python("fxprobe.tools.procs", *procs.stop_args(load["argv"], load.get("pid"))))
    return procs.stop_load(load["argv"], load.get("pid"))


def stop_now(load: dict | None, runner) -> str:
    """Stop a load of this run where it runs (it hung); one line: what was found and stopped."""
    if load is None:
        return "no load recorded to stop"
    try:
        return procs.describe(load, stop(load, runner), "hung")
    except FxprobeError as exc:
        return f"could not stop the load on {load.get('where')}: {exc}"


def owner_alive(entry: dict) -> bool:
    return procs.alive(entry.get("pid"), entry.get("owner_started"))


def stop_orphans(journal: Journal, runner, say=print) -> list[str]:
    """Stop every journaled load whose run is gone; one line per load (what was found and stopped).
    Loads of a run that still runs are left alone (and named)."""
    lines = []
    for entry in journal.entries():
        loads = entry.get("loads") or []
        if not loads:
            continue
        if owner_alive(entry):
            lines.append(f"left running: the load of {entry.get('scenario', '?')} (its run, pid "
                         f"{entry.get('pid')}, is still running)")
            continue
        for load in loads:
            try:
                line = procs.describe(load, stop(load, runner))
            except FxprobeError as exc:
                line = f"could not check the load on {load.get('where')} (pid {load.get('pid')}): {exc}"
                say(line)
                lines.append(line)
                continue
            say(line)
            lines.append(line)
            journal.drop_load(entry["id"], load.get("pid"))
    return lines


def finish_load(journal: Journal, entry_id: str, load: dict | None, runner, still_running: bool, say=print) -> str | None:
    """At the end of a run (normal or interrupted): stop the load if it may still run, forget it."""
    if load is None:
        return None
    line = None
    if still_running:
        try:
            line = procs.describe(load, stop(load, runner))
        except FxprobeError as exc:
            line = f"could not stop the load on {load.get('where')}: {exc} (fxprobe fault restore stops it)"
            say(line)
            return line
        say(line)
    journal.drop_load(entry_id, load.get("pid"))
    return line
