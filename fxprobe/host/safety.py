"""The target check every destructive step goes through, in a dry run as in a real one.

A block device is refused when it is mounted (itself or a partition), holds the root
filesystem, is swap (itself or a partition, /proc/swaps), has holders (device-mapper, md) or partitions
in use, when the kernel refuses an exclusive open of it (EBUSY: probed on this machine's own /dev), or when its
identity (serial, WWID, or ``loop:<backing file>`` for a loop device) is not on the allow-list; each line
names the rule that refused.
A directory is refused when it is a system folder (/, /dev, /proc, /sys, /etc, /usr, /boot) or
inside one: fxprobe lays files out in a directory target, so it is always written.
Reads sysfs, /proc/self/mountinfo and /proc/swaps under a root that tests redirect.

A dry run calls the same :func:`check_target` and shows :meth:`TargetCheck.lines`; the caller then
raises :meth:`TargetCheck.require_safe` after printing, so a refused target exits 2 in both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from fxprobe.core.errors import BadInput, UnsafeTarget
from fxprobe.core.paths import system_refusal
from fxprobe.tools.blockdev import SystemView


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    def to_dict(self) -> dict:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


@dataclass(frozen=True)
class TargetCheck:
    path: str
    kind: str                 # "block" or "directory"
    device: str = ""          # sysfs name, e.g. loop0, nvme0n1
    identity: str = ""        # serial / wwid / loop:<file>
    size_bytes: int | None = None
    destructive: bool = False
    checks: tuple[Check, ...] = field(default_factory=tuple)
    subsystem: dict = field(default_factory=dict)   # the NVMe subsystem behind it (SystemView.nvme_subsystem), {}

    @property
    def refused(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def safe(self) -> bool:
        return not self.refused

    def lines(self) -> list[str]:
        what = f"{self.path} ({self.kind}" + (f" {self.device}, id {self.identity or '?'}" if self.device else "") + ")"
        head = f"target {what}: {'OK' if self.safe else 'REFUSED'}" + \
            (" for writing" if self.destructive else " for reading")
        return [head] + [f"  {'ok     ' if c.ok else 'REFUSED'} {c.name}: {c.detail}" for c in self.checks]

    @property
    def refusal(self) -> str:
        """The first reason the target is refused, as one line ("" when it is safe)."""
        if self.safe:
            return ""
        first = self.refused[0]
        return f"refusing to write to {self.path}: {first.name}: {first.detail}"

    def require_safe(self) -> "TargetCheck":
        if not self.safe:
            name = self.refused[0].name
            raise UnsafeTarget(self.refusal, hint={"allow-list": "add its identity with --allow-serial after "
                                                                 "checking it holds nothing",
                                                   "system folder": "name a data or scratch folder"}
                               .get(name, "pick another device"))
        return self

    def to_dict(self) -> dict:
        return {"path": self.path, "kind": self.kind, "device": self.device, "identity": self.identity,
                "size_bytes": self.size_bytes, "destructive": self.destructive, "safe": self.safe,
                "checks": [c.to_dict() for c in self.checks], "subsystem": self.subsystem}


def device_name(path: str, view: SystemView) -> str | None:
    """sysfs name of a /dev path (following symlinks such as /dev/disk/by-id/...), or None."""
    real = view.realpath(path)
    name = os.path.basename(real)
    return name if real.startswith("/dev/") and view.is_block(name) else None


def check_target(path: str, *, destructive: bool, allow: tuple[str, ...] = (),
                 view: SystemView | None = None) -> TargetCheck:
    """Look at a target before using it. Raises BadInput when it does not exist or is
    neither a directory nor a block device; otherwise returns the checks (see ``safe``)."""
    view = view or SystemView()
    text = str(path)
    if text.startswith("/dev/"):
        name = device_name(text, view)
        if name is None:
            raise BadInput(f"target {text}: no such block device", hint="check the name with lsblk")
        return _check_block(text, name, destructive, allow, view)
    if not view.exists(text):
        raise BadInput(f"target {text}: does not exist", hint="create the directory or name a block device")
    if not view.is_dir(text):
        raise BadInput(f"target {text}: not a directory or a block device under /dev")
    checks = [Check("exists", True, "directory")]
    refusal = system_refusal(text, view.realpath)
    checks.append(Check("system folder", not refusal, refusal or "not a system folder"))
    if destructive and not view.writable(text):
        checks.append(Check("writable", False, "no write permission"))
    return TargetCheck(text, "directory", destructive=destructive, checks=tuple(checks))


def _check_block(path: str, name: str, destructive: bool, allow: tuple[str, ...],
                 view: SystemView) -> TargetCheck:
    identity = view.identity(name)
    parts = view.partitions(name)
    own = {view.dev_number(n): n for n in [name] + parts if view.dev_number(n)}
    sources = {f"/dev/{n}": n for n in [name] + parts}
    mounts = view.mounts()
    # a source by another name (a by-id link) counts too; btrfs shows an anonymous 0:NN, not the device's number
    named = {src: view.block_named(src) for num, _, src in mounts if num not in own and src.startswith("/dev/")
             and src not in sources}
    mounted = [(point, own.get(num) or sources.get(src) or named.get(src)) for num, point, src in mounts
               if num in own or src in sources or named.get(src) in sources.values()]
    checks = [Check("exists", True, f"block device {name}, {view.size_bytes(name) or 0:,} B")]
    subsystem = view.nvme_subsystem(name)
    if not destructive:
        return TargetCheck(path, "block", name, identity, view.size_bytes(name), destructive, tuple(checks), subsystem)
    root = [m for m in mounted if m[0] == "/"]
    checks.append(Check("root filesystem", not root,
                        f"{root[0][1]} holds /" if root else "does not hold /"))
    checks.append(Check("mounted", not mounted,
                        ", ".join(f"{dev} on {point}" for point, dev in mounted)
                        if mounted else "not mounted"))
    swapped = sorted(view.swaps() & {name, *parts})
    checks.append(Check("swap", not swapped, f"{', '.join(swapped)} in use as swap" if swapped else "not swap"))
    holders = view.holders(name)
    checks.append(Check("holders", not holders,
                        f"held by {', '.join(holders)}" if holders else "no holders"))
    busy = [p for p in parts if view.holders(p) or p in swapped or any(dev == p for _, dev in mounted)]
    checks.append(Check("partitions", not busy,
                        f"partitions in use: {', '.join(busy)}" if busy else
                        (f"partitions {', '.join(parts)} not in use" if parts else "no partitions")))
    held, how = view.exclusive_open(name)
    checks.append(Check("exclusive open", held is not True, how))
    listed = bool(identity) and identity in allow
    checks.append(Check("allow-list", listed,
                        f"{identity or 'no serial'} is on the allow-list" if listed else
                        f"{identity or 'device has no serial'} is not on the allow-list"))
    return TargetCheck(path, "block", name, identity, view.size_bytes(name), destructive, tuple(checks), subsystem)


def unsafe_reasons(path: str, view: SystemView | None = None) -> list[str]:
    """Why writing to (or pulling) block device ``path`` would touch something in use - every rule of the target
    check but the allow-list (the caller judges that by the device's identity): [] when nothing holds it."""
    check = check_target(path, destructive=True, view=view)
    return [f"{check.path} ({check.device}): {c.name}: {c.detail}" for c in check.refused if c.name != "allow-list"]


WRITING_RW = ("write", "randwrite", "rw", "randrw", "readwrite", "trimwrite")


def load_writes(rw: str) -> bool:
    """Whether a fio ``rw`` mode writes to its target."""
    return rw in WRITING_RW or "write" in rw


def check_load_target(target: str, rw: str, *, allow: tuple[str, ...] = (),
                      view: SystemView | None = None) -> TargetCheck | None:
    """The one check a plan makes for the load it will run, the same in a dry run as in a real one: None when
    the load only reads; else the target check (show its ``lines()``, refuse with ``refusal`` when not
    ``safe`` - a dry run prints the refusal and exits 2 like the real run, which refuses before touching it)."""
    if not load_writes(rw):
        return None
    return check_target(target, destructive=True, allow=allow, view=view)

