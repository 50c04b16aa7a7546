"""The soak's 1 Hz path watch reads only what it needs (nvme_sysfs.controller_states), the same as before."""

from __future__ import annotations

from pathlib import Path

from fxprobe.core import sysfs
from fxprobe.host import telemetry
from fxprobe.tools import nvme_sysfs


def tree(root: Path) -> Path:
    """Two subsystems: nvme0/nvme1 two TCP paths of one, nvme2 a local PCIe drive of another."""
    for sub, ctrls in (("nvme-subsys0", ("nvme0", "nvme1")), ("nvme-subsys1", ("nvme2",))):
        (root / "sys/class/nvme-subsystem" / sub / "nvme0n1").mkdir(parents=True)
        (root / "sys/class/nvme-subsystem" / sub / "iopolicy").write_text("round-robin\n")
        for ctrl in ctrls:
            (root / "sys/class/nvme-subsystem" / sub / ctrl).mkdir()
    for i, (transport, state) in enumerate((("tcp", "live"), ("tcp", "connecting"), ("pcie", "live"))):
        base = root / f"sys/class/nvme/nvme{i}"
        (base / f"nvme0c{i}n1").mkdir(parents=True)
        for name, text in {"model": "Linux", "serial": f"S{i}", "firmware_rev": "6.1", "transport": transport,
                           "state": state, "subsysnqn": f"nqn.test:{i // 2}", "cntlid": str(i), "kato": "5",
                           f"nvme0c{i}n1/ana_state": "optimized"}.items():
            (base / name).write_text(text + "\n")
        if transport == "tcp":
            (base / "address").write_text(f"traddr=192.0.2.{i},trsvcid=4420\n")
    return root


def test_controller_states_equal_the_full_read(tmp_path, monkeypatch):
    monkeypatch.setattr(sysfs, "ROOT", tree(tmp_path))
    full = {c.name: {"state": c.state, "transport": c.transport, "address": c.address,
                     "subsystem": c.subsystem, "subsysnqn": c.subsysnqn} for c in nvme_sysfs.controllers()}
    assert nvme_sysfs.controller_states() == full == telemetry.path_states()
    assert full["nvme1"] == {"state": "connecting", "transport": "tcp", "address": "traddr=192.0.2.1,trsvcid=4420",
                             "subsystem": "nvme-subsys0", "subsysnqn": "nqn.test:0"}
    assert full["nvme2"]["address"] is None and full["nvme2"]["subsystem"] == "nvme-subsys1"
    assert nvme_sysfs.controllers()[0].timeouts == {"kato": "5"}


def test_sysfs_read_strips_and_defaults(tmp_path, monkeypatch):
    monkeypatch.setattr(sysfs, "ROOT", tmp_path)
    (tmp_path / "sys").mkdir()
    (tmp_path / "sys/state").write_bytes(b"live\n\xff")
    assert sysfs.read("/sys/state") == "live\n\ufffd".strip()
    assert sysfs.read("/sys/missing", "gone") == "gone"
    assert sysfs.read("/sys", "a folder") == "a folder"
    assert sysfs.listdir("/sys") == ["state"] and sysfs.listdir("/nope") == []
