"""The kernel's network interfaces and RDMA ports as sysfs and netlink show them (``/sys/class/net``,
``/sys/class/infiniband``, rtnetlink through pyroute2): read here, judged in :mod:`fxprobe.network`.
Local reads go through :mod:`fxprobe.core.sysfs` (root redirectable); a node's attribute is read with ``cat``."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace

from pyroute2 import IPRoute

from fxprobe.core import sysfs
from fxprobe.core.data import AsDict
from fxprobe.core.errors import BadInput
from fxprobe.core.hosts import Host
from fxprobe.core.kernel import NET_CLASS, RDMA_CLASS
from fxprobe.core.runner import Runner

TCP_ECN = "/proc/sys/net/ipv4/tcp_ecn"


def attribute_path(iface: str, name: str) -> str:
    """A network interface's sysfs attribute (speed, mtu, operstate ...)."""
    return f"{NET_CLASS}/{iface}/{name}"


def read_attribute(runner: Runner, host: Host, iface: str, name: str, label: str | None = None) -> str | None:
    """An interface attribute on ``host`` (``cat`` over its connection; None when unreadable)."""
    result = runner.run(["cat", attribute_path(iface, name)], timeout=10, host=host, label=label or f"{name}-{iface}",
                        always=True)
    return result.stdout.strip() if result.ok else None


def speed_bps(runner: Runner, iface: str, host: Host) -> float | None:
    """The port's reported speed in bit/s (None when it reports none: a virtual NIC, a link down)."""
    text = read_attribute(runner, host, iface, "speed", label=f"speed-{iface}")
    return int(text) * 1e6 if text and text.isdigit() and int(text) > 0 else None


def ecn_settings(iface: str) -> dict:
    """TCP ECN and the RoCE ECN switches a NIC driver exposes (information)."""
    info: dict = {"tcp_ecn": sysfs.read(TCP_ECN)}
    ecn_dir = attribute_path(iface, "ecn")
    if sysfs.exists(ecn_dir):
        info["roce_ecn"] = {f"{kind}/{prio}": sysfs.read(f"{ecn_dir}/{kind}/enable/{prio}")
                            for kind in sysfs.listdir(ecn_dir)
                            for prio in sysfs.listdir(f"{ecn_dir}/{kind}/enable")}
    return info


@dataclass(frozen=True)
class Gid:
    index: int
    gid: str
    type: str
    ndev: str | None

    @property
    def ipv4(self) -> str | None:
        address = ipaddress.IPv6Address(self.gid)
        return str(address.ipv4_mapped) if address.ipv4_mapped else None


@dataclass(frozen=True)
class RdmaPort:
    device: str
    port: int
    state: str | None
    phys_state: str | None
    active_mtu: str | None
    rate: str | None
    gids: tuple[Gid, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Interface(AsDict):
    name: str
    operstate: str | None
    mtu: int | None
    speed_mbps: int | None
    addresses: tuple[str, ...]
    rdma: tuple[RdmaPort, ...]


def _gids(device: str, port: str) -> tuple[Gid, ...]:
    base = f"{RDMA_CLASS}/{device}/ports/{port}"
    gids = []
    for index in sysfs.listdir(f"{base}/gids"):
        if not index.isdigit():
            continue
        raw = sysfs.read(f"{base}/gids/{index}")
        if not raw or set(raw.replace(":", "")) == {"0"}:
            continue
        gid_type = sysfs.read(f"{base}/gid_attrs/types/{index}") or ""
        ndev = sysfs.read(f"{base}/gid_attrs/ndevs/{index}")
        try:
            text = str(ipaddress.IPv6Address(raw))
        except ValueError:
            continue
        gids.append(Gid(int(index), text, gid_type, ndev))
    return tuple(sorted(gids, key=lambda g: g.index))


def read_rdma_ports() -> list[tuple[str | None, RdmaPort]]:
    """Every RDMA port of this host with all its GIDs, read once: (the device's parent netdev, the port).
    A GID table has hundreds of entries a port (1024 for rxe): read per interface, a guest with 10 NICs and
    4 soft-RoCE devices read 41,000 files for one netcheck (23 s under TCG)."""
    table = []
    for device in sysfs.listdir(RDMA_CLASS):
        base = f"{RDMA_CLASS}/{device}"
        parent = sysfs.read(f"{base}/parent")
        for port in sysfs.listdir(f"{base}/ports"):
            where = f"{base}/ports/{port}"
            table.append((parent, RdmaPort(device, int(port), sysfs.read(f"{where}/state"),
                                           sysfs.read(f"{where}/phys_state"), None, sysfs.read(f"{where}/rate"),
                                           _gids(device, port))))
    return table


def rdma_ports_for(ifname: str, table: list[tuple[str | None, RdmaPort]] | None = None) -> tuple[RdmaPort, ...]:
    """RDMA ports bound to a netdev: physical (device/infiniband) or soft (rxe: GID ndevs, parent file);
    ``table``: read_rdma_ports() already read (else read here)."""
    devices = sysfs.listdir(f"{NET_CLASS}/{ifname}/device/infiniband")
    ports = []
    for parent, port in read_rdma_ports() if table is None else table:
        if parent == ifname or port.device in devices or any(g.ndev == ifname for g in port.gids):
            ports.append(replace(port, gids=tuple(g for g in port.gids if g.ndev in (None, ifname))))
    return tuple(ports)


def read_interfaces(names: list[str] | None = None) -> list[Interface]:
    with IPRoute() as ipr:
        links = {link.get("ifname"): link for link in ipr.get_links()}
        addrs: dict[int, list[str]] = {}
        for addr in ipr.get_addr():
            addrs.setdefault(addr["index"], []).append(f"{addr.get('address')}/{addr['prefixlen']}")
    if names:
        unknown = [n for n in names if n not in links]
        if unknown:
            raise BadInput(f"--iface {unknown[0]}: no such interface (have: {', '.join(sorted(links))})")
    table = read_rdma_ports()
    if not names:
        names = [n for n in links if n != "lo" and (rdma_ports_for(n, table) or sysfs.exists(f"{NET_CLASS}/{n}/device"))]
    result = []
    for name in names:
        link = links[name]
        speed = sysfs.read(f"{NET_CLASS}/{name}/speed")
        speed_mbps = int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None
        result.append(Interface(name, link.get("operstate"), link.get("mtu"), speed_mbps,
                                tuple(addrs.get(link["index"], [])), rdma_ports_for(name, table)))
    return result
