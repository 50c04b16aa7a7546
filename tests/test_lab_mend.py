"""tests/lab_mend.py on the real lab: four planted breakages are each found, mended, and the lab is whole again.
Without it, one test that leaves the lab broken (or a drive the TCG guest loses on its own) fails every later
test on the same lab (a CI-like run: 1 failure became 7)."""

import time

import pytest

import lab_mend


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
