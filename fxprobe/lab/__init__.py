"""The lab: a miniature NVMe-oF deployment (array + hosts) under QEMU, or natively with the modules.

Use ``fxprobe.lab.vm.Lab`` (``Lab.load(name)``, ``Lab.up(LabSpec(...))``); see its module docstring.
"""

from __future__ import annotations


def probe_capabilities(runner) -> list:
    """What ``fxprobe doctor`` shows about the lab: QEMU, the cached kernel, the acceleration."""
    import json
    import os
    import shutil

    from fxprobe.host.doctor import Capability
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
