"""RoCEv2 arithmetic: per-packet overhead, payload ceiling per MTU, line and protocol efficiency, MTU rules.

Facts (IEEE 802.3 framing; InfiniBand Annex A16/A17 for RoCE): on the wire each RoCEv2 packet carries preamble+SFD 8, IFG 12,
Ethernet 14, FCS 4, IPv4 20 (IPv6 40), UDP 8, BTH 12, ICRC 4 = 82 bytes besides the
payload; +4 AETH on first/last/only RDMA READ response packets, +4 per VLAN tag.
Kernel ``iboe_get_mtu``: the RoCE MTU is the largest IB MTU that fits in
netdev MTU - (GRH 40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4 = 96).
"""

from __future__ import annotations

from fxprobe.core.errors import BadInput

PREAMBLE_SFD = 8
INTERFRAME_GAP = 12
ETHERNET_HEADER = 14
FCS = 4
IPV4_HEADER = 20
IPV6_HEADER = 40
UDP_HEADER = 8
BTH = 12
ICRC = 4
AETH = 4
VLAN_TAG = 4

IB_MTUS = (256, 512, 1024, 2048, 4096)
# iboe_get_mtu: IB_GRH_BYTES + IB_UDP_BYTES + IB_BTH_BYTES + IB_EXT_XRC_BYTES + IB_EXT_ATOMICETH_BYTES + IB_ICRC_BYTES
IBOE_MTU_OVERHEAD = 40 + 8 + 12 + 4 + 28 + 4  # 96


def packet_overhead(*, ipv6: bool = False, vlan_tags: int = 0, aeth: bool = False) -> int:
    """Bytes on the wire per RoCEv2 packet besides its payload (82 for IPv4, no VLAN, no AETH)."""
    if vlan_tags < 0:
        raise BadInput(f"vlan_tags must be >= 0, got {vlan_tags}")
    return (PREAMBLE_SFD + INTERFRAME_GAP + ETHERNET_HEADER + FCS
            + (IPV6_HEADER if ipv6 else IPV4_HEADER) + UDP_HEADER + BTH + ICRC
            + (AETH if aeth else 0) + VLAN_TAG * vlan_tags)


def _check_mtu(mtu: int) -> int:
    if mtu not in IB_MTUS:
        raise BadInput(f"RoCE MTU {mtu} is not one of {', '.join(map(str, IB_MTUS))}")
    return mtu


def payload_efficiency(mtu: int, **overhead) -> float:
    """Large-message payload share of the wire: MTU / (MTU + overhead); 4096 -> 0.9804."""
    mtu = _check_mtu(mtu)
    return mtu / (mtu + packet_overhead(**overhead))


def payload_ceiling_bps(line_bps: float, mtu: int, **overhead) -> float:
    """Highest RDMA payload rate (bit/s) a link of line_bps can carry at this RoCE MTU."""
    if line_bps <= 0:
        raise BadInput(f"line rate must be positive, got {line_bps}")
    return line_bps * payload_efficiency(mtu, **overhead)


def line_efficiency(measured_bps: float, line_bps: float) -> float:
    """Measured payload rate / nominal link rate (83 Gb/s on 100 GbE -> 0.83)."""
    if line_bps <= 0:
        raise BadInput(f"line rate must be positive, got {line_bps}")
    return measured_bps / line_bps


def protocol_efficiency(measured_bps: float, line_bps: float, mtu: int, **overhead) -> float:
    """Measured payload rate / the RoCEv2 payload ceiling at this MTU (83 Gb/s, 100 GbE, 4096 -> 0.8466)."""
    return measured_bps / payload_ceiling_bps(line_bps, mtu, **overhead)


def netdev_mtu_for_roce(roce_mtu: int) -> int:
    """Smallest netdev MTU that gives this active RoCE MTU (4096 -> 4192)."""
    return _check_mtu(roce_mtu) + IBOE_MTU_OVERHEAD


