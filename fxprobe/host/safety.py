"""The target check every destructive step goes through, in a dry run as in a real one.

A block device is refused when it is mounted (itself or a partition), holds the root
filesystem, has holders (device-mapper, md) or partitions in use, or when its identity
(serial, WWID, or ``loop:<backing file>`` for a loop device) is not on the allow-list.
A directory is refused when it is a system folder (/, /dev, /proc, /sys, /etc, /usr, /boot) or
inside one: fxprobe lays files out in a directory target, so it is always written.
Reads sysfs and /proc/self/mountinfo under a root that tests redirect.

A dry run calls the same :func:`check_target` and shows :meth:`TargetCheck.lines`; the caller then
raises :meth:`TargetCheck.require_safe` after printing, so a refused target exits 2 in both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from fxprobe.core.errors import BadInput, UnsafeTarget
from fxprobe.core.paths import system_refusal


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
                "checks": [c.to_dict() for c in self.checks]}


class SystemView:
    """sysfs and mountinfo, read under ``root`` (``/`` on a real machine; a tree in tests)."""

    def __init__(self, root: Path = Path("/")):
        self.root = Path(root)

    # -- primitives (RemoteSystemView answers them over the node's host) ----------
    def read(self, path: str) -> str | None:
        try:
            return (self.root / path.lstrip("/")).read_text().strip()
        except (FileNotFoundError, NotADirectoryError, PermissionError, IsADirectoryError):
            return None

    def exists(self, path: str) -> bool:
        return (self.root / path.lstrip("/")).exists()

    def is_dir(self, path: str) -> bool:
        return (self.root / path.lstrip("/")).is_dir()

    def listdir(self, path: str) -> list[str]:
        folder = self.root / path.lstrip("/")
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def realpath(self, path: str) -> str:
        return os.path.realpath(path) if self.root == Path("/") else path

    def writable(self, path: str) -> bool:
        return os.access(self.root / path.lstrip("/"), os.W_OK)

    # -- block devices ------------------------------------------------------
    def _read(self, *parts: str) -> str | None:
        return self.read("/".join(parts))

    def is_block(self, name: str) -> bool:
        return self.exists(f"sys/class/block/{name}")

    def dev_number(self, name: str) -> str | None:
        return self._read("sys/class/block", name, "dev")

    def size_bytes(self, name: str) -> int | None:
        sectors = self._read("sys/class/block", name, "size")
        return int(sectors) * 512 if sectors and sectors.isdigit() else None

    def partitions(self, name: str) -> list[str]:
        base = f"sys/class/block/{name}"
        return [p for p in self.listdir(base) if self.exists(f"{base}/{p}/partition")]

    def holders(self, name: str) -> list[str]:
        return self.listdir(f"sys/class/block/{name}/holders")

    def identity(self, name: str) -> str:
        for parts in (("device", "serial"), ("serial",), ("wwid",), ("device", "wwid")):
            value = self._read("sys/class/block", name, *parts)
            if value:
                return value
        backing = self._read("sys/class/block", name, "loop", "backing_file")
        return f"loop:{backing}" if backing else ""

    def mounts(self) -> list[tuple[str, str, str]]:
        """(major:minor, mount point, source) for each line of mountinfo."""
        text = self._read("proc/self/mountinfo") or ""
        out = []
        for line in text.splitlines():
            fields = line.split()
            if len(fields) < 5:
                continue
            source = ""
            if "-" in fields:
                after = fields[fields.index("-") + 1:]
                source = after[1] if len(after) > 1 else ""
            out.append((fields[2], fields[4], source))
        return out


class RemoteSystemView(SystemView):
    """The same questions asked on a node through its host (``cat``, ``ls``, ``test``, ``readlink``)."""

    def __init__(self, runner, host):
        super().__init__(Path("/"))
        self.runner, self.host = runner, host

    def _run(self, argv: list[str]):
        return self.runner.run(argv, timeout=30, host=self.host, always=True, label="target-check")

    def read(self, path: str) -> str | None:
        result = self._run(["cat", "/" + path.lstrip("/")])
        return result.stdout.strip() if result.ok else None

    def exists(self, path: str) -> bool:
        return self._run(["test", "-e", "/" + path.lstrip("/")]).ok

    def is_dir(self, path: str) -> bool:
        return self._run(["test", "-d", "/" + path.lstrip("/")]).ok

    def listdir(self, path: str) -> list[str]:
        result = self._run(["ls", "-1", "/" + path.lstrip("/")])
        return sorted(result.stdout.split()) if result.ok else []

    def realpath(self, path: str) -> str:
        result = self._run(["readlink", "-f", path])
        return result.stdout.strip() if result.ok and result.stdout.strip() else path

    def writable(self, path: str) -> bool:
        return self._run(["test", "-w", path]).ok


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
    mounted = [(point, own.get(num) or sources.get(src)) for num, point, src in view.mounts()
               if num in own or src in sources]
    checks = [Check("exists", True, f"block device {name}, {view.size_bytes(name) or 0:,} B")]
    root = [m for m in mounted if m[0] == "/"]
    checks.append(Check("root filesystem", not root,
                        f"{root[0][1]} holds /" if root else "does not hold /"))
    checks.append(Check("mounted", not mounted,
                        ", ".join(f"{dev} on {point}" for point, dev in mounted)
                        if mounted else "not mounted"))
    holders = view.holders(name)
    checks.append(Check("holders", not holders,
                        f"held by {', '.join(holders)}" if holders else "no holders"))
    busy = [p for p in parts if view.holders(p) or any(dev == p for _, dev in mounted)]
    checks.append(Check("partitions", not busy,
                        f"partitions in use: {', '.join(busy)}" if busy else
                        (f"partitions {', '.join(parts)} not in use" if parts else "no partitions")))
    if destructive:
        listed = bool(identity) and identity in allow
        checks.append(Check("allow-list", listed,
                            f"{identity or 'no serial'} is on the allow-list" if listed else
                            f"{identity or 'device has no serial'} is not on the allow-list"))
    else:
        checks = checks[:1]  # reading needs only that it exists
    return TargetCheck(path, "block", name, identity, view.size_bytes(name), destructive, tuple(checks))


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

