"""Issue 18.2 in the lab: netcheck from both ends of a data link (host1 <-> array), and netcheck without --iface.

The planted fail (the array's side of link 2 at MTU 1500) runs here; its pass twin (both ends equal: PASS) was
measured in the lab by hand and is the comparison unit-tested in tests/test_netcheck_both_ends.py - in the suite it cost as
much as the fail (two fxprobe starts in TCG guests, ~460 s at load 8-16) for no other code path.
"""

from __future__ import annotations


import pytest

from labcli import fx_here as fx
from labcli import fx as fx_in_guest

pytestmark = pytest.mark.lab


def names(data) -> dict:
    return {c["name"]: c for c in data["verdict"]["criteria"]}


def both_ends(lab) -> tuple[object, list[str]]:
    link = lab.link(2, "host1")
    return link, ["netcheck", "--lab", lab.name, "--node", "host1", "--peer", link.array_ip, "--peer-node", "array"]


def test_array_side_mtu_1500_fails_naming_the_array_side_and_interface(lab, tmp_path):
    link, both = both_ends(lab)
    lab.exec("array", ["ip", "link", "set", link.array_nic, "mtu", "1500"], check=True)
    try:
        code, short, err = fx(tmp_path, *both)
    finally:
        lab.exec("array", ["ip", "link", "set", link.array_nic, "mtu", "9000"], check=True)
    assert code == 1, err
    c = names(short)
    assert f"short side: array {link.array_nic} (1500 B" in c[f"link MTU at both ends of {link.array_ip}"]["detail"]
    back = c[f"array: path MTU 9000 to {link.host_ip} via {link.array_nic}"]     # the read-back direction
    assert back["outcome"] == "fail"
    assert [n["node"] for n in short["nodes"]] == ["host1", "array"]


def test_netcheck_without_iface_in_a_guest_judges_the_data_links_not_the_management_nic(lab):
    code, data, err = fx_in_guest(lab, "host1", "netcheck")
    assert data["outcome"] in ("pass", "fail"), (data["outcome"], data.get("reason"), err)
    assert [i["name"] for i in data["not_judged"]] == ["mgmt"]
    assert sorted(i["name"] for i in data["interfaces"]) == ["l1", "l2"]
