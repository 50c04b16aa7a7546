"""The target check, over a fake sysfs / mountinfo tree and over this machine's real root disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import loopdev

from fxprobe.core.errors import BadInput, UnsafeTarget
from fxprobe.host.safety import SystemView, check_target


def make_disk(root: Path, name: str, dev: str, *, serial: str | None = None, parts: dict | None = None,
              holders=(), size_sectors: int = 2048, loop_file: str | None = None) -> None:
    base = root / "sys/class/block" / name
    (base / "holders").mkdir(parents=True)
    (base / "dev").write_text(dev + "\n")
    (base / "size").write_text(f"{size_sectors}\n")
    for holder in holders:
        (base / "holders" / holder).mkdir()
    if serial:
        (base / "device").mkdir()
        (base / "device/serial").write_text(serial + "  \n")
    if loop_file:
        (base / "loop").mkdir()
        (base / "loop/backing_file").write_text(loop_file + "\n")
    for part, (pdev, pholders) in (parts or {}).items():
        pbase = base / part
        (pbase / "holders").mkdir(parents=True)
        (pbase / "partition").write_text("1\n")
        (pbase / "dev").write_text(pdev + "\n")
        for holder in pholders:
            (pbase / "holders" / holder).mkdir()
        # partitions also appear at the top of /sys/class/block (a link, as in sysfs)
        (root / "sys/class/block" / part).symlink_to(pbase)


def mountinfo(root: Path, lines: list[str]) -> None:
    (root / "proc/self").mkdir(parents=True, exist_ok=True)
    (root / "proc/self/mountinfo").write_text("\n".join(lines) + "\n")


@pytest.fixture
def fake(tmp_path):
    root = tmp_path / "root"
    make_disk(root, "nvme0n1", "259:0", serial="S1ROOT", parts={"nvme0n1p1": ("259:1", ())})
    make_disk(root, "nvme1n1", "259:2", serial="S2FREE")
    make_disk(root, "nvme2n1", "259:3", serial="S3MD", holders=("md0",))
    make_disk(root, "nvme3n1", "259:4", serial="S4DATA", parts={"nvme3n1p1": ("259:5", ()),
                                                                "nvme3n1p2": ("259:6", ("dm-0",))})
    make_disk(root, "nvme4n1", "259:7", serial="S5MNT")
    make_disk(root, "loop0", "7:0", loop_file="/tmp/backing.img")
    mountinfo(root, [
        "22 1 259:1 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p1 rw",
        "40 22 259:7 / /data rw,relatime shared:9 - xfs /dev/nvme4n1 rw",
        "41 22 0:5 / /dev rw - devtmpfs udev rw",
    ])
    return SystemView(root)


def refused(check) -> list[str]:
    return [c.name for c in check.refused]


def test_free_allow_listed_device_is_safe(fake):
    check = check_target("/dev/nvme1n1", destructive=True, allow=("S2FREE",), view=fake)
    assert check.safe and check.identity == "S2FREE" and check.size_bytes == 2048 * 512
    assert check.require_safe() is check


def test_root_disk_is_refused(fake):
    check = check_target("/dev/nvme0n1", destructive=True, allow=("S1ROOT",), view=fake)
    assert "root filesystem" in refused(check) and "mounted" in refused(check)
    with pytest.raises(UnsafeTarget, match="refusing to write to /dev/nvme0n1: root filesystem"):
        check.require_safe()


def test_mounted_device_holders_and_busy_partitions_are_refused(fake):
    assert refused(check_target("/dev/nvme4n1", destructive=True, allow=("S5MNT",), view=fake)) == ["mounted"]
    assert refused(check_target("/dev/nvme2n1", destructive=True, allow=("S3MD",), view=fake)) == ["holders"]
    assert refused(check_target("/dev/nvme3n1", destructive=True, allow=("S4DATA",), view=fake)) == ["partitions"]


def test_not_allow_listed_is_refused(fake):
    check = check_target("/dev/nvme1n1", destructive=True, allow=("OTHER",), view=fake)
    assert refused(check) == ["allow-list"]
    with pytest.raises(UnsafeTarget, match="S2FREE is not on the allow-list"):
        check.require_safe()


def test_loop_device_identity_is_its_backing_file(fake):
    check = check_target("/dev/loop0", destructive=True, allow=("loop:/tmp/backing.img",), view=fake)
    assert check.safe and check.identity == "loop:/tmp/backing.img"


def test_reading_needs_only_existence(fake):
    assert check_target("/dev/nvme0n1", destructive=False, view=fake).safe


def test_missing_targets(fake, tmp_path):
    with pytest.raises(BadInput, match="/dev/nvme9n1: no such block device"):
        check_target("/dev/nvme9n1", destructive=True, view=fake)
    with pytest.raises(BadInput, match="does not exist"):
        check_target(str(tmp_path / "nope"), destructive=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(BadInput, match="not a directory"):
        check_target(str(tmp_path / "file"), destructive=True)


def test_dry_run_description_lists_every_check(fake):
    lines = check_target("/dev/nvme0n1", destructive=True, view=fake).lines()
    assert lines[0].startswith("target /dev/nvme0n1 (block nvme0n1, id S1ROOT): REFUSED for writing")
    assert any("REFUSED root filesystem" in line for line in lines)
    assert any("allow-list" in line for line in lines)


def root_block_device() -> str | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/" and "-" in fields:
            source = fields[fields.index("-") + 2]
            if source.startswith("/dev/") and os.path.exists(source):
                return source
    return None


@pytest.mark.skipif(root_block_device() is None, reason="the root filesystem is not on a /dev block device here")
def test_this_machines_root_device_is_refused():
    device = root_block_device()
    check = check_target(device, destructive=True, allow=(SystemView().identity(Path(device).name),))
    assert not check.safe and "root filesystem" in refused(check)


def test_remote_view_asks_the_same_questions_through_a_host(tmp_path):
    """RemoteSystemView runs cat/ls/test/readlink through a host; on LocalHost it must agree with sysfs."""
    from fxprobe.core.hosts import LOCAL
    from fxprobe.core.runner import Runner
    from fxprobe.tools.blockdev import RemoteSystemView
    remote, local = RemoteSystemView(Runner(None), LOCAL), SystemView()
    assert remote.exists(str(tmp_path)) and remote.is_dir(str(tmp_path)) and remote.writable(str(tmp_path))
    assert not remote.exists(str(tmp_path / "nope"))
    assert check_target(str(tmp_path), destructive=True, view=remote).safe
    device = root_block_device()
    if device:
        a = check_target(device, destructive=True, view=remote).to_dict()
        b = check_target(device, destructive=True, view=local).to_dict()
        for check in (a, b):     # the O_EXCL probe asks this machine's kernel only: the node's answer is "not probed"
            check["checks"] = [c for c in check["checks"] if c["name"] != "exclusive open"]
        assert a == b and not a["safe"]


def test_the_remote_view_finds_a_device_s_partitions_in_one_command(fake, tmp_path):
    from fxprobe.core.hosts import LOCAL
    from fxprobe.core.rundir import RunDir
    from fxprobe.core.runner import Runner
    from fxprobe.tools.blockdev import RemoteSystemView
    run = RunDir.create(tmp_path / "runs", "x")
    remote = RemoteSystemView(Runner(run), LOCAL)
    remote.block_root = str(fake.root / "sys/class/block")
    for name in ("nvme3n1", "nvme0n1", "nvme1n1", "nope"):
        assert remote.partitions(name) == fake.partitions(name), name
    assert len(list(run.commands())) == 4          # one command per device
    assert remote.partitions("nvme3n1") == ["nvme3n1p1", "nvme3n1p2"]


@pytest.mark.parametrize("target, refused", [("/dev/nvme0n1", "root filesystem"), ("/dev/nvme4n1", "mounted"),
                                             ("/dev/nvme2n1", "holders")])
def test_a_writing_load_on_a_root_or_mounted_device_is_refused_by_the_plan_check(fake, target, refused):
    """Issue 13, "Dry run hides a refusal": the plan of a randwrite load gets the same check, dry run or not."""
    from fxprobe.host.safety import check_load_target
    check = check_load_target(target, "randwrite", allow=("S1ROOT", "S5MNT", "S3MD"), view=fake)
    assert not check.safe and check.refused[0].name == refused
    assert check.refusal.startswith(f"refusing to write to {target}: {refused}")
    assert any(line.startswith(f"  REFUSED {refused}") for line in check.lines())
    assert check_load_target(target, "randread", view=fake) is None       # a read load writes nothing


def test_a_system_folder_is_refused_as_a_directory_target(tmp_path):
    for folder in ("/", "/etc", "/usr", "/boot"):
        check = check_target(folder, destructive=True)
        assert not check.safe and check.refused[0].name == "system folder", check.lines()
    assert check_target(str(tmp_path), destructive=True).safe


# -- review G1 items 8-9: btrfs root, swap, a by-id link, the kernel's own exclusive-open answer ---------------
@pytest.fixture
def review_tree(tmp_path):
    """The review's tree: root on btrfs on nvme0n1p2 (mountinfo's 0:31, as btrfs shows), a swap partition
    nvme1n1p1 (only in /proc/swaps), a disk mounted at /data, a free disk reached through a by-id link."""
    root = tmp_path / "root"
    make_disk(root, "nvme0n1", "259:0", serial="S0BTRFS", parts={"nvme0n1p1": ("259:1", ()), "nvme0n1p2": ("259:2", ())})
    make_disk(root, "nvme1n1", "259:3", serial="S1SWAP", parts={"nvme1n1p1": ("259:4", ())})
    make_disk(root, "nvme2n1", "259:5", serial="S2DATA")
    make_disk(root, "nvme3n1", "259:6", serial="S3FREE")
    mountinfo(root, ["22 1 0:31 /@ / rw,relatime shared:1 - btrfs /dev/nvme0n1p2 rw,subvol=/@",
                     "40 22 259:5 / /data rw - xfs /dev/nvme2n1 rw"])
    (root / "proc/swaps").write_text("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
                                     "/dev/nvme1n1p1                          partition\t8388604\t\t1024\t\t-2\n")
    (root / "dev/disk/by-id").mkdir(parents=True)
    (root / "dev/disk/by-id/nvme-FX_S3FREE").symlink_to("../../nvme3n1")
    (root / "dev/disk/by-id/nvme-FX_S0BTRFS").symlink_to("../../nvme0n1")
    return SystemView(root)


def test_a_btrfs_root_is_found_by_its_mount_source(review_tree):
    assert review_tree.root_devices() == {"nvme0n1p2", "nvme0n1"}       # before: set() (0:31 matched nothing)
    check = check_target("/dev/nvme0n1", destructive=True, allow=("S0BTRFS",), view=review_tree)
    assert {"root filesystem", "mounted", "partitions"} <= set(refused(check))


def test_a_swap_partition_is_in_use(review_tree):
    disk = check_target("/dev/nvme1n1", destructive=True, allow=("S1SWAP",), view=review_tree)
    assert refused(disk) == ["swap", "partitions"]
    assert "nvme1n1p1 in use as swap" in next(c.detail for c in disk.refused if c.name == "swap")
    part = check_target("/dev/nvme1n1p1", destructive=True, allow=("S1SWAP",), view=review_tree)
    assert "swap" in refused(part)


def test_a_by_id_link_is_judged_as_the_device_it_leads_to(review_tree):
    assert check_target("/dev/disk/by-id/nvme-FX_S3FREE", destructive=True, allow=("S3FREE",), view=review_tree).safe
    check = check_target("/dev/disk/by-id/nvme-FX_S0BTRFS", destructive=True, allow=("S0BTRFS",), view=review_tree)
    assert check.device == "nvme0n1" and "root filesystem" in refused(check)


@pytest.fixture
def loop_device(tmp_path):
    yield from loopdev.loop_device(tmp_path, 8 << 20)


def test_a_device_someone_holds_exclusively_is_refused_by_the_kernel_s_answer(loop_device):
    """A holder sysfs does not show (a program's O_EXCL open, as mkfs or a database takes it): the kernel's EBUSY."""
    device, identity = loop_device
    assert check_target(device, destructive=True, allow=(identity,)).safe
    held = os.open(device, os.O_RDONLY | os.O_EXCL)
    try:
        check = check_target(device, destructive=True, allow=(identity,))
        assert refused(check) == ["exclusive open"] and "EBUSY" in check.refusal
    finally:
        os.close(held)
    assert check_target(device, destructive=True, allow=(identity,)).safe
