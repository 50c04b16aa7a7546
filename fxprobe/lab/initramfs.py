"""The lab guests' tiny initramfs: busybox, the init script and the few modules it loads.

Written as a "newc" cpio archive in Python (no cpio binary needed) and cached by content hash.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from fxprobe.core.errors import NotRunnable
from fxprobe.lab.kernel import LabKernel, cache_root
from fxprobe.core.runner import Runner

# What the initramfs loads, in this order, to reach the 9p root and the overlay.
BOOT_MODULES = ("virtio_pci", "virtio_net", "9pnet_virtio", "9p", "overlay")
BUSYBOX_CANDIDATES = ("/bin/busybox", "/usr/bin/busybox")


def guest_file(name: str) -> Path:
    """Path of a file shipped in ``fxprobe/lab/guest/`` (the guests read it over 9p)."""
    return Path(str(resources.files("fxprobe.lab") / "guest" / name))


@dataclass(frozen=True)
class CpioEntry:
    path: str
    mode: int
    data: bytes = b""
    rdev: tuple[int, int] = (0, 0)


def _header(entry: CpioEntry, ino: int) -> bytes:
    name = entry.path.encode() + b"\0"
    fields = [ino, entry.mode, 0, 0, 1, 0, len(entry.data), 0, 0, entry.rdev[0], entry.rdev[1], len(name), 0]
    head = b"070701" + b"".join(f"{value:08X}".encode() for value in fields)
    pad = lambda n: b"\0" * ((4 - n % 4) % 4)
    return head + name + pad(len(head) + len(name))


def write_cpio(entries: list[CpioEntry]) -> bytes:
    """A newc archive of ``entries`` with the trailer."""
    out = bytearray()
    for ino, entry in enumerate(entries + [CpioEntry("TRAILER!!!", 0)], start=1):
        out += _header(entry, ino)
        out += entry.data + b"\0" * ((4 - len(entry.data) % 4) % 4)
    return bytes(out)


def module_closure(runner: Runner, kernel: LabKernel, names=BOOT_MODULES) -> list[Path]:
    """Module files to insmod, dependencies first, each once (from ``modprobe --show-depends``)."""
    ordered: list[Path] = []
    for name in names:
        result = runner.run(["modprobe", "-d", str(kernel.root), "-S", kernel.version, "--show-depends", name],
                            timeout=30, always=True, check=True, what=f"resolving module {name}")
        for line in result.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "insmod":
                path = Path(parts[1])
                if path not in ordered:
                    ordered.append(path)
    return ordered


def find_busybox() -> Path:
    for candidate in BUSYBOX_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return Path(candidate)
    raise NotRunnable("busybox is not installed (the lab's initramfs needs a static busybox)",
                      hint="apt-get install busybox-static")


def ensure_initramfs(runner: Runner, kernel: LabKernel) -> Path:
    busybox = find_busybox().read_bytes()
    init = guest_file("init").read_bytes()
    modules = module_closure(runner, kernel)
    digest = hashlib.sha256(busybox + init + kernel.version.encode()
                            + "\n".join(str(m) for m in modules).encode()).hexdigest()[:16]
    path = cache_root() / "initramfs" / f"{kernel.version}-{digest}.cpio"
    if path.exists():
        return path
    dirs = ["bin", "dev", "proc", "sys", "mods", "lower", "rw", "newroot"]
    entries = [CpioEntry(d, stat.S_IFDIR | 0o755) for d in dirs]
    entries.append(CpioEntry("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1)))
    entries.append(CpioEntry("bin/busybox", stat.S_IFREG | 0o755, busybox))
    entries.append(CpioEntry("init", stat.S_IFREG | 0o755, init))
    entries.append(CpioEntry("modules.order", stat.S_IFREG | 0o644,
                             "".join(m.name + "\n" for m in modules).encode()))
    entries += [CpioEntry(f"mods/{m.name}", stat.S_IFREG | 0o644, m.read_bytes()) for m in modules]
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
        tmp.write(write_cpio(entries))        # a file of this writer's own: two `lab up` at once never mix theirs
    os.replace(tmp.name, path)
    return path
