"""Test hosts in network namespaces (real veth links on this machine, no lab needed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest


def require_netns() -> None:
    reason = None
    if os.geteuid() != 0:
        reason = "network namespaces need root"
    elif shutil.which("ip") is None:
        reason = "iproute2 is not installed"
    if reason:
        if os.environ.get("FXPROBE_REQUIRE_LAB") == "1":
            pytest.fail(f"lab prerequisite missing: {reason}")
        pytest.skip(reason)


class VethPair:
    """Two namespaces joined by one veth link, each end with an address and an MTU."""

    def __init__(self, mtu_a: int = 1500, mtu_b: int = 1500):
        tag = uuid.uuid4().hex[:6]
        self.ns_a, self.ns_b = f"fxa-{tag}", f"fxb-{tag}"
        self.if_a, self.if_b = f"fxa{tag[:4]}", f"fxb{tag[:4]}"
        self.addr_a, self.addr_b = "10.98.0.1", "10.98.0.2"
        ip = lambda *a: subprocess.run(["ip", *a], check=True, capture_output=True)
        ip("netns", "add", self.ns_a)
        ip("netns", "add", self.ns_b)
        ip("link", "add", self.if_a, "netns", self.ns_a, "type", "veth", "peer", "name", self.if_b, "netns", self.ns_b)
        for ns, ifname, addr, mtu in ((self.ns_a, self.if_a, self.addr_a, mtu_a), (self.ns_b, self.if_b, self.addr_b, mtu_b)):
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", ifname)
            ip("-n", ns, "link", "set", ifname, "up", "mtu", str(mtu))
            ip("-n", ns, "link", "set", "lo", "up")

    def in_a(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns_a, *argv]

    def close(self) -> None:
        for ns in (self.ns_a, self.ns_b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
