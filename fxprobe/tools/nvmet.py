"""The Linux NVMe target (nvmet) through configfs, as a small object model (nvmetcli style).

``Subsystem``, ``Namespace`` and ``Port`` are thin nodes over a configfs folder; errors name the
path; ``teardown`` removes things in the only order the kernel accepts (port links, namespaces,
subsystems, then ports left empty). The root is redirectable for tests (``NvmetRoot(path)``).
"""

from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fxprobe.core import sysfs
from fxprobe.core.errors import NotRunnable, ToolError
from fxprobe.core.kernel import NVMET_CONFIGFS

TRTYPES = ("tcp", "rdma", "loop")


class CFSError(ToolError):
    """A configfs operation failed; the message names the path."""


@contextmanager
def _configfs(what: str, path: Path, nothing_to_do: type[OSError] | tuple = ()):
    """The one place a configfs operation's OSError becomes a CFSError naming the path; ``nothing_to_do`` is the
    error that means it was already done (a folder that exists, or is gone)."""
    try:
        yield
    except nothing_to_do:
        pass
    except OSError as exc:
        raise CFSError(f"cannot {what} {path}: {exc.strerror or exc}") from None


def _write(path: Path, value: str) -> None:
    with _configfs(f"write {value!r} to", path):
        path.write_text(f"{value}\n")


def _read(path: Path) -> str:
    with _configfs("read", path):
        return path.read_text().strip()


def _mkdir(path: Path) -> None:
    with _configfs("create", path, FileExistsError):
        path.mkdir()


def _rmdir(path: Path) -> None:
    with _configfs("remove", path, FileNotFoundError):
        path.rmdir()


@dataclass(frozen=True)
class Node:
    """One configfs folder of nvmet (nvmetcli's node): its path, its attribute files read and written by name
    (errors name the path), the names of the entries of a sub-folder."""

    path: Path

    def get(self, name: str) -> str:
        return _read(self.path / name)

    def set(self, name: str, value: str) -> None:
        _write(self.path / name, value)

    def entries(self, folder: str) -> list[str]:
        where = self.path / folder
        return sorted(p.name for p in where.iterdir()) if where.is_dir() else []


class Namespace(Node):
    @property
    def nsid(self) -> int:
        return int(self.path.name)

    @property
    def device_path(self) -> str:
        return self.get("device_path")

    @property
    def enabled(self) -> bool:
        return self.get("enable") == "1"

    def set_device(self, device: str) -> None:
        if self.enabled:
            self.set("enable", "0")
        self.set("device_path", device)

    def enable(self, on: bool = True) -> None:
        self.set("enable", "1" if on else "0")

    def to_dict(self) -> dict:
        return {"nsid": self.nsid, "device_path": self.device_path, "enabled": self.enabled}


class Subsystem(Node):
    @property
    def nqn(self) -> str:
        return self.path.name

    def namespaces(self) -> list[Namespace]:
        return sorted((Namespace(self.path / "namespaces" / n) for n in self.entries("namespaces")),
                      key=lambda n: n.nsid)

    def add_namespace(self, nsid: int, device: str, enable: bool = True) -> Namespace:
        namespace = Namespace(self.path / "namespaces" / str(nsid))
        _mkdir(namespace.path)
        namespace.set_device(device)
        if enable:
            namespace.enable()
        return namespace

    def set_attr(self, name: str, value: str) -> None:
        self.set(f"attr_{name}", value)

    def attr(self, name: str) -> str:
        return self.get(f"attr_{name}")

    def delete(self) -> None:
        for namespace in self.namespaces():
            namespace.enable(False)
            _rmdir(namespace.path)
        for host in (self.path / "allowed_hosts").glob("*") if (self.path / "allowed_hosts").is_dir() else []:
            host.unlink()
        _rmdir(self.path)

    def to_dict(self) -> dict:
        return {"nqn": self.nqn, "allow_any_host": self.attr("allow_any_host") == "1",
                "serial": self.attr("serial") if (self.path / "attr_serial").exists() else None,
                "namespaces": [n.to_dict() for n in self.namespaces()]}


class Port(Node):
    @property
    def port_id(self) -> int:
        return int(self.path.name)

    def addr(self, name: str) -> str:
        return self.get(f"addr_{name}")

    def configure(self, trtype: str, traddr: str, trsvcid: str | int, adrfam: str = "ipv4") -> None:
        if trtype not in TRTYPES:
            raise CFSError(f"{self.path}: unknown transport {trtype!r} (use {', '.join(TRTYPES)})")
        if self.subsystem_nqns():
            current = (self.addr("trtype"), self.addr("traddr"), self.addr("trsvcid"))
            if current != (trtype, traddr, str(trsvcid)):
                raise CFSError(f"{self.path}: in use as {':'.join(current)}, cannot change it while subsystems are linked")
            return
        for name, value in (("trtype", trtype), ("adrfam", adrfam), ("traddr", traddr), ("trsvcid", str(trsvcid))):
            self.set(f"addr_{name}", value)

    def subsystem_nqns(self) -> list[str]:
        return self.entries("subsystems")

    def link(self, subsystem: Subsystem) -> None:
        link = self.path / "subsystems" / subsystem.nqn
        if link.is_symlink() or link.exists():
            return
        try:
            os.symlink(subsystem.path, link)
        except OSError as exc:
            hint = " (address in use, or the transport module is not loaded)" if exc.errno in (
                errno.EADDRINUSE, errno.EINVAL, errno.ENODEV) else ""
            raise CFSError(f"cannot link {subsystem.nqn} to port {self.path}: {exc.strerror or exc}{hint}") from None

    def unlink(self, nqn: str) -> None:
        link = self.path / "subsystems" / nqn
        if link.is_symlink():
            try:
                link.unlink()
            except OSError as exc:
                raise CFSError(f"cannot unlink {link}: {exc.strerror or exc}") from None

    def delete(self) -> None:
        for nqn in self.subsystem_nqns():
            self.unlink(nqn)
        _rmdir(self.path)

    def to_dict(self) -> dict:
        return {"port_id": self.port_id, "trtype": self.addr("trtype"), "traddr": self.addr("traddr"),
                "trsvcid": self.addr("trsvcid"), "adrfam": self.addr("adrfam"),
                "subsystems": self.subsystem_nqns()}


class NvmetRoot:
    """The nvmet configfs tree (default: core.kernel.NVMET_CONFIGFS under core.sysfs's root, which tests redirect)."""

    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path is not None else sysfs.path(NVMET_CONFIGFS)

    def probe(self) -> str | None:
        """Why nvmet cannot be configured here, or None."""
        if not self.path.is_dir():
            return f"{self.path} does not exist (load the nvmet module and mount configfs)"
        if not os.access(self.path / "subsystems", os.W_OK):
            return f"{self.path}/subsystems is not writable (run as root)"
        return None

    def require(self) -> None:
        reason = self.probe()
        if reason:
            raise NotRunnable(f"nvmet target: {reason}", hint="modprobe nvmet nvmet-tcp; mount -t configfs none /sys/kernel/config")

    def subsystems(self) -> list[Subsystem]:
        folder = self.path / "subsystems"
        return sorted((Subsystem(p) for p in folder.iterdir()), key=lambda s: s.nqn) if folder.is_dir() else []

    def ports(self) -> list[Port]:
        folder = self.path / "ports"
        return sorted((Port(p) for p in folder.iterdir()), key=lambda p: p.port_id) if folder.is_dir() else []

    def subsystem(self, nqn: str, create: bool = True, allow_any_host: bool = True) -> Subsystem:
        subsystem = Subsystem(self.path / "subsystems" / nqn)
        if not subsystem.path.is_dir():
            if not create:
                raise CFSError(f"{subsystem.path}: no such subsystem")
            _mkdir(subsystem.path)
        if allow_any_host:
            subsystem.set_attr("allow_any_host", "1")
        return subsystem

    def namespace(self, nqn: str, nsid: int) -> Namespace:
        """Namespace ``nsid`` of subsystem ``nqn`` (looked up, not made: its path may not exist)."""
        return Namespace(self.path / "subsystems" / nqn / "namespaces" / str(nsid))

    def port(self, port_id: int, create: bool = True) -> Port:
        port = Port(self.path / "ports" / str(port_id))
        if not port.path.is_dir():
            if not create:
                raise CFSError(f"{port.path}: no such port")
            _mkdir(port.path)
        return port

    def teardown(self, nqn: str | None = None) -> list[str]:
        """Remove one subsystem (or all), then every port left with no subsystem. Returns what was removed."""
        removed = []
        targets = [s for s in self.subsystems() if nqn is None or s.nqn == nqn]
        for port in self.ports():
            for subsystem in targets:
                port.unlink(subsystem.nqn)
        for subsystem in targets:
            subsystem.delete()
            removed.append(f"subsystem {subsystem.nqn}")
        for port in self.ports():
            if not port.subsystem_nqns():
                port.delete()
                removed.append(f"port {port.port_id}")
        return removed

    def dump(self) -> dict:
        return {"subsystems": [s.to_dict() for s in self.subsystems()],
                "ports": [p.to_dict() for p in self.ports()]}
