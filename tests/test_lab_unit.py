"""Lab pieces that need no guest: specs, address plan, QEMU argv, cpio, nvmet object model, mdstat, CLI refusals."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from fxprobe.cli.main import main
from fxprobe.core.errors import BadInput, EXIT_NOT_RUN, EXIT_USAGE
from fxprobe.lab.initramfs import CpioEntry, write_cpio
from fxprobe.lab.kernel import parse_image_package
from fxprobe.lab.qemu import MAX_DRIVES, TCG_TB_MB, Drive, GuestConfig, Nic, device_option, guest_argv
from fxprobe.lab.kernel import LabKernel
from fxprobe.lab.spec import LabSpec, drive_serial, hosts_file, link_plan
from fxprobe.lab.vm import choose_ports, listening_ports, parse_path_lines
from fxprobe.tools.mdadm import parse_mdstat
from fxprobe.tools.nvmet import CFSError, NvmetRoot

FIXTURES = Path(__file__).parent / "fixtures" / "lab"


# -- spec -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, words", [
    ({"raid": "raid7"}, "unknown RAID level"),
    ({"drives": MAX_DRIVES + 1}, "hot-pluggable drives"),
    ({"transport": "fc"}, "unknown transport"),
    ({"raid": "raid6", "raid_drives": 3}, "at least 4"),
    ({"links": 3}, "--links 3"),
    ({"name": "Bad Name"}, "lab name"),
])
def test_spec_refuses_bad_input(kwargs, words):
    with pytest.raises(BadInput, match=words):
        LabSpec(**kwargs).validate()


def test_default_spec_is_the_issue_default():
    spec = LabSpec().validate()
    assert (spec.drives, spec.raid, spec.hosts, spec.links, spec.transport) == (24, "raid6", 1, 1, "tcp")
    assert spec.guest_names == ["array", "host1"]


@given(st.text(alphabet="0123456789abcdef", min_size=8, max_size=8))
def test_drive_serials_are_distinct_and_fit_the_nvme_field(token):
    serials = [drive_serial(token, slot) for slot in range(MAX_DRIVES)]
    assert len(set(serials)) == MAX_DRIVES
    assert all(len(s) <= 20 and s.isascii() for s in serials)


@given(st.integers(1, 8), st.integers(1, 2))
def test_link_plan_addresses_are_unique(hosts, links):
    spec = LabSpec(hosts=hosts, links=links).validate()
    plan = link_plan(spec)
    addresses = [l.array_ip for l in plan] + [l.host_ip for l in plan]
    assert len(set(addresses)) == len(addresses) == 2 * hosts * links
    assert len({l.port_id for l in plan}) == len(plan)
    assert spec.port_count == 1 + hosts + hosts * links


def test_hosts_file_names_every_guest():
    spec = LabSpec(hosts=2, links=2)
    text = hosts_file(spec, "host2")
    assert "10.1.2.1\tarray" in text and "10.1.1.2\thost1\thost" in text
    assert "host2" in hosts_file(spec, "array")


def test_port_base_taken_is_refused():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(BadInput, match=f"port {port} on 127.0.0.1 is already taken"):
            choose_ports(LabSpec(port_base=port).validate())


# -- QEMU argv --------------------------------------------------------------------------------

def test_guest_argv_is_loopback_only_and_drives_hotpluggable(tmp_path):
    kernel = LabKernel("6.1.0-x", "linux-image-6.1.0-x", tmp_path)
    guest = GuestConfig("array", tmp_path / "array", 2222, "52:54:00:00:00:00", 1024, 1,
                        (Nic("l1h1", "52:54:00:01:01:01", "10.1.1.1", listen=3333, speed=100000),),
                        (Drive(0, "SER0", "/x/0.img"), Drive(1, "SER1", "/x/1.img")))
    argv = guest_argv(guest, kernel, tmp_path / "initrd", tmp_path / "stage2.sh", "tcg")
    text = " ".join(argv)
    assert "hostfwd=tcp:127.0.0.1:2222-:22" in text and "restrict=on" in text
    assert "listen=127.0.0.1:3333" in text and "speed=100000" in text
    assert f"unix:{tmp_path}/array/qmp.sock,server=on,wait=off" in text
    assert "nvme,id=drive1,drive=nv1,serial=SER1,bus=pci.0,addr=0x4" in text
    assert "tcg,thread=multi" in text and "readonly=on" in text


def test_an_array_guest_of_8_hosts_on_2_links_has_a_bridge_slot_for_every_device(tmp_path):
    """16 data NICs, the management NIC and the three 9p shares on one bridge, each in its own slot (the
    shares sat at 0x10-0x12, where the 15th and 16th data NICs go)."""
    kernel = LabKernel("6.1.0-x", "linux-image-6.1.0-x", tmp_path)
    nics = tuple(Nic(f"l{n}h{h}", f"52:54:00:{n:02x}:{h:02x}:01", f"10.{n}.{h}.1", listen=4000 + 10 * n + h)
                 for h in range(1, 9) for n in (1, 2))
    guest = GuestConfig("array", tmp_path / "array", 2222, "52:54:00:00:00:00", 1408, 1, nics)
    argv = guest_argv(guest, kernel, tmp_path / "initrd", tmp_path / "stage2.sh", "tcg")
    slots = [part.split("addr=")[1].split(",")[0] for part in argv if "bus=nics" in part]
    assert len(slots) == 16 + 1 + 3 and len(set(slots)) == len(slots)
    assert all(int(slot, 16) < 32 for slot in slots)
    assert f"tcg,thread=multi,tb-size={TCG_TB_MB}" in argv
    with pytest.raises(ValueError, match="NIC bridge holds"):
        guest_argv(GuestConfig("array", tmp_path, 2222, "m", 1408, 1, nics * 2), kernel, tmp_path, tmp_path, "tcg")


def test_drive_device_args_are_the_same_at_boot_and_restore():
    drive = Drive(7, "S", "/i")
    assert drive.device_args() == {"driver": "nvme", "id": "drive7", "drive": "nv7", "serial": "S",
                                   "bus": "pci.0", "addr": "0xa", "ioeventfd": True}
    assert device_option(drive.device_args()) == "nvme,id=drive7,drive=nv7,serial=S,bus=pci.0,addr=0xa,ioeventfd=on"


# -- initramfs --------------------------------------------------------------------------------

def test_cpio_archive_is_read_by_cpio(tmp_path):
    data = write_cpio([CpioEntry("bin", 0o040755), CpioEntry("bin/x", 0o100755, b"hello"),
                       CpioEntry("dev/console", 0o020600, rdev=(5, 1))])
    archive = tmp_path / "a.cpio"
    archive.write_bytes(data)
    listing = subprocess.run(["cpio", "-it", "--quiet"], input=data, capture_output=True, check=True).stdout.decode()
    assert listing.split() == ["bin", "bin/x", "dev/console"]


def test_kernel_package_is_resolved_from_apt_cache_depends():
    text = "linux-image-amd64\n  Depends: linux-image-6.1.0-57-amd64\n"
    assert parse_image_package(text) == "linux-image-6.1.0-57-amd64"


# -- mdstat, paths, sockets ----------------------------------------------------------------------

def test_mdstat_fixture_from_the_lab():
    arrays = parse_mdstat((FIXTURES / "array-mdstat.txt").read_text())
    assert len(arrays) == 1 and arrays[0].level == "raid6"
    assert arrays[0].raid_disks == 20 == arrays[0].working_disks and not arrays[0].degraded


def test_mdstat_degraded_and_recovering():
    text = ("md127 : active raid6 nvme5n1[5] nvme3n1[3](F) nvme0n1[0]\n"
            "      1046528 blocks super 1.2 level 6, 512k chunk, algorithm 2 [6/5] [UUU_UU]\n"
            "      [=>...................]  recovery =  8.5% (22016/261632) finish=0.1min speed=22016K/sec\n")
    (md,) = parse_mdstat(text)
    assert md.degraded and md.action == "recovery" and md.progress == 8.5
    assert [m.faulty for m in md.members] == [False, True, False]


def test_path_lines():
    text = "nqn.x nvme0 live tcp traddr=10.1.1.1,trsvcid=4420\nnqn.x nvme1 connecting tcp traddr=10.2.1.1,trsvcid=4420\n"
    paths = parse_path_lines(text)
    assert [p.state for p in paths] == ["live", "connecting"] and paths[1].address.startswith("traddr=10.2")


def test_listening_ports_reads_proc_net_tcp():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert server.getsockname()[1] in listening_ports()


def test_listening_ports_at_an_address_leaves_out_the_same_number_on_another():
    with socket.socket() as here, socket.socket() as elsewhere, socket.socket() as everywhere:
        here.bind(("127.0.0.1", 0))
        port = here.getsockname()[1]
        elsewhere.bind(("127.0.0.2", port))     # the same number on another address: allowed, and not ours
        here.listen()
        elsewhere.listen()
        assert port in listening_ports(address="127.0.0.1")
        here.close()
        assert port in listening_ports() and port not in listening_ports(address="127.0.0.1")
        everywhere.bind(("0.0.0.0", 0))
        everywhere.listen()
        assert everywhere.getsockname()[1] in listening_ports(address="127.0.0.1")   # every address includes it


# -- nvmet object model on a fake configfs tree ------------------------------------------------

def test_nvmet_model_on_a_fake_tree(tmp_path):
    root = NvmetRoot(tmp_path)
    (tmp_path / "subsystems").mkdir()
    (tmp_path / "ports").mkdir()
    subsystem = root.subsystem("nqn.test:a")
    (subsystem.path / "namespaces").mkdir()
    namespace_dir = subsystem.path / "namespaces" / "1"
    namespace_dir.mkdir()
    (namespace_dir / "enable").write_text("0\n")
    namespace = subsystem.add_namespace(1, "/dev/md127")
    assert namespace.device_path == "/dev/md127" and namespace.enabled
    port = root.port(101)
    (port.path / "subsystems").mkdir()
    port.configure("tcp", "10.1.1.1", 4420)
    port.link(subsystem)
    assert port.subsystem_nqns() == ["nqn.test:a"]
    with pytest.raises(CFSError, match="in use as tcp:10.1.1.1:4420"):
        port.configure("rdma", "10.1.1.1", 4420)
    with pytest.raises(CFSError, match="ports/7: no such port"):
        root.port(7, create=False)
    # (ordered teardown needs real configfs semantics: tested in the array guest, test_lab.py)


def test_nvmet_probe_names_the_path(tmp_path):
    assert "does not exist" in NvmetRoot(tmp_path / "nvmet").probe()


# -- CLI refusals: one line, exit 2 or 3, nothing left ------------------------------------------

def _qemu_processes_of(name: str) -> list[int]:
    import psutil
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "qemu-system" in cmdline and f"/labs/{name}/" in cmdline:
            found.append(process.pid)
    return found


@pytest.mark.parametrize("args, env, code, words", [
    (["--raid", "raid7"], {}, EXIT_USAGE, "unknown RAID level"),
    (["--drives", "99"], {}, EXIT_USAGE, "--drives 99"),
    ([], {"FXPROBE_QEMU": "/nonexistent/qemu-system-x86_64"}, EXIT_NOT_RUN, "is not installed"),
])
def test_lab_up_refusals(args, env, code, words, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("FXPROBE_LAB_HOME", str(tmp_path / "labs"))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["--runs", str(tmp_path / "runs"), "lab", "up", "--lab", "refused", *args]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "labs" / "refused").exists() and not _qemu_processes_of("refused")


def test_lab_up_port_taken(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("FXPROBE_LAB_HOME", str(tmp_path / "labs"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code = main(["--runs", str(tmp_path / "runs"), "lab", "up", "--lab", "busy", "--port-base", str(port)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == EXIT_USAGE and len(err) == 1 and f"port {port}" in err[0]
    assert not (tmp_path / "labs" / "busy").exists() and not _qemu_processes_of("busy")


def test_lab_status_without_a_lab(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("FXPROBE_LAB_HOME", str(tmp_path / "labs"))
    assert main(["--runs", str(tmp_path / "runs"), "lab", "status", "--lab", "none"]) == EXIT_USAGE
    assert "no lab named 'none' is up" in capsys.readouterr().err


def test_native_lab_refuses_on_a_kernel_without_modules(capsys, monkeypatch, tmp_path):
    if Path("/lib/modules", os.uname().release).is_dir():
        pytest.skip("this kernel has modules: the native lab is tested inside the array guest")
    monkeypatch.setenv("FXPROBE_LAB_HOME", str(tmp_path / "labs"))
    assert main(["--runs", str(tmp_path / "runs"), "lab", "up", "--native", "--lab", "nat"]) == EXIT_NOT_RUN
    assert "no loadable modules" in capsys.readouterr().err


def test_lab_folder_too_long_for_a_unix_socket(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("FXPROBE_LAB_HOME", str(tmp_path / ("x" * 100)))
    assert main(["--runs", str(tmp_path / "runs"), "lab", "up", "--lab", "long"]) == EXIT_USAGE
    assert "too long for a unix socket" in capsys.readouterr().err


# -- state file ---------------------------------------------------------------------------------

def _state():
    from fxprobe.lab.state import DriveState, ExportState, GuestState, KernelState, LabState, LinkState
    spec = LabSpec(name="t", drives=2, raid="raid1", hosts=1).validate()
    state = LabState(spec=spec, created="2026-01-01T00:00:00Z", accel="tcg", python="/usr/bin/python3",
                     kernel=KernelState(version="6.1.0-1-amd64", package="linux-image-6.1.0-1-amd64", root="/k"))
    state.guests["array"] = GuestState(ssh_port=2001, qmp="/l/array/qmp.sock", console="/l/array/c.log",
                                       hostnqn="nqn.a", role="array", pid=11)
    state.guests["host1"] = GuestState(ssh_port=2002, qmp="/l/host1/qmp.sock", console="/l/host1/c.log",
                                       hostnqn="nqn.h")
    state.drives += [DriveState(slot=s, serial=drive_serial("abcd1234", s), image=f"/l/{s}.img", export="fxlab")
                     for s in range(2)]
    state.links.append(LinkState(**link_plan(spec)[0].to_dict(), socket_port=3001))
    state.exports.append(ExportState(name="fxlab", nqn=spec.subsystem_nqn, level="raid1", slots=[0, 1],
                                     transport="tcp", backing="/dev/md127", connected=["host1"]))
    return state


def test_lab_state_round_trips_through_its_file(tmp_path):
    from fxprobe.lab.state import LabState
    state = _state()
    state.drives[1].present, state.drives[1].pulled = False, "2026-01-01T00:01:00Z"
    state.timings["ready_s"] = 91.5
    state.write(tmp_path / "state.json")
    again = LabState.read(tmp_path / "state.json", "t")
    assert again == state and again.to_dict() == state.to_dict()
    assert again.spec == state.spec and again.host_names == ["host1"] and again.array_names == ["array"]
    assert again.main_export.nqn == state.spec.subsystem_nqn and again.free_slots() == []
    assert again.drives[0].device() == Drive(0, drive_serial("abcd1234", 0), "/l/0.img")


def test_lab_state_file_errors_name_the_file_and_field(tmp_path):
    from fxprobe.lab.state import LabState
    path = tmp_path / "state.json"
    path.write_text("{")
    with pytest.raises(BadInput, match="not valid JSON"):
        LabState.read(path, "t")
    data = _state().to_dict()
    data["drives"][0]["slot"] = "zero"
    path.write_text(__import__("json").dumps(data))
    with pytest.raises(BadInput, match=r"field drives\.0\.slot"):
        LabState.read(path, "t")
    with pytest.raises(ValueError):
        _state().drives[0].slot = "zero"      # assignments are checked too


def test_a_guest_runs_fxprobe_with_the_same_minor_python_and_its_launcher_says_so(tmp_path):
    """Guests start Debian's python of this X.Y when there is one (statically linked: seconds faster per start
    under TCG than a --enable-shared build), with -S and the path of this process's imports; the guest's
    `fxprobe` command (the share's bin/fxprobe) is that same argv."""
    import sys
    from fxprobe.lab import guestpython
    argv = guestpython.python_argv("fxprobe.cli.main", "--version")
    assert argv[0] == "env" and argv[1].startswith("PYTHONPATH=") and argv[4:] == ["-S", "-m", "fxprobe.cli.main",
                                                                                    "--version"]
    assert argv[2] == "PYDANTIC_DISABLE_PLUGINS=__all__"          # no scan of every distribution's entry points
    argv = argv[:2] + argv[3:]
    assert argv[2].endswith(f"python{sys.version_info.major}.{sys.version_info.minor}") or argv[2] == sys.executable
    import fxprobe
    assert argv[1].split("=", 1)[1].split(":")[0] == str(Path(fxprobe.__file__).resolve().parent.parent)
    guestpython.write_launcher(tmp_path)
    text = (tmp_path / "bin" / "fxprobe").read_text()
    assert text.startswith("#!/bin/sh\n") and f"{argv[2]} -S -m fxprobe.cli.main \"$@\"" in text
    assert (tmp_path / "bin" / "fxprobe").stat().st_mode & 0o100
