"""Capabilities of this machine: each wrapped tool with its version, kernel facilities, the lab.

Declarative: a table of tool probes and a table of kernel probes, run by one engine
that records every command in the run directory.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, replace

from fxprobe.core.data import AsDict
from fxprobe.core import kernel, sysfs
from fxprobe.core.rundir import utc_stamp
from fxprobe.core.runner import PACKAGE_OF, Runner, install_hint
from fxprobe.host.tool_versions import CachedVersion, ToolVersionCache, binary_identity
from fxprobe.tools import fio, iperf3, nvme, perftest
from fxprobe.tools.dpkg import ToolOrigin, tool_origins


@dataclass(frozen=True)
class Capability(AsDict):
    name: str
    kind: str          # "tool" | "kernel" | "lab"
    present: bool
    version: str = ""
    reason: str = ""   # why missing (or a note when present)
    fix: str = ""      # the command that fixes it
    path: str = ""     # a tool: where PATH found it
    origin: ToolOrigin | None = None   # a tool: the file that runs, and whether a package installed it unchanged


@dataclass(frozen=True)
class ToolProbe:
    name: str
    argv: tuple[str, ...]
    pattern: str       # regex whose group "version" is the version


# the tools fxprobe parses carry their own version command and pattern (tools/): one regex each
TOOL_PROBES = (
    ToolProbe("fio", fio.VERSION_ARGV, fio.VERSION_PATTERN),
    ToolProbe("nvme-cli", nvme.VERSION_ARGV, nvme.VERSION_PATTERN),
    ToolProbe("libnvme", nvme.VERSION_ARGV, nvme.LIBNVME_VERSION_PATTERN),
    ToolProbe("perftest", ("ib_read_bw", "--version"), perftest.VERSION_PATTERN),
    ToolProbe("iperf3", iperf3.VERSION_ARGV, iperf3.VERSION_PATTERN),
    ToolProbe("mdadm", ("mdadm", "--version"), r"mdadm - v(?P<version>\S+)"),
    ToolProbe("blktrace", ("blktrace", "-v"), r"version (?P<version>\S+)"),
    ToolProbe("iproute2", ("ip", "-V"), r"iproute2-(?P<version>\S+)"),
    ToolProbe("qemu", ("qemu-system-x86_64", "--version"), r"version (?P<version>\S+)"),
    ToolProbe("openssh", ("ssh", "-V"), r"OpenSSH_(?P<version>[^\s,]+)"),
)


def probe_tool(runner: Runner, probe: ToolProbe, cache: ToolVersionCache | None = None,
               read: dict[str, str] | None = None) -> Capability:
    """The tool's version from ``probe``'s command; with ``cache``, the answer its unchanged binary gave before
    (``read`` gets the UTC stamp of the answer used, per tool)."""
    found = shutil.which(probe.argv[0])
    if found is None:
        return Capability(probe.name, "tool", False, reason=f"`{probe.argv[0]}` not found on PATH",
                          fix=install_hint(probe.argv[0]).replace("install it: ", ""))
    argv = list(probe.argv)
    binary = binary_identity(found) if cache is not None else None
    cached = cache.get(probe.name, argv, binary) if cache is not None else None
    if cached is None:
        result = runner.run(argv, timeout=20, label=f"version-{probe.name}", always=True)
        cached = CachedVersion(argv=argv, binary=binary or [], output=result.stdout + "\n" + result.stderr,
                               read=utc_stamp())
        # ib_read_bw --version prints its version and exits 1: an answer the pattern reads is kept all the same
        if cache is not None and binary is not None and (result.ok or re.search(probe.pattern, cached.output)):
            cache.put(probe.name, cached)
    if read is not None:
        read[probe.name] = cached.read
    origin = ToolOrigin(**cached.origin) if cached.origin else None
    match = re.search(probe.pattern, cached.output)
    if not match:
        return Capability(probe.name, "tool", True, reason=f"version not recognised in `{' '.join(probe.argv)}` output",
                          path=found, origin=origin)
    return Capability(probe.name, "tool", True, version=match.group("version").rstrip(","), path=found, origin=origin)


def with_origins(runner: Runner, caps: list[Capability], cache: ToolVersionCache | None = None) -> list[Capability]:
    """``caps`` with each found tool's origin (tools.dpkg): the cache's while the binary is unchanged, else asked
    of dpkg for all of them at once, and kept in the cache beside the version."""
    ask = {c.name: c.path for c in caps if c.kind == "tool" and c.path and c.origin is None}
    found = tool_origins(runner, ask, {name: PACKAGE_OF.get(os.path.basename(path), "") for name, path in ask.items()})
    if cache is not None:
        for name, origin in found.items():
            entry = cache.file.versions.get(name)
            if entry is not None and entry.binary == binary_identity(ask[name]):
                cache.put(name, entry.model_copy(update={"origin": origin.to_dict()}))
    return [replace(c, origin=found[c.name]) if c.name in found else c for c in caps]


def _modules_available() -> bool:
    return sysfs.exists(f"/lib/modules/{os.uname().release}/modules.dep")


def _kernel(name: str, present: bool, what: str, module: str | None = None) -> Capability:
    if present:
        return Capability(name, "kernel", True, reason=what)
    if module and _modules_available():
        return Capability(name, "kernel", False, reason=f"{what}: module {module} not loaded",
                          fix=f"modprobe {module}")
    reason = f"{what}: not in this kernel"
    if not _modules_available():
        reason += f" (no /lib/modules/{os.uname().release}: this kernel cannot load modules)"
    return Capability(name, "kernel", False, reason=reason,
                      fix="use a kernel with the module, or run inside the lab: fxprobe lab up")


def kernel_capabilities() -> list[Capability]:
    configfs = "configfs" in sysfs.filesystems()
    rdma_devices = kernel.rdma_devices()
    return [
        _kernel("configfs", configfs, "configfs filesystem", "configfs"),
        _kernel("nvme-core", kernel.module_loaded("nvme_core") or kernel.has(kernel.NVME_CLASS),
                "NVMe host driver", "nvme"),
        _kernel("nvme-fabrics", kernel.module_loaded("nvme_fabrics") or sysfs.exists("/dev/nvme-fabrics"),
                "NVMe over Fabrics host", "nvme-fabrics"),
        _kernel("nvmet", kernel.module_loaded("nvmet") or kernel.has(kernel.NVMET_CONFIGFS),
                "NVMe target (nvmet)", "nvmet"),
        _kernel("null_blk", kernel.module_loaded("null_blk") or kernel.has(kernel.NULLB_CONFIGFS),
                "null_blk test devices", "null_blk"),
        _kernel("md", kernel.has(kernel.MDSTAT), "md RAID", "raid456"),
        _kernel("rdma", bool(rdma_devices),
                f"RDMA devices ({', '.join(rdma_devices)})" if rdma_devices else "RDMA devices", "rdma_rxe"),
        _kernel("kvm", os.path.exists("/dev/kvm"), "/dev/kvm (the lab falls back to TCG without it)"),
    ]


def lab_capabilities(runner: Runner) -> list[Capability]:
    """What ``fxprobe doctor`` shows about the lab: QEMU, the cached kernel, the acceleration."""
    import json

    from fxprobe.lab.kernel import cache_root, cached_kernels
    from fxprobe.lab.qemu import qemu_binary

    caps = []
    qemu = shutil.which(qemu_binary())
    caps.append(Capability("lab qemu", "lab", bool(qemu), reason=qemu or f"{qemu_binary()} not found",
                           fix="" if qemu else "apt-get install --no-install-recommends qemu-system-x86"))
    kernels = cached_kernels()
    caps.append(Capability("lab kernel", "lab", bool(kernels),
                           version=kernels[-1].version if kernels else "",
                           reason=f"cached in {kernels[-1].root}" if kernels else
                           "not cached yet: the first `fxprobe lab up` downloads linux-image-amd64 (~70 MB)",
                           fix="" if kernels else "fxprobe lab up"))
    accel_file = cache_root() / "accel.json"
    known = json.loads(accel_file.read_text()) if accel_file.exists() else {}
    caps.append(Capability("lab accel", "lab", True, version=", ".join(sorted(set(known.values()))) or "not probed",
                           reason="KVM is tried once and dropped when it does not boot; TCG otherwise"
                           if os.path.exists("/dev/kvm") else "no /dev/kvm: TCG"))
    return caps


def collect(runner: Runner) -> list[Capability]:
    caps = with_origins(runner, [probe_tool(runner, probe) for probe in TOOL_PROBES])
    caps += kernel_capabilities()
    caps += lab_capabilities(runner)
    return caps


def table(caps: list[Capability]) -> list[str]:
    width = max(len(c.name) for c in caps)
    lines = [f"{'capability':{width}}  {'kind':6}  {'status':7}  detail"]
    for c in caps:
        status = "ok" if c.present else "MISSING"
        detail = c.version or c.reason
        if c.present and c.version and c.reason:
            detail += f" ({c.reason})"
        if not c.present and c.fix:
            detail += f"; fix: {c.fix}"
        if c.origin is not None and not c.origin.trusted:
            detail += f"; {c.origin.text()}"
        lines.append(f"{c.name:{width}}  {c.kind:6}  {status:7}  {detail}")
    return lines
