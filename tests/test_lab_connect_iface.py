"""``connect --host-iface`` binds each of two lab paths to its own interface (issue 16, Must-show 4):
the kernel's /sys/class/nvme/nvmeX/address of each path shows the host_iface it was given."""

from __future__ import annotations

import pytest

from labcli import fx

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel]   # no timing judged: on two labs at once

HOST = "host2"


def addresses_by_traddr(lab, nqn: str) -> dict[str, str]:
    """traddr -> the kernel's address line of each controller of ``nqn`` on the host."""
    script = (f'for c in /sys/class/nvme/nvme*; do [ "$(cat $c/subsysnqn 2>/dev/null)" = "{nqn}" ] && '
              'cat $c/address; done; true')
    out = lab.exec(HOST, ["sh", "-c", script], timeout=60, check=True).stdout.split()
    fields = [dict(part.split("=", 1) for part in line.split(",") if "=" in part) for line in out]
    return {f["traddr"]: ",".join(f"{k}={v}" for k, v in f.items()) for f in fields}


def test_connect_binds_each_path_to_its_own_interface(lab):
    nqn = lab.spec.subsystem_nqn
    links = lab.links(HOST)
    assert len(links) == 2, "two paths, each on its own link"
    lab.exec(HOST, ["nvme", "disconnect", "-n", nqn], timeout=60, check=True)   # fxprobe's own disconnect
    try:                                                                        # is tested in test_lab_g1
        argv = ["connect", "-t", "tcp", "--nqn", nqn]
        for link in links:                        # -a/-f pairs in order, as nvme-cli users give them
            argv += ["-a", link.array_ip, "-f", link.host_nic]
        code, data, err = fx(lab, HOST, *argv)
        assert code == 0, err
        connected = {p["traddr"]: p for p in data["connected"]}
        assert sorted(connected) == sorted(link.array_ip for link in links)
        lab.wait_paths(HOST, nqn, 2)
        kernel = addresses_by_traddr(lab, nqn)
        for link in links:
            assert f"host_iface={link.host_nic}" in kernel[link.array_ip], kernel      # the kernel's own word
            assert f"host_iface={link.host_nic}" in connected[link.array_ip]["address"], connected
            assert connected[link.array_ip]["host_iface"] == link.host_nic
    finally:
        lab.exec(HOST, ["nvme", "disconnect", "-n", nqn], timeout=60)
        for link in links:                        # the session lab's host2: NVMe/TCP on both links, unbound
            lab.exec(HOST, ["nvme", "connect", "-t", "tcp", "-a", link.array_ip, "-s", "4420", "-n", nqn], timeout=60)
        lab.wait_paths(HOST, nqn, 2)
