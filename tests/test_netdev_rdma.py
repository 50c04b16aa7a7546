"""RDMA ports and their GIDs from a sysfs tree of the shape soft-RoCE gives (1024 GID entries a port, most of them
zero), read once for all interfaces: a guest with 10 NICs and 4 rxe devices read 41,000 GID files for one netcheck
when each interface read every device's table again."""

from __future__ import annotations

import pytest

from fxprobe.core import sysfs
from fxprobe.tools import netdev

ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"
DEVICES = {"rxe_l1": ("l1", ["fe80:0000:0000:0000:5054:00ff:fe12:3401", "0000:0000:0000:0000:0000:ffff:0a01:0101"]),
           "rxe_l2": ("l2", ["fe80:0000:0000:0000:5054:00ff:fe12:3402", "0000:0000:0000:0000:0000:ffff:0a02:0101"])}


@pytest.fixture
def rdma_tree(tmp_path, monkeypatch):
    root = tmp_path / "root"
    monkeypatch.setattr(sysfs, "ROOT", root)
    for device, (parent, gids) in DEVICES.items():
        base = root / "sys/class/infiniband" / device
        base.mkdir(parents=True)
        (base / "parent").write_text(parent + "\n")
        port = base / "ports/1"
        for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
            (port / sub).mkdir(parents=True)
        for index in range(1024):
            used = index < len(gids)
            (port / "gids" / str(index)).write_text((gids[index] if used else ZERO) + "\n")
            if used:          # unused entries: the kernel refuses these reads (EINVAL); absent here
                (port / "gid_attrs/types" / str(index)).write_text(("RoCE v2" if index % 2 else "IB/RoCE v1") + "\n")
                (port / "gid_attrs/ndevs" / str(index)).write_text(parent + "\n")
        for name, text in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"), ("rate", "10 Gb/sec (1X QDR)")):
            (port / name).write_text(text + "\n")
    return root


def test_each_gid_file_is_read_once_for_all_interfaces(rdma_tree, monkeypatch):
    reads: dict[str, int] = {}
    real_read = sysfs.read

    def counting(rel, *args, **kwargs):
        reads[rel] = reads.get(rel, 0) + 1
        return real_read(rel, *args, **kwargs)
    monkeypatch.setattr(sysfs, "read", counting)
    table = netdev.read_rdma_ports()
    ports = {name: netdev.rdma_ports_for(name, table) for name in ("l1", "l2", "eth0")}
    gid_reads = {rel: n for rel, n in reads.items() if "/gids/" in rel}
    assert len(gid_reads) == 2 * 1024 and set(gid_reads.values()) == {1}
    [l1], [l2] = ports["l1"], ports["l2"]
    assert ports["eth0"] == ()
    assert (l1.device, l1.port, l1.state, l1.rate) == ("rxe_l1", 1, "4: ACTIVE", "10 Gb/sec (1X QDR)")
    assert [(g.index, g.type, g.ndev, g.ipv4) for g in l2.gids] == [(0, "IB/RoCE v1", "l2", None),
                                                                     (1, "RoCE v2", "l2", "10.2.1.1")]


def test_a_table_read_once_gives_what_each_interface_reads_alone(rdma_tree):
    table = netdev.read_rdma_ports()
    for name in ("l1", "l2", "eth0"):
        assert netdev.rdma_ports_for(name, table) == netdev.rdma_ports_for(name)
