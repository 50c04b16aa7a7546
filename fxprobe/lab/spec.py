"""What a lab is made of (LabSpec), checked before anything starts, and its address plan.

Addressing: data link ``n`` (1..links) of host ``h`` (1..hosts) is a point-to-point segment
10.n.h.0/24, array = .1 (NIC ``l{n}h{h}``), host = .2 (NIC ``l{n}``). The array routes between
segments, so every guest reaches every other by name (``array``, ``host1``...).
Drives sit in slots 0..drives-1; the first ``raid_drives`` form the main md array.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from fxprobe.core.data import AsDict
from fxprobe.core.errors import BadInput
from fxprobe.lab.qemu import MAX_DRIVES

RAID_LEVELS = ("raid6", "raid10", "raid5", "raid1", "raid0", "none")
MIN_DRIVES = {"raid6": 4, "raid10": 2, "raid5": 3, "raid1": 2, "raid0": 1, "none": 0}
TRANSPORTS = ("tcp", "rdma")
MAX_HOSTS = 8
MAX_LINKS = 2
NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,19}$")
SUBSYS_PREFIX = "nqn.2026-12.io.fxprobe"
NVME_PORT = 4420


def check_name(name: str) -> str:
    """A lab's name (its folder, its QEMU process names): BadInput when it is not one."""
    if not NAME_RE.match(name):
        raise BadInput(f"lab name {name!r}: use 1-20 lowercase letters, digits or '-', starting with a letter")
    return name


def check_raid(level: str, drives: int | None = None) -> None:
    """An md level fxprobe builds (``none``: one device exported as it is) and, given ``drives``, enough of them."""
    if level not in RAID_LEVELS:
        raise BadInput(f"--raid {level!r}: unknown RAID level", hint=f"use one of {', '.join(RAID_LEVELS)}")
    if drives is not None and level != "none" and drives < MIN_DRIVES[level]:
        raise BadInput(f"--raid {level} needs at least {MIN_DRIVES[level]} drives, got {drives}")


@dataclass(frozen=True)
class LabSpec(AsDict):
    name: str = "default"
    drives: int = 24
    raid: str = "raid6"
    raid_drives: int | None = None     # None: every drive
    hosts: int = 1
    links: int = 1
    transport: str = "tcp"
    link_speed: int = 100000            # advertised Mb/s on data NICs
    drive_mb: int = 256
    port_base: int | None = None        # None: free ports chosen by the kernel
    accel: str = "auto"
    connect: bool = True                # connect every host on every link at `up`
    arrays: int = 1                     # array guests: array, then array2.. (drives only, see lab.arrays)

    def validate(self) -> "LabSpec":
        check_name(self.name)
        check_raid(self.raid)
        if self.transport not in TRANSPORTS:
            raise BadInput(f"--transport {self.transport!r}: unknown transport", hint="use tcp or rdma")
        if not 1 <= self.drives <= MAX_DRIVES:
            raise BadInput(f"--drives {self.drives}: the array guest holds 1 to {MAX_DRIVES} hot-pluggable drives",
                           hint=f"use --drives {MAX_DRIVES} or fewer")
        used = self.array_drives
        if not 0 <= used <= self.drives:
            raise BadInput(f"--raid-drives {used}: must be between 0 and --drives {self.drives}")
        check_raid(self.raid, used)
        if self.raid == "none" and self.raid_drives not in (None, 0, 1):
            raise BadInput("--raid none exports one drive: leave --raid-drives unset")
        if not 1 <= self.hosts <= MAX_HOSTS:
            raise BadInput(f"--hosts {self.hosts}: use 1 to {MAX_HOSTS}")
        if not 1 <= self.arrays <= 4:
            raise BadInput(f"--arrays {self.arrays}: use 1 to 4")
        if not 1 <= self.links <= MAX_LINKS:
            raise BadInput(f"--links {self.links}: use 1 or {MAX_LINKS}")
        if not 10 <= self.link_speed <= 800000:
            raise BadInput(f"--link-speed {self.link_speed}: Mb/s between 10 and 800000")
        if not 16 <= self.drive_mb <= 65536:
            raise BadInput(f"--drive-mb {self.drive_mb}: use 16 to 65536")
        if self.port_base is not None and not 1024 <= self.port_base <= 65535 - self.port_count:
            raise BadInput(f"--port-base {self.port_base}: must leave {self.port_count} ports below 65536, above 1023")
        if self.accel not in ("auto", "kvm", "tcg"):
            raise BadInput(f"--accel {self.accel!r}: use auto, kvm or tcg")
        return self

    @property
    def array_drives(self) -> int:
        if self.raid == "none":
            return 1
        return self.drives if self.raid_drives is None else self.raid_drives

    @property
    def guest_names(self) -> list[str]:
        return ["array"] + [f"host{h}" for h in range(1, self.hosts + 1)]

    @property
    def port_count(self) -> int:
        """Loopback ports the lab listens on: one SSH per guest, one socket per data link."""
        return len(self.guest_names) + self.hosts * self.links

    @property
    def subsystem_nqn(self) -> str:
        return f"{SUBSYS_PREFIX}:{self.name}:array"

    @classmethod
    def from_dict(cls, data: dict) -> "LabSpec":
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(frozen=True)
class LinkPlan:
    host: int
    n: int

    @property
    def array_nic(self) -> str:
        return f"l{self.n}h{self.host}"

    @property
    def host_nic(self) -> str:
        return f"l{self.n}"

    @property
    def array_ip(self) -> str:
        return f"10.{self.n}.{self.host}.1"

    @property
    def host_ip(self) -> str:
        return f"10.{self.n}.{self.host}.2"

    @property
    def port_id(self) -> int:
        """nvmet port id of this link on the array."""
        return 100 * self.n + self.host

    def mac(self, side: int) -> str:
        return f"52:54:00:{self.n:02x}:{self.host:02x}:{side:02x}"

    def to_dict(self) -> dict:
        return {"host": f"host{self.host}", "n": self.n, "array_nic": self.array_nic, "host_nic": self.host_nic,
                "array_ip": self.array_ip, "host_ip": self.host_ip, "nvmet_port": self.port_id}


def link_plan(spec: LabSpec) -> list[LinkPlan]:
    return [LinkPlan(h, n) for h in range(1, spec.hosts + 1) for n in range(1, spec.links + 1)]


def drive_serial(lab_token: str, slot: int) -> str:
    """Distinct per slot and per lab, at most 20 characters (NVMe SN field)."""
    return f"FXL{lab_token[:6].upper()}S{slot:02d}"


def host_identity(lab_token: str, guest: str) -> tuple[str, str]:
    """(hostnqn, hostid) of a guest: stable for the lab, distinct per guest."""
    hostid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"fxprobe-lab:{lab_token}:{guest}"))
    return f"nqn.2014-08.org.nvmexpress:uuid:{hostid}", hostid


def hosts_file(spec: LabSpec, guest: str) -> str:
    """/etc/hosts of ``guest``: ``array`` is the array's address on the guest's own first link."""
    lines = ["127.0.0.1\tlocalhost", f"127.0.1.1\t{guest}"]
    host_index = int(guest[4:]) if guest.startswith("host") else 1
    lines.append(f"{LinkPlan(host_index, 1).array_ip}\tarray" if guest != "array" else "")
    for h in range(1, spec.hosts + 1):
        if f"host{h}" != guest:
            lines.append(f"{LinkPlan(h, 1).host_ip}\thost{h}" + ("\thost" if h == 1 else ""))
    return "\n".join(line for line in lines if line) + "\n"
