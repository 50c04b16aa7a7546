"""Fault methods, each with its matching restore.

A method is built from a scenario's ``[fault]`` table and an environment (the lab, or this Linux
host). It can say what it would do (``plan``), why it cannot run here (``probe``), what it refuses
for safety (``refusals``), how to undo it as a JSON record (``restore_record``, written to the
journal before injecting), and ``inject``; the class's ``undo`` replays such a record, in this run or
in a new process (``fxprobe fault restore``, through ``restore_from_record``).

Lab: QMP ``device_del``/``device_add`` (drive-pull) and ``set_link`` (link-down, link-flap).
Linux host: pyroute2 link down/up, ``nvme disconnect`` of one path, sysfs device remove/rescan,
nvmet namespace or port disable through configfs, null_blk power off, md fail/re-add, manual.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from fxprobe.core import sysfs
from fxprobe.core.kernel import NET_CLASS, NULLB_CONFIGFS, NVME_CLASS, PCI_RESCAN, controller_attribute
from fxprobe.faults.base import Env, Method, RestoreContext, Undo, _need  # noqa: F401  (the methods' interface)
from fxprobe.core.errors import BadInput, NotRunnable, ToolError, UnsafeTarget
from fxprobe.core.runner import Runner
from fxprobe.host.safety import check_target
from fxprobe.tools.blockdev import SystemView
from fxprobe.tools.nvme_sysfs import controller_by_serial

REDUNDANCY = {"raid0": 0, "linear": 0, "raid1": None, "raid4": 1, "raid5": 1, "raid6": 2, "raid10": 1}


def md_redundancy_left(level: str, raid_disks: int | None, working: int | None) -> int | None:
    """How many more members the array can lose without losing data (None: unknown)."""
    per = REDUNDANCY.get(level)
    if level == "raid1" and raid_disks:
        per = raid_disks - 1
    if per == 0:
        return 0
    if per is None or raid_disks is None or working is None:
        return None
    return per - (raid_disks - working)


def redundancy_refusal(device: str, md_arrays: list[dict]) -> str | None:
    """Why losing block device ``device`` (e.g. nvme3n1) would exceed its md array's redundancy."""
    for md in md_arrays:
        if any(m["device"] == device and not m.get("faulty") for m in md["members"]):
            left = md_redundancy_left(md["level"], md.get("raid_disks"), md.get("working_disks"))
            if left is None:
                return f"{device} is in {md['name']} ({md['level']}) whose redundancy is unknown"
            if left < 1:
                state = f"{md.get('working_disks')}/{md.get('raid_disks')} members working"
                return (f"{device} is in {md['name']} ({md['level']}, {state}): losing it exceeds the RAID's "
                        f"redundancy (data loss / I/O errors)")
    return None


# -- lab (QMP) ------------------------------------------------------------------------------
class LabDrivePull(Method):
    """One drive, or several (``fault.slots`` / ``fault.serials``), pulled at once or ``delay_s`` apart."""

    record = "lab-drive"
    also = ("lab-drives",)     # several slots in one record
    kind, via = "drive-pull", "qmp"

    @property
    def slots(self) -> list[int]:
        """fault.slots, else the slots of fault.serials, else [the one slot] (empty: not built yet)."""
        if self.fault.get("slots"):
            return [int(s) for s in self.fault["slots"]]
        if self.fault.get("serials"):
            by_serial = {d.serial: d.slot for d in self.env.lab.state.drives}
            unknown = [s for s in self.fault["serials"] if s not in by_serial]
            if unknown:
                raise BadInput(f"fault.serials: no drive {', '.join(unknown)} in lab {self.env.lab.name}",
                               hint="fxprobe lab status lists the slots and serials")
            return [by_serial[s] for s in self.fault["serials"]]
        return [self.slot] if self.slot is not None else []

    @property
    def slot(self) -> int | None:
        """fault.slot (or the first of several), else the first drive of the export the load uses."""
        if self.fault.get("slot") is not None:
            return int(self.fault["slot"])
        if self.fault.get("slots") or self.fault.get("serials"):
            return self.slots[0]
        lab = self.env.lab
        export = lab.main_export if self.env.export == "main" else lab.state.export_named(self.env.export)
        return export.slots[0] if export and export.slots else None

    @property
    def target(self) -> str:
        if self.slot is None:
            return f"the first drive of the {self.env.export} export (built at run time)"
        return ",".join(self.env.lab.drive(slot).serial for slot in self.slots)

    def plan(self) -> list[str]:
        names = ", ".join(f"drive{s}" for s in self.slots) or "drive?"
        delay = self.fault.get("delay_s") or 0
        when = f", {delay:g} s apart" if delay and len(self.slots) > 1 else (" at once" if len(self.slots) > 1 else "")
        return [f"QMP device_del {names} (serial {self.target}){when} in lab {self.env.lab.name}'s array guest, "
                "then mdadm --fail/--remove detached",
                "restore: QMP device_add of the same drive(s), " + (
                    "as new drives: mdadm --zero-superblock, --add (md rebuilds them whole)" if self.fault.get("replace")
                    else "mdadm --re-add (or --add)")]

    def probe(self) -> str | None:
        if self.slot is None:
            return None
        pulled = [s for s in self.slots if not self.env.lab.drive(s).present]
        return f"drive slot {', '.join(map(str, pulled))} is already pulled" if pulled else None

    def refusals(self) -> list[str]:
        if self.slot is None:      # the export is built at run time: its level decides before anything is built
            level = self.env.export_level
            if level and REDUNDANCY.get(level) == 0:
                return [f"the {self.env.export} export is a {level}: losing any member exceeds the RAID's "
                        f"redundancy (data loss / I/O errors)"]
            return []
        from fxprobe.faults.labprep import array_view
        info = array_view(self.env.lab, roles=True)
        devices = []
        for slot in self.slots:
            serial = self.env.lab.drive(slot).serial
            device = next((c["namespaces"][0] for c in info["nvme_controllers"]
                           if c.get("serial") == serial and c.get("namespaces")), None)
            if device is None:
                return [f"drive {serial} is not visible in the array guest"]
            devices.append(device)
        refusal = geometry_refusal(devices, info["md"])
        return [refusal] if refusal else []

    @classmethod
    def undo(cls, record: dict, ctx: "RestoreContext") -> str:
        """Every pulled slot back and checked; a slot md did not take back fails the restore (kept in the journal)."""
        from fxprobe.faults.restored import RestoreFailed
        lab = ctx.lab(record["lab"])
        texts, failed = [], []
        for slot in record.get("slots") or [record["slot"]]:
            try:
                texts.append(_restore_lab_drive(lab, slot, record.get("md_readd", True), record.get("replace", False)))
            except RestoreFailed as exc:
                failed.append(str(exc))
        if failed:
            raise RestoreFailed("; ".join(failed + texts), hint="the journal keeps the restore: fxprobe fault restore")
        return "; ".join(texts)

    def restore_record(self) -> dict:
        drive = self.env.lab.drive(self.slot)
        export = self.env.lab.state.export_named(drive.export) if drive.export else None
        level = export.level if export else None
        # beyond redundancy (a planted --allow-visible run) md has failed: the drives only go back in their slots
        beyond = len(self.slots) > 1 and bool(self.refusals())
        record = {"method": self.record, "lab": self.env.lab.name, "slot": self.slot,
                  "md_readd": REDUNDANCY.get(level, 1) != 0 and not beyond, "replace": bool(self.fault.get("replace"))}
        return record if len(self.slots) == 1 else {**record, "method": "lab-drives", "slots": self.slots}

    def inject(self) -> None:
        if not self.fault.get("delay_s"):      # at once: every device_del before any is awaited
            self.env.lab.drive_pulls(self.slots)
            if len(self.slots) > 1:
                for slot in self.slots:
                    self.env.note(f"drive slot {slot} pulled")
            return
        for i, slot in enumerate(self.slots):
            if i:
                time.sleep(self.fault["delay_s"])
            self.env.lab.drive_pull(slot)
            if len(self.slots) > 1:
                self.env.note(f"drive slot {slot} pulled")


def geometry_refusal(devices: list[str], md_arrays: list[dict]) -> str | None:
    """Why losing block devices ``devices`` together (with what is missing already) loses data in
    their md array, by its geometry (faults.geometry); None when every array survives it."""
    from fxprobe.faults.geometry import data_lost
    for md in md_arrays:
        members = {m["device"]: m for m in md["members"]}
        pulled = [d for d in devices if d in members and not members[d].get("faulty")]
        if not pulled:
            continue
        level = md["level"]
        working = [m for m in md["members"] if not m.get("faulty") and not m.get("spare")]
        raid_disks = md.get("raid_disks") or len(working)

        def role(m):
            return m["role"] if m.get("role") is not None else m["index"]
        missing = (set(range(raid_disks)) - {role(m) for m in working}) | {role(members[d]) for d in pulled}
        lost = data_lost(level, raid_disks, missing, md.get("layout"))
        if lost:
            state = f"{len(working)}/{raid_disks} members working"
            return (f"pulling {' + '.join(pulled)} from {md['name']} ({level}, {state}) exceeds the RAID's "
                    f"redundancy (data loss / I/O errors): {lost}")
    return None


class LabLink(Method):
    record = "lab-link"
    kind, via = "link-down", "qmp"

    @property
    def n(self) -> int:
        return int(_need(self.fault, "link", f"{self.kind} via qmp"))

    @property
    def target(self) -> str:
        link = self.env.lab.link(self.n, self.env.load_host)
        return link.host_nic

    def plan(self) -> list[str]:
        link = self.env.lab.link(self.n, self.env.load_host)
        return [f"QMP set_link up=false on both ends of data link {self.n} "
                f"({link.host}:{link.host_nic} - {link.array}:{link.array_nic})",
                "restore: QMP set_link up=true"]

    def refusals(self) -> list[str]:
        if not self.env.nqn:
            return []
        live = live_paths_lab(self.env.lab, self.env.load_host, self.env.nqn)
        link = self.env.lab.link(self.n, self.env.load_host)
        others = [p for p in live if f"traddr={link.array_ip}," not in (p.get("address") or "") + ","]
        if not others:
            return [f"link {self.n} carries the only live path of {self.env.nqn} on {self.env.load_host} "
                    f"({len(live)} live path(s))"]
        return []

    @classmethod
    def undo(cls, record: dict, ctx: "RestoreContext") -> str:
        from fxprobe.faults.restored import check_lab_link
        lab = ctx.lab(record["lab"])
        lab_set_link(lab, record["n"], record["host"], True)
        return f"lab {lab.name}: link {record['n']} of {record['host']} up; checked: " + \
            check_lab_link(lab, record["n"], record["host"])

    def restore_record(self) -> dict:
        return {"method": self.record, "lab": self.env.lab.name, "n": self.n, "host": self.env.load_host}

    def inject(self) -> None:
        lab_set_link(self.env.lab, self.n, self.env.load_host, False)

    def load_nics(self, live_paths: list[dict]) -> set[str]:
        link = self.env.lab.link(self.n, self.env.load_host)
        carried = [p for p in live_paths if f"traddr={link.array_ip}," in (p.get("address") or "") + ","]
        return {link.host_nic} if carried else set()


class LabLinkFlap(LabLink):
    kind = "link-flap"

    def plan(self) -> list[str]:
        period = self.fault["period_s"]
        return [f"flap data link {self.n} of {self.env.load_host}: QMP set_link down {period / 2:g} s, "
                f"up {period / 2:g} s, repeated through the fault window", "restore: QMP set_link up=true"]

    def flap(self, duration_s: float, stop: Callable[[], bool] = lambda: False) -> list[tuple[float, bool]]:
        """Down/up every period/2 for ``duration_s``; returns (epoch s, up) of each change; ends up."""
        half = self.fault["period_s"] / 2
        changes = []
        end = time.monotonic() + duration_s
        up = True
        while time.monotonic() < end and not stop():
            up = not up
            lab_set_link(self.env.lab, self.n, self.env.load_host, up)
            changes.append((self.env.note(f"link {self.n} {'up' if up else 'down'}"), up))
            time.sleep(max(0.0, min(half, end - time.monotonic())))
        if not up:
            lab_set_link(self.env.lab, self.n, self.env.load_host, True)
            changes.append((self.env.note(f"link {self.n} up"), True))
        return changes

    def inject(self) -> None:
        lab_set_link(self.env.lab, self.n, self.env.load_host, False)


def plug_only(lab, slot: int) -> str:
    """QMP device_add of a pulled drive without md steps: a raid0 cannot take a member back."""
    drive = lab.drive(slot)
    with lab.qmp(drive.array) as qmp:
        qmp.command("device_add", **drive.device().device_args())
    drive.present, drive.pulled = True, None
    lab.save()
    return f"drive slot {slot} plugged back (its {drive.export} md has no redundancy: not re-added)"


def lab_set_link(lab, n: int, host: str, up: bool) -> dict:
    """The lab's link_up/link_down; if fxprobe.tools.qmp cannot pass QMP's own ``name`` argument
    (``Qmp.command(name, **arguments)`` takes it as the command), send set_link directly."""
    try:
        return (lab.link_up if up else lab.link_down)(n, host)
    except TypeError as exc:
        if "multiple values for argument 'name'" not in str(exc):
            raise
    from qemu.qmp import QMPError
    from qemu.qmp.legacy import QEMUMonitorProtocol
    from fxprobe.core.rundir import utc_stamp
    link = lab.link(n, host)
    for guest, nic in ((link.host, link.host_nic), (link.array, link.array_nic)):
        path = lab.state.guests[guest].qmp
        monitor = QEMUMonitorProtocol(path)
        try:
            monitor.connect(negotiate=True)
            monitor.settimeout(15)
            reply = monitor.cmd_obj({"execute": "set_link", "arguments": {"name": f"nic-{nic}", "up": up}})
        except (OSError, QMPError) as exc:
            raise ToolError(f"QMP {path}: set_link: {exc}") from None
        finally:
            monitor.close()
        if "error" in reply:
            raise ToolError(f"QMP {path}: set_link nic-{nic}: {reply['error'].get('desc')}")
    link.up, link.changed = up, utc_stamp()
    lab.save()
    return {"host": link.host, "n": link.n, "up": up, "at": link.changed}


def live_paths_lab(lab, host: str, nqn: str) -> list[dict]:
    from fxprobe.faults.labprep import host_view
    for subsys in host_view(lab, host):
        if subsys["nqn"] == nqn:
            return [p for p in subsys["paths"] if p.get("transport") and p.get("state") == "live"]
    return []


# -- this Linux host ---------------------------------------------------------------------------
def block_by_serial(serial: str) -> str | None:
    return SystemView(sysfs.ROOT).disk_by_serial(serial)


def local_md_arrays() -> list[dict]:
    from fxprobe.tools.mdadm import read_mdstat
    return [a.to_dict() for a in read_mdstat()]


class HostDrive(Method):
    """Common checks for a drive named by serial on this host."""

    kind = "drive-pull"

    @property
    def serial(self) -> str:
        return str(_need(self.fault, "serial", f"drive-pull via {self.via}"))

    @property
    def target(self) -> str:
        return self.serial

    def judged(self) -> tuple[list[str], list[str]]:
        """(unsafe, redundancy): every block device of the drive - each namespace, with its partitions - through
        the target check's rules (mounted, swap, holders, partitions in use, the kernel's exclusive-open answer;
        / also below md or dm), never allowed; then md redundancy (--allow-visible plants a visible fault). A drive
        md alone holds is judged by the redundancy rule (md holding it is the point of the fault)."""
        view = SystemView(sysfs.ROOT)
        arrays = local_md_arrays()
        members, mds = {m["device"] for md in arrays for m in md["members"]}, {md["name"] for md in arrays}
        rooted, unsafe, redundancy = view.root_devices(), [], []
        for disk in view.disks_by_serial(self.serial):
            devices = [disk, *view.partitions(disk)]
            in_md = [d for d in devices if d in members]
            md_only = bool(in_md) and all(set(view.holders(d)) <= mds for d in devices)
            skip = {"allow-list", "root filesystem"} | ({"holders", "partitions", "exclusive open"} if md_only else set())
            if rooted & set(devices):
                unsafe.append(f"{disk} (serial {self.serial}) holds the root filesystem")
            check = check_target(f"/dev/{disk}", destructive=True, view=view)
            unsafe += [f"unsafe target /dev/{disk} (serial {self.serial}): {c.name}: {c.detail}"
                       for c in check.refused if c.name not in skip]
            redundancy += [refusal for d in in_md if (refusal := redundancy_refusal(d, arrays))]
        return unsafe, redundancy

    def refusals(self) -> list[str]:
        unsafe, redundancy = self.judged()
        return unsafe + redundancy

    def unsafe(self) -> list[str]:
        return self.judged()[0]

    def require_safe(self) -> None:
        """At the moment of the fault, whatever was allowed since the plan: nothing in use is touched."""
        unsafe, _ = self.judged()
        if unsafe:
            raise UnsafeTarget(f"refusing {self.kind} of drive {self.serial}: {unsafe[0]}; nothing injected",
                               hint="pick a drive that holds nothing in use")


class SysfsRemove(HostDrive):
    record = "pci-rescan"
    via = "sysfs"

    def pci_path(self) -> Path | None:
        ctrl = controller_by_serial(self.serial)
        if ctrl is None:
            return None
        device = sysfs.path(controller_attribute(ctrl, "device")).resolve()
        return device if (device / "remove").exists() else None

    def probe(self) -> str | None:
        if controller_by_serial(self.serial) is None:
            return f"no NVMe controller with serial {self.serial} in {NVME_CLASS}"
        if self.pci_path() is None:
            return f"NVMe drive {self.serial} has no sysfs 'remove' (not a PCI device: a fabrics controller?)"
        return None

    def plan(self) -> list[str]:
        return [f"echo 1 > {self.pci_path() or '<pci device>'}/remove (drive {self.serial})",
                f"restore: echo 1 > {PCI_RESCAN}"]

    @classmethod
    def undo(cls, record: dict, ctx: "RestoreContext") -> str:
        _write(sysfs.path(PCI_RESCAN), "1")
        return f"PCI bus rescanned (drive {record['serial']})"

    def restore_record(self) -> dict:
        return {"method": self.record, "serial": self.serial}

    def inject(self) -> None:
        self.require_safe()
        path = self.pci_path()
        _write(path / "remove", "1")


class MdFail(HostDrive):
    record = "md-readd"
    via = "md"

    def probe(self) -> str | None:
        if self.fault.get("md") is None:
            return "fault.md (the md device, e.g. /dev/md0) is required for drive-pull via md"
        if block_by_serial(self.serial) is None:
            return f"no block device with serial {self.serial}"
        return None

    def plan(self) -> list[str]:
        device = block_by_serial(self.serial) or "<device>"
        return [f"mdadm {self.fault['md']} --fail /dev/{device} --remove /dev/{device}",
                f"restore: mdadm {self.fault['md']} --re-add /dev/{device} (else --add)"]

    @classmethod
    def undo(cls, record: dict, ctx: "RestoreContext") -> str:
        from fxprobe.faults.restored import RestoreFailed, member_problem
        from fxprobe.tools.mdadm import add_back
        add_back(ctx.runner, record["md"], record["device"])
        problem = member_problem(local_md_arrays(), Path(record["md"]).resolve().name, Path(record["device"]).name)
        if problem:
            raise RestoreFailed(f"{record['device']} added back to {record['md']}, but {problem}",
                                hint="the journal keeps the restore: fxprobe fault restore")
        return f"{record['device']} back in {record['md']}"

    def restore_record(self) -> dict:
        return {"method": self.record, "md": self.fault["md"], "device": f"/dev/{block_by_serial(self.serial)}"}

    def inject(self) -> None:
        self.require_safe()
        device = f"/dev/{block_by_serial(self.serial)}"
        self.env.runner.run(["mdadm", self.fault["md"], "--fail", device, "--remove", device], timeout=60,
                            check=True, what="md fail")


class NullBlkPower(Method):
    record = "nullblk-power"
    kind, via = "drive-pull", "nullblk"

    @property
    def folder(self) -> str:
        return f"{NULLB_CONFIGFS}/{_need(self.fault, 'nullb', 'drive-pull via nullblk')}"

    @property
    def target(self) -> str:
        return f"nullb:{self.fault.get('nullb')}"

    def probe(self) -> str | None:
        if self.fault.get("nullb") is None:
            return "fault.nullb (the null_blk configfs name) is required for drive-pull via nullblk"
        return None if sysfs.exists(f"{self.folder}/power") else f"{self.folder}/power does not exist (null_blk configfs)"

    def plan(self) -> list[str]:
        return [f"echo 0 > {self.folder}/power", f"restore: echo 1 > {self.folder}/power"]

    @classmethod
    def undo(cls, record: dict, ctx: "RestoreContext") -> str:
        _write(sysfs.path(f"{record['folder']}/power"), "1")
        return f"{record['folder']} powered on"

    def restore_record(self) -> dict:
        return {"method": self.record, "folder": self.folder}

    def inject(self) -> None:
        _write(sysfs.path(f"{self.folder}/power"), "0")


class NetlinkLink(Method):
    record = "netlink-up"
    kind, via = "link-down", "netlink"

    @property
    def interface(self) -> str:
        return str(_need(self.fault, "interface", f"{self.kind} via netlink"))

    @property
    def target(self) -> str:
        return self.interface

    def probe(self) -> str | None:
        if not sysfs.exists(f"{NET_CLASS}/{self.interface}"):
            return f"no network interface {self.interface!r} here"
        return None

    def plan(self) -> list[str]:
        return [f"netlink: ip link set {self.interface} down", f"restore: ip link set {self.interface} up"]

    def refusals(self) -> list[str]:
        nqn = self.fault.get("nqn")
        if not nqn:
            return []
        from fxprobe.tools import nvme_sysfs
        mine = [c for c in nvme_sysfs.controllers() if c.subsysnqn == nqn and c.state == "live"]
        others = [c for c in mine if not _routes_via(c.address or "", self.interface)]
        if mine and not others:
            return [f"{self.interface} carries the only live path of {nqn}"]
        return []

    @classmethod
    def undo(cls, record: dict, ctx: "RestoreContext") -> str:
        set_link_state(record["interface"], "up")
        return f"{record['interface']} up"

    def restore_record(self) -> dict:
        return {"method": self.record, "interface": self.interface}

    def inject(self) -> None:
        set_link_state(self.interface, "down")

    def load_nics(self, live_paths: list[dict]) -> set[str]:
        carried = [p for p in live_paths if _routes_via(p.get("address") or "", self.interface)]
        return {self.interface} if carried else set()


def _routes_via(address: str, interface: str) -> bool:
    """Whether the path's traddr is reached through ``interface`` (route lookup over netlink)."""
    from pyroute2 import IPRoute
    traddr = dict(p.split("=", 1) for p in address.split(",") if "=" in p).get("traddr")
    if not traddr:
        return False
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=interface)
        routes = ipr.route("get", dst=traddr)
    return bool(index) and any(r.get_attr("RTA_OIF") == index[0] for r in routes)


def set_link_state(interface: str, state: str) -> None:
    from pyroute2 import IPRoute, NetlinkError
    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=interface)
        if not index:
            raise ToolError(f"no network interface {interface!r}")
        try:
            ipr.link("set", index=index[0], state=state)
        except NetlinkError as exc:
            raise ToolError(f"netlink: cannot set {interface} {state}: {exc}") from None


class NvmeDisconnect(Method):
    record = "nvme-connect"
    kind, via = "path-loss", "nvme-disconnect"

    def _controller(self):
        from fxprobe.tools import nvme_sysfs
        nqn = _need(self.fault, "nqn", "path-loss")
        address = _need(self.fault, "address", "path-loss")
        for ctrl in nvme_sysfs.controllers():
            if ctrl.subsysnqn == nqn and f"traddr={address}," in (ctrl.address or "") + ",":
                return ctrl
        return None

    @property
    def target(self) -> str:
        return f"{self.fault.get('nqn')}@{self.fault.get('address')}"

    def probe(self) -> str | None:
        return None if self._controller() else f"no controller of {self.fault.get('nqn')} at {self.fault.get('address')}"

    def refusals(self) -> list[str]:
        from fxprobe.tools import nvme_sysfs
        live = [c for c in nvme_sysfs.controllers() if c.subsysnqn == self.fault["nqn"] and c.state == "live"]
        return [f"{self.target} is the only live path"] if len(live) <= 1 else []

    def plan(self) -> list[str]:
        ctrl = self._controller()
        return [f"nvme disconnect -d {ctrl.name if ctrl else '<controller>'} ({self.target})",
                f"restore: nvme connect -t {ctrl.transport if ctrl else '?'} -a {self.fault['address']} -n {self.fault['nqn']}"]

    @classmethod
    def undo(cls, record: dict, ctx: "RestoreContext") -> str:
        ctx.runner.run(["nvme", "connect", "-t", record["transport"], "-a", record["traddr"], "-s",
                        str(record["trsvcid"]), "-n", record["nqn"]], timeout=90, check=True,
                       what="reconnecting the path")
        return f"path {record['traddr']} of {record['nqn']} reconnected"

    def restore_record(self) -> dict:
        ctrl = self._controller()
        fields = dict(p.split("=", 1) for p in (ctrl.address or "").split(",") if "=" in p) if ctrl else {}
        return {"method": self.record, "nqn": self.fault["nqn"], "transport": ctrl.transport if ctrl else "tcp",
                "traddr": self.fault["address"], "trsvcid": fields.get("trsvcid", "4420")}

    def inject(self) -> None:
        from fxprobe.host.fabrics import disconnect_controller
        disconnect_controller(self.env.runner, self._controller().name)


class NvmetFault(Method):
    """A fault on this machine's nvmet target through configfs: the tree must be writable and the fault must
    name ``needs``; ``missing`` says why what it names is not there."""

    needs: tuple[str, ...] = ()

    def probe(self) -> str | None:
        from fxprobe.tools.nvmet import NvmetRoot
        reason = NvmetRoot().probe()
        if reason:
            return reason
        if any(self.fault.get(key) in (None, "") for key in self.needs):
            return f"{' and '.join('fault.' + key for key in self.needs)} are required for {self.kind}"
        return self.missing()

    def missing(self) -> str | None:
        return None


class NvmetPortDisable(NvmetFault):
    record = "nvmet-port-link"
    kind, via, needs = "port-disable", "configfs", ("port", "nqn")

    @property
    def target(self) -> str:
        return f"nvmet-port:{self.fault.get('port')}"

    def missing(self) -> str | None:
        from fxprobe.tools.nvmet import NvmetRoot
        port = NvmetRoot().port(int(self.fault["port"]), create=False)
        return None if self.fault["nqn"] in port.subsystem_nqns() else \
            f"nvmet port {self.fault['port']} does not export {self.fault['nqn']}"

    def plan(self) -> list[str]:
        return [f"unlink nvmet port {self.fault['port']} from {self.fault['nqn']} (configfs)",
                "restore: link it again"]

    @classmethod
    def undo(cls, record: dict, ctx: "RestoreContext") -> str:
        from fxprobe.tools.nvmet import NvmetRoot
        root = NvmetRoot()
        root.port(record["port"], create=False).link(root.subsystem(record["nqn"], create=False))
        return f"nvmet port {record['port']} exports {record['nqn']} again"

    def restore_record(self) -> dict:
        return {"method": self.record, "port": int(self.fault["port"]), "nqn": self.fault["nqn"]}

    def inject(self) -> None:
        from fxprobe.tools.nvmet import NvmetRoot
        NvmetRoot().port(int(self.fault["port"]), create=False).unlink(self.fault["nqn"])


class NvmetNamespaceDisable(NvmetFault):
    record = "nvmet-ns-enable"
    kind, via, needs = "namespace-disable", "configfs", ("nqn", "nsid")

    @property
    def target(self) -> str:
        return f"{self.fault.get('nqn')}/ns{self.fault.get('nsid')}"

    def missing(self) -> str | None:
        from fxprobe.tools.nvmet import NvmetRoot
        folder = NvmetRoot().namespace(self.fault["nqn"], int(self.fault["nsid"])).path
        return None if folder.is_dir() else f"{folder} does not exist"

    def plan(self) -> list[str]:
        return [f"echo 0 > nvmet {self.target} enable (configfs)", "restore: echo 1 > enable"]

    @classmethod
    def undo(cls, record: dict, ctx: "RestoreContext") -> str:
        from fxprobe.tools.nvmet import NvmetRoot
        NvmetRoot().namespace(record["nqn"], int(record["nsid"])).enable()
        return f"namespace {record['nsid']} of {record['nqn']} enabled"

    def restore_record(self) -> dict:
        return {"method": self.record, "nqn": self.fault["nqn"], "nsid": int(self.fault["nsid"])}

    def inject(self) -> None:
        from fxprobe.tools.nvmet import NvmetRoot
        NvmetRoot().namespace(self.fault["nqn"], int(self.fault["nsid"])).enable(False)


class Manual(Method):
    """A hand pulls the drive / cable; a udev (block/net) event timestamps it."""
    record = "manual"

    via = "manual"

    @property
    def target(self) -> str:
        return str(self.fault.get("serial") or self.fault.get("interface") or "manual")

    def probe(self) -> str | None:
        import importlib.util
        if importlib.util.find_spec("pyudev") is None:
            return "pyudev is not installed (pip install pyudev)"
        return None if Path("/run/udev/control").exists() else "no udev daemon runs here (events cannot be seen)"

    def plan(self) -> list[str]:
        what = f"drive {self.fault.get('serial')}" if self.kind == "drive-pull" else f"cable of {self.fault.get('interface')}"
        return [f"tell the engineer to pull {what} now; wait for the udev remove event and timestamp it",
                "restore: tell the engineer to put it back; wait for the add event"]

    @classmethod
    def undo(cls, record: dict, ctx: "RestoreContext") -> str:
        ctx.say(f"PUT BACK {record['target']} NOW (waiting up to 300 s for the kernel to see it)")
        at = wait_udev_event("add" if record.get("kind") == "drive-pull" else "change", record["target"], 300)
        return f"{record['target']} is back (udev add at {at:.3f})"

    def restore_record(self) -> dict:
        return {"method": self.record, "kind": self.kind, "target": self.target}

    def inject(self) -> None:
        what = "drive " + self.target if self.kind == "drive-pull" else "the cable of " + self.target
        self.env.say(f"PULL {what} NOW (waiting up to 300 s for the kernel to notice)")
        at = wait_udev_event("remove" if self.kind == "drive-pull" else "change", self.target, 300)
        self.env.note(f"udev saw {self.target} go at {at:.3f}")


def wait_udev_event(action: str, target: str, timeout: float) -> float:
    """Epoch seconds of the first udev event ``action`` on a block/net device matching ``target``."""
    import pyudev
    context = pyudev.Context()
    monitor = pyudev.Monitor.from_netlink(context)
    monitor.filter_by("block")
    monitor.filter_by("net")
    monitor.start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        device = monitor.poll(timeout=max(0.1, deadline - time.monotonic()))
        if device is None:
            break
        names = {device.sys_name, device.get("ID_SERIAL_SHORT", ""), device.get("INTERFACE", "")}
        if device.action == action and (target in names or target == "manual"):
            return time.time()
    raise ToolError(f"no udev {action} event for {target} within {timeout:.0f} s")


def _write(path: Path, value: str) -> None:
    try:
        Path(path).write_text(value)
    except OSError as exc:
        raise ToolError(f"cannot write {value!r} to {path}: {exc.strerror or exc}") from None


LAB_METHODS = {("drive-pull", "qmp"): LabDrivePull, ("link-down", "qmp"): LabLink, ("link-flap", "qmp"): LabLinkFlap}
HOST_METHODS = {("drive-pull", "sysfs"): SysfsRemove, ("drive-pull", "md"): MdFail,
                ("drive-pull", "nullblk"): NullBlkPower, ("link-down", "netlink"): NetlinkLink,
                ("path-loss", "nvme-disconnect"): NvmeDisconnect, ("port-disable", "configfs"): NvmetPortDisable,
                ("namespace-disable", "configfs"): NvmetNamespaceDisable}


def _control(env: Env, fault: dict) -> Method:
    from fxprobe.faults.control import TargetControl      # via = "command": the user's target-control executable
    return TargetControl(env, fault)


for _table in (LAB_METHODS, HOST_METHODS):
    _table.update({("drive-pull", "command"): _control, ("link-down", "command"): _control})


def choose(env: Env, fault: dict) -> Method:
    """The method for ``fault``: the one named by ``via``, or the first this environment can do.
    Raises NotRunnable (naming every reason) when none can run here; nothing is touched."""
    from fxprobe.faults.scenario import KINDS
    kind, via = fault["kind"], fault["via"]
    table = LAB_METHODS if env.lab is not None else HOST_METHODS
    candidates = KINDS[kind] if via == "auto" else (via,)
    reasons = []
    for name in candidates:
        if name == "manual":
            if env.lab is None and via == "manual":
                method = Manual(env, fault)
                method.kind = kind
            else:
                reasons.append("manual: only when asked (via = \"manual\") on a real host")
                continue
        elif (kind, name) not in table:
            where = "in the lab" if env.lab is not None else "on a Linux host"
            reasons.append(f"{name}: cannot do {kind} {where}")
            continue
        else:
            method = table[(kind, name)](env, fault)
        reason = method.probe()
        if reason is None:
            return method
        reasons.append(f"{name}: {reason}")
    raise NotRunnable(f"fault {kind} cannot be injected here: " + "; ".join(reasons))


# -- restore (also from the journal, in a new process) -------------------------------------------
def _restore_lab_drive(lab, slot: int, redundant: bool, replace: bool = False) -> str:
    """Plug a pulled drive back (and into its md when it is redundant; ``replace``: as a new drive, rebuilt whole),
    then check that it is back."""
    from fxprobe.faults.restored import RestoreFailed, check_lab_drive
    if lab.drive(slot).present:
        text = f"lab {lab.name}: drive slot {slot} is already present"
    elif not redundant:
        text = f"lab {lab.name}: " + plug_only(lab, slot)
    else:
        try:
            result = lab.drive_restore(slot, replace=replace)
        except ToolError as exc:
            raise RestoreFailed(f"lab {lab.name}: drive slot {slot} plugged back, but md did not take it "
                                f"back: {exc}", hint="the journal keeps the restore: fxprobe fault restore") from None
        text = f"lab {lab.name}: drive slot {slot} back as {result.get('device')}" + \
            (f", re-added to {result['md']}" if result.get("md_action") == "re-add" else
             f", added to {result['md']} as a new drive (a full rebuild)" if result.get("md_action") == "replace" else
             f", added back to {result['md']} (a full recovery)" if result.get("md") else "")
    return f"{text}; checked: {check_lab_drive(lab, slot, redundant)}"


def restore_from_record(record: dict, env: Env | None = None, runner: Runner | None = None) -> str:
    """Undo one journaled fault through the class that wrote the record; returns what was done."""
    import fxprobe.faults.control  # noqa: F401  (registers TargetControl's record, also in a new process)
    import fxprobe.faults.labprep  # noqa: F401  (registers the lab prepare step's records)
    undo = Undo.registry.get(record.get("method"))
    if undo is None:
        raise BadInput(f"restore journal: unknown method {record.get('method')!r}", hint="undo the fault by hand")
    return undo.undo(record, RestoreContext(env, runner))


from fxprobe.faults.corrupt import HostCorrupt, LabCorrupt  # noqa: E402  (Method subclasses: after Method)

LAB_METHODS[("corrupt", "dd")] = LabCorrupt
HOST_METHODS[("corrupt", "dd")] = HostCorrupt
