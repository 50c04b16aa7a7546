"""The QEMU lab against real guests (issue 3, "Must show" 1-7).

The first test boots a tiny lab of its own (rdma, 2 drives) and checks that `lab down` leaves
nothing; the others share the session lab of tests/conftest.py and restore what they break.
"""

from __future__ import annotations

import json
import os
import re
import time

import psutil
import pytest

from fxprobe.cli.main import main
from fxprobe.core.errors import NotRunnable
from fxprobe.core.hosts import SshHost
from fxprobe.host import telemetry
from fxprobe.lab.spec import LabSpec
from fxprobe.lab.vm import ALT_PORT_OFFSET, Lab, lab_home, listening_ports
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner

from conftest import SESSION_RAID_DRIVES, skip_or_fail

pytestmark = pytest.mark.lab


def qemu_processes(folder) -> list[int]:
    pids = []
    for process in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "qemu-system" in cmdline and str(folder) in cmdline and process.info["status"] != psutil.STATUS_ZOMBIE:
            pids.append(process.pid)
    return pids


def lab_ports(lab: Lab) -> set[int]:
    return {g.ssh_port for g in lab.state.guests.values()} | {l.socket_port for l in lab.state.links}


def lab_listening(lab: Lab) -> set[int]:
    """The lab's ports something listens on at 127.0.0.1 (the same number on another address belongs to
    someone else: the lab beside is handed ports from the same range)."""
    return lab_ports(lab) & listening_ports(address="127.0.0.1")


def wait_for(predicate, timeout: float, what: str, step: float = 1.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(step)


def md(lab: Lab) -> dict:
    return lab.guest_info("array")["md"][0]


# -- a tiny rdma lab of its own: Must-show 4 (--transport rdma), 5 and 6 -----------------------------

@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_tiny_rdma_lab_connects_and_down_leaves_nothing(tmp_path):
    run = RunDir.create(tmp_path, "tiny-lab")
    spec = LabSpec(name=f"tiny-{os.getpid()}", drives=2, raid="raid1",
                   hosts=1, links=1, transport="rdma", drive_mb=64)
    try:
        lab = Lab.up(spec, Runner(run))
    except NotRunnable as exc:
        skip_or_fail(str(exc))
    folder = lab.folder
    try:
        # the kernel came from the cache: no download in this run's command record
        assert not any("download" in " ".join(c["argv"]) for c in run.commands())
        live = lab.live_paths("host1", spec.subsystem_nqn)
        assert [p.transport for p in live] == ["rdma"]
        assert (folder.stat().st_mode & 0o777) == 0o700
        assert (folder / "id_ed25519").stat().st_mode & 0o777 == 0o600
        assert len(qemu_processes(folder)) == 2 and len(lab_listening(lab)) == len(lab_ports(lab))
    finally:
        code = main(["--runs", str(tmp_path / "runs"), "lab", "down", "--lab", spec.name])
    assert code == 0
    assert not qemu_processes(folder), "a QEMU process of the lab is still running"
    assert not lab_listening(lab), "a port of the lab still listens"
    assert not folder.exists(), "the lab folder (keys, sockets, drives) is still there"


# -- the session lab ---------------------------------------------------------------------------------

@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_must_show_1_subsystem_on_host_and_24_drives_in_array(lab, tmp_path, capsys):
    nqn = lab.main_export.nqn
    host = json.loads(lab.exec("host", ["nvme", "list", "-v", "-o", "json"], check=True).stdout)
    nqns = [s["SubsystemNQN"] for d in host["Devices"] for s in d["Subsystems"]]
    assert nqn in nqns
    array = json.loads(lab.exec("array", ["nvme", "list", "-o", "json"], check=True).stdout)
    serials = sorted(d["SerialNumber"].strip() for d in array["Devices"])
    assert serials == sorted(d.serial for d in lab.state.drives) and len(serials) == 24
    capsys.readouterr()
    assert main(["--runs", str(tmp_path), "--json", "lab", "status", "--lab", lab.name]) == 0
    status = json.loads(capsys.readouterr().out)["lab"]
    assert sorted(d["serial"] for d in status["drives"] if d["state"] == "present") == serials
    assert status["md"][0]["working_disks"] == SESSION_RAID_DRIVES
    assert {s["nqn"] for s in status["nvme"]["host1"]} >= {nqn}


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_soak_health_reads_each_smart_log_through_tools_nvme(lab):
    """The soak's health record (telemetry.smart_logs) is tools.nvme's reader and parser: a drive of the array
    (QEMU's NVMe: 323 K) and a fabrics controller of host1 (nvmet: no sensor, 0 K -> no Celsius) give the typed
    record's fields; a controller that is not there is an error kept beside them, not raised."""
    array = telemetry.smart_logs(Runner(), host=lab.guest("array"), controllers=["nvme0", "nvme99"])
    assert array["nvme0"]["temperature_k"] == 323 and array["nvme0"]["temperature_c"] == 49.85
    assert array["nvme0"]["media_errors"] == 0 and array["nvme0"]["spare_below_threshold"] is False
    assert array["nvme99"]["error"].startswith("nvme smart-log: ")
    host = telemetry.smart_logs(Runner(), host=lab.guest("host1"), controllers=["nvme0"])["nvme0"]
    assert host["temperature_k"] == 0 and host["temperature_c"] is None and host["critical_warning"] == 0


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_guests_are_ssh_hosts_and_resolve_each_other(lab):
    host = lab.guest("host")
    assert isinstance(host, SshHost) and host.address == "127.0.0.1"
    assert Runner().run(["hostname"], timeout=60, host=host, check=True).stdout.strip() == "host1"
    # from /etc/hosts, at once: a guest asking the host's name servers, which it cannot reach, waited 10 s here
    assert lab.exec("host2", ["getent", "hosts", "array"], timeout=8, check=True).stdout.split()[0] == "10.1.2.1"
    lab.exec("host1", ["ping", "-c", "1", "-W", "10", "host2"], timeout=60, check=True)
    # management endpoints listen on loopback only
    for guest in lab.state.guests.values():
        assert guest.ssh_port in listening_ports()
    tcp = open("/proc/net/tcp").read()
    for guest in lab.state.guests.values():
        assert f"0100007F:{guest.ssh_port:04X}" in tcp


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_must_show_2_link_down_leaves_one_live_path(lab):
    nqn = lab.main_export.nqn
    assert len(lab.wait_paths("host1", nqn, 2)) == 2
    lab.link_down(2, host="host1")
    try:
        live = lab.wait_paths("host1", nqn, 1, timeout=90)
        assert live[0].address.startswith("traddr=10.1.1.1")
        status = {(l["host"], l["n"]): l for l in lab.status()["links"]}
        assert status[("host1", 2)]["up"] is False and status[("host1", 2)]["host_operstate"] == "down"
    finally:
        lab.link_up(2, host="host1")
    assert len(lab.wait_paths("host1", nqn, 2, timeout=120)) == 2


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_must_show_3_drive_pull_degrades_md_and_namespace_stays_readable(lab):
    slot = 3
    lab.drive_pull(slot)
    try:
        state = wait_for(lambda: (lambda m: m if m["degraded"] else None)(md(lab)), 60, "md to degrade")
        assert state["working_disks"] == SESSION_RAID_DRIVES - 1
        namespace = lab.guest_info("host1")["nvme_subsystems"]
        device = next(s["namespaces"][0] for s in namespace if s["nqn"] == lab.main_export.nqn)
        read = lab.exec("host1", ["dd", f"if=/dev/{device}", "of=/dev/null", "bs=1M", "count=16", "iflag=direct"],
                        timeout=120, check=True)
        assert "16777216 bytes" in read.stderr
    finally:
        restored = lab.drive_restore(slot)
    assert restored["device"].startswith("/dev/nvme")
    # the drive goes back in: md recovers it (observed as a recovery action, or already done)
    dmesg = wait_for(lambda: (lambda out: out if "recovery of RAID array" in out else None)(
        lab.exec("array", ["dmesg"], check=True).stdout), 60, "md recovery to start")
    assert re.search(r"md: recovery of RAID array md\d+", dmesg)
    wait_for(lambda: not md(lab)["degraded"] and not md(lab)["action"], 240, "md recovery to finish", step=5)


@pytest.mark.lab_parallel   # judges no throughput: ib_read_bw's result line is there, not what it measured
def test_must_show_4_rdma_gids_connect_and_ib_read_bw(lab):
    info = {g: lab.guest_info(g)["rdma"] for g in ("array", "host2")}
    for guest, ports in info.items():
        assert any(g["type"] == "RoCE v2" for p in ports for g in p["gids"]), f"{guest}: no RoCE v2 GID"
    link = lab.link(1, "host2")
    nqn = lab.main_export.nqn
    before = {p.controller for p in lab.live_paths("host2", nqn)}
    lab.exec("host2", ["nvme", "connect", "-t", "rdma", "-a", link.array_ip, "-s", "4420", "-n", nqn],
             timeout=60, check=True)
    try:
        live = wait_for(lambda: [p for p in lab.live_paths("host2", nqn) if p.transport == "rdma"], 60,
                        "an rdma path")
        assert live[0].controller not in before
    finally:
        for path in lab.live_paths("host2", nqn):
            if path.transport == "rdma":
                lab.exec("host2", ["nvme", "disconnect", "-d", path.controller], timeout=60)
    # ib_read_bw between host1 and the array over rxe
    host_dev, array_dev = "rxe_l1", "rxe_l1h1"
    gid = lambda guest, dev: next(g["index"] for p in lab.guest_info(guest)["rdma"] if p["device"] == dev
                                  for g in p["gids"] if g["type"] == "RoCE v2" and "ffff" in g["gid"])
    server = lab.runner.start(["ib_read_bw", "-d", array_dev, "-x", str(gid("array", array_dev)), "-F",
                               "-p", "18555", "-n", "200"], host=lab.guest("array"), label="ib_read_bw-server")
    try:
        time.sleep(3)
        client = lab.exec("host1", ["ib_read_bw", "-d", host_dev, "-x", str(gid("host1", host_dev)), "-F",
                                    "-p", "18555", "-n", "200", "10.1.1.1"], timeout=120)
        assert client.ok, client.stderr
        assert re.search(r"^\s*65536\s+200\s+[\d.]+\s+[\d.]+", client.stdout, re.M), client.stdout
    finally:
        server.stop()


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_add_export_twin_raid0_from_free_drives(lab):
    export = lab.add_export("raid0", [20, 21], name="twin")
    try:
        assert export.nqn.endswith(":twin")
        assert len(lab.wait_paths("host1", export.nqn, 2)) == 2
        levels = {m["level"] for m in lab.guest_info("array")["md"]}
        assert levels == {"raid6", "raid0"}
    finally:
        lab.remove_export("twin")
    assert [m["level"] for m in lab.guest_info("array")["md"]] == ["raid6"]
    assert not lab.live_paths("host1", export.nqn)


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_throttle_sets_and_removes_tbf(lab):
    lab.throttle(1, "200mbit", host="host2")
    try:
        shown = lab.exec("array", ["tc", "qdisc", "show", "dev", "l1h2"], check=True).stdout
        assert "tbf" in shown and "200Mbit" in shown
    finally:
        lab.throttle(1, "off", host="host2")
    assert "tbf" not in lab.exec("host2", ["tc", "qdisc", "show", "dev", "l1"], check=True).stdout


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_bad_fault_input_is_one_line(lab, tmp_path, capsys):
    assert main(["--runs", str(tmp_path), "lab", "fault", "drive-pull", "--lab", lab.name, "99"]) == 2
    assert main(["--runs", str(tmp_path), "lab", "fault", "throttle", "--lab", lab.name, "1", "fast"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "no drive slot 99" in err[0] and "'fast': expected a rate" in err[1]


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_native_lab_inside_the_array_guest(lab):
    """`fxprobe lab up --native` (the same target code) builds, reports and tears down in a real kernel."""
    base = lab.python("fxprobe.cli.main", "--runs", "/tmp/runs")     # this checkout's fxprobe, in the guest
    up = lab.exec("array", base + ["lab", "up", "--native", "--lab", "nt", "--drives", "4", "--raid", "raid5",
                                   "--port-base", "4430"], timeout=300)
    try:
        assert up.ok, up.stderr
        status = json.loads(lab.exec("array", base + ["--json", "lab", "status", "--native", "--lab", "nt"],
                                     timeout=120, check=True).stdout)["native"]
        assert status["level"] == "raid5" and len(status["devices"]) == 4
        assert [p["state"] for s in status["nvme"] for p in s["paths"]] == ["live"]
    finally:
        down = lab.exec("array", base + ["lab", "down", "--native", "--lab", "nt"], timeout=120)
    assert down.ok, down.stderr
    left = lab.exec("array", ["ls", "/sys/kernel/config/nvmet/subsystems"], check=True).stdout.split()
    assert left == [lab.main_export.nqn]
    assert [m["level"] for m in lab.guest_info("array")["md"]] == ["raid6"]
