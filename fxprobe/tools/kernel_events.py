"""Kernel uevents and rtnetlink link changes as they come, read from the kernel's netlink sockets.

``python -m fxprobe.tools.kernel_events --seconds N`` prints one JSON line per kernel uevent of the
block, nvme and net subsystems and per RTM_NEWLINK/RTM_DELLINK message, each with its epoch time; the
first line says the listener is ready. It runs on the node that sees the events (a lab guest, a host)
and needs no udev daemon: uevents come straight from the kernel (NETLINK_KOBJECT_UEVENT, group 1).

It reads the two sockets with the standard library only. pyudev and pyroute2 (used everywhere else)
cost 0.5 s and 1.9 s to import here and about 35 s together in a TCG lab guest under load, while a
fault run waits for the listener before it starts the load; the messages read here are two simple,
stable kernel formats (``ACTION@DEVPATH\\0KEY=VALUE\\0...`` and ``nlmsghdr``+``ifinfomsg``+rtattrs).
"""

from __future__ import annotations

import json
import select
import socket
import struct
import sys
import time

NETLINK_KOBJECT_UEVENT = 15
RTMGRP_LINK = 1
RTM_NEWLINK, RTM_DELLINK = 16, 17
IFLA_IFNAME, IFLA_OPERSTATE = 3, 16
# IF_OPER_* as iproute2 and pyroute2 print them
OPERSTATES = ("UNKNOWN", "NOTPRESENT", "DOWN", "LOWERLAYERDOWN", "TESTING", "DORMANT", "UP")
SUBSYSTEMS = ("block", "nvme", "net")
NLMSG_HEADER = struct.Struct("=IHHII")          # length, type, flags, seq, pid
IFINFOMSG = struct.Struct("=BxHiII")            # family, type, index, flags, change
RTATTR = struct.Struct("=HH")                   # length, type


def parse_uevent(data: bytes) -> dict | None:
    """``{"action", "subsystem", "device"}`` of one kernel uevent datagram (None for udevd's own
    re-broadcasts, which start with ``libudev``)."""
    if data.startswith(b"libudev"):
        return None
    fields = {}
    for item in data.split(b"\0")[1:]:
        key, sep, value = item.partition(b"=")
        if sep:
            fields[key.decode(errors="replace")] = value.decode(errors="replace")
    if "ACTION" not in fields or "DEVPATH" not in fields:
        return None
    return {"action": fields["ACTION"], "subsystem": fields.get("SUBSYSTEM", ""),
            "device": fields["DEVPATH"].rsplit("/", 1)[-1]}


def parse_link_messages(data: bytes) -> list[dict]:
    """``{"action", "device", "operstate"}`` for each RTM_NEWLINK/RTM_DELLINK in one netlink datagram."""
    out, offset = [], 0
    while offset + NLMSG_HEADER.size <= len(data):
        length, kind, _, _, _ = NLMSG_HEADER.unpack_from(data, offset)
        if length < NLMSG_HEADER.size or offset + length > len(data):
            break
        if kind in (RTM_NEWLINK, RTM_DELLINK):
            attrs = _rtattrs(data, offset + NLMSG_HEADER.size + IFINFOMSG.size, offset + length)
            name = attrs.get(IFLA_IFNAME, b"").split(b"\0", 1)[0].decode(errors="replace") or None
            oper = attrs.get(IFLA_OPERSTATE)
            out.append({"action": "RTM_NEWLINK" if kind == RTM_NEWLINK else "RTM_DELLINK", "device": name,
                        "operstate": OPERSTATES[oper[0]] if oper and oper[0] < len(OPERSTATES) else None})
        offset += (length + 3) & ~3
    return out


def _rtattrs(data: bytes, start: int, end: int) -> dict[int, bytes]:
    attrs, offset = {}, start
    while offset + RTATTR.size <= end:
        length, kind = RTATTR.unpack_from(data, offset)
        if length < RTATTR.size:
            break
        attrs.setdefault(kind, data[offset + RTATTR.size:offset + length])
        offset += (length + 3) & ~3
    return attrs


def listen(seconds: float, out=sys.stdout) -> None:
    uevents = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_KOBJECT_UEVENT)
    uevents.bind((0, 1))
    links = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    links.bind((0, RTMGRP_LINK))
    for sock in (uevents, links):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    say = lambda record: print(json.dumps(record), file=out, flush=True)
    end = time.monotonic() + seconds
    say({"t": time.time(), "source": "listener", "text": "started"})
    while time.monotonic() < end:
        ready, _, _ = select.select([uevents, links], [], [], max(0.05, end - time.monotonic()))
        now = time.time()
        if uevents in ready:
            event = parse_uevent(uevents.recv(65536))
            if event and event["subsystem"] in SUBSYSTEMS:
                say({"t": now, "source": "uevent", **event})
        if links in ready:
            for event in parse_link_messages(links.recv(65536)):
                say({"t": now, "source": "netlink", **event})
    uevents.close()
    links.close()


def main(argv: list[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m fxprobe.tools.kernel_events")
    parser.add_argument("--seconds", type=float, required=True)
    listen(parser.parse_args(argv).seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
