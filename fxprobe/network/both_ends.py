"""Network checks from both ends of a data path: what each end's own ``netcheck`` recorded, compared.

``netcheck --peer ADDR --peer-node NODE`` runs netcheck on this side (or ``--node``) and on the peer node, each
probing the other with don't-fragment pings (the peer at this side's MTU: the direction KV read-back data
flows, array -> host). These pure functions compare the two sub-runs' results: the link MTU, the RoCE active
MTU and the RoCE v2 GID at both ends of the route, naming the side and interface that is short.
"""

from __future__ import annotations

from fxprobe.core.verdict import Criterion, Outcome


def end(results: dict, peer: str) -> dict:
    """One end of the route to ``peer`` as its netcheck recorded it: interface, its MTU, address, RDMA ports."""
    route = (results.get("routes") or {}).get(peer) or {}
    iface = route.get("iface")
    nic = next((i for i in results.get("interfaces") or [] if i.get("name") == iface), {}) if iface else {}
    return {"iface": iface, "source": route.get("source"), "mtu": nic.get("mtu"), "rdma": nic.get("rdma") or [],
            "addresses": [a.split("/")[0] for a in nic.get("addresses") or []]}


def _roce_v2(side: dict) -> bool:
    return any(str(g.get("type", "")).lower() == "roce v2" and _mapped(g.get("gid")) in side["addresses"]
               for port in side["rdma"] for g in port.get("gids") or [])


def _mapped(gid: str | None) -> str | None:
    import ipaddress
    try:
        address = ipaddress.IPv6Address(gid or "")
    except ValueError:
        return None
    return str(address.ipv4_mapped) if address.ipv4_mapped else None


def _active(side: dict) -> int | None:
    values = [int(p["active_mtu"]) for p in side["rdma"] if str(p.get("active_mtu") or "").isdigit()]
    return min(values) if values else None


def _pair(name: str, near_name: str, near: dict, far_name: str, far: dict, key, unit: str) -> Criterion:
    a, b = key(near), key(far)
    shown = f"{near_name} {near['iface']} {a if a is not None else '?'} / {far_name} {far['iface']} " \
            f"{b if b is not None else '?'}"
    if a is None or b is None:
        missing = near_name if a is None else far_name
        return Criterion(name, Outcome.NOT_RUN, shown, "equal", "==", unit, f"{missing} does not report it")
    if a == b:
        return Criterion(name, Outcome.PASS, shown, "equal", "==", unit)
    short_name, short, other_name, other = (near_name, near, far_name, far) if a < b else (far_name, far, near_name, near)
    return Criterion(name, Outcome.FAIL, shown, "equal", "==", unit,
                     f"short side: {short_name} {short['iface']} ({min(a, b)} {unit}, {other_name} "
                     f"{other['iface']} has {max(a, b)} {unit})")


def compare(near_name: str, near_results: dict, far_name: str, far_results: dict, peer: str) -> list[Criterion]:
    """Both ends of the path to ``peer``: link MTU equal, RoCE active MTU equal (where RDMA runs), RoCE v2 GID
    on the route's address at both ends (where RDMA runs). Pure: reads the two sub-runs' results only."""
    near = end(near_results, peer)
    far = end(far_results, near["source"]) if near["source"] else {"iface": None, "mtu": None, "rdma": [],
                                                                    "addresses": [], "source": None}
    if not near["iface"] or not far["iface"]:
        where = near_name if not near["iface"] else far_name
        return [Criterion(f"both ends of {peer}", Outcome.FAIL, "no route", detail=f"{where} has no route to the other end")]
    criteria = [_pair(f"link MTU at both ends of {peer}", near_name, near, far_name, far, lambda s: s["mtu"], "B")]
    if near["rdma"] or far["rdma"]:
        criteria.append(_pair(f"RoCE active MTU at both ends of {peer}", near_name, near, far_name, far, _active, "B"))
        v2 = {near_name: _roce_v2(near), far_name: _roce_v2(far)}
        lacking = [f"{n} {s['iface']}" for n, s in ((near_name, near), (far_name, far)) if not v2[n]]
        criteria.append(Criterion(f"RoCE v2 GID at both ends of {peer}", Outcome.PASS if not lacking else Outcome.FAIL,
                                  ", ".join(f"{n}: {'RoCE v2' if ok else 'none'}" for n, ok in v2.items()),
                                  "RoCE v2 at both", "==",
                                  detail=("no RoCE v2 GID on the route's address: " + ", ".join(lacking)) if lacking else ""))
    return criteria
