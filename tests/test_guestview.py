"""tools/guestview.sh, the shell views the fault run samples in lab guests, run for real over sysfs/procfs trees laid
out as a host guest and the array guest show them (FXPROBE_SYSROOT), and read back by tools.guestview's parsers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from fxprobe.tools import guestview
from fxprobe.tools.mdadm import parse_md_geometry

NQN = "nqn.2026-12.io.fxprobe:t:array"
MDSTAT = """Personalities : [raid6] [raid5] [raid4] [raid0]
md127 : active raid0 nvme21n1[1] nvme20n1[0]
      1048576 blocks super 1.2 512k chunks

unused devices: <none>
"""


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def run(root: Path, argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                          env={**os.environ, "FXPROBE_SYSROOT": str(root)})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def host_tree(root: Path) -> Path:
    """Two TCP paths (link 2 connecting) to one subsystem with one multipath namespace."""
    subsys = root / "sys/class/nvme-subsystem/nvme-subsys0"
    for n, (link, state) in enumerate(((1, "live"), (2, "connecting"))):
        ctrl = f"sys/devices/virtual/nvme-fabrics/ctl/nvme{n}"
        for name, value in (("state", state), ("transport", "tcp"),
                            ("address", f"traddr=10.{link}.1.1,trsvcid=4420,src_addr=10.{link}.1.2")):
            write(root, f"{ctrl}/{name}", value)
        subsys.mkdir(parents=True, exist_ok=True)
        (subsys / f"nvme{n}").symlink_to(root / ctrl)
    write(root, "sys/class/nvme-subsystem/nvme-subsys0/subsysnqn", NQN)
    write(root, "sys/class/nvme-subsystem/nvme-subsys0/iopolicy", "round-robin")
    (subsys / "nvme0n1").mkdir()
    return root


def array_tree(root: Path) -> Path:
    """Two PCIe drives in a raid0 md127 (512 KiB chunks, data at sector 2048) and a spare without a slot."""
    write(root, "proc/mdstat", MDSTAT.rstrip("\n"))
    for n, serial in ((20, "FXLS20"), (21, "FXLS21")):
        write(root, f"sys/class/nvme/nvme{n}/serial", serial)
        (root / f"sys/class/nvme/nvme{n}/nvme{n}n1").mkdir()
    md = "sys/block/md127/md"
    for name, value in (("level", "raid0"), ("chunk_size", "524288"), ("layout", "0")):
        write(root, f"{md}/{name}", value)
    for device, slot in (("nvme20n1", "0"), ("nvme21n1", "1"), ("nvme22n1", "none")):
        write(root, f"{md}/dev-{device}/slot", slot)
        write(root, f"{md}/dev-{device}/offset", "2048")
    return root


def test_the_host_view_shows_every_path_and_namespace(tmp_path):
    [sub] = guestview.parse_host_view(run(host_tree(tmp_path), guestview.view_argv("host")))
    assert (sub["name"], sub["nqn"], sub["iopolicy"], sub["namespaces"]) == ("nvme-subsys0", NQN, "round-robin",
                                                                             ["nvme0n1"])
    assert [(p["controller"], p["state"], p["address"].split(",")[0]) for p in sub["paths"]] == [
        ("nvme0", "live", "traddr=10.1.1.1"), ("nvme1", "connecting", "traddr=10.2.1.1")]


def test_the_array_view_with_roles_and_the_md_geometry(tmp_path):
    root = array_tree(tmp_path)
    view = guestview.parse_array_view(run(root, guestview.view_argv("array", "roles")))
    assert [(c["name"], c["serial"], c["namespaces"]) for c in view["nvme_controllers"]] == [
        ("nvme20", "FXLS20", ["nvme20n1"]), ("nvme21", "FXLS21", ["nvme21n1"])]
    [md] = view["md"]
    assert md["name"] == "md127" and md["layout"] == 0
    assert {m["device"]: m["role"] for m in md["members"]} == {"nvme20n1": 0, "nvme21n1": 1}
    geometry = parse_md_geometry(run(root, guestview.md_geometry_argv("md127")))
    assert (geometry.level, geometry.chunk_bytes) == ("raid0", 524288)
    assert [m[1] for m in geometry.members] == ["nvme20n1", "nvme21n1"]        # the spare has no slot


def test_the_sampling_loop_stamps_each_view(tmp_path):
    text = run(host_tree(tmp_path), guestview.loop_argv("host", 2, 0.1))
    samples = guestview.parse_sampling(text, guestview.parse_host_view)
    assert len(samples) >= 2 and all(t > 1.7e9 for t, _ in samples)
    assert [s[0]["paths"][0]["state"] for _, s in samples] == ["live"] * len(samples)


def test_the_sampling_loop_forks_no_process_a_sample_under_bash_and_sh_does(tmp_path):
    """Under emulation a fork costs a lab guest 0.1 s or more; the loop samples every second in two guests through
    each fault run, so bash's loop takes its clock and its wait without date or sleep. The twin: sh forks both."""
    shims, calls = tmp_path / "bin", tmp_path / "calls"
    shims.mkdir()
    for tool in ("date", "sleep"):
        real = subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        (shims / tool).write_text(f'#!/bin/sh\necho {tool} >> "{calls}"\nexec {real} "$@"\n')
        (shims / tool).chmod(0o755)
    root = host_tree(tmp_path / "root")
    env = {**os.environ, "FXPROBE_SYSROOT": str(root), "PATH": f"{shims}:{os.environ['PATH']}"}
    # 3 s: the loop ends at a whole second of the clock, so its window is 2 to 3 s long
    argv = guestview.loop_argv("host", 3, 0.2)
    assert argv[0] == "bash"
    text = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env, check=True).stdout
    samples = guestview.parse_sampling(text, guestview.parse_host_view)
    assert len(samples) >= 3 and all(b - a >= 0.2 for (a, _), (b, _) in zip(samples, samples[1:]))
    assert not calls.exists(), calls.read_text()
    # the twin: sh forks date twice for every "T" line it prints (the clock check and the stamp) and sleep after
    # each; a loaded machine (CI runs these tests at idle priority beside a lab) prints fewer lines, never none
    text = subprocess.run(["sh", *argv[1:]], capture_output=True, text=True, timeout=30, env=env, check=True).stdout
    stamped = sum(line.startswith("T ") for line in text.splitlines())
    forked = calls.read_text().split()
    assert stamped >= 1 and forked.count("date") >= 2 * stamped and forked.count("sleep") >= stamped, forked


def timeouts_tree(root: Path) -> Path:
    """Two TCP controllers of NQN (one with fast_io_fail_tmo off, one without the file), a PCIe drive, and a
    controller of another subsystem."""
    for n, nqn, transport, state, tmo in ((0, NQN, "tcp", "live", ("5", "600", "10", "off")),
                                          (1, NQN, "tcp", "connecting", ("2", "60", "1", None)),
                                          (2, "nqn.2014.08.org.nvmexpress:uuid:x", "pcie", "live", (None,) * 4),
                                          (3, "nqn.other", "rdma", "live", ("5", "-1", "10", "5"))):
        ctrl = f"sys/class/nvme/nvme{n}"
        for name, value in (("transport", transport), ("state", state), ("subsysnqn", nqn),
                            ("address", f"traddr=10.{n}.1.1,trsvcid=4420,src_addr=10.{n}.1.2")):
            write(root, f"{ctrl}/{name}", value)
        for name, value in zip(("kato", "ctrl_loss_tmo", "reconnect_delay", "fast_io_fail_tmo"), tmo):
            if value is not None:
                write(root, f"{ctrl}/{name}", value)
        sub = f"sys/class/nvme-subsystem/nvme-subsys{n}"
        write(root, f"{sub}/subsysnqn", nqn)
        (root / sub / f"nvme{n}").mkdir()
    write(root, "sys/class/nvme-subsystem/nvme-subsys0/iopolicy", "numa")
    return root


def test_the_timeouts_view_reads_what_the_advice_module_reads(tmp_path, monkeypatch):
    """The fault run reads a lab host's NVMe timeouts with this view (sh builtins) instead of a Python start in the
    guest: what it parses equals faults.advice.read_timeouts over the same sysfs, for the run's subsystem and all."""
    from fxprobe.core import sysfs
    from fxprobe.faults.advice import read_timeouts
    root = timeouts_tree(tmp_path)
    monkeypatch.setattr(sysfs, "ROOT", root)
    text = run(root, guestview.view_argv("timeouts"))
    for nqn in (NQN, None):
        assert guestview.parse_timeouts_view(text, nqn) == read_timeouts(nqn)
    mine = guestview.parse_timeouts_view(text, NQN)
    assert mine["iopolicy"] == "numa" and set(mine["controllers"]) == {"nvme0", "nvme1"}
    assert mine["controllers"]["nvme0"]["fast_io_fail_tmo"] == "off"
    assert "fast_io_fail_tmo" not in mine["controllers"]["nvme1"]
