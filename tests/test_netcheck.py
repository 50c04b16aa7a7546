import json
import subprocess
import sys

import pytest

from fxprobe.network.roce import netdev_mtu_for_roce
from netns import VethPair, require_netns


def fxprobe_in(pair: VethPair, tmp_path, *args):
    argv = pair.in_a([sys.executable, "-m", "fxprobe.cli.main", "--run-dir", str(tmp_path / "run"), "--json", *args])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    return done.returncode, (json.loads(done.stdout) if done.stdout.strip().startswith("{") else None), done.stderr


def test_roce_netdev_mtu_arithmetic():
    assert netdev_mtu_for_roce(4096) == 4192
    assert netdev_mtu_for_roce(1024) == 1120


@pytest.mark.parametrize("mtu_b, expect", [(4200, 0), (1500, 1)])
def test_path_mtu_probe_passes_and_fails_for_real(tmp_path, mtu_b, expect):
    require_netns()
    pair = VethPair(mtu_a=4200, mtu_b=mtu_b)
    try:
        code, result, err = fxprobe_in(pair, tmp_path, "netcheck", "--iface", pair.if_a, "--peer", pair.addr_b)
    finally:
        pair.close()
    assert code == expect, err
    criteria = {c["name"]: c for c in result["verdict"]["criteria"]}
    probe = criteria[f"path MTU 4200 to {pair.addr_b} via {pair.if_a}"]
    assert probe["outcome"] == ("pass" if expect == 0 else "fail")
    assert criteria[f"route to {pair.addr_b}"]["measured"] == pair.if_a


def test_roce_required_without_rdma_names_interface_and_mtu(tmp_path):
    require_netns()
    pair = VethPair(mtu_a=1500, mtu_b=1500)
    try:
        code, result, err = fxprobe_in(pair, tmp_path, "netcheck", "--iface", pair.if_a, "--roce")
    finally:
        pair.close()
    assert code == 1
    mtu = next(c for c in result["verdict"]["criteria"] if "MTU for RoCE" in c["name"])
    assert mtu["name"].startswith(pair.if_a) and mtu["measured"] == 1500 and mtu["threshold"] == 4192
