"""The machine as the kernel (sysfs, procfs) and /etc describe it: the readers of the reproducibility log
(host.preflight), each small, each returning plain data, all through core.sysfs (whose root tests redirect)."""

from __future__ import annotations

import os
import platform
import re
from typing import Any

import psutil

from fxprobe.core import sysfs
from fxprobe.core.kernel import BLOCK_CLASS, NET_CLASS, NVME_CLASS, RDMA_CLASS

NODES = "/sys/devices/system/node"
CPUS = "/sys/devices/system/cpu"
CPUINFO = "/proc/cpuinfo"
DRM_CLASS = "/sys/class/drm"
OS_RELEASE = "/etc/os-release"


def os_release() -> dict:
    text = sysfs.read(OS_RELEASE, "") or ""
    pairs = dict(re.findall(r'^(\w+)="?([^"\n]*)"?$', text, re.M))
    return {k: pairs[k] for k in ("PRETTY_NAME", "ID", "VERSION_ID") if k in pairs}


def cpu_info() -> dict:
    text = sysfs.read(CPUINFO, "") or ""
    models = re.findall(r"^model name\s*:\s*(.+)$", text, re.M)
    return {"model": models[0] if models else platform.processor() or None,
            "logical_cpus": os.cpu_count(), "physical_cores": psutil.cpu_count(logical=False)}


def numa_layout() -> list[dict]:
    nodes = []
    for name in sysfs.listdir(NODES):
        if not re.fullmatch(r"node\d+", name):
            continue
        meminfo = sysfs.read(f"{NODES}/{name}/meminfo", "") or ""
        total = re.search(r"MemTotal:\s+(\d+) kB", meminfo)
        nodes.append({"node": name, "cpus": sysfs.read(f"{NODES}/{name}/cpulist"),
                      "mem_total_kib": int(total.group(1)) if total else None})
    return nodes


def cpu_governors() -> dict[str, int]:
    counts: dict[str, int] = {}
    for cpu in sysfs.listdir(CPUS):
        if re.fullmatch(r"cpu\d+", cpu):
            governor = sysfs.read(f"{CPUS}/{cpu}/cpufreq/scaling_governor")
            if governor:
                counts[governor] = counts.get(governor, 0) + 1
    return counts


def cstates() -> list[dict]:
    base = f"{CPUS}/cpu0/cpuidle"
    states = []
    for state in sysfs.listdir(base):
        if state.startswith("state"):
            states.append({"state": state, "name": sysfs.read(f"{base}/{state}/name"),
                           "latency_us": sysfs.read(f"{base}/{state}/latency"),
                           "disabled": sysfs.read(f"{base}/{state}/disable") == "1"})
    return states


def data_interfaces(names: list[str] | None) -> list[dict]:
    names = names or [n for n in sysfs.listdir(NET_CLASS)
                      if n != "lo" and sysfs.exists(f"{NET_CLASS}/{n}/device")]
    result = []
    for name in names:
        base = f"{NET_CLASS}/{name}"
        driver_link = sysfs.path(f"{base}/device/driver")
        result.append({
            "name": name, "operstate": sysfs.read(f"{base}/operstate"), "mtu": sysfs.read(f"{base}/mtu"),
            "speed_mbps": sysfs.read(f"{base}/speed"),
            "driver": driver_link.resolve().name if driver_link.exists() else None,
            "pci": sysfs.path(f"{base}/device").resolve().name if sysfs.exists(f"{base}/device") else None,
        })
    return result


def rdma_devices() -> list[dict]:
    devices = []
    for dev in sysfs.listdir(RDMA_CLASS):
        base = f"{RDMA_CLASS}/{dev}"
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
    for ctrl in sysfs.listdir(NVME_CLASS):
        base = f"{NVME_CLASS}/{ctrl}"
        ctrls.append({"controller": ctrl, **{k: sysfs.read(f"{base}/{k}") for k in
                      ("model", "serial", "firmware_rev", "transport", "address", "state")}})
    return ctrls


def block_write_cache() -> dict[str, str]:
    caches = {}
    for dev in sysfs.listdir(BLOCK_CLASS):
        if dev.startswith(("loop", "ram", "zram")):
            continue
        mode = sysfs.read(f"{BLOCK_CLASS}/{dev}/queue/write_cache")
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
    for card in sysfs.listdir(DRM_CLASS):
        if re.fullmatch(r"card\d+", card):
            cards.append({"card": card, "vendor": sysfs.read(f"{DRM_CLASS}/{card}/device/vendor"),
                          "device": sysfs.read(f"{DRM_CLASS}/{card}/device/device"),
                          "power_dpm_force_performance_level":
                              sysfs.read(f"{DRM_CLASS}/{card}/device/power_dpm_force_performance_level")})
    return cards
