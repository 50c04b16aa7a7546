"""The reproducibility log every run folder carries: ``environment.json``, written when the run starts.

It is the preflight log (``fxprobe preflight``: kernel, distro, CPU, memory/NUMA, governor, C-states, NICs,
RDMA, NVMe, tool versions, caches, clock, sensors) of the machine the command ran on, with every item
missing from it listed as a reproducibility risk and every biasing knob as a warning. ``fxprobe preflight``
replaces it with the full log of the data interfaces it was given. Collected once per process (tool
versions do not change under a running command); ``collected`` says when. A tool's version is the one its binary
gave before while that binary is unchanged (``tool_versions_read`` says when each was read; host.tool_versions).
"""

from __future__ import annotations

import copy
import platform
from functools import lru_cache

from fxprobe.core import sysfs
from fxprobe.core.errors import FxprobeError
from fxprobe.core.rundir import RunDir, utc_stamp
from fxprobe.core.runner import Runner
from fxprobe.host import preflight
from fxprobe.host.tool_versions import ToolVersionCache

SOURCE = "fxprobe.host.environment: the preflight log, taken when the run started"


@lru_cache(maxsize=1)
def _collected() -> tuple[str, dict]:
    try:
        return utc_stamp(), preflight.collect(Runner(None), tool_cache=ToolVersionCache()).to_dict()
    except FxprobeError as exc:        # the log is evidence about the run, never a reason for it to fail
        return utc_stamp(), {"items": {}, "missing": [{"item": "environment", "reason": f"not collected: {exc}"}],
                             "warnings": []}


def snapshot() -> dict:
    """This machine's reproducibility log as environment.json holds it."""
    collected, log = _collected()
    return {"source": SOURCE, "hostname": platform.node(), "collected": collected,
            "sysfs_root": sysfs.root(),           # "/" unless FXPROBE_SYSROOT redirected the kernel's files
            **copy.deepcopy(log)}


def record(run: RunDir) -> None:
    """Write environment.json into ``run`` unless it already has one."""
    run.ensure_environment(snapshot)
