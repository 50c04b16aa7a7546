"""Getting the lab into a scenario's shape: a twin export (e.g. raid0 for the planted fail), the number of
paths, the NVMe timeouts and the iopolicy; each step journals its undo record first, and the ``Undo`` class that
replays that record is here beside it."""

from __future__ import annotations

import time

from fxprobe.core.errors import BadInput, ToolError
from fxprobe.core.kernel import controller_attribute, subsystem_attribute
from fxprobe.faults.base import RestoreContext, Undo
from fxprobe.lab.spec import NVME_PORT
from fxprobe.tools import guestview
from fxprobe.tools.guestview import parse_array_view, parse_host_view, parse_sampling

# scenario [lab] key -> nvme-cli 2.x connect flag (fast_io_fail_tmo has no flag: written to sysfs)
CONNECT_FLAGS = {"keep_alive_tmo": "--keep-alive-tmo", "ctrl_loss_tmo": "--ctrl-loss-tmo",
                 "reconnect_delay": "--reconnect-delay"}

TWIN = "twin"


def remove_twin(lab, name: str) -> str:
    """Remove a twin export; stop its md if a failed member kept it alive; wipe the md superblocks of
    its drives (so nothing assembles them again); re-plug any drive whose namespace came back under
    another name (so slot -> /dev/nvmeXn1 holds again)."""
    export = lab.state.export_named(name)
    if export is None:
        return f"export {name} already gone"
    done = [f"export {name} removed"]
    lab.remove_export(name)
    serials = {lab.drive(slot).serial: slot for slot in export.slots}
    for slot in export.slots:
        drive = lab.drive(slot)
        ctrl = _controller(lab, drive.serial)
        if drive.present and ctrl and not (ctrl["namespaces"] and ctrl["namespaces"][0].startswith(ctrl["name"] + "n")):
            release_md(lab, serials, export.backing)
            lab.drive_pull(slot)
            lab.drive_restore(slot)
            done.append(f"re-plugged slot {slot} (its namespace had come back as {ctrl['namespaces']})")
    stopped = release_md(lab, serials, export.backing)
    if stopped:
        done.append(f"stopped {', '.join(stopped)}")
    for serial in serials:
        ctrl = _controller(lab, serial)
        if ctrl and ctrl["namespaces"]:
            lab.exec("array", ["mdadm", "--zero-superblock", f"/dev/{ctrl['namespaces'][0]}"], timeout=60,
                     label="md-zero")
    done.append(f"wiped md superblocks of slots {export.slots}")
    return "; ".join(done)


def _controller(lab, serial: str) -> dict | None:
    return next((c for c in array_view(lab)["nvme_controllers"] if c["serial"] == serial), None)


def release_md(lab, serials: dict, backing: str = "") -> list[str]:
    """Stop every md array (active, failed or inactive) holding one of these drives, or the export's
    own md (``backing``, e.g. /dev/md126: a failed raid0 still holds its vanished member)."""
    view = array_view(lab)
    devices = {c["namespaces"][0] for c in view["nvme_controllers"] if c["serial"] in serials and c["namespaces"]}
    stopped = []
    for md in view["md"]:
        if {m["device"] for m in md["members"]} & devices or f"/dev/{md['name']}" == backing:
            lab.exec("array", ["mdadm", "--stop", f"/dev/{md['name']}"], timeout=60, check=True, label="md-stop")
            stopped.append(f"/dev/{md['name']}")
    return stopped


def export_nqn(lab, which: str) -> str:
    return (lab.main_export if which == "main" else lab.export(TWIN)).nqn


def free_slots(lab) -> list[int]:
    return lab.state.free_slots()


def ensure_twin(lab, level: str, slots: list[int], remember, host: str) -> bool:
    """Build the twin export if it is not there (its undo is remembered first), connected from the load's
    ``host`` only (the fault run's load is the twin's only user)."""
    if lab.state.export_named(TWIN):
        return False
    busy = [s for s in slots if s not in free_slots(lab)]
    if busy:
        raise BadInput(f"lab.twin_slots: slot(s) {busy} are not free in lab {lab.name}",
                       hint=f"free slots: {free_slots(lab) or 'none'} (or leave twin_slots out)")
    remember({"method": LabPrepare.TWIN_EXPORT, "lab": lab.name, "name": TWIN})
    lab.add_export(level, slots, name=TWIN, connect=[host])
    return True


def wait_md_idle(lab, timeout: float, interval: float = 2.0) -> float | None:
    """Seconds until no md array of the array guest runs a recovery/resync (None: still busy at the timeout)."""
    started = time.monotonic()
    while True:
        if not [m for m in array_view(lab)["md"] if m.get("action")]:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            return None
        time.sleep(interval)


def controllers_of(lab, host: str, nqn: str) -> list[dict]:
    for subsys in host_view(lab, host):
        if subsys["nqn"] == nqn:
            return [p for p in subsys["paths"] if p.get("transport")]
    return []


def connect_paths(lab, host: str, nqn: str, links: list[int], options: dict, replace: bool = False) -> list[dict]:
    """Connect ``host`` to ``nqn`` over exactly ``links`` with ``options`` (scenario [lab] timeout keys,
    and ``transport``, else the export's). ``replace`` disconnects every path first (timeouts such as
    kato are set at connect time)."""
    flags = [f"{CONNECT_FLAGS[k]}={v}" for k, v in options.items() if k in CONNECT_FLAGS]
    transport = options.get("transport") or lab.export(nqn).transport
    if replace:
        lab.exec(host, ["nvme", "disconnect", "-n", nqn], timeout=60, label="disconnect-paths")
    current = {p["address"].split(",")[0].split("=", 1)[1]: p for p in controllers_of(lab, host, nqn)
               if p.get("address")}
    wanted = {lab.link(n, host).array_ip for n in links}
    for address, path in current.items():
        if address not in wanted:
            lab.exec(host, ["nvme", "disconnect", "-d", path["controller"]], timeout=60, check=True,
                     label="disconnect-path")
    for n in links:
        address = lab.link(n, host).array_ip
        if address not in current or replace:
            lab.exec(host, ["nvme", "connect", "-t", transport, "-a", address, "-s", str(NVME_PORT), "-n", nqn,
                            *flags], timeout=90, check=True, label=f"connect-link{n}")
    live = wait_paths(lab, host, nqn, len(links))
    if options.get("fast_io_fail_tmo") is not None:
        value = "off" if options["fast_io_fail_tmo"] < 0 else str(options["fast_io_fail_tmo"])
        for path in live:
            lab.exec(host, ["tee", controller_attribute(path["controller"], "fast_io_fail_tmo")],
                     input=value, timeout=30, check=True, label="fast_io_fail_tmo")
    return live


def current_iopolicy(lab, host: str, nqn: str) -> str | None:
    for subsys in host_view(lab, host):
        if subsys["nqn"] == nqn:
            return subsys.get("iopolicy")
    return None


def wait_paths(lab, host: str, nqn: str, count: int, timeout: float = 60) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        live = [p for p in controllers_of(lab, host, nqn) if p["state"] == "live"]
        if len(live) == count:
            return live
        if time.monotonic() > deadline:
            raise ToolError(f"{host}: {len(live)} live paths to {nqn} after {timeout:.0f} s, expected {count}")
        time.sleep(0.5)


def set_iopolicy(lab, host: str, nqn: str, policy: str) -> str | None:
    """Write the subsystem's iopolicy; returns the previous one."""
    for subsys in host_view(lab, host):
        if subsys["nqn"] == nqn:
            lab.exec(host, ["tee", subsystem_attribute(subsys["name"], "iopolicy")], input=policy,
                     timeout=30, check=True, label="iopolicy")
            return subsys.get("iopolicy")
    return None


def twin_slots(lab, lab_table: dict) -> list[int]:
    if lab_table["twin_slots"]:
        return list(lab_table["twin_slots"])
    free = free_slots(lab)
    if len(free) < lab_table["twin_drives"]:
        raise BadInput(f"lab {lab.name} has {len(free)} free drive slot(s), the twin needs {lab_table['twin_drives']}",
                       hint="start the lab with --raid-drives below --drives")
    return free[:lab_table["twin_drives"]]


def prepare(lab, lab_table: dict, host: str, remember) -> tuple[str, list[str]]:
    """(nqn, lines saying what was done) for the scenario's [lab] table; ``remember(undo)`` is
    called before each step changes anything (it journals the undo)."""
    done = []
    if lab_table["export"] == "twin":
        slots = twin_slots(lab, lab_table)
        if ensure_twin(lab, lab_table["twin_level"], slots, remember, host):
            done.append(f"built twin export: {lab_table['twin_level']} over slots {slots}")
    nqn = export_nqn(lab, lab_table["export"])
    all_links = [l.n for l in lab.links(host)]
    options = {k: lab_table[k] for k in ("keep_alive_tmo", "ctrl_loss_tmo", "reconnect_delay") if lab_table[k] > 0}
    if lab_table["fast_io_fail_tmo"] != -2:
        options["fast_io_fail_tmo"] = lab_table["fast_io_fail_tmo"]
    if lab_table.get("transport") and lab_table["transport"] != lab.export(nqn).transport:
        options["transport"] = lab_table["transport"]
    links = all_links[:lab_table["paths"]] if lab_table["paths"] else all_links
    if options or links != all_links:
        remember({"method": LabPrepare.PATHS, "lab": lab.name, "host": host, "nqn": nqn, "links": all_links,
                     "options": {}})
        connect_paths(lab, host, nqn, links, options, replace=bool(options))
        done.append(f"{host}: {len(links)} path(s) to {nqn} on link(s) {links}"
                    + (f" with {options}" if options else ""))
    if lab_table["iopolicy"]:
        before = current_iopolicy(lab, host, nqn)
        if before and before != lab_table["iopolicy"]:
            remember({"method": LabPrepare.IOPOLICY, "lab": lab.name, "host": host, "nqn": nqn, "policy": before})
        set_iopolicy(lab, host, nqn, lab_table["iopolicy"])
        done.append(f"{host}: iopolicy {lab_table['iopolicy']} (was {before})")
    return nqn, done


# -- the undo of each step above, replayed from its journal record (its "method": the step's name)
def _reconnect(lab, record: dict) -> str:
    connect_paths(lab, record["host"], record["nqn"], record["links"], record.get("options", {}), replace=True)
    return f"{record['host']} connected to {record['nqn']} on links {record['links']} (defaults)"


def _iopolicy_back(lab, record: dict) -> str:
    set_iopolicy(lab, record["host"], record["nqn"], record["policy"])
    return f"iopolicy {record['policy']} again"


class LabPrepare(Undo):
    """Undoes a step of prepare in the lab its record names: a reconnect of a host's paths (connects it back to
    every link, default timeouts), an iopolicy change, ensure_twin's export (removes it)."""

    PATHS, IOPOLICY, TWIN_EXPORT = "lab-paths", "lab-iopolicy", "lab-remove-export"
    record, also = PATHS, (IOPOLICY, TWIN_EXPORT)
    steps = {PATHS: _reconnect, IOPOLICY: _iopolicy_back,
             TWIN_EXPORT: lambda lab, record: remove_twin(lab, record["name"])}

    @classmethod
    def undo(cls, record: dict, ctx: RestoreContext) -> str:
        lab = ctx.lab(record["lab"])
        return f"lab {lab.name}: " + cls.steps[record["method"]](lab, record)


# -- quick views of the guests (one shared SSH connection, no Python start in a TCG guest): tools/guestview.sh
def view_loop(view: str, seconds: float, interval: float) -> list[str]:
    """argv of the sampling loop of one guest view: ``host`` (its NVMe subsystems and paths) or ``array``
    (its md arrays and drives)."""
    return guestview.loop_argv(view, seconds, interval)


def parse_view_loop(view: str, text: str) -> list[tuple[float, object]]:
    """(node epoch, parsed view) per block of ``view_loop(view, ...)`` output."""
    return parse_sampling(text, parse_host_view if view == "host" else parse_array_view)


def host_view(lab, host: str) -> list[dict]:
    result = lab.runner.run(guestview.view_argv("host"), timeout=60, host=lab.guest(host), check=True,
                            label=f"view-{host}")
    return parse_host_view(result.stdout)


def timeouts_view(lab, host: str, nqn: str) -> dict:
    """The NVMe timeouts of ``host``'s controllers of ``nqn`` and its iopolicy, as faults.advice.read_timeouts
    gives them on that host."""
    result = lab.runner.run(guestview.view_argv("timeouts"), timeout=60, host=lab.guest(host), check=True,
                            label="timeouts")
    return guestview.parse_timeouts_view(result.stdout, nqn)


def array_view(lab, roles: bool = False) -> dict:
    """The array guest's NVMe controllers and md arrays (``roles``: with members' md roles and raid10 layouts)."""
    views = ("array", "roles") if roles else ("array",)
    result = lab.runner.run(guestview.view_argv(*views), timeout=60, host=lab.guest("array"), check=True,
                            label="view-array")
    return parse_array_view(result.stdout)
