"""tests/lab_mend.py on the real lab: four planted breakages are each found, mended, and the lab is whole again.
Without it, one test that leaves the lab broken (or a drive the TCG guest loses on its own) fails every later
test on the same lab (a CI-like run: 1 failure became 7)."""

import time

import pytest

import lab_mend
from fxprobe.tools import dmesg


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_a_pulled_drive_a_lost_drive_a_cut_link_and_a_left_fio_are_found_and_mended(lab):
    assert lab_mend.problems(lab) == []
    lab.drive_pull(6)
    with lab.qmp("array") as qmp:                  # the guest loses drive 8 while the state holds it present
        qmp.command("device_del", id="drive8")
        assert qmp.wait_event("DEVICE_DELETED", 30, {"device": "drive8"}) is not None
    lab.link_down(1, host="host2")
    left = lab.runner.start(["fio", "--name=left", "--ioengine=null", "--rw=read", "--size=1M",
                             "--time_based", "--runtime=300"], host=lab.guest("host1"), label="left-fio")
    try:
        deadline = time.monotonic() + 60
        while True:
            found = lab_mend.problems(lab)
            if any("fio" in line for line in found):     # the path count is not waited for (keep-alive: ~10 s)
                break
            assert time.monotonic() < deadline, found
            time.sleep(2)
        assert "drive slot 6 pulled" in found
        assert "drive slot 8 missing in the array guest (the state holds it present)" in found
        assert "link 1 of host2 down" in found
        done = lab_mend.mend(lab)
    finally:
        left.stop(timeout=5)
    print("\nmended:", "; ".join(done))
    assert "drive slot 6 plugged back as /dev/nvme" in " ".join(done)
    assert "drive slot 8 unplugged (its guest had lost it)" in done and "host1: fio killed" in done
    assert lab_mend.problems(lab) == []
    stalls = lab_mend.drive_stalls(lab)    # none in a lab whose drives never timed out; else the lines and the clock
    assert not stalls or (all("timeout" in line for line in stalls[:-1]) and "uptime now" in stalls[-1])
    assert lab.drive(6).present and lab.drive(8).present and lab.link(1, "host2").up


PLANTED: dict = {}     # kept across the two runs of the test below (one pytest process)


@pytest.mark.lab_parallel   # judges no time or throughput
def test_a_failure_while_an_emulated_drive_times_out_runs_once_more_on_a_fresh_device(lab):
    """tests/conftest.py's second run, planted: the first run logs a timeout of drive slot 23's controller in the
    array guest's kernel log (the line QEMU's stalled drive makes, marked as planted) and fails; the harness replaces
    the drive by a fresh QEMU device (the guest's nvme driver probes it again) and runs the test once more. If the
    harness does not, this test fails."""
    drive = lab.drive(23)
    if not PLANTED:
        controller = next(c["name"] for c in lab_mend.labprep.array_view(lab)["nvme_controllers"]
                          if c["serial"] == drive.serial)
        marker = "timeout, aborting (planted by test_lab_mend)"
        lab.exec("array", ["sh", "-c", f"echo '<4>nvme {controller}: I/O 0 QID 1 {marker}' > /dev/kmsg"],
                 timeout=30, check=True)
        PLANTED.update(controller=controller, marker=marker)
        pytest.fail(f"planted: {controller} timed out during the first run")
    dmesg = lab.exec("array", ["dmesg"], timeout=60).stdout
    after = dmesg[dmesg.rindex(PLANTED["marker"]):]
    assert " pci function " in after, after[-2000:]     # the nvme driver probed a new device after the timeout
    assert drive.present and lab_mend.problems(lab) == []
    assert PLANTED["controller"] in lab_mend.read_stalls(lab).controllers


def test_only_a_timeout_logged_during_the_test_calls_for_a_second_run():
    """The twin of the test above, without a lab: a timeout logged before the test started is not one of its own,
    and the kernel's other nvme lines are no timeouts."""
    lines = ["[  100.000001] nvme nvme11: I/O 859 QID 1 timeout, reset controller",
             "[  480.100000] nvme nvme20: pci function 0000:00:1a.0",
             "[  488.384783] nvme nvme20: I/O 865 (I/O Cmd) QID 1 timeout, aborting"]
    stalls = lab_mend.Stalls(dmesg.parse_nvme_timeouts("\n".join(lines)), 560.0)
    assert stalls.controllers == ["nvme11", "nvme20"]
    assert stalls.since(80).controllers == ["nvme20"] and stalls.since(40).lines == ()
    assert stalls.summary(1) == [lines[2], "array guest uptime now 560.00 s"]
