"""The kernel event listener's parsers, over datagrams captured from this machine's kernel and over
messages built by pyroute2's own encoder (an independent writer of the same format)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

from fxprobe.tools import kernel_events

FIXTURES = Path(__file__).parent / "fixtures" / "netlink"


def test_a_captured_uevent_names_action_subsystem_and_device():
    event = kernel_events.parse_uevent((FIXTURES / "uevent-lo.bin").read_bytes())
    assert event == {"action": "change", "subsystem": "net", "device": "lo"}


def test_a_block_remove_uevent_as_the_kernel_sends_it():
    data = (b"remove@/devices/pci0000:00/0000:00:05.0/nvme/nvme3/nvme3n1\0ACTION=remove\0"
            b"DEVPATH=/devices/pci0000:00/0000:00:05.0/nvme/nvme3/nvme3n1\0SUBSYSTEM=block\0DEVNAME=nvme3n1\0"
            b"DEVTYPE=disk\0SEQNUM=2270\0")
    assert kernel_events.parse_uevent(data) == {"action": "remove", "subsystem": "block", "device": "nvme3n1"}


def test_udevd_rebroadcasts_and_garbage_are_skipped():
    assert kernel_events.parse_uevent(b"libudev\0\xfe\xed\xca\xfe" + b"\0" * 20) is None
    assert kernel_events.parse_uevent(b"add@/x\0no-equals-sign\0") is None


def test_a_captured_rtm_newlink_names_the_device():
    assert kernel_events.parse_link_messages((FIXTURES / "rtnl-lo.bin").read_bytes()) == [
        {"action": "RTM_NEWLINK", "device": "lo", "operstate": "UNKNOWN"}]


def encoded(event: int, name: str, operstate: str) -> bytes:
    msg = ifinfmsg()
    msg["header"]["type"] = event
    msg["index"] = 7
    msg["attrs"] = [("IFLA_IFNAME", name), ("IFLA_OPERSTATE", operstate)]
    msg.encode()
    return bytes(msg.data)


def test_messages_built_by_pyroute2_read_back_the_same():
    data = encoded(16, "l2", "DOWN") + encoded(17, "veth-data-9", "UP")
    assert kernel_events.parse_link_messages(data) == [
        {"action": "RTM_NEWLINK", "device": "l2", "operstate": "DOWN"},
        {"action": "RTM_DELLINK", "device": "veth-data-9", "operstate": "UP"}]


def test_truncated_and_foreign_messages_are_skipped():
    data = encoded(16, "l1", "UP")
    assert kernel_events.parse_link_messages(data[:-3]) == []
    other = struct.pack("=IHHII", 20, 24, 0, 0, 0) + b"\0" * 4          # RTM_NEWROUTE
    assert kernel_events.parse_link_messages(other + data) == [
        {"action": "RTM_NEWLINK", "device": "l1", "operstate": "UP"}]


@pytest.mark.alone   # it changes lo's MTU (the machine's, seen by every test) inside the listener's 2 s window
def test_the_listener_runs_here_and_sees_a_link_change():
    """On this machine's kernel: the listener reports ready, then the RTM_NEWLINK of an MTU change on lo."""
    process = subprocess.Popen([sys.executable, "-m", "fxprobe.tools.kernel_events", "--seconds", "2"],
                               stdout=subprocess.PIPE, text=True)
    first = json.loads(process.stdout.readline())
    assert first["source"] == "listener" and first["text"] == "started"
    mtu = Path("/sys/class/net/lo/mtu").read_text().strip()
    subprocess.run(["ip", "link", "set", "lo", "mtu", "65000"], check=True)
    subprocess.run(["ip", "link", "set", "lo", "mtu", mtu], check=True)
    lines = [json.loads(line) for line in process.communicate(timeout=10)[0].splitlines()]
    assert any(e["source"] == "netlink" and e["device"] == "lo" for e in lines), lines
