"""The redirectable sysfs root (core.sysfs.ROOT, FXPROBE_SYSROOT) in use: the NVMe views, the kernel checks and the
soak's path telemetry read a tree laid out as a lab host guest shows it (two TCP paths to one subsystem, one
multipath namespace), not this machine's /sys."""

from __future__ import annotations

from pathlib import Path

import pytest

from fxprobe.core import kernel, sysfs
from fxprobe.host import telemetry
from fxprobe.tools import nvme_sysfs

NQN = "nqn.2026-12.io.fxprobe:rehearse:array"


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


@pytest.fixture
def guest_tree(tmp_path, monkeypatch):
    """A host guest's /sys: nvme0 (link 1) and nvme1 (link 2, connecting) of one subsystem, namespace nvme0n1."""
    root = tmp_path / "sysroot"
    for n, (link, state) in enumerate(((1, "live"), (2, "connecting"))):
        base = f"/sys/class/nvme/nvme{n}"
        for name, value in (("model", "Linux"), ("serial", "c0ffee00"), ("firmware_rev", "6.1.0-57"),
                            ("transport", "tcp"), ("state", state), ("subsysnqn", NQN), ("cntlid", str(n + 1)),
                            ("address", f"traddr=10.{link}.1.1,trsvcid=4420,src_addr=10.{link}.1.2"),
                            ("kato", "5"), ("ctrl_loss_tmo", "600")):
            write(root, f"{base}/{name}", value)
        write(root, f"{base}/nvme0c{n}n1/ana_state", "optimized")
        write(root, f"{base}/nvme0c{n}n1/nsid", "1")
        (root / f"sys/class/nvme-subsystem/nvme-subsys0/nvme{n}").mkdir(parents=True)
    write(root, "/sys/class/nvme-subsystem/nvme-subsys0/subsysnqn", NQN)
    write(root, "/sys/class/nvme-subsystem/nvme-subsys0/iopolicy", "round-robin")
    (root / "sys/class/nvme-subsystem/nvme-subsys0/nvme0n1").mkdir()
    for name, value in (("size", "2097152"), ("nsid", "1"), ("queue/logical_block_size", "512"),
                        ("wwid", "uuid.7f3c")):
        write(root, f"/sys/block/nvme0n1/{name}", value)
    (root / "sys/block/nvme0n1/holders").mkdir()
    write(root, "/proc/mdstat", "Personalities : \nunused devices: <none>")
    monkeypatch.setattr(sysfs, "ROOT", root)
    return root


def test_the_nvme_views_read_the_redirected_tree(guest_tree):
    ctrls = {c.name: c for c in nvme_sysfs.controllers()}
    assert sorted(ctrls) == ["nvme0", "nvme1"]
    assert ctrls["nvme0"].state == "live" and ctrls["nvme1"].state == "connecting"
    assert ctrls["nvme1"].address.startswith("traddr=10.2.1.1") and ctrls["nvme0"].subsystem == "nvme-subsys0"
    assert ctrls["nvme0"].timeouts == {"kato": "5", "ctrl_loss_tmo": "600"}
    assert ctrls["nvme0"].paths == ({"path": "nvme0c0n1", "ana_state": "optimized", "nsid": "1"},)
    [sub] = nvme_sysfs.subsystems()
    assert (sub.nqn, sub.iopolicy, sub.controllers, sub.namespaces) == (NQN, "round-robin", ("nvme0", "nvme1"),
                                                                       ("nvme0n1",))
    [ns] = nvme_sysfs.namespaces()
    assert (ns.name, ns.size_bytes, ns.logical_block_size, ns.wwid) == ("nvme0n1", 2097152 * 512, 512, "uuid.7f3c")


def test_the_kernel_checks_and_soak_telemetry_read_the_redirected_tree(guest_tree):
    assert kernel.has(kernel.NVME_CLASS) and kernel.has(kernel.MDSTAT)
    assert not kernel.has(kernel.NVMET_CONFIGFS) and kernel.rdma_devices() == []
    states = telemetry.path_states()
    assert {name: s["state"] for name, s in states.items()} == {"nvme0": "live", "nvme1": "connecting"}
    assert telemetry.md_states() == {}


def test_an_empty_root_is_a_host_without_nvme(tmp_path, monkeypatch):
    monkeypatch.setattr(sysfs, "ROOT", tmp_path)
    assert nvme_sysfs.controllers() == [] and not kernel.has(kernel.NVME_CLASS)


def test_the_array_guest_finds_its_pcie_drives_by_serial_in_the_redirected_tree(tmp_path, monkeypatch):
    """lab.target (run in the array guest) maps serials to the first namespace of each PCIe controller."""
    for ctrl, transport, serial in (("nvme0", "pcie", "FXLS00"), ("nvme1", "pcie", "FXLS01"), ("nvme2", "tcp", "X")):
        write(tmp_path, f"/sys/class/nvme/{ctrl}/transport", transport)
        write(tmp_path, f"/sys/class/nvme/{ctrl}/serial", serial)
        (tmp_path / f"sys/class/nvme/{ctrl}/{ctrl}n1").mkdir()
    (tmp_path / "sys/class/nvme/nvme1/nvme1n2").mkdir()
    write(tmp_path, "/sys/class/nvme/nvme3/transport", "pcie")        # no serial yet: skipped
    monkeypatch.setattr(sysfs, "ROOT", tmp_path)
    assert nvme_sysfs.pcie_namespaces_by_serial() == {"FXLS00": "/dev/nvme0n1", "FXLS01": "/dev/nvme1n1"}


def test_a_controller_that_reported_no_sensor_is_not_asked_again(guest_tree, monkeypatch):
    """nvme0 (fabrics, 0 K: no sensor) and a PCIe drive nvme2 (323 K). Once nvme0 said 0 K, its temperature is not
    read again: its temp1_input becomes a FIFO nobody writes, which blocks a reader as an admin command to a
    controller whose link just went down does (60 s). The twin: the same FIFO on a controller not yet asked blocks."""
    import os
    import threading
    monkeypatch.setattr(telemetry, "_NO_SENSOR", set())
    write(guest_tree, "/sys/class/nvme/nvme0/hwmon3/temp1_input", "-273150")
    write(guest_tree, "/sys/class/nvme/nvme2/hwmon4/temp1_input", "49850")
    for name, value in (("state", "live"), ("subsysnqn", "nqn.2014.08.org.nvmexpress:qemu-drive"),
                        ("address", "0000:00:03.0")):
        write(guest_tree, f"/sys/class/nvme/nvme2/{name}", value)
    assert telemetry.nvme_temperatures() == {"nvme2": 49.85}

    def blocking(controller: str, hwmon: str) -> None:
        sensor = guest_tree / f"sys/class/nvme/{controller}/{hwmon}/temp1_input"
        sensor.unlink()
        os.mkfifo(sensor)

    def read_in_a_thread() -> tuple[threading.Thread, list]:
        out: list = []
        reader = threading.Thread(target=lambda: out.append(telemetry.nvme_temperatures()), daemon=True)
        reader.start()
        reader.join(timeout=5)
        return reader, out

    blocking("nvme0", "hwmon3")
    reader, out = read_in_a_thread()
    assert not reader.is_alive() and out == [{"nvme2": 49.85}]
    monkeypatch.setattr(telemetry, "_NO_SENSOR", set())          # the twin: not known to have no sensor
    reader, out = read_in_a_thread()
    assert reader.is_alive() and out == []
    with open(guest_tree / "sys/class/nvme/nvme0/hwmon3/temp1_input", "w") as unblock:
        unblock.write("-273150\n")
    reader.join(timeout=5)
    assert out == [{"nvme2": 49.85}] and len(telemetry._NO_SENSOR) == 1
