"""The reproducibility log a third party needs (domain.md, audit checklist).

Every item is either filled (with its source) or listed as missing with a reason;
every hidden knob that can bias a result becomes a warning with the fix.
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass, field
from typing import Any

import psutil

from fxprobe.core.data import AsDict
from fxprobe.core import sysfs
from fxprobe.core.clock import clock_state
from fxprobe.host.doctor import TOOL_PROBES, probe_tool
from fxprobe.core.errors import NotRunnable
from fxprobe.core.runner import Runner


@dataclass(frozen=True)
class KnobWarning(AsDict):
    knob: str
    observed: str
    why: str
    fix: str


@dataclass
class Preflight:
    items: dict[str, Any] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    warnings: list[KnobWarning] = field(default_factory=list)

    def put(self, name: str, value: Any, missing_reason: str = "") -> None:
        if value in (None, "", [], {}):
            self.missing[name] = missing_reason or "not found on this machine"
        else:
            self.items[name] = value

    def to_dict(self) -> dict:
        return {"items": self.items,
                "missing": [{"item": k, "reason": v} for k, v in self.missing.items()],
                "warnings": [w.to_dict() for w in self.warnings]}


# -- readers (each small, each returns plain data) ------------------------------
def os_release() -> dict:
    text = sysfs.read("/etc/os-release", "") or ""
    pairs = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', text, re.M))
    return {k: pairs[k] for k in ("PRETTY_NAME", "ID", "VERSION_ID") if k in pairs}


def cpu_info() -> dict:
    text = sysfs.read("/proc/cpuinfo", "") or ""
    models = re.findall(r"^model name\s*:\s*(.+)$", text, re.M)
    return {"model": models[0] if models else platform.processor() or None,
            "logical_cpus": os.cpu_count(), "physical_cores": psutil.cpu_count(logical=False)}


def numa_layout() -> list[dict]:
    nodes = []
    for name in sysfs.listdir("/sys/devices/system/node"):
        if not re.fullmatch(r"node\d+", name):
            continue
        meminfo = sysfs.read(f"/sys/devices/system/node/{name}/meminfo", "") or ""
        total = re.search(r"MemTotal:\s+(\d+) kB", meminfo)
        nodes.append({"node": name, "cpus": sysfs.read(f"/sys/devices/system/node/{name}/cpulist"),
                      "mem_total_kib": int(total.group(1)) if total else None})
    return nodes


def cpu_governors() -> dict[str, int]:
    counts: dict[str, int] = {}
    for cpu in sysfs.listdir("/sys/devices/system/cpu"):
        if re.fullmatch(r"cpu\d+", cpu):
            governor = sysfs.read(f"/sys/devices/system/cpu/{cpu}/cpufreq/scaling_governor")
            if governor:
                counts[governor] = counts.get(governor, 0) + 1
    return counts


def cstates() -> list[dict]:
    base = "/sys/devices/system/cpu/cpu0/cpuidle"
    states = []
    for state in sysfs.listdir(base):
        if state.startswith("state"):
            states.append({"state": state, "name": sysfs.read(f"{base}/{state}/name"),
                           "latency_us": sysfs.read(f"{base}/{state}/latency"),
                           "disabled": sysfs.read(f"{base}/{state}/disable") == "1"})
    return states


def data_interfaces(names: list[str] | None) -> list[dict]:
    names = names or [n for n in sysfs.listdir("/sys/class/net")
                      if n != "lo" and sysfs.exists(f"/sys/class/net/{n}/device")]
    result = []
    for name in names:
        base = f"/sys/class/net/{name}"
        driver_link = sysfs.path(f"{base}/device/driver")
        result.append({
            "name": name, "operstate": sysfs.read(f"{base}/operstate"), "mtu": sysfs.read(f"{base}/mtu"),
            "speed_mbps": sysfs.read(f"{base}/speed"),
            "driver": driver_link.resolve().name if driver_link.exists() else None,
            "pci": sysfs.path(f"{base}/device").resolve().name if sysfs.exists(f"{base}/device") else None,
        })
    return result


def nic_firmware(runner: Runner, name: str) -> dict | None:
    """``ethtool -i`` of a NIC; None when ethtool is missing or fails (the firmware is then not recorded)."""
    try:
        result = runner.run(["ethtool", "-i", name], timeout=10, label=f"ethtool-i-{name}", always=True)
    except NotRunnable:
        return None
    if not result.ok:
        return None
    return dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)


def rdma_devices() -> list[dict]:
    devices = []
    for dev in sysfs.listdir("/sys/class/infiniband"):
        base = f"/sys/class/infiniband/{dev}"
        ports = []
        for port in sysfs.listdir(f"{base}/ports"):
            ports.append({"port": port, "state": sysfs.read(f"{base}/ports/{port}/state"),
                          "link_layer": sysfs.read(f"{base}/ports/{port}/link_layer"),
                          "rate": sysfs.read(f"{base}/ports/{port}/rate")})
        devices.append({"device": dev, "fw_ver": sysfs.read(f"{base}/fw_ver"),
                        "node_type": sysfs.read(f"{base}/node_type"), "ports": ports})
    return devices


def nvme_controllers() -> list[dict]:
    ctrls = []
    for ctrl in sysfs.listdir("/sys/class/nvme"):
        base = f"/sys/class/nvme/{ctrl}"
        ctrls.append({"controller": ctrl, **{k: sysfs.read(f"{base}/{k}") for k in
                      ("model", "serial", "firmware_rev", "transport", "address", "state")}})
    return ctrls


def block_write_cache() -> dict[str, str]:
    caches = {}
    for dev in sysfs.listdir("/sys/block"):
        if dev.startswith(("loop", "ram", "zram")):
            continue
        mode = sysfs.read(f"/sys/block/{dev}/queue/write_cache")
        if mode:
            caches[dev] = mode
    return caches


def page_cache() -> dict:
    mem = psutil.virtual_memory()
    return {"cached_bytes": getattr(mem, "cached", None), "buffers_bytes": getattr(mem, "buffers", None),
            "dirty_ratio": sysfs.read("/proc/sys/vm/dirty_ratio"),
            "dirty_background_ratio": sysfs.read("/proc/sys/vm/dirty_background_ratio")}


def sensors() -> dict:
    found: dict[str, Any] = {}
    for zone in sysfs.listdir("/sys/class/thermal"):
        temp = sysfs.read(f"/sys/class/thermal/{zone}/temp")
        if temp and temp.lstrip("-").isdigit():
            found[f"thermal/{zone}"] = {"type": sysfs.read(f"/sys/class/thermal/{zone}/type"),
                                        "celsius": int(temp) / 1000}
    for hw in sysfs.listdir("/sys/class/hwmon"):
        name = sysfs.read(f"/sys/class/hwmon/{hw}/name")
        for entry in sysfs.listdir(f"/sys/class/hwmon/{hw}"):
            if re.fullmatch(r"(temp|power|in|curr)\d+_input", entry):
                found[f"hwmon/{hw}/{name}/{entry}"] = sysfs.read(f"/sys/class/hwmon/{hw}/{entry}")
    for zone in sysfs.listdir("/sys/class/powercap"):
        energy = sysfs.read(f"/sys/class/powercap/{zone}/energy_uj")
        if energy:
            found[f"powercap/{zone}"] = {"name": sysfs.read(f"/sys/class/powercap/{zone}/name"),
                                         "energy_uj": energy}
    return found


def gpus() -> list[dict]:
    cards = []
    for card in sysfs.listdir("/sys/class/drm"):
        if re.fullmatch(r"card\d+", card):
            cards.append({"card": card, "vendor": sysfs.read(f"/sys/class/drm/{card}/device/vendor"),
                          "device": sysfs.read(f"/sys/class/drm/{card}/device/device"),
                          "power_dpm_force_performance_level":
                              sysfs.read(f"/sys/class/drm/{card}/device/power_dpm_force_performance_level")})
    return cards


# -- the log ----------------------------------------------------------------------
def collect(runner: Runner, interfaces: list[str] | None = None) -> Preflight:
    pf = Preflight()
    uname = os.uname()
    pf.put("kernel", {"release": uname.release, "version": uname.version, "machine": uname.machine})
    pf.put("distro", os_release(), "/etc/os-release not readable")
    pf.put("cpu", cpu_info())
    pf.put("memory", {"total_bytes": psutil.virtual_memory().total})
    pf.put("numa", numa_layout(), "no /sys/devices/system/node: NUMA layout unknown")
    governors = cpu_governors()
    pf.put("cpu_governor", governors, "no cpufreq in sysfs (virtual machine or driver not loaded): "
                                      "frequency scaling is not recorded")
    for governor, count in governors.items():
        if governor != "performance":
            pf.warnings.append(KnobWarning("cpu_governor", f"{governor} on {count} CPUs",
                                        "frequency scaling adds latency variance",
                                        "cpupower frequency-set -g performance"))
    states = cstates()
    pf.put("cstates", states, "no cpuidle states in sysfs: C-state policy is not recorded")
    deep = [s for s in states if not s["disabled"] and s["latency_us"] and s["latency_us"].isdigit()
            and int(s["latency_us"]) > 10]
    if deep:
        pf.warnings.append(KnobWarning("cstates", ", ".join(f"{s['name']} ({s['latency_us']} us)" for s in deep),
                                    "deep C-states add wake-up latency to I/O completions",
                                    "cpupower idle-set -D 10 (or boot with processor.max_cstate=1)"))
    nics = data_interfaces(interfaces)
    for nic in nics:
        firmware = nic_firmware(runner, nic["name"])
        nic["ethtool"] = firmware
    pf.put("nics", nics, "no physical network interface found (pass --iface)")
    pf.put("rdma_devices", rdma_devices(), "no RDMA device in /sys/class/infiniband")
    pf.put("nvme_controllers", nvme_controllers(), "no NVMe controller in /sys/class/nvme")
    pf.put("gpus", gpus(), "no GPU under /sys/class/drm (GPU, driver and power management not recorded)")
    tools = {}
    for probe in TOOL_PROBES:
        cap = probe_tool(runner, probe)
        if cap.present and cap.version:
            tools[cap.name] = cap.version
        else:
            pf.missing[f"tool:{cap.name}"] = cap.reason
    pf.put("tools", tools)
    pf.put("page_cache", page_cache())
    caches = block_write_cache()
    pf.put("write_cache", caches, "no block device exposes queue/write_cache")
    for dev, mode in caches.items():
        if mode == "write back":
            pf.warnings.append(KnobWarning("write_cache", f"{dev}: write back",
                                        "a volatile write cache makes write results depend on flushes",
                                        f"record it in the report, or: echo 'write through' > /sys/block/{dev}/queue/write_cache"))
    clock = clock_state()
    pf.put("clock", clock, "adjtimex not available")
    if clock is not None and not clock["synchronized"]:
        pf.warnings.append(KnobWarning("clock", "not synchronized (kernel STA_UNSYNC)",
                                    "timestamps from several hosts cannot be lined up",
                                    "enable NTP/PTP: apt-get install chrony && systemctl enable --now chrony"))
    pf.put("sensors", sensors(), "no thermal zone, hwmon or powercap sensor exposed: "
                                 "power draw and temperature are not logged")
    return pf


def lines(pf: Preflight) -> list[str]:
    out = [f"recorded {len(pf.items)} items: {', '.join(pf.items)}"]
    for item, reason in pf.missing.items():
        out.append(f"MISSING  {item}: {reason}")
    for w in pf.warnings:
        out.append(f"WARNING  {w.knob}: {w.observed} - {w.why}; fix: {w.fix}")
    return out
