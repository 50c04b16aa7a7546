"""Real runs on a loop device (losetup --direct-io=on) as root; refused devices stay untouched."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from fxprobe.core.errors import UnsafeTarget
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.tools import fio
from fxprobe.workload.run import run_profile

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("fio") or not os.path.exists("/dev/loop-control"),
    reason="needs root, losetup, fio and /dev/loop-control")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def loop(tmp_path):
    """A 96 MiB loop device with direct I/O, filled with a marker; detached afterwards."""
    runner = Runner(None)
    backing = tmp_path / "backing.img"
    backing.write_bytes(b"fxprobe!" * (96 << 17))
    result = runner.run(["losetup", "--find", "--show", "--direct-io=on", str(backing)], timeout=30)
    if not result.ok:
        pytest.skip(f"losetup failed here: {result.stderr.strip()}")
    device = result.stdout.strip()
    try:
        yield device, backing
    finally:
        for mount_point in [l.split()[4] for l in Path("/proc/self/mountinfo").read_text().splitlines()
                            if f" {device} " in l]:
            runner.run(["umount", mount_point], timeout=30)
        runner.run(["losetup", "-d", device], timeout=30)


def test_run_on_a_loop_device(loop, tmp_path):
    device, backing = loop
    run = RunDir.create(tmp_path / "runs", "run")
    result = run_profile("qwen25-32b-cold-restore", device, runner=Runner(run),
                         allow=(f"loop:{backing}",), runtime=1, ramp=0.5, max_bytes=64 << 20)
    assert result.target_check.safe and result.target_check.identity == f"loop:{backing}"
    assert len(result.repeats) == 3 and result.bandwidth.mean > 0
    assert result.percentiles_ns[99.0] == fio.percentile_from_bins(
        fio.merge_bins(*(r.bins for r in result.repeats)), 99.0)
    assert "filename=" + device in Path(result.job_file).read_text()
    assert digest(backing) != hashlib.sha256(b"fxprobe!" * (96 << 17)).hexdigest()  # laid out


def test_not_allow_listed_loop_device_is_untouched(loop, tmp_path):
    device, backing = loop
    before = digest(backing)
    run = RunDir.create(tmp_path / "runs", "run")
    with pytest.raises(UnsafeTarget, match="is not on the allow-list"):
        run_profile("checkpoint-write", device, runner=Runner(run), runtime=1, ramp=0, max_bytes=32 << 20)
    assert digest(backing) == before and list(run.commands()) == []


def test_mounted_loop_device_is_refused_and_untouched(loop, tmp_path):
    device, backing = loop
    runner = Runner(None)
    if not shutil.which("mkfs.ext4"):
        pytest.skip("mkfs.ext4 missing")
    runner.run(["mkfs.ext4", "-q", "-F", device], timeout=60, check=True)
    mount_point = tmp_path / "mnt"
    mount_point.mkdir()
    if not runner.run(["mount", device, str(mount_point)], timeout=30).ok:
        pytest.skip("cannot mount here")
    runner.run(["umount", str(mount_point)], timeout=30, check=True)
    runner.run(["mount", "-o", "ro", device, str(mount_point)], timeout=30, check=True)
    before = digest(backing)
    with pytest.raises(UnsafeTarget, match=f"mounted: {Path(device).name} on {mount_point}"):
        run_profile("checkpoint-write", device, runner=Runner(None), allow=(f"loop:{backing}",),
                    runtime=1, ramp=0, max_bytes=32 << 20)
    assert digest(backing) == before
