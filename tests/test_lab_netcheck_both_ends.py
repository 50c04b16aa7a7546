"""Issue 18.2 in the lab: netcheck from both ends of a data link (host1 <-> array), and netcheck without --iface.

The RoCE/MTU checks from both ends: the pass twin (both ends of link 2 at MTU 4200) and the planted fail (the
array's side at 1500) run in one test, and the one-ended RoCE check of the same link is covered by it (the near
end's own netcheck is a sub-run of the both-ends run).
"""

from __future__ import annotations


import pytest

from labcli import fx_here as fx
from labcli import fx as fx_in_guest

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel]   # no timing judged: on two labs at once


def names(data) -> dict:
    return {c["name"]: c for c in data["verdict"]["criteria"]}


def both_ends(lab) -> tuple[object, list[str]]:
    link = lab.link(2, "host1")
    return link, ["netcheck", "--lab", lab.name, "--node", "host1", "--peer", link.array_ip, "--peer-node", "array"]


def set_mtu(lab, guest: str, nic: str, mtu: int) -> None:
    lab.exec(guest, ["ip", "link", "set", "dev", nic, "mtu", str(mtu)], check=True)


def test_roce_from_both_ends_passes_at_4200_and_an_array_side_at_1500_fails_naming_that_side(lab, tmp_path):
    """The pass twin and the planted fail in one test, two runs: both ends of link 2 at MTU 4200 -> PASS (RoCE
    MTU 4096 fits, RoCE v2 GID on both sides, the don't-fragment probe both ways); the array's side at 1500 ->
    FAIL naming the array side and interface, and the read-back direction blocked, while nothing of the host's
    side fails (its own one-way probe still passes: the blind spot of a one-ended check)."""
    link, both = both_ends(lab)
    argv = [*both, "--roce", "--iface", link.host_nic]
    try:
        set_mtu(lab, "host1", link.host_nic, 4200)
        set_mtu(lab, "array", link.array_nic, 4200)
        code, equal, err = fx(tmp_path, *argv)
        assert code == 0, (err[-2000:], [c for c in equal["verdict"]["criteria"] if c["outcome"] != "pass"])
        c = names(equal)
        assert c[f"host1: {link.host_nic} MTU for RoCE MTU 4096"]["measured"] == 4200
        assert c[f"array: {link.array_nic} MTU for RoCE MTU 4096"]["measured"] == 4200
        assert c[f"RoCE v2 GID at both ends of {link.array_ip}"]["outcome"] == "pass"
        assert c[f"array: path MTU 4200 to {link.host_ip} via {link.array_nic}"]["outcome"] == "pass"

        set_mtu(lab, "array", link.array_nic, 1500)
        code, short, err = fx(tmp_path, *argv)
    finally:
        set_mtu(lab, "host1", link.host_nic, 9000)
        set_mtu(lab, "array", link.array_nic, 9000)
    assert code == 1, err
    c = names(short)
    assert f"short side: array {link.array_nic} (1500 B" in c[f"link MTU at both ends of {link.array_ip}"]["detail"]
    roce = c[f"array: {link.array_nic} MTU for RoCE MTU 4096"]
    assert (roce["outcome"], roce["measured"], roce["threshold"]) == ("fail", 1500, 4192)
    assert c[f"array: path MTU 4200 to {link.host_ip} via {link.array_nic}"]["outcome"] == "fail"   # read-back
    failed = sorted(n for n, x in c.items() if x["outcome"] != "pass")
    assert all(n.startswith("array: ") or n.endswith(f"at both ends of {link.array_ip}") for n in failed), failed
    assert c[f"host1: path MTU 4200 to {link.array_ip} via {link.host_nic}"]["outcome"] == "pass"
    assert [n["node"] for n in short["nodes"]] == ["host1", "array"]


def test_netcheck_without_iface_in_a_guest_judges_the_data_links_not_the_management_nic(lab):
    code, data, err = fx_in_guest(lab, "host1", "netcheck")
    assert data["outcome"] in ("pass", "fail"), (data["outcome"], data.get("reason"), err)
    assert [i["name"] for i in data["not_judged"]] == ["mgmt"]
    assert sorted(i["name"] for i in data["interfaces"]) == ["l1", "l2"]
