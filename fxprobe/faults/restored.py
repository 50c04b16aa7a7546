"""Honest restores: after undoing a fault, look whether it really is undone.

A drive is back when the array guest sees its serial again and (on a redundant export) it is a
working member of its md array, with md recovering, resyncing or clean. A link is back when both
NICs are up and every NVMe path over it is live again. What is still broken raises RestoreFailed
(exit 4), naming it; the pure ``*_problem`` functions decide from captured views.
"""

from __future__ import annotations

import time

from fxprobe.core.errors import ToolError
from fxprobe.tools import netdev


class RestoreFailed(ToolError):
    """A restore ran but its effect is not there: the line says what is still broken."""


def drive_problem(view: dict, serial: str, export_serials: list[str], redundant: bool) -> str | None:
    """What is wrong with drive ``serial`` in the array view (None: it is back as it should be)."""
    devices = {c["serial"]: (c.get("namespaces") or [None])[0] for c in view["nvme_controllers"]}
    device = devices.get(serial)
    if device is None:
        return f"drive {serial} is not visible in the array guest"
    if not redundant:
        return None
    others = {devices.get(s) for s in export_serials if s != serial} - {None}
    md = next((m for m in view["md"] if others & {x["device"] for x in m["members"]}), None)
    if md is None:
        return f"drive {serial} is back as {device} but no md array holds its export's other drives"
    member = next((x for x in md["members"] if x["device"] == device), None)
    state = f"{md['name']} [{md.get('raid_disks')}/{md.get('working_disks')}] [{md.get('health', '?')}]"
    if member is None:
        return f"drive {serial} is back as {device} but is not a member of {state}"
    if member.get("faulty"):
        return f"drive {serial} ({device}) is a faulty member of {state}"
    if md.get("action") in ("recovery", "resync") or (md.get("health") and "_" not in md["health"]):
        return None
    role = member.get("role") if member.get("role") is not None else member.get("index")
    health = md.get("health") or ""
    if not member.get("spare") and isinstance(role, int) and role < len(health) and health[role] == "U":
        return None      # in sync in its own role (a write-intent bitmap resyncs at once); another member is away
    if member.get("spare"):
        return f"drive {serial} ({device}) is a spare of {state}, and md is not recovering onto it"
    return f"drive {serial} ({device}) is in {state}, which is degraded and not recovering"


def drive_back_line(view: dict, serial: str) -> str:
    devices = {c["serial"]: (c.get("namespaces") or [None])[0] for c in view["nvme_controllers"]}
    md = next((m for m in view["md"] if devices.get(serial) in {x["device"] for x in m["members"]}), None)
    if md is None:
        return f"drive {serial} visible as {devices.get(serial)}"
    what = f"{md['action']} {md.get('progress') or 0:g}%" if md.get("action") else "clean"
    return f"drive {serial} is {devices.get(serial)} in {md['name']} [{md.get('health')}] ({what})"


def path_problem(subsystems: list[dict], array_ip: str) -> str | None:
    """The NVMe paths over the link to ``array_ip`` that are not live (None: all are)."""
    bad = [f"{s['nqn']} {p['controller']} {p['state']}" for s in subsystems for p in s["paths"]
           if f"traddr={array_ip}," in (p.get("address") or "") + "," and p["state"] != "live"]
    return f"paths over {array_ip} not live: {'; '.join(bad)}" if bad else None


def check_lab_drive(lab, slot: int, redundant: bool, timeout: float = 45.0) -> str:
    """Wait (bounded) until drive ``slot`` is back; its state as a line, or RestoreFailed."""
    from fxprobe.faults.labprep import array_view
    drive = lab.drive(slot)
    export = lab.state.export_named(drive.export) if drive.export else None
    serials = [lab.drive(s).serial for s in export.slots] if export else []
    deadline = time.monotonic() + timeout
    while True:
        view = array_view(lab, roles=True)
        problem = drive_problem(view, drive.serial, serials, redundant and export is not None)
        if problem is None:
            return drive_back_line(view, drive.serial)
        if time.monotonic() > deadline:
            raise RestoreFailed(f"lab {lab.name}: drive slot {slot} not restored: {problem}",
                                hint=f"see fxprobe lab status --lab {lab.name}; the journal keeps the restore")
        time.sleep(2)


def check_lab_link(lab, n: int, host: str, timeout: float = 90.0) -> str:
    """Wait (bounded) until link ``n`` of ``host`` is up at both NICs and its paths are live."""
    from fxprobe.faults.labprep import host_view
    link = lab.link(n, host)
    deadline = time.monotonic() + timeout
    while True:
        problems = []
        for guest, nic in ((link.host, link.host_nic), (link.array, link.array_nic)):
            state = lab.exec(guest, ["cat", netdev.attribute_path(nic, "operstate")], timeout=30).stdout.strip()
            if state != "up":
                problems.append(f"{guest}:{nic} is {state or 'unknown'}")
        if not problems:
            problem = path_problem(host_view(lab, host), link.array_ip)
            if problem is None:
                return f"link {n} of {host} up, its paths live"
            problems.append(problem)
        if time.monotonic() > deadline:
            raise RestoreFailed(f"lab {lab.name}: link {n} of {host} not restored after {timeout:.0f} s: "
                                + "; ".join(problems),
                                hint=f"see fxprobe lab status --lab {lab.name}; the journal keeps the restore")
        time.sleep(1)


def member_problem(md_arrays: list[dict], md_name: str, device: str) -> str | None:
    """What is wrong with block device ``device`` as a member of md array ``md_name`` (None: it is back)."""
    md = next((m for m in md_arrays if m["name"] == md_name), None)
    if md is None:
        return f"no md array {md_name}"
    member = next((x for x in md["members"] if x["device"] == device), None)
    state = f"{md_name} [{md.get('raid_disks')}/{md.get('working_disks')}] [{md.get('health', '?')}]"
    if member is None or member.get("faulty"):
        return f"{device} is {'a faulty member' if member else 'not a member'} of {state}"
    if md.get("action") in ("recovery", "resync") or (md.get("health") and "_" not in md["health"]):
        return None
    return f"{device} is in {state}, which is degraded and not recovering"
