"""Shared test support: ONE QEMU lab per test session, handed to every ``@pytest.mark.lab`` test.

The session lab: array guest with 24 drives (raid6 over the first 20, slots 20-23 free for
``lab.add_export``), 2 host guests, 2 data links per host, NVMe/TCP connected on every link,
an NVMe/RDMA port next to each TCP port (soft-RoCE on every data NIC).

Tests restore what they break (drives, links, throttles, extra exports). Without a prerequisite
(QEMU, the Debian kernel package...) lab tests skip with the reason; with FXPROBE_REQUIRE_LAB=1
they fail instead.
"""

from __future__ import annotations

import os
import sys

import pytest

SESSION_DRIVES = 24
SESSION_RAID_DRIVES = 20


def lab_required() -> bool:
    return os.environ.get("FXPROBE_REQUIRE_LAB") == "1"


def skip_or_fail(reason: str):
    """Skip a lab test for a missing prerequisite, or fail it under FXPROBE_REQUIRE_LAB=1."""
    if lab_required():
        pytest.fail(f"lab prerequisite missing (FXPROBE_REQUIRE_LAB=1): {reason}", pytrace=False)
    pytest.skip(f"lab not available: {reason}")


def session_lab_name() -> str:
    return f"pt-{os.getpid()}"


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """The session's lab handle (fxprobe.lab.vm.Lab), booted on first use and stopped at the end."""
    from fxprobe.errors import NotRunnable
    from fxprobe.lab.spec import LabSpec
    from fxprobe.lab.vm import Lab
    from fxprobe.rundir import RunDir
    from fxprobe.runner import Runner

    spec = LabSpec(name=session_lab_name(), drives=SESSION_DRIVES, raid="raid6", raid_drives=SESSION_RAID_DRIVES,
                   hosts=2, links=2, transport="tcp")
    run = RunDir.create(tmp_path_factory.mktemp("lab-evidence"), "session-lab")
    try:
        handle = Lab.up(spec, Runner(run), progress=lambda text: print(f"[lab] {text}", file=sys.stderr))
    except NotRunnable as exc:
        skip_or_fail(str(exc))
    yield handle
    handle.down()
