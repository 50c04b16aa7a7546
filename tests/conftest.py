"""Shared test support: ONE QEMU lab per test session, handed to every ``@pytest.mark.lab`` test.

The session lab: array guest with 24 drives (raid6 over the first 20, slots 20-23 free for
``lab.add_export``), 2 host guests, 2 data links per host, NVMe/TCP connected on every link,
an NVMe/RDMA port next to each TCP port (soft-RoCE on every data NIC).

Tests restore what they break (drives, links, throttles, extra exports). Without a prerequisite
(QEMU, the Debian kernel package...) lab tests skip with the reason; with FXPROBE_REQUIRE_LAB=1
they fail instead.

FXPROBE_TEST_LAB=<name> makes the tests use a lab that is already up (started with
``fxprobe lab up --lab <name> --drives 24 --raid-drives 20 --hosts 2 --links 2``) and leave it up:
handy while writing lab tests.
"""

from __future__ import annotations

import os
import sys

import pytest

SESSION_DRIVES = 24
SESSION_RAID_DRIVES = 20
SESSION_DRIVE_MB = 128   # small drives: a re-added drive's md recovery takes ~1 min under TCG


def pytest_collection_modifyitems(items):
    """A test that takes the ``lab`` fixture is a lab test, marked or not: scripts/test runs the tests
    without the lab on two workers and must never boot a lab (or load the machine) beside the lab tests."""
    for item in items:
        if "lab" in getattr(item, "fixturenames", ()) and item.get_closest_marker("lab") is None:
            item.add_marker(pytest.mark.lab)


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
    from fxprobe.core.errors import NotRunnable
    from fxprobe.lab.spec import LabSpec
    from fxprobe.lab.vm import Lab
    from fxprobe.core.rundir import RunDir
    from fxprobe.core.runner import Runner

    existing = os.environ.get("FXPROBE_TEST_LAB")
    if existing:
        yield Lab.load(existing)
        return
    spec = LabSpec(name=session_lab_name(), drives=SESSION_DRIVES, raid="raid6", raid_drives=SESSION_RAID_DRIVES,
                   hosts=2, links=2, transport="tcp", drive_mb=SESSION_DRIVE_MB)
    run = RunDir.create(tmp_path_factory.mktemp("lab-evidence"), "session-lab")
    try:
        handle = Lab.up(spec, Runner(run), progress=lambda text: print(f"[lab] {text}", file=sys.stderr))
    except NotRunnable as exc:
        skip_or_fail(str(exc))
    yield handle
    handle.down()
