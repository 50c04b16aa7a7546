"""Block devices as sysfs and /proc/self/mountinfo show them (``SystemView``: read under a root, ``/`` on a real
machine and a captured tree in tests; ``RemoteSystemView``: the same questions asked on a node through its host).
The target check every destructive step goes through (host.safety) and the host fault methods ask here."""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from fxprobe.core.kernel import BLOCK_DEVICES, MOUNTINFO, SWAPS
from fxprobe.tools.nvme import parse_address


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
        """Where ``path`` leads once its symlinks are followed (/dev/disk/by-id/... -> /dev/nvme0n1); under a
        tree in tests, within the tree (its links are relative, as udev's are)."""
        if self.root == Path("/"):
            return os.path.realpath(path)
        real, root = os.path.realpath(self.root / path.lstrip("/")), os.path.realpath(self.root)
        return "/" + os.path.relpath(real, root) if real.startswith(root + os.sep) else path

    def writable(self, path: str) -> bool:
        return os.access(self.root / path.lstrip("/"), os.W_OK)

    # -- block devices ------------------------------------------------------
    def _read(self, *parts: str) -> str | None:
        return self.read("/".join(parts))

    def is_block(self, name: str) -> bool:
        return self.exists(f"{BLOCK_DEVICES}/{name}")

    def dev_number(self, name: str) -> str | None:
        return self._read(BLOCK_DEVICES, name, "dev")

    def size_bytes(self, name: str) -> int | None:
        sectors = self._read(BLOCK_DEVICES, name, "size")
        return int(sectors) * 512 if sectors and sectors.isdigit() else None

    def is_partition(self, name: str) -> bool:
        return self.exists(f"{BLOCK_DEVICES}/{name}/partition")

    def partitions(self, name: str) -> list[str]:
        base = f"{BLOCK_DEVICES}/{name}"
        return [p for p in self.listdir(base) if self.exists(f"{base}/{p}/partition")]

    def holders(self, name: str) -> list[str]:
        return self.listdir(f"{BLOCK_DEVICES}/{name}/holders")

    def slaves(self, name: str) -> list[str]:
        """The devices below an md or dm device."""
        return self.listdir(f"{BLOCK_DEVICES}/{name}/slaves")

    def identity(self, name: str) -> str:
        for parts in (("device", "serial"), ("serial",), ("wwid",), ("device", "wwid")):
            value = self._read(BLOCK_DEVICES, name, *parts)
            if value:
                return value
        backing = self._read(BLOCK_DEVICES, name, "loop", "backing_file")
        return f"loop:{backing}" if backing else ""

    def nvme_subsystem(self, name: str) -> dict:
        """The NVMe subsystem a namespace belongs to, as the kernel names it: its NQN, serial, transport and the
        transport address of every controller (path) to it (``traddr``: the array's port for NVMe-oF, the PCI
        address of a local drive); {} for any other block device. A multipath head's ``device`` is the subsystem
        (its controllers are links in it); without multipath it is the one controller."""
        base = f"{BLOCK_DEVICES}/{name}/device"
        nqn = self._read(base, "subsysnqn")
        if not nqn:
            return {}
        own = self._read(base, "address")
        controllers = [""] if own is not None else [c for c in self.listdir(base) if re.fullmatch(r"nvme\d+", c)]
        addresses, transports = set(), set()
        for controller in controllers:
            folder = f"{base}/{controller}" if controller else base
            address = own if not controller else self._read(folder, "address")
            traddr = parse_address(address or "").get("traddr", "")
            if traddr:
                addresses.add(traddr)
            transports.add(self._read(folder, "transport") or "")
        return {"nqn": nqn, "serial": self._read(base, "serial") or "", "transport": ",".join(sorted(transports - {""})),
                "addresses": sorted(addresses)}

    def mounts(self) -> list[tuple[str, str, str]]:
        """(major:minor, mount point, source) for each line of mountinfo."""
        text = self._read(MOUNTINFO) or ""
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

    def block_named(self, source: str) -> str | None:
        """The block device a /dev path names (a mount source, a swap device), following its symlinks, or None."""
        if not source.startswith("/dev/"):
            return None
        name = os.path.basename(self.realpath(source))
        return name if self.is_block(name) else None

    def swaps(self) -> set[str]:
        """Block devices in active use as swap (/proc/swaps: a swap file lives on a mounted filesystem instead)."""
        lines = (self._read(SWAPS) or "").splitlines()[1:]
        named = (self.block_named(line.split()[0].replace("\\040", " ")) for line in lines if line.split())
        return {name for name in named if name}

    def exclusive_open(self, name: str) -> tuple[bool | None, str]:
        """Whether someone holds ``/dev/<name>`` exclusively - a mount, swap, md, device-mapper, or a program's
        O_EXCL open - asked the kernel itself with an O_EXCL open (read-only, closed at once): (True, why) when
        busy, (None, why) when it could not be asked (a tree in tests, no device node, no permission)."""
        if self.root != Path("/"):
            return None, "not probed (not this machine's /)"
        try:
            handle = os.open(f"/dev/{name}", os.O_RDONLY | os.O_EXCL | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.EBUSY:
                return True, f"/dev/{name}: O_EXCL open refused with EBUSY (in use: mounted, swap, md/dm or a program)"
            return None, f"not probed (/dev/{name}: {errno.errorcode.get(exc.errno, exc.errno)})"
        os.close(handle)
        return False, f"/dev/{name} opened exclusively: nobody holds it"

    # -- questions of this machine's drives (the host fault methods) ------------------
    def disk_by_serial(self, serial: str) -> str | None:
        """The first whole disk (not a partition) whose device reports ``serial``."""
        disks = self.disks_by_serial(serial)
        return disks[0] if disks else None

    def disks_by_serial(self, serial: str) -> list[str]:
        """Every whole disk (not a partition) whose device reports ``serial``: each namespace of the drive."""
        return [name for name in self.listdir(BLOCK_DEVICES)
                if self._read(BLOCK_DEVICES, name, "device", "serial") == serial and not self.is_partition(name)]

    def root_devices(self) -> set[str]:
        """Block devices under / (the root filesystem's device, its disk and the disks below md/dm). The device is
        found by its major:minor or by the mount's source path (btrfs shows an anonymous 0:NN number)."""
        rooted = [(number, source) for number, point, source in self.mounts() if point == "/"]
        names = {name for name in self.listdir(BLOCK_DEVICES) if self.dev_number(name) in {n for n, _ in rooted}}
        names |= {name for _, source in rooted if (name := self.block_named(source))}
        pending = list(names)
        while pending:   # walk down: partition -> disk, md/dm -> slaves
            name = pending.pop()
            parent = (self.root / BLOCK_DEVICES.lstrip("/") / name).resolve().parent.name
            below = ([parent] if self.is_partition(name) else []) + self.slaves(name)
            for device in below:
                if device not in names:
                    names.add(device)
                    pending.append(device)
        return names


class RemoteSystemView(SystemView):
    """The same questions asked on a node through its host (``cat``, ``ls``, ``test``, ``readlink``, ``find``):
    one command per question - one for all of a device's partitions - and each file read once per view (a lab
    guest under TCG answers an ssh command in 0.1-2 s; a disk's sysfs folder has ~30 entries)."""

    def __init__(self, runner, host):
        super().__init__(Path("/"))
        self.runner, self.host = runner, host
        self.block_root = "/" + BLOCK_DEVICES.lstrip("/")     # where partitions() looks (a tree in tests)
        self._reads: dict[str, str | None] = {}

    def _run(self, argv: list[str]):
        return self.runner.run(argv, timeout=30, host=self.host, always=True, label="target-check")

    def read(self, path: str) -> str | None:
        path = "/" + path.lstrip("/")
        if path not in self._reads:
            result = self._run(["cat", path])
            self._reads[path] = result.stdout.strip() if result.ok else None
        return self._reads[path]

    def partitions(self, name: str) -> list[str]:
        """The sub-folders of the device's folder that hold a ``partition`` file, in one ``find`` (the
        trailing / follows the class link; a partition's folder is a real one below it)."""
        result = self._run(["find", f"{self.block_root}/{name}/", "-mindepth", "2", "-maxdepth", "2",
                            "-name", "partition"])
        return sorted(Path(line).parent.name for line in result.stdout.split()) if result.ok else []

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

    def exclusive_open(self, name: str) -> tuple[bool | None, str]:
        return None, "not probed on a node (mounts, swap and holders are read there)"
