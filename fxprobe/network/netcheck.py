"""RoCEv2 / MTU readiness of the data interfaces (pyroute2 for links and routes, sysfs for RDMA).

Each check is a Criterion so the verdict prints measured beside required.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field

from pyroute2 import IPRoute

from fxprobe.core.errors import BadInput
from fxprobe.core.hosts import LOCAL, Host
from fxprobe.network.roce import netdev_mtu_for_roce
from fxprobe.tools import netdev
from fxprobe.tools.netdev import Interface, read_interfaces
from fxprobe.core.runner import Runner
from fxprobe.core.verdict import Criterion, Outcome, Verdict

IPV4_HEADER_ICMP = 28          # IPv4 20 + ICMP 8: ping -s payload = MTU - 28


def route_interface(peer: str) -> str | None:
    return route_to(peer)[0]


def route_to(peer: str) -> tuple[str | None, str | None]:
    """(interface, this side's source address) of the route to ``peer``."""
    with IPRoute() as ipr:
        try:
            routes = ipr.route("get", dst=peer)
        except Exception:      # pyroute2 NetlinkError: no route (unreachable network)
            return None, None
        if not routes:
            return None, None
        oif = routes[0].get("oif")
        links = ipr.get_links(oif)
        return (links[0].get("ifname") if links else None), routes[0].get_attr("RTA_PREFSRC")


def probe_path_mtu(runner: Runner, peer: str, mtu: int, iface: str | None = None,
                   host: Host = LOCAL) -> tuple[bool, str]:
    """Don't-fragment ICMP at the full MTU: (passed, detail)."""
    argv = ["ping", "-M", "do", "-s", str(mtu - IPV4_HEADER_ICMP), "-c", "2", "-W", "2", "-q"]
    if iface:
        argv += ["-I", iface]
    result = runner.run(argv + [peer], timeout=15, host=host, label=f"pmtu-{peer}", always=True)
    received = re.search(r"(\d+) received", result.stdout)
    ok = result.returncode == 0 and bool(received) and int(received.group(1)) > 0
    detail = (result.stdout.strip().splitlines() or [""])[-1] if ok else \
        ((result.stderr.strip() or result.stdout.strip()).splitlines() or ["no reply"])[-1]
    return ok, detail


def qos_info(runner: Runner, iface: str) -> dict:
    """PFC/ECN/DSCP where the system exposes them; shown as information, never guessed."""
    info = netdev.ecn_settings(iface)
    if shutil.which("dcb") is None:
        info["pfc"] = "not read: the dcb tool (iproute2) is not installed"
        return info
    result = runner.run(["dcb", "pfc", "show", "dev", iface], timeout=10, label=f"dcb-pfc-{iface}", always=True)
    info["pfc"] = result.stdout.strip() if result.ok else f"not exposed ({(result.stderr.strip().splitlines() or ['dcb failed'])[-1]})"
    return info


@dataclass
class NetcheckResult:
    interfaces: list[Interface]
    verdict: Verdict
    qos: dict
    routes: dict = field(default_factory=dict)          # peer -> {"iface", "source"}
    not_judged: list[Interface] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"interfaces": [i.to_dict() for i in self.interfaces], "verdict": self.verdict.to_dict(),
                "qos": self.qos, "routes": self.routes,
                "not_judged": [{**i.to_dict(), "why": "not a data interface: no speed reported, no RDMA port"
                                + (", no route to a --peer" if self.routes else "")} for i in self.not_judged]}


def data_interfaces(found: list[Interface], peers: list[str]) -> tuple[list[Interface], list[Interface], dict]:
    """Which interfaces are judged without --iface: the routes to the peers, else every interface that
    reports a speed or carries an RDMA port; the rest (a management NIC without speed) is information."""
    routes = {}
    for peer in peers:
        iface, source = route_to(peer)
        routes[peer] = {"iface": iface, "source": source}
    if peers:
        wanted = {r["iface"] for r in routes.values()}
        judged = [nic for nic in found if nic.name in wanted]
    else:
        judged = [nic for nic in found if nic.speed_mbps or nic.rdma]
    return judged, [nic for nic in found if nic not in judged], routes


def with_active_mtu(runner: Runner, nic: Interface) -> Interface:
    """The interface with each RDMA port's active MTU (ibv_devinfo), where it can be read."""
    from dataclasses import replace
    from fxprobe.tools.ibverbs import run_active_mtu
    ports = tuple(replace(p, active_mtu=str(mtu) if (mtu := run_active_mtu(runner, p.device, p.port)) else None)
                  for p in nic.rdma)
    return replace(nic, rdma=ports)


def check(runner: Runner, interfaces: list[str] | None = None, peers: list[str] | None = None,
          roce: bool | None = None, roce_mtu: int = 4096, min_speed_mbps: int | None = None,
          probe_mtu: int | None = None) -> NetcheckResult:
    """Evaluate every data interface (and every peer path); ``roce=None`` checks RoCE where a device is bound.
    Without ``interfaces`` only the data interfaces are judged (:func:`data_interfaces`). ``probe_mtu`` sends
    the don't-fragment probe at that size instead of the interface's own MTU (the other end's MTU)."""
    found = read_interfaces(interfaces)
    if not found:
        raise BadInput("no data interface found", hint="name them with --iface")
    not_judged: list[Interface] = []
    routes = {peer: dict(zip(("iface", "source"), route_to(peer))) for peer in peers or []}
    if not interfaces:
        found, not_judged, routes = data_interfaces(found, list(peers or []))
        if not found:
            return NetcheckResult([], Verdict("netcheck", (), reason="no data interface: none reports a speed or "
                                              "an RDMA port" + (", none routes to a --peer" if peers else "")),
                                  {}, routes, not_judged)
    found = [with_active_mtu(runner, nic) if nic.rdma else nic for nic in found]
    criteria: list[Criterion] = []
    qos = {}
    for nic in found:
        criteria.append(Criterion(f"{nic.name} link", Outcome.PASS if nic.operstate == "UP" else Outcome.FAIL,
                                  nic.operstate, "UP", "=="))
        if min_speed_mbps:
            criteria.append(Criterion.compare(f"{nic.name} speed", nic.speed_mbps, ">=", min_speed_mbps, unit="Mb/s",
                                              detail="" if nic.speed_mbps else "speed not reported"))
        else:
            criteria.append(Criterion(f"{nic.name} speed", Outcome.PASS if nic.speed_mbps else Outcome.NOT_RUN,
                                      nic.speed_mbps, unit="Mb/s",
                                      detail="" if nic.speed_mbps else "the driver reports no speed"))
        want_roce = bool(nic.rdma) if roce is None else roce
        if want_roce:
            need = netdev_mtu_for_roce(roce_mtu)
            criteria.append(Criterion.compare(f"{nic.name} MTU for RoCE MTU {roce_mtu}", nic.mtu, ">=", need, unit="B"))
            criteria.append(Criterion(f"{nic.name} RDMA device", Outcome.PASS if nic.rdma else Outcome.FAIL,
                                      ",".join(f"{p.device}/{p.port}" for p in nic.rdma) or "none",
                                      detail="" if nic.rdma else "no RDMA device bound (rdma link add rxe0 type rxe netdev IF for soft-RoCE)"))
            for port in nic.rdma:
                active = bool(port.state and "ACTIVE" in port.state)
                criteria.append(Criterion(f"{port.device}/{port.port} port state", Outcome.PASS if active else Outcome.FAIL,
                                          port.state, "ACTIVE", "=="))
                v4 = {a.split("/")[0] for a in nic.addresses}
                v2 = [g for g in port.gids if g.type.lower() == "roce v2"]
                on_address = [g for g in v2 if g.ipv4 in v4]
                chosen = on_address or v2
                criteria.append(Criterion(
                    f"{port.device}/{port.port} RoCE v2 GID", Outcome.PASS if on_address else Outcome.FAIL,
                    f"index {chosen[0].index} ({chosen[0].gid})" if chosen else "none",
                    detail="on " + (on_address[0].ipv4 or "") if on_address
                    else ("no RoCE v2 GID on the interface's IPv4 address" if v2 else "no GID of type RoCE v2")))
        qos[nic.name] = qos_info(runner, nic.name)
    by_name = {nic.name: nic for nic in found}
    for peer in peers or []:
        iface = route_interface(peer)
        nic = by_name.get(iface)
        mtu = nic.mtu if nic else None
        criteria.append(Criterion(f"route to {peer}", Outcome.PASS if nic else Outcome.FAIL, iface or "no route",
                                  detail="" if nic else "the peer is not reached through a checked data interface"))
        if mtu:
            size = probe_mtu or mtu
            ok, detail = probe_path_mtu(runner, peer, size, iface)
            criteria.append(Criterion(f"path MTU {size} to {peer} via {iface}", Outcome.PASS if ok else Outcome.FAIL,
                                      "passes" if ok else "blocked", detail=detail))
    return NetcheckResult(found, Verdict("netcheck", tuple(criteria)), qos, routes, not_judged)
