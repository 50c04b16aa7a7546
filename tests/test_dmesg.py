"""tools/dmesg.py over kernel log lines captured from the lab's array guest in CI-like runs (an emulated drive that
stopped completing I/O: aborted, reset, disabled) and the nvme driver's other lines, which are no timeouts."""

from __future__ import annotations

import pytest

from fxprobe.core.errors import ParseError
from fxprobe.tools import dmesg

CAPTURED = """\
[    2.113201] nvme nvme20: pci function 0000:00:1a.0
[    2.389120] nvme nvme20: 2/0/0 default/read/poll queues
[  488.384783] nvme nvme20: I/O 865 (I/O Cmd) QID 1 timeout, aborting
[  488.384989] nvme nvme20: I/O 866 (I/O Cmd) QID 1 timeout, aborting
[  488.390001] nvme nvme20: Abort status: 0x0
[  519.101060] nvme nvme20: I/O 859 QID 1 timeout, reset controller
[  727.989410] nvme nvme22: I/O 123 QID 1 timeout, disable controller
[  730.000000] md/raid:md127: Disk failure on nvme22n1, disabling device.
"""


def test_timeouts_are_read_with_their_clock_and_controller_and_nothing_else_is():
    found = dmesg.parse_nvme_timeouts(CAPTURED)
    assert [(t.uptime_s, t.controller) for t in found] == [(488.384783, "nvme20"), (488.384989, "nvme20"),
                                                           (519.10106, "nvme20"), (727.98941, "nvme22")]
    assert found[-1].line == "[  727.989410] nvme nvme22: I/O 123 QID 1 timeout, disable controller"
    lines = dmesg.timeout_lines([t.to_dict() for t in found])
    assert lines == ["nvme20: 3 timeout(s) from 488.384783 s to 519.10106 s of the kernel's clock; last: "
                     "[  519.101060] nvme nvme20: I/O 859 QID 1 timeout, reset controller",
                     "nvme22: 1 timeout(s) from 727.98941 s to 727.98941 s of the kernel's clock; last: "
                     "[  727.989410] nvme nvme22: I/O 123 QID 1 timeout, disable controller"]
    assert dmesg.parse_nvme_timeouts("") == () and dmesg.timeout_lines([]) == []


def test_the_kernel_clock_and_a_bad_one():
    assert dmesg.parse_uptime("563.00 1100.50\n") == 563.0
    with pytest.raises(ParseError, match="array: field 'uptime'"):
        dmesg.parse_uptime("", "array")
