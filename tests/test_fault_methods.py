"""Fault methods, safety refusals, the restore journal, and the CLI's refusals (nothing injected)."""

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import loopdev

from fxprobe.core import sysfs
from fxprobe.core.errors import BadInput, NotRunnable
from fxprobe.faults import engine, methods
from fxprobe.faults.journal import Journal
from fxprobe.core.runner import Runner
from fxprobe.tools.blockdev import SystemView


# -- RAID redundancy ---------------------------------------------------------------------------
def md(level, raid_disks, working, members):
    return {"name": "md0", "level": level, "raid_disks": raid_disks, "working_disks": working,
            "members": [{"device": d, "faulty": False} for d in members]}


@pytest.mark.parametrize("level, disks, working, refused", [
    ("raid6", 6, 6, False), ("raid6", 6, 5, False), ("raid6", 6, 4, True),
    ("raid5", 4, 4, False), ("raid5", 4, 3, True), ("raid1", 2, 2, False), ("raid1", 2, 1, True),
    ("raid10", 4, 4, False), ("raid0", None, None, True), ("raid0", 2, 2, True),
])
def test_redundancy_refusal_reads_level_and_degraded_state(level, disks, working, refused):
    arrays = [md(level, disks, working, ["nvme1n1", "nvme2n1"])]
    reason = methods.redundancy_refusal("nvme1n1", arrays)
    assert (reason is not None) == refused
    if refused:
        assert "exceeds the RAID's redundancy" in reason and level in reason
    assert methods.redundancy_refusal("nvme9n1", arrays) is None   # not a member: no objection


# -- a fake sysfs for host methods ----------------------------------------------------------------
@pytest.fixture
def fake_sys(tmp_path, monkeypatch):
    root = tmp_path / "root"
    monkeypatch.setattr(sysfs, "ROOT", root)

    def put(rel, text):
        path = root / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    # drive A: nvme0 (PCI) with disk nvme0n1, holds / through partition nvme0n1p1; drive B: nvme1n1 in raid1
    put("sys/bus/pci/devices/0000:01:00.0/remove", "")
    put("sys/bus/pci/rescan", "")
    (root / "sys/class/nvme").mkdir(parents=True)
    for ctrl, serial in (("nvme0", "SERIAL-A"), ("nvme1", "SERIAL-B")):
        put(f"sys/class/nvme/{ctrl}/serial", serial)
    (root / "sys/class/nvme/nvme0/device").symlink_to(root / "sys/bus/pci/devices/0000:01:00.0")
    put("sys/devices/nvme0n1/device/serial", "SERIAL-A")
    put("sys/devices/nvme0n1/dev", "259:0")
    put("sys/devices/nvme0n1/nvme0n1p1/partition", "1")
    put("sys/devices/nvme0n1/nvme0n1p1/dev", "259:1")
    put("sys/devices/nvme1n1/device/serial", "SERIAL-B")
    put("sys/devices/nvme1n1/dev", "259:2")
    (root / "sys/class/block").mkdir(parents=True)
    for name, target in (("nvme0n1", "sys/devices/nvme0n1"), ("nvme0n1p1", "sys/devices/nvme0n1/nvme0n1p1"),
                         ("nvme1n1", "sys/devices/nvme1n1")):
        (root / "sys/class/block" / name).symlink_to(root / target)
    put("proc/self/mountinfo", "22 1 259:1 / / rw,relatime - ext4 /dev/nvme0n1p1 rw\n")
    put("proc/mdstat", "Personalities : [raid1]\nmd0 : active raid1 nvme1n1[0] sda[1](F)\n"
                       "      1000 blocks super 1.2 [2/1] [U_]\n\nunused devices: <none>\n")
    return root


def host_env():
    return methods.Env(Runner(), None)


def test_root_device_and_degraded_raid1_are_refused(fake_sys):
    assert SystemView(sysfs.ROOT).root_devices() >= {"nvme0n1p1", "nvme0n1"}
    root_drive = methods.SysfsRemove(host_env(), {"kind": "drive-pull", "via": "sysfs", "serial": "SERIAL-A"})
    assert root_drive.probe() is None
    assert any("root filesystem" in r for r in root_drive.refusals())
    md_drive = methods.SysfsRemove(host_env(), {"kind": "drive-pull", "via": "sysfs", "serial": "SERIAL-B"})
    assert any("exceeds the RAID's redundancy" in r for r in md_drive.refusals())


def test_sysfs_remove_writes_remove_and_restore_rescans(fake_sys):
    from fxprobe.core.errors import UnsafeTarget
    method = methods.SysfsRemove(host_env(), {"kind": "drive-pull", "via": "sysfs", "serial": "SERIAL-A"})
    with pytest.raises(UnsafeTarget, match="holds the root filesystem"):     # drive A holds /: refused at inject too
        method.inject()
    assert (fake_sys / "sys/bus/pci/devices/0000:01:00.0/remove").read_text() == ""
    (fake_sys / "proc/self/mountinfo").write_text("22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n")  # / elsewhere
    method.inject()
    assert (fake_sys / "sys/bus/pci/devices/0000:01:00.0/remove").read_text() == "1"
    text = methods.restore_from_record(method.restore_record(), host_env())
    assert (fake_sys / "sys/bus/pci/rescan").read_text() == "1" and "SERIAL-A" in text


def test_nullblk_power_off_and_on(fake_sys):
    (fake_sys / "sys/kernel/config/nullb/disk0").mkdir(parents=True)
    (fake_sys / "sys/kernel/config/nullb/disk0/power").write_text("1")
    method = methods.NullBlkPower(host_env(), {"kind": "drive-pull", "via": "nullblk", "nullb": "disk0"})
    assert method.probe() is None and method.target == "nullb:disk0"
    method.inject()
    assert (fake_sys / "sys/kernel/config/nullb/disk0/power").read_text() == "0"
    methods.restore_from_record(method.restore_record())
    assert (fake_sys / "sys/kernel/config/nullb/disk0/power").read_text() == "1"


def test_nvmet_port_and_namespace_disable_and_their_undo_over_configfs(fake_sys):
    """The host's nvmet faults through tools/nvmet's object model, on an nvmet tree under the redirected root."""
    nqn = "nqn.2026-12.io.x:y"
    nvmet = fake_sys / "sys/kernel/config/nvmet"
    (nvmet / "subsystems" / nqn / "namespaces" / "1").mkdir(parents=True)
    (nvmet / "subsystems" / nqn / "namespaces" / "1" / "enable").write_text("1\n")
    (nvmet / "ports" / "1" / "subsystems").mkdir(parents=True)
    (nvmet / "ports" / "1" / "subsystems" / nqn).symlink_to(nvmet / "subsystems" / nqn)
    port = methods.NvmetPortDisable(host_env(), {"kind": "port-disable", "via": "configfs", "port": 1, "nqn": nqn})
    assert port.probe() is None
    port.inject()
    assert not (nvmet / "ports/1/subsystems" / nqn).exists()
    assert "exports" in methods.restore_from_record(port.restore_record(), host_env())
    assert (nvmet / "ports/1/subsystems" / nqn).resolve() == (nvmet / "subsystems" / nqn).resolve()
    ns = methods.NvmetNamespaceDisable(host_env(), {"kind": "namespace-disable", "via": "configfs", "nqn": nqn,
                                                    "nsid": 1})
    assert ns.probe() is None
    ns.inject()
    assert (nvmet / "subsystems" / nqn / "namespaces/1/enable").read_text().strip() == "0"
    methods.restore_from_record(ns.restore_record(), host_env())
    assert (nvmet / "subsystems" / nqn / "namespaces/1/enable").read_text().strip() == "1"
    missing = methods.NvmetNamespaceDisable(host_env(), {"kind": "namespace-disable", "via": "configfs",
                                                         "nqn": nqn, "nsid": 2})
    assert "namespaces/2 does not exist" in missing.probe()
    unnamed = methods.NvmetPortDisable(host_env(), {"kind": "port-disable", "via": "configfs", "port": 1})
    assert unnamed.probe() == "fault.port and fault.nqn are required for port-disable"


def test_a_fault_the_environment_cannot_do_is_not_runnable(fake_sys):
    fault = {"kind": "port-disable", "via": "auto", "port": 1, "nqn": "nqn.2026-12.x:y"}
    with pytest.raises(NotRunnable) as caught:
        methods.choose(host_env(), fault)
    assert "port-disable cannot be injected here" in str(caught.value) and "configfs" in str(caught.value)
    with pytest.raises(NotRunnable) as caught:
        methods.choose(host_env(), {"kind": "drive-pull", "via": "auto", "serial": "NOPE"})
    assert "sysfs: no NVMe controller with serial NOPE" in str(caught.value)


def test_unknown_journal_method_is_bad_input():
    with pytest.raises(BadInput):
        methods.restore_from_record({"method": "teleport"})


# -- netlink on a real veth link of this machine ---------------------------------------------------------
@pytest.fixture
def veth():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        from conftest import skip_or_fail
        skip_or_fail("needs root and iproute2 for a veth pair")
    tag = uuid.uuid4().hex[:5]
    a, b = f"fxf{tag}a", f"fxf{tag}b"
    subprocess.run(["ip", "link", "add", a, "type", "veth", "peer", "name", b], check=True)
    subprocess.run(["ip", "link", "set", a, "up"], check=True)
    subprocess.run(["ip", "link", "set", b, "up"], check=True)
    yield a
    subprocess.run(["ip", "link", "del", a], check=False)


def test_netlink_link_down_and_restore_on_a_real_veth(veth):
    method = methods.choose(host_env(), {"kind": "link-down", "via": "auto", "interface": veth})
    assert isinstance(method, methods.NetlinkLink)
    method.inject()
    flags = lambda: int(Path(f"/sys/class/net/{veth}/flags").read_text(), 16)
    assert flags() & 1 == 0
    methods.restore_from_record(method.restore_record())
    assert flags() & 1 == 1


# -- journal ------------------------------------------------------------------------------------------
def test_journal_is_written_before_and_closed_after(tmp_path):
    journal = Journal(tmp_path / "j" / "fault-journal.json")
    journal.open("a", "drive-pull", [{"method": "lab-drive", "lab": "x", "slot": 1}])
    journal.open("b", "link-down", [{"method": "netlink-up", "interface": "eth9"}])
    data = json.loads(journal.path.read_text())
    assert [e["id"] for e in data["entries"]] == ["a", "b"] and data["entries"][0]["pid"] == os.getpid()
    journal.close("a")
    assert [e["id"] for e in journal.entries()] == ["b"]
    journal.close("b")
    assert not journal.path.exists() and journal.entries() == []


def test_replay_undoes_records_last_first_and_keeps_failures(tmp_path, fake_sys):
    (fake_sys / "sys/kernel/config/nullb/d1").mkdir(parents=True)
    (fake_sys / "sys/kernel/config/nullb/d1/power").write_text("0")
    journal = Journal(tmp_path / "fault-journal.json")
    journal.open("x", "drive-pull", [{"method": "nullblk-power", "folder": "/sys/kernel/config/nullb/d1"}])
    done = engine.replay_journal(journal, Runner(), progress=lambda text: None)
    assert done == ["/sys/kernel/config/nullb/d1 powered on"]
    assert (fake_sys / "sys/kernel/config/nullb/d1/power").read_text() == "1"
    assert journal.entries() == []
    env = host_env()
    undo = [{"method": "nullblk-power", "folder": "/sys/kernel/config/nullb/d1"},
            {"method": "nullblk-power", "folder": "/sys/kernel/config/nullb/missing"}]
    log, failed = [], []
    failures = engine.undo_all(undo, env, log, lambda text: None, failed)
    assert [f["folder"] for f in failures] == ["/sys/kernel/config/nullb/missing"]
    assert log == ["/sys/kernel/config/nullb/d1 powered on"] and undo == []
    assert len(failed) == 1 and failed[0].startswith("nullblk-power: ")


def test_bad_journal_is_one_clear_line(tmp_path):
    path = tmp_path / "fault-journal.json"
    path.write_text("{not json")
    with pytest.raises(BadInput) as caught:
        Journal(path).entries()
    assert str(path) in str(caught.value)


# -- plan and safety through the CLI (nothing injected) -------------------------------------------------
def fxprobe(tmp_path, *args, env=None):
    argv = [sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp_path / "runs"), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "FXPROBE_FAULT_JOURNAL": str(tmp_path / "journal.json"), **(env or {})})
    assert "Traceback" not in done.stdout + done.stderr
    return done


def test_cli_dry_run_is_the_default_off_a_lab_and_prints_the_plan(tmp_path, veth):
    scenario = tmp_path / "cut.toml"
    scenario.write_text(f'[fault]\nkind = "link-down"\ninterface = "{veth}"\n[timing]\n[criteria]\n[load]\ntarget = "/dev/null"\n'
                        'verify = "off"\nno_verify_reason = "plan only"\n')   # a verified load writes its layout
    done = fxprobe(tmp_path, "--json", "fault", "run", str(scenario))
    assert done.returncode == 3, done.stderr
    result = json.loads(done.stdout)
    assert result["dry_run"] is True and result["verdict"] is None
    assert any(f"ip link set {veth} down" in line for line in result["plan"]["lines"])
    assert Path(f"/sys/class/net/{veth}/operstate").read_text().strip() == "up"      # both ends up, as made
    assert int(Path(f"/sys/class/net/{veth}/flags").read_text(), 16) & 1 == 1   # still up: nothing injected
    assert not (tmp_path / "journal.json").exists()


def test_cli_device_not_on_the_allow_list_is_refused(tmp_path, veth):
    scenario = tmp_path / "cut.toml"
    scenario.write_text(f'[fault]\nkind = "link-down"\ninterface = "{veth}"\n[timing]\n[criteria]\n[load]\ntarget = "/dev/null"\n'
                        'verify = "off"\nno_verify_reason = "plan only"\n')
    done = fxprobe(tmp_path, "fault", "run", str(scenario), "--yes", "--allow-serial", "SOMETHING-ELSE")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "not on the allow-list" in lines[0] and "nothing injected" in lines[0]
    assert int(Path(f"/sys/class/net/{veth}/flags").read_text(), 16) & 1 == 1


def test_cli_fault_the_environment_cannot_do_is_exit_3_one_line(tmp_path):
    scenario = tmp_path / "port.toml"
    scenario.write_text('[fault]\nkind = "port-disable"\nport = 1\nnqn = "nqn.2026-12.io.x:y"\n[timing]\n[criteria]\n'
                        '[load]\ntarget = "/dev/null"\nverify = "off"\nno_verify_reason = "plan only"\n')
    done = fxprobe(tmp_path, "fault", "run", str(scenario), "--yes", "--allow-serial", "nvmet-port:1")
    assert done.returncode == 3
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot be injected here" in lines[0]


def test_cli_restore_with_an_empty_journal(tmp_path):
    done = fxprobe(tmp_path, "--json", "fault", "restore")
    assert done.returncode == 0
    assert json.loads(done.stdout)["restored"] == []


def test_cli_list_names_the_shipped_scenarios(tmp_path):
    done = fxprobe(tmp_path, "--json", "fault", "list")
    assert done.returncode == 0
    names = {row["name"] for row in json.loads(done.stdout)["scenarios"]}
    assert {"drive-pull", "link-down", "link-flap"} <= names


@pytest.fixture
def loop_device(tmp_path):
    for device, _ in loopdev.loop_device(tmp_path, 64 << 20, direct_io=True):
        yield device


@pytest.mark.alone   # its load's figures are measured here: run alone
def test_real_host_run_link_down_on_an_unrelated_veth_is_an_error_the_fault_was_not_seen(tmp_path, veth, loop_device):
    """The whole host path for real: netlink fault, fio load on a loop device, logs, verdict, PNG. The veth carries
    none of the load's paths, so the cut did nothing to the load: that is no proof of invisibility (the review's
    finding: it passed as 'invisible') - the run's verdict is an error, the fault not seen."""
    scenario = tmp_path / "veth-cut.toml"
    scenario.write_text(f'[fault]\nkind = "link-down"\ninterface = "{veth}"\n'
                        f'[timing]\nsteady_s = 3\nsettle_s = 1\nfault_s = 2\nrecover_s = 1\n'
                        f'[load]\ntarget = "{loop_device}"\nlog_msec = 500\nregion = "16M"\n'
                        f'[criteria]\nmax_p99_ratio = 1000.0\nmin_throughput_pct = 20.0\n')
    # the verify layout writes the loop device: it must be allowed as a write target
    done = fxprobe(tmp_path, "--json", "fault", "run", str(scenario), "--yes", "--allow-serial", veth,
                   "--allow-serial", f"loop:{tmp_path / 'disk.img'}")
    assert done.returncode == 4, done.stderr[-2000:]                  # error: the fault was not seen
    result = json.loads(done.stdout)
    assert result["mode"] == "host" and result["impact"]["errors"] == 0
    assert result["verify"]["mismatches"] == 0 and result["verify"]["bytes_verified"] > 16 << 20   # passes
    assert result["impact"]["resolution_ms"] == 1                       # stall from per-I/O completions
    assert result["verdict"] == "error" and not result["fault_seen"]["seen"], result["criteria"]
    seen = next(c for c in result["criteria"] if c["name"].startswith("fault seen"))
    assert seen["outcome"] == "error" and seen["detail"].startswith("the fault was not seen: no load path leaving live")
    assert Path(result["png"]).exists()
    assert result["restore_log"] == [f"{veth} up"]
    assert int(Path(f"/sys/class/net/{veth}/flags").read_text(), 16) & 1 == 1
    assert any(e.get("device") == veth for e in result["timeline"]["events"])   # netlink saw the cut
    assert not (tmp_path / "journal.json").exists()


# -- review G1 item 8: every block device of the drive through the target check's rules -------------------------
@pytest.fixture
def drives_in_use(tmp_path, monkeypatch):
    """Drives by serial: S0MULTI (namespace 2 holds /), S1BTRFS (btrfs root: mountinfo's 0:31), S2DATA (mounted
    at /data), S3SWAP (a swap partition), S4FREE (nothing), S5MD (a member of a clean raid6, md holds it)."""
    from test_safety import make_disk, mountinfo
    root = tmp_path / "root"
    make_disk(root, "nvme0n1", "259:0", serial="S0MULTI")
    make_disk(root, "nvme0n2", "259:1", serial="S0MULTI")
    make_disk(root, "nvme1n1", "259:2", serial="S1BTRFS", parts={"nvme1n1p1": ("259:3", ())})
    make_disk(root, "nvme2n1", "259:4", serial="S2DATA")
    make_disk(root, "nvme3n1", "259:5", serial="S3SWAP", parts={"nvme3n1p1": ("259:6", ())})
    make_disk(root, "nvme4n1", "259:7", serial="S4FREE")
    make_disk(root, "nvme5n1", "259:8", serial="S5MD", holders=("md0",))
    mountinfo(root, ["22 1 259:1 / / rw,relatime - ext4 /dev/nvme0n2 rw",
                     "23 22 0:31 /@home /home rw - btrfs /dev/nvme1n1p1 rw",
                     "40 22 259:4 / /data rw - xfs /dev/nvme2n1 rw"])
    (root / "proc/swaps").write_text("Filename Type Size Used Priority\n/dev/nvme3n1p1 partition 8388604 0 -2\n")
    (root / "proc/mdstat").write_text("Personalities : [raid6]\nmd0 : active raid6 nvme5n1[0] sdb[1] sdc[2] sdd[3]\n"
                                      "      1000 blocks super 1.2 level 6, 512k chunk [4/4] [UUUU]\n\nunused devices: <none>\n")
    monkeypatch.setattr(sysfs, "ROOT", root)
    return root


@pytest.mark.parametrize("serial, rule", [("S0MULTI", "holds the root filesystem"), ("S1BTRFS", "mounted: nvme1n1p1 on /home"),
                                          ("S2DATA", "mounted: nvme2n1 on /data"), ("S3SWAP", "swap: nvme3n1p1 in use as swap")])
def test_a_drive_pull_of_a_drive_in_use_is_refused_by_the_rule_it_breaks(drives_in_use, serial, rule):
    method = methods.SysfsRemove(host_env(), {"kind": "drive-pull", "via": "sysfs", "serial": serial})
    assert any(rule in r for r in method.refusals()), method.refusals()


def test_a_btrfs_root_and_a_second_namespace_holding_it_are_root_devices(drives_in_use):
    (drives_in_use / "proc/self/mountinfo").write_text("22 1 0:31 /@ / rw - btrfs /dev/nvme1n1p1 rw\n")
    assert SystemView(sysfs.ROOT).root_devices() == {"nvme1n1p1", "nvme1n1"}


def test_a_free_drive_and_a_member_of_a_redundant_md_are_not_refused(drives_in_use):
    for serial in ("S4FREE", "S5MD"):
        assert methods.SysfsRemove(host_env(), {"kind": "drive-pull", "via": "sysfs", "serial": serial}).refusals() == []
