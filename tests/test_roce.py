"""RoCEv2 arithmetic: the 100 GbE numbers of gate G2, and the kernel's MTU rule."""

import pytest

from fxprobe.network import roce
from fxprobe.core.errors import BadInput


def test_overhead_is_82_bytes_and_grows_with_aeth_vlan_ipv6():
    assert roce.packet_overhead() == 82
    assert roce.packet_overhead(aeth=True) == 86
    assert roce.packet_overhead(vlan_tags=1) == 86
    assert roce.packet_overhead(ipv6=True) == 102


@pytest.mark.parametrize("mtu, percent", [(1024, 92.59), (2048, 96.15), (4096, 98.04)])
def test_payload_efficiency_per_mtu(mtu, percent):
    assert roce.payload_efficiency(mtu) * 100 == pytest.approx(percent, abs=0.005)


def test_83_gbps_on_100_gbe():
    measured, line = 83e9, 100e9
    assert roce.line_efficiency(measured, line) == pytest.approx(0.83)
    assert roce.payload_ceiling_bps(line, 4096) == pytest.approx(98.04e9, rel=1e-4)
    assert roce.protocol_efficiency(measured, line, 4096) == pytest.approx(0.847, abs=0.0005)


def test_netdev_mtu_rule():
    assert roce.netdev_mtu_for_roce(4096) == 4192
    assert [roce.netdev_mtu_for_roce(m) for m in roce.IB_MTUS] == [352, 608, 1120, 2144, 4192]


def test_bad_values():
    with pytest.raises(BadInput):
        roce.payload_ceiling_bps(100e9, 9000)
    with pytest.raises(BadInput):
        roce.line_efficiency(1, 0)

