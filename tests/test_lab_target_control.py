"""Issue 17.3 in the lab: the target-control hooks. fault run through the lab's hook (via = "command",
examples/target-control/lab) gives the QMP path's verdicts and every hook call is evidence: the raid6 pull (invisible,
a randwrite load verified after md's resync) in tests/test_lab_verify.py, its raid0 twin (visible by its I/O errors,
the throughput counted from successful I/O only) in the same file. Here: examples/target-control/linux-ssh against
the array guest."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from fxprobe.faults import labprep

pytestmark = pytest.mark.lab

HOOK = str(Path(__file__).resolve().parent.parent / "examples" / "target-control" / "lab")


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_linux_ssh_hook_pulls_and_restores_a_drive_of_the_array_guest(lab):
    """examples/target-control/linux-ssh against the array guest (a Linux nvmet + md target over SSH)."""
    hook = str(Path(HOOK).with_name("linux-ssh"))
    prefix = lab.guest("array").ssh_prefix()
    env = {**os.environ, "FXPROBE_TARGET_SSH": prefix[-1], "FXPROBE_TARGET_SSH_OPTS": " ".join(prefix[1:-1])}
    serial = lab.drive(23).serial          # a free drive: in no md array

    def call(*args) -> dict:
        done = subprocess.run([hook, *args], capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def drive() -> dict:
        return next(d for d in call("status")["drives"] if d["serial"] == serial)

    assert drive()["present"] is True and drive()["slot"] == "0000:00:1a.0"
    # an earlier test's pull leaves md recovering for a minute or more in a slow TCG guest (CI: the raid6 reported
    # redundancy_left 1, honestly): the hook's figure is checked against md's own, read just before and after it
    # (waiting for md to be idle took up to 50 s here)
    def redundancy_of_md() -> int:
        [raid6] = [m for m in labprep.array_view(lab)["md"] if m["level"] == "raid6"]
        return 2 - (raid6["raid_disks"] - raid6["working_disks"])
    before = redundancy_of_md()
    reported = {d["redundancy_left"] for d in call("status")["drives"] if d["level"] == "raid6"}
    assert reported and reported <= {before, redundancy_of_md()}, (reported, before)
    call("drive-pull", serial)
    try:
        assert drive()["present"] is False
    finally:
        call("drive-restore", serial)
    assert drive()["present"] is True
