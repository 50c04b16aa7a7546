"""tools.qmp's pure part: when an event happened, from the timestamp QEMU puts on it."""

from __future__ import annotations

from fxprobe.tools.qmp import event_epoch

# the DEVICE_DELETED QEMU 7.2 sent when lab drive 22 was pulled (device_del 0.387 s before), as the monitor gave it
DELETED = {"timestamp": {"seconds": 1796613213, "microseconds": 745045}, "event": "DEVICE_DELETED",
           "data": {"device": "drive22", "path": "/machine/peripheral/drive22"}}


def test_the_event_time_is_its_timestamp_to_the_microsecond():
    assert event_epoch(DELETED) == 1796613213.745045


def test_an_event_without_a_usable_timestamp_has_no_time():
    assert event_epoch({"event": "DEVICE_DELETED"}) is None
    assert event_epoch({"timestamp": {"seconds": "x", "microseconds": 1}}) is None
