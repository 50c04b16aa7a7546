"""The reproducibility log a third party needs to repeat a run (README, "environment.json").

Every item is either filled (with its source) or listed as missing with a reason;
every hidden knob that can bias a result becomes a warning with the fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import psutil

from fxprobe.core.data import AsDict
from fxprobe.core.kernel import BLOCK_CLASS, NVME_CLASS, RDMA_CLASS
from fxprobe.core.clock import clock_state
from fxprobe.host.doctor import TOOL_PROBES, probe_tool, with_origins
from fxprobe.host.tool_versions import RULE, ToolVersionCache
from fxprobe.core.errors import NotRunnable
from fxprobe.core.runner import Runner
from fxprobe.tools import sysinfo
from fxprobe.tools.dpkg import NOT_TRACEABLE, UNCHECKED, ToolOrigin


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


# -- readers that run a command -----------------------------------------------------
def nic_firmware(runner: Runner, name: str) -> dict | None:
    """``ethtool -i`` of a NIC; None when ethtool is missing or fails (the firmware is then not recorded)."""
    try:
        result = runner.run(["ethtool", "-i", name], timeout=10, label=f"ethtool-i-{name}", always=True)
    except NotRunnable:
        return None
    if not result.ok:
        return None
    return dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)


# -- the log ----------------------------------------------------------------------
def origin_fix(name: str, origin: ToolOrigin) -> str:
    """What a tool_origin warning tells the operator to do: reinstall, take the copy off PATH, or make it checkable."""
    if origin.state == UNCHECKED:
        return ("install dpkg (dpkg-query) so the origin can be checked, or have the buyer name the file's SHA-256 "
                "in gates.toml [provenance] trusted_builds")
    if origin.package:
        return f"apt-get install --reinstall {origin.package}"
    return f"run the distribution's {name} (remove {origin.path} from PATH, or install the package)"


def collect(runner: Runner, interfaces: list[str] | None = None, tool_cache: ToolVersionCache | None = None) -> Preflight:
    """The preflight log; with ``tool_cache``, tool versions its unchanged binaries gave before (host.tool_versions)."""
    pf = Preflight()
    uname = os.uname()
    pf.put("kernel", {"release": uname.release, "version": uname.version, "machine": uname.machine})
    pf.put("distro", sysinfo.os_release(), f"{sysinfo.OS_RELEASE} not readable")
    pf.put("cpu", sysinfo.cpu_info())
    pf.put("memory", {"total_bytes": psutil.virtual_memory().total})
    pf.put("numa", sysinfo.numa_layout(), f"no {sysinfo.NODES}: NUMA layout unknown")
    governors = sysinfo.cpu_governors()
    pf.put("cpu_governor", governors, "no cpufreq in sysfs (virtual machine or driver not loaded): "
                                      "frequency scaling is not recorded")
    for governor, count in governors.items():
        if governor != "performance":
            pf.warnings.append(KnobWarning("cpu_governor", f"{governor} on {count} CPUs",
                                        "frequency scaling adds latency variance",
                                        "cpupower frequency-set -g performance"))
    states = sysinfo.cstates()
    pf.put("cstates", states, "no cpuidle states in sysfs: C-state policy is not recorded")
    deep = [s for s in states if not s["disabled"] and s["latency_us"] and s["latency_us"].isdigit()
            and int(s["latency_us"]) > 10]
    if deep:
        pf.warnings.append(KnobWarning("cstates", ", ".join(f"{s['name']} ({s['latency_us']} us)" for s in deep),
                                    "deep C-states add wake-up latency to I/O completions",
                                    "cpupower idle-set -D 10 (or boot with processor.max_cstate=1)"))
    nics = sysinfo.data_interfaces(interfaces)
    for nic in nics:
        firmware = nic_firmware(runner, nic["name"])
        nic["ethtool"] = firmware
    pf.put("nics", nics, "no physical network interface found (pass --iface)")
    pf.put("rdma_devices", sysinfo.rdma_devices(), f"no RDMA device in {RDMA_CLASS}")
    pf.put("nvme_controllers", sysinfo.nvme_controllers(), f"no NVMe controller in {NVME_CLASS}")
    pf.put("gpus", sysinfo.gpus(), f"no GPU under {sysinfo.DRM_CLASS} (GPU, driver and power management not recorded)")
    tools, origins, read = {}, {}, {}
    for cap in with_origins(runner, [probe_tool(runner, probe, tool_cache, read) for probe in TOOL_PROBES], tool_cache):
        if cap.present and cap.version:
            tools[cap.name] = cap.version
        else:
            pf.missing[f"tool:{cap.name}"] = cap.reason
        if cap.origin is not None:
            origins[cap.name] = cap.origin.to_dict()
            if cap.origin.state in NOT_TRACEABLE:
                pf.warnings.append(KnobWarning(
                    "tool_origin", f"{cap.name}: {cap.origin.text()}",
                    "a program no package installed, one changed since, or one nobody could check can print any "
                    "figure: what it measured cannot be traced to a release anyone can check (a report over it is "
                    "INCOMPLETE unless gates.toml [provenance] trusts its SHA-256)",
                    origin_fix(cap.name, cap.origin)))
    pf.put("tools", tools)
    pf.put("tool_origins", origins)
    if tool_cache is not None:
        tool_cache.save()
        pf.put("tool_versions_read", {"cache": str(tool_cache.path), "rule": RULE, "read": read})
    pf.put("page_cache", sysinfo.page_cache())
    caches = sysinfo.block_write_cache()
    pf.put("write_cache", caches, "no block device exposes queue/write_cache")
    for dev, mode in caches.items():
        if mode == "write back":
            pf.warnings.append(KnobWarning("write_cache", f"{dev}: write back",
                                        "a volatile write cache makes write results depend on flushes",
                                        f"record it in the report, or: echo 'write through' > {BLOCK_CLASS}/{dev}/queue/write_cache"))
    clock = clock_state()
    pf.put("clock", clock, "adjtimex not available")
    if clock is not None and not clock["synchronized"]:
        pf.warnings.append(KnobWarning("clock", "not synchronized (kernel STA_UNSYNC)",
                                    "timestamps from several hosts cannot be lined up",
                                    "enable NTP/PTP: apt-get install chrony && systemctl enable --now chrony"))
    pf.put("sensors", sysinfo.sensors(), "no thermal zone, hwmon or powercap sensor exposed: "
                                 "power draw and temperature are not logged")
    return pf


def lines(pf: Preflight) -> list[str]:
    out = [f"recorded {len(pf.items)} items: {', '.join(pf.items)}"]
    for item, reason in pf.missing.items():
        out.append(f"MISSING  {item}: {reason}")
    for w in pf.warnings:
        out.append(f"WARNING  {w.knob}: {w.observed} - {w.why}; fix: {w.fix}")
    return out
