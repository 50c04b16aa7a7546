"""rdma-core's ``ibv_devinfo``: the port's active MTU (the RoCE MTU the port runs), which sysfs does not show.

Format (rdma-core libibverbs/examples/devinfo.c): per port ``active_mtu:\t\t4096 (5)``.
"""

from __future__ import annotations

import re
import shutil

from fxprobe.core.hosts import LOCAL, Host
from fxprobe.core.runner import Runner

_ACTIVE_MTU = re.compile(r"^\s*active_mtu:\s*(\d+)\s*\(\d+\)", re.MULTILINE)


def parse_active_mtu(text: str) -> int | None:
    """The first ``active_mtu`` of ``ibv_devinfo -d DEV -i PORT`` output, in bytes; None when absent."""
    match = _ACTIVE_MTU.search(text)
    return int(match.group(1)) if match else None


def run_active_mtu(runner: Runner, device: str, port: int, host: Host = LOCAL) -> int | None:
    """The port's active MTU, or None when ibv_devinfo is not installed or does not say."""
    if host is LOCAL and shutil.which("ibv_devinfo") is None:
        return None
    result = runner.run(["ibv_devinfo", "-d", device, "-i", str(port)], timeout=15, host=host,
                        label=f"ibv_devinfo-{device}", always=True)
    return parse_active_mtu(result.stdout) if result.ok else None
