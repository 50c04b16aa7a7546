"""Telemetry for long runs: psutil counters, NVMe temperature/health, NVMe path states, md state.

Every reader returns plain dicts (JSON-ready) and never raises for a missing facility: a
machine without NVMe or md simply gives empty maps. Counters are the raw cumulative values
the kernel keeps (a reader computes rates from two samples).
"""

from __future__ import annotations

import re

import psutil

from fxprobe.tools import mdadm, nvme, nvme_sysfs
from fxprobe.core import sysfs
from fxprobe.core.errors import ParseError, ToolError
from fxprobe.core.kernel import MDSTAT, NVME_CLASS
from fxprobe.core.hosts import LOCAL, Host

SKIP_DISKS = re.compile(r"^(loop|ram|zram|sr|fd)\d*")


def host_counters() -> dict:
    """CPU, memory, per-disk and per-NIC counters from psutil."""
    memory = psutil.virtual_memory()
    disks = {name: [c.read_bytes, c.write_bytes, c.read_count, c.write_count, getattr(c, "busy_time", 0)]
             for name, c in (psutil.disk_io_counters(perdisk=True) or {}).items() if not SKIP_DISKS.match(name)}
    nics = {name: [c.bytes_sent, c.bytes_recv, c.errin, c.errout, c.dropin, c.dropout]
            for name, c in (psutil.net_io_counters(pernic=True) or {}).items() if name != "lo"}
    return {"cpu_pct": psutil.cpu_percent(interval=None), "load1": psutil.getloadavg()[0],
            "mem_used": memory.used, "mem_available": memory.available,
            "disk_fields": ["read_bytes", "write_bytes", "read_count", "write_count", "busy_ms"], "disks": disks,
            "nic_fields": ["bytes_sent", "bytes_recv", "errin", "errout", "dropin", "dropout"], "nics": nics}


# Controllers whose sensor said "not reported" (0 K: nvmet's fabrics controllers), by name, subsystem and address,
# are asked once. Each read is an admin command, and one sent as a link goes down, while the controller still
# says live, waits for the admin timeout (60 s): in the lab's link-cut soak the telemetry stopped for that minute
# and the finished soak's process could not exit until the command returned (a thread in the kernel's wait).
_NO_SENSOR: set[tuple[str, str, str]] = set()


def nvme_temperatures() -> dict[str, float]:
    """Composite temperature (deg C) of each live NVMe controller that exposes a hwmon node.

    Each read sends a Get Log Page to the controller: a controller that is not live is skipped
    (the read would wait for the admin timeout), and so is one that reported no sensor before."""
    temps = {}
    for ctrl in sysfs.listdir(NVME_CLASS):
        if sysfs.read(f"{NVME_CLASS}/{ctrl}/state") != "live":
            continue
        key = (ctrl, *(sysfs.read(f"{NVME_CLASS}/{ctrl}/{attr}", "") for attr in ("subsysnqn", "address")))
        if key in _NO_SENSOR:
            continue
        for hwmon in sysfs.listdir(f"{NVME_CLASS}/{ctrl}"):
            if hwmon.startswith("hwmon"):
                raw = sysfs.read(f"{NVME_CLASS}/{ctrl}/{hwmon}/temp1_input")
                if not (raw and raw.lstrip("-").isdigit()):
                    continue
                if int(raw) > -273000:
                    temps[ctrl] = int(raw) / 1000
                else:                                   # 0 K: not reported
                    _NO_SENSOR.add(key)
    return temps


def path_states() -> dict[str, dict]:
    """Every NVMe controller (one per path for fabrics): state, transport, address, subsystem."""
    return nvme_sysfs.controller_states()


def md_states() -> dict[str, dict]:
    """md arrays from the kernel's mdstat: level, health string, degraded, running action."""
    text = sysfs.read(MDSTAT, "") or ""
    try:
        arrays = mdadm.parse_mdstat(text)
    except ParseError as exc:
        return {"_error": {"detail": str(exc)}}
    return {a.name: {"level": a.level, "health": a.health, "degraded": a.degraded,
                     "working": a.working_disks, "disks": a.raid_disks, "action": a.action}
            for a in arrays}


def smart_logs(runner, host: Host = LOCAL, controllers: list[str] | None = None) -> dict[str, dict]:
    """``nvme smart-log`` of each controller, read and parsed by :mod:`fxprobe.tools.nvme` (its health fields
    and counters as JSON); a failure is kept as {"error": ...}, never raised."""
    result = {}
    for ctrl in controllers if controllers is not None else sysfs.listdir(NVME_CLASS):
        try:
            smart = nvme.run_smart_log(runner, f"/dev/{ctrl}", host=host, timeout=15)
        except ToolError as exc:                  # a failed command or an output it cannot read
            result[ctrl] = {"error": str(exc)}
        else:
            result[ctrl] = smart.to_dict() if smart else {}
    return result
