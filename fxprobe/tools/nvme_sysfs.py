"""What the kernel says about NVMe, straight from sysfs (the second source beside nvme-cli).

/sys/class/nvme/nvmeX                controllers (model, serial, firmware_rev, transport, address, state, ...)
/sys/class/nvme-subsystem/nvme-subsysN subsystems (subsysnqn, iopolicy), links to controllers and namespace heads
/sys/block/nvmeXnY                   namespaces (size in 512-byte sectors, logical_block_size, nguid/eui/wwid)
/sys/class/nvme/nvmeX/nvmeXcYnZ      multipath path nodes with ana_state
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from fxprobe.core.data import AsDict
from fxprobe.core import sysfs

TIMEOUT_ATTRS = ("kato", "ctrl_loss_tmo", "reconnect_delay", "fast_io_fail_tmo")


@dataclass(frozen=True)
class SysController(AsDict):
    name: str
    model: str | None
    serial: str | None
    firmware: str | None
    transport: str | None
    address: str | None
    state: str | None
    subsysnqn: str | None
    cntlid: str | None
    subsystem: str | None
    timeouts: dict = field(default_factory=dict)
    paths: tuple[dict, ...] = ()
    pci_address: str | None = None   # 0000:00:03.0 for a PCIe drive; None for a fabrics controller
    slot: str | None = None          # the platform's slot name (/sys/bus/pci/slots/NAME) holding it
    namespaces: tuple[str, ...] = ()  # its block devices: nvmeXnY below it, or its subsystem's multipath heads


PCI_ADDRESS = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def pci_slots() -> dict[str, str]:
    """PCI slot address (domain:bus:device) -> slot name, from /sys/bus/pci/slots (hotplug drivers fill it)."""
    slots = {}
    for name in sysfs.listdir("/sys/bus/pci/slots"):
        address = sysfs.read(f"/sys/bus/pci/slots/{name}/address")
        if address:
            slots.setdefault(address, name)
    return slots


def slot_of(pci_address: str | None, slots: dict[str, str]) -> str | None:
    """The slot name of a PCI function (``0000:00:03.0`` sits in the slot whose address is ``0000:00:03``)."""
    if not pci_address:
        return None
    return slots.get(pci_address.rsplit(".", 1)[0])


@dataclass(frozen=True)
class SysNamespace(AsDict):
    name: str
    nsid: str | None
    size_bytes: int | None
    logical_block_size: int | None
    nguid: str | None
    eui: str | None
    wwid: str | None
    holders: tuple[str, ...]
    partitions: tuple[str, ...]
    read_only: bool | None = None    # /sys/block/nvmeXnY/ro


@dataclass(frozen=True)
class SysSubsystem(AsDict):
    name: str
    nqn: str | None
    iopolicy: str | None
    controllers: tuple[str, ...]
    namespaces: tuple[str, ...]


def _int(text: str | None) -> int | None:
    return int(text) if text and text.strip().isdigit() else None


def controller_by_serial(serial: str) -> str | None:
    """The controller (nvme0) whose drive reports ``serial``."""
    return next((name for name in sysfs.listdir("/sys/class/nvme")
                 if sysfs.read(f"/sys/class/nvme/{name}/serial") == serial), None)


def pcie_namespaces_by_serial() -> dict[str, str]:
    """{serial: "/dev/nvmeXnY"} for local (PCIe) NVMe controllers' first namespace."""
    found = {}
    for ctrl in sysfs.listdir("/sys/class/nvme"):
        base = f"/sys/class/nvme/{ctrl}"
        serial = sysfs.read(f"{base}/serial")
        if sysfs.read(f"{base}/transport") != "pcie" or serial is None:
            continue
        namespaces = sorted(e for e in sysfs.listdir(base) if e.startswith(f"{ctrl}n") and e[len(ctrl) + 1:].isdigit())
        if namespaces:
            found[serial] = f"/dev/{namespaces[0]}"
    return found


def controllers() -> list[SysController]:
    result = []
    slots = pci_slots()
    for name in sysfs.listdir("/sys/class/nvme"):
        base = f"/sys/class/nvme/{name}"
        device = sysfs.link_name(f"{base}/device")
        pci = device if device and PCI_ADDRESS.match(device) else None
        subsystem, heads = None, []
        for sub in sysfs.listdir("/sys/class/nvme-subsystem"):
            entries = sysfs.listdir(f"/sys/class/nvme-subsystem/{sub}")
            if name in entries:
                subsystem, heads = sub, [e for e in entries if re.fullmatch(r"nvme\d+n\d+", e)]
        entries = sysfs.listdir(base)
        paths = tuple({"path": entry, "ana_state": sysfs.read(f"{base}/{entry}/ana_state"),
                       "nsid": sysfs.read(f"{base}/{entry}/nsid")}
                      for entry in entries if re.fullmatch(r"nvme\d+c\d+n\d+", entry))
        own = sorted({e for e in entries if re.fullmatch(r"nvme\d+n\d+", e)} | set(heads))
        result.append(SysController(
            name, sysfs.read(f"{base}/model"), sysfs.read(f"{base}/serial"), sysfs.read(f"{base}/firmware_rev"),
            sysfs.read(f"{base}/transport"), sysfs.read(f"{base}/address"), sysfs.read(f"{base}/state"),
            sysfs.read(f"{base}/subsysnqn"), sysfs.read(f"{base}/cntlid"), subsystem,
            {k: v for k in TIMEOUT_ATTRS if (v := sysfs.read(f"{base}/{k}")) is not None},
            paths, pci, slot_of(pci, slots), tuple(own)))
    return result


def controller_states() -> dict[str, dict]:
    """Per controller what a path watch needs: state, transport, address, subsystem, subsysnqn
    (5 reads each, where ``controllers()`` makes about 15; a soak asks every second)."""
    owner = {ctrl: sub for sub in sysfs.listdir("/sys/class/nvme-subsystem")
             for ctrl in sysfs.listdir(f"/sys/class/nvme-subsystem/{sub}")}
    out = {}
    for name in sysfs.listdir("/sys/class/nvme"):
        base = f"/sys/class/nvme/{name}"
        out[name] = {"state": sysfs.read(f"{base}/state"), "transport": sysfs.read(f"{base}/transport"),
                     "address": sysfs.read(f"{base}/address"), "subsystem": owner.get(name),
                     "subsysnqn": sysfs.read(f"{base}/subsysnqn")}
    return out


def namespaces() -> list[SysNamespace]:
    result = []
    for name in sysfs.listdir("/sys/block"):
        if not re.fullmatch(r"nvme\d+n\d+", name):
            continue
        base = f"/sys/block/{name}"
        sectors = _int(sysfs.read(f"{base}/size"))
        result.append(SysNamespace(
            name, sysfs.read(f"{base}/nsid"), sectors * 512 if sectors is not None else None,
            _int(sysfs.read(f"{base}/queue/logical_block_size")), sysfs.read(f"{base}/nguid"),
            sysfs.read(f"{base}/eui"), sysfs.read(f"{base}/wwid"),
            tuple(sysfs.listdir(f"{base}/holders")),
            tuple(p for p in sysfs.listdir(base) if p.startswith(name + "p")),
            {"0": False, "1": True}.get(sysfs.read(f"{base}/ro") or "")))
    return result


def subsystems() -> list[SysSubsystem]:
    result = []
    for name in sysfs.listdir("/sys/class/nvme-subsystem"):
        base = f"/sys/class/nvme-subsystem/{name}"
        entries = sysfs.listdir(base)
        result.append(SysSubsystem(name, sysfs.read(f"{base}/subsysnqn"), sysfs.read(f"{base}/iopolicy"),
                                   tuple(e for e in entries if re.fullmatch(r"nvme\d+", e)),
                                   tuple(e for e in entries if re.fullmatch(r"nvme\d+n\d+", e))))
    return result


def subsystem_of(device: str) -> str | None:
    """The NQN of the NVMe subsystem holding the block device ``device`` (/dev/nvme1n1); None for any other."""
    name = device.rsplit("/", 1)[-1]
    return next((s.nqn for s in subsystems() if name in s.namespaces), None)


def write_attribute(rel: str, value: str) -> None:
    """Write a controller/subsystem attribute (fast_io_fail_tmo, iopolicy); OSError names the path."""
    target = sysfs.path(rel)
    try:
        target.write_text(value)
    except OSError as exc:
        from fxprobe.core.errors import ToolError
        raise ToolError(f"{target}: cannot write {value!r}: {exc.strerror}") from None
