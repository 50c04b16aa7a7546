"""The kernel log (``dmesg``) and the kernel's clock (``/proc/uptime``): the lines fxprobe reads from them.

An NVMe controller whose command does not complete within the driver's I/O timeout (``nvme_core.io_timeout``, 30 s
by default) is logged as, for example::

    [  488.384783] nvme nvme20: I/O 865 (I/O Cmd) QID 1 timeout, aborting
    [  519.101060] nvme nvme20: I/O 859 QID 1 timeout, reset controller

(the stamp is the kernel's uptime in seconds; the driver aborts the command, then resets the controller, then
disables it). ``/proc/uptime`` holds the uptime and the idle time, in seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fxprobe.core.data import AsDict
from fxprobe.core.errors import ParseError

# what such lines mean in a lab, where the array is a guest whose drives QEMU emulates (fault runs and the report)
EMULATOR_STALLED = ("LAB DRIVE TIMED OUT (the array guest's emulated QEMU NVMe drive completed no I/O within the "
                    "driver's timeout: the run measured the lab's emulator with the fault)")
UPTIME_ARGV = ("cat", "/proc/uptime")     # the node's kernel clock (read on the node, over its runner)
TIMEOUT_RE = re.compile(r"^\[\s*(\d+\.\d+)\] nvme (nvme\d+): .*\btimeout\b")


@dataclass(frozen=True)
class DriveTimeout(AsDict):
    uptime_s: float        # the kernel's clock when it logged the line
    controller: str        # nvme20
    line: str


def parse_nvme_timeouts(text: str) -> tuple[DriveTimeout, ...]:
    """Every NVMe command timeout in ``dmesg`` output, in the order logged."""
    found = []
    for line in text.splitlines():
        if match := TIMEOUT_RE.match(line.strip()):
            found.append(DriveTimeout(float(match.group(1)), match.group(2), line.strip()))
    return tuple(found)


def parse_uptime(text: str, source: str = "/proc/uptime") -> float:
    """The kernel's uptime in seconds from ``/proc/uptime``."""
    fields = text.split()
    try:
        return float(fields[0])
    except (IndexError, ValueError):
        raise ParseError(source, "uptime", f"expected two numbers of seconds, got {text.strip()[:40]!r}") from None


def timeout_lines(timeouts: list[dict]) -> list[str]:
    """One line per controller of recorded ``DriveTimeout`` dicts: how many, when (the kernel's clock), the last."""
    by_controller: dict[str, list[dict]] = {}
    for timeout in timeouts:
        if isinstance(timeout, dict):
            by_controller.setdefault(str(timeout.get("controller")), []).append(timeout)
    return [f"{name}: {len(found)} timeout(s) from {found[0].get('uptime_s')} s to {found[-1].get('uptime_s')} s of "
            f"the kernel's clock; last: {found[-1].get('line')}" for name, found in by_controller.items()]
