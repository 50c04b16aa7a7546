"""Reach a TCP port inside a lab guest from this machine, for the duration of a run.

The guests sit behind QEMU user networking (``-netdev user,id=mgmt,restrict=on``): only SSH is
forwarded at boot. ``forward`` adds a loopback rule at run time with the HMP command
``hostfwd_add mgmt tcp:ADDR:HOSTPORT-:GUESTPORT`` (through QMP ``human-monitor-command``) and
``unforward`` removes it. Rules listen on loopback only (127.0.0.0/8).
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Iterator

from fxprobe.core.data import AsDict
from fxprobe.core.errors import BadInput, ToolError

NETDEV = "mgmt"
ATTEMPTS = 5


@dataclass(frozen=True)
class Forward(AsDict):
    """One rule: ``host_address:host_port`` on this machine reaches ``guest_port`` in ``guest``."""

    guest: str
    guest_port: int
    host_address: str
    host_port: int

    @property
    def rule(self) -> str:
        return f"tcp:{self.host_address}:{self.host_port}-:{self.guest_port}"


def parse_usernet_forwards(text: str) -> list[tuple[str, int, int]]:
    """(host address, host port, guest port) of the TCP host-forward rules in HMP ``info usernet``.

    A rule prints as ``TCP[HOST_FORWARD]  <fd>  127.0.0.1  2222  10.0.2.15  22  0  0``."""
    rules = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[0] == "TCP[HOST_FORWARD]":
            if fields[3].isdigit() and fields[5].isdigit():
                rules.append((fields[2], int(fields[3]), int(fields[5])))
    return rules


def _loopback(address: str) -> str:
    try:
        ip = ipaddress.IPv4Address(address)
    except ValueError:
        raise BadInput(f"forward address {address!r}: expected an IPv4 loopback address (127.x.y.z)") from None
    if not ip.is_loopback:
        raise BadInput(f"forward address {address}: only loopback (127.0.0.0/8) is allowed")
    return address


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def _hmp(lab, guest: str, command: str) -> str:
    with lab.qmp(guest) as qmp:
        return str(qmp.command("human-monitor-command", **{"command-line": command}) or "")


def usernet_forwards(lab, guest: str) -> list[tuple[str, int, int]]:
    """The TCP host-forward rules a guest has now (the boot-time SSH rule included)."""
    return parse_usernet_forwards(_hmp(lab, guest, "info usernet"))


def forward(lab, guest: str, guest_port: int, host_address: str = "127.0.0.1") -> Forward:
    """Add a rule from a free port on ``host_address`` (loopback) to ``guest_port`` in the guest."""
    guest = lab.guest_name(guest)
    host_address = _loopback(host_address)
    if not 1 <= int(guest_port) <= 65535:
        raise BadInput(f"guest port {guest_port} out of range 1-65535")
    reply = ""
    for _ in range(ATTEMPTS):   # another process may take the port between the probe and the rule
        rule = Forward(guest, int(guest_port), host_address, _free_port(host_address))
        reply = _hmp(lab, guest, f"hostfwd_add {NETDEV} {rule.rule}").strip()
        if not reply:
            return rule
    raise ToolError(f"lab {lab.name} guest {guest}: hostfwd_add for guest port {guest_port} failed "
                    f"{ATTEMPTS} times: {reply}")


def unforward(lab, rule: Forward) -> None:
    """Remove a rule; a rule that is already gone is not an error (QEMU answers
    ``host forwarding rule for tcp:ADDR:PORT removed`` or ``... not found``)."""
    reply = _hmp(lab, rule.guest, f"hostfwd_remove {NETDEV} tcp:{rule.host_address}:{rule.host_port}").strip()
    if not re.search(r"host forwarding rule for \S+ (removed|not found)", reply):
        raise ToolError(f"lab {lab.name} guest {rule.guest}: hostfwd_remove {rule.rule}: {reply}")


@contextlib.contextmanager
def forwarded(lab, guest: str, guest_port: int, host_address: str = "127.0.0.1") -> Iterator[Forward]:
    """``with forwarded(lab, "host1", 8765) as rule:`` dial ``rule.host_address:rule.host_port``."""
    rule = forward(lab, guest, guest_port, host_address)
    try:
        yield rule
    finally:
        unforward(lab, rule)


def guest_address(index: int) -> str:
    """The loopback address the ``index``-th guest node (from 1) is dialed at: each node needs its
    own, since fio's client names the logs it brings back after the address it dialed."""
    if not 1 <= index <= 254:
        raise BadInput(f"at most 254 lab guest nodes (got {index})")
    return f"127.0.1.{index}"


@contextlib.contextmanager
def guest_nodes(lab, guests: list[str], guest_port: int) -> Iterator[list]:
    """fio nodes for lab guests: ``fio --server`` listens on 0.0.0.0:guest_port inside each guest,
    fio's client here dials a forwarded loopback port; every rule is removed on the way out."""
    from fxprobe.tools.fio import Node
    names = [lab.guest_name(g) for g in guests]
    if len(set(names)) != len(names):
        raise BadInput(f"--nodes {','.join(guests)}: a guest is listed twice")
    with contextlib.ExitStack() as stack:
        nodes = []
        for index, name in enumerate(names, 1):
            rule = stack.enter_context(forwarded(lab, name, guest_port, guest_address(index)))
            host = lab.guest(name)      # one shared ssh connection per guest (see Lab.guest)
            nodes.append(Node(host, rule.host_address, rule.host_port,
                              listen_address="0.0.0.0", listen_port=guest_port, label=name))
        yield nodes

