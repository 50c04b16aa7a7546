"""Issue 18.2: both ends of a data path compared from the two ends' own netcheck results (pure)."""

from __future__ import annotations

from fxprobe.core.verdict import Outcome
from fxprobe.network.both_ends import compare


def side(iface, address, mtu, peer, active="4096", gid_type="RoCE v2"):
    gid = "::ffff:" + address
    return {"routes": {peer: {"iface": iface, "source": address}},
            "interfaces": [{"name": iface, "mtu": mtu, "addresses": [f"{address}/24"],
                            "rdma": [{"device": "rxe0", "port": 1, "active_mtu": active,
                                      "gids": [{"index": 1, "gid": gid, "type": gid_type}]}]},
                           {"name": "mgmt", "mtu": 1500, "addresses": ["10.0.2.15/24"], "rdma": []}]}


def by_name(criteria):
    return {c.name.split(" at both")[0]: c for c in criteria}


def test_equal_ends_pass():
    c = by_name(compare("host1", side("l2", "10.2.1.2", 9000, "10.2.1.1"),
                        "array", side("l2h1", "10.2.1.1", 9000, "10.2.1.2"), "10.2.1.1"))
    assert all(x.outcome is Outcome.PASS for x in c.values()), c


def test_array_side_mtu_1500_fails_naming_the_side_and_interface():
    c = by_name(compare("host1", side("l2", "10.2.1.2", 9000, "10.2.1.1"),
                        "array", side("l2h1", "10.2.1.1", 1500, "10.2.1.2", active="1024"), "10.2.1.1"))
    assert c["link MTU"].outcome is Outcome.FAIL and "short side: array l2h1 (1500 B" in c["link MTU"].detail
    assert c["RoCE active MTU"].outcome is Outcome.FAIL and "array l2h1 (1024 B" in c["RoCE active MTU"].detail


def test_a_missing_roce_v2_gid_names_the_side():
    c = by_name(compare("host1", side("l2", "10.2.1.2", 9000, "10.2.1.1", gid_type="IB/RoCE v1"),
                        "array", side("l2h1", "10.2.1.1", 9000, "10.2.1.2"), "10.2.1.1"))
    assert c["RoCE v2 GID"].outcome is Outcome.FAIL and "host1 l2" in c["RoCE v2 GID"].detail


def test_no_route_back_fails():
    far = side("l2h1", "10.2.1.1", 9000, "10.9.9.9")
    assert compare("host1", side("l2", "10.2.1.2", 9000, "10.2.1.1"), "array", far, "10.2.1.1")[0].outcome \
        is Outcome.FAIL


def test_parse_active_mtu():
    from fxprobe.tools.ibverbs import parse_active_mtu
    text = "hca_id:\trxe0\n\tport:\t1\n\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\tmax_mtu:\t\t4096 (5)\n" \
           "\t\tactive_mtu:\t\t1024 (3)\n"
    assert parse_active_mtu(text) == 1024 and parse_active_mtu("") is None
