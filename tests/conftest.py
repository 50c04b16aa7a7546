"""Shared test support: ONE QEMU lab per test session (per xdist worker), handed to every ``@pytest.mark.lab`` test.

The lab's spec is tests/session_lab.py's. Tests restore what they break (drives, links, throttles, extra
exports). Without a prerequisite (QEMU, the Debian kernel package...) lab tests skip with the reason; with
FXPROBE_REQUIRE_LAB=1 they fail instead.

FXPROBE_TEST_LAB=<name> makes the tests use a lab that is already up (``python3 tests/session_lab.py up NAME``,
or ``fxprobe lab up --lab <name> --drives 24 --raid-drives 20 --hosts 2 --links 2``) and leave it up: handy
while writing lab tests. FXPROBE_TEST_LABS=<a>,<b> does the same for pytest-xdist workers, worker gwN taking
the Nth (scripts/test runs the ``lab_parallel`` tests so, each worker on a lab of its own).
"""

from __future__ import annotations

import os
import sys
import tempfile
import warnings

import pytest
from hypothesis import settings

from session_lab import SESSION_DRIVES, SESSION_RAID_DRIVES  # noqa: F401  (tests import them from here)


# No hypothesis deadline anywhere: the suite shares two cores with QEMU guests (scripts/test boots the labs while
# the tests without a lab run), and a test must fail for what it checks, never for the machine's load.
settings.register_profile("fxprobe", deadline=None)
settings.load_profile("fxprobe")


# scripts/test hands the lab_parallel tests to its two workers a file at a time (--dist loadfile), in the order
# collected: the longest files first, so that the short ones fill in at the end instead of one long file running
# alone on one worker at the end. Seconds each file took in part 2 of a CI-like run (ci30, main 169ddf1: two labs,
# part 1 beside them); a file not named goes after these. Only the order changes, never what runs.
LAB_PARALLEL_SECONDS = {
    "test_lab_g1.py": 326, "test_lab.py": 250, "test_fault_lab.py": 241, "test_lab_rehearse.py": 225,
    "test_lab_recover.py": 219, "test_soak_lab.py": 148, "test_lab_verify.py": 140, "test_lab_workload.py": 105,
    "test_lab_fleet.py": 102, "test_lab_netcheck_both_ends.py": 91, "test_lab_raid_geometry.py": 86,
    "test_lab_fault_tune.py": 55, "test_lab_mend.py": 29, "test_lab_connect_iface.py": 20,
    "test_lab_target_control.py": 11,
}


# Every run fxprobe begins appends a line to the machine's ledger (fxprobe.core.ledger), and a gate lists the runs
# of the same commands there that it was not given. The tests' runs never go to the ledger of the machine they run
# on: a session (each xdist worker) has a ledger of its own, which module fixtures' runs share, and each test one of
# its own (machine_ledger_of_this_test).
os.environ["FXPROBE_MACHINE_LEDGER"] = os.path.join(tempfile.mkdtemp(prefix="fxprobe-tests-"), "machine-ledger.jsonl")


@pytest.fixture(autouse=True)
def machine_ledger_of_this_test(tmp_path, monkeypatch):
    monkeypatch.setenv("FXPROBE_MACHINE_LEDGER", str(tmp_path / "machine-ledger.jsonl"))


def pytest_collection_modifyitems(items):
    """A test that takes the ``lab`` fixture is a lab test, marked or not: scripts/test runs the tests
    without the lab on two workers and must never boot a lab (or load the machine) beside the lab tests.
    The lab_parallel tests come first, longest file first (LAB_PARALLEL_SECONDS); the others keep their order."""
    for item in items:
        if "lab" in getattr(item, "fixturenames", ()) and item.get_closest_marker("lab") is None:
            item.add_marker(pytest.mark.lab)
    items.sort(key=lambda item: -LAB_PARALLEL_SECONDS.get(item.path.name, 0.5)
               if item.get_closest_marker("lab_parallel") else 0)


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
    import session_lab
    from fxprobe.core.errors import BadInput, NotRunnable
    from fxprobe.lab.vm import Lab
    from fxprobe.core.rundir import RunDir
    from fxprobe.core.runner import Runner

    existing = lab_given()
    if existing:
        try:
            handle = Lab.load(existing)
        except BadInput as exc:       # scripts/test booted it ahead: its boot failed (its log names why)
            skip_or_fail(f"{exc}; the boot's log: {os.environ.get('FXPROBE_TEST_LAB_LOGS', 'not kept')}")
        yield handle
        return
    run = RunDir.create(tmp_path_factory.mktemp("lab-evidence"), "session-lab")
    try:
        handle = session_lab.up(session_lab_name(), Runner(run), progress=lambda text: print(f"[lab] {text}",
                                                                                             file=sys.stderr))
    except NotRunnable as exc:
        skip_or_fail(str(exc))
    yield handle
    handle.down()


def lab_given() -> str | None:
    """The name of a lab that is already up for this process: FXPROBE_TEST_LAB, or this xdist worker's entry of
    FXPROBE_TEST_LABS."""
    labs = [name for name in os.environ.get("FXPROBE_TEST_LABS", "").split(",") if name]
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if labs and worker.startswith("gw"):
        return labs[int(worker[2:]) % len(labs)]
    return os.environ.get("FXPROBE_TEST_LAB") or None


# -- the lab left whole (tests/lab_mend.py): after a lab test that failed, and at the end of each file of lab tests,
# what is broken is mended and named in a warning (the run's warnings summary), so that one test's breakage fails
# that test alone
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when in ("setup", "call") and report.failed:
        item.fxprobe_failed = True
    return report


def mend_lab(lab, when: str) -> None:
    import lab_mend
    done = lab_mend.mend(lab)
    if done:
        warnings.warn(f"lab {lab.name} mended {when}: {'; '.join(done)}")


@pytest.fixture(scope="module", autouse=True)
def lab_whole_after_each_file(request):
    request.module.fxprobe_lab = None
    yield
    if request.module.fxprobe_lab is not None:
        mend_lab(request.module.fxprobe_lab, f"at the end of {request.module.__name__}.py")


@pytest.fixture(autouse=True)
def lab_whole_after_a_failure(request, lab_whole_after_each_file):
    yield
    lab = request.node.funcargs.get("lab") if "lab" in request.fixturenames else None
    if lab is None:
        return
    request.module.fxprobe_lab = lab
    if getattr(request.node, "fxprobe_failed", False):
        import lab_mend
        stalled = getattr(request.node, "fxprobe_stalled", None)
        if stalled is not None:       # a second run follows (pytest_runtest_protocol below)
            stalls, first = stalled
            replaced = lab_mend.replace_stalled(lab, stalls.controllers)
            warnings.warn(f"lab {lab.name}: {request.node.name} failed while an emulated drive of the array guest "
                          f"timed out (the lab's QEMU NVMe, not fxprobe): {'; '.join(stalls.summary())}; its first "
                          f"run's failure: {first}; {'; '.join(replaced) or 'no drive to replace'}; it runs once more")
        else:
            stalls = lab_mend.drive_stalls(lab)
            if stalls:
                warnings.warn(f"lab {lab.name}: an emulated drive of the array guest timed out (the lab's QEMU NVMe, "
                              f"not fxprobe): {'; '.join(stalls)}")
        mend_lab(lab, f"after {request.node.name} failed")


# -- a second run after the lab's emulated drive stalled: QEMU 7.2's emulated NVMe drive sometimes stops completing
# I/O (the array guest's kernel logs "timeout, aborting", then resets the controller; seen in 3 of 13 CI-like runs,
# the official CI of 29dfb9b and ci73, where drive 2 stalled 12 s after drive 1 was hot-added). It was reproduced by
# pulling and restoring drives beside others under load; the lab's drives now run with ioeventfd=on, which stopped
# it there (fxprobe/lab/qemu.py Drive.device_args), and this stays as the net. A lab test that fails while such a
# timeout is logged (between its start and its failure) runs once more, after the stalled drive is replaced by a
# fresh QEMU device and the lab is mended; the warnings summary names the test, its first failure and the stall.
# Any other failure, and any failure of the second run, is the test's own.
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    if "lab" not in getattr(item, "fixturenames", ()):
        return None
    from _pytest.runner import runtestprotocol
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = first_run(item, nextitem)
    stalled, item.fxprobe_stalled = getattr(item, "fxprobe_stalled", None), None
    if stalled is not None and reports[-1].passed:     # a teardown that could not mend the lab is reported as is
        item.fxprobe_failed = False
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
    elif stalled is not None:         # what the kept module fixtures hold goes now, as the next test needs
        try:
            item.session._setupstate.teardown_exact(nextitem)
        except Exception as exc:
            warnings.warn(f"tearing down after {item.name}: {exc}")
    for report in reports:
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


def first_run(item, nextitem):
    """pytest's runtestprotocol, except that a failure while an emulated drive stalled keeps the module's fixtures
    for the second run (the teardown goes as far as this test, not to the next one)."""
    import time
    from _pytest.runner import call_and_report
    started = time.monotonic()
    reports = [call_and_report(item, "setup", log=False)]
    if reports[0].passed:
        reports.append(call_and_report(item, "call", log=False))
    lab = (item.funcargs or {}).get("lab")
    if reports[-1].when == "call" and reports[-1].failed and lab is not None:
        stalled_during(item, lab, time.monotonic() - started, reports[-1])
    if item.session.shouldfail or item.session.shouldstop:
        nextitem = None
    keep = ThisTestOnly(item) if getattr(item, "fxprobe_stalled", None) is not None else nextitem
    reports.append(call_and_report(item, "teardown", log=False, nextitem=keep))
    item._request, item.funcargs = False, None
    return reports


class ThisTestOnly:
    """A next item for pytest's teardown that descends from everything ``item`` does but ``item`` itself: the
    test's own fixtures are torn down, its module's and the session's are kept."""
    def __init__(self, item):
        self.chain = item.listchain()[:-1]

    def listchain(self):
        return self.chain


def stalled_during(item, lab, seconds: float, failed) -> None:
    """Mark ``item`` for a second run if the array guest logged an emulated drive timeout in the last ``seconds``
    (its teardown, lab_whole_after_a_failure, replaces the stalled drives and mends the lab)."""
    import lab_mend
    try:
        stalls = lab_mend.read_stalls(lab).since(seconds)
    except Exception as exc:      # the guest did not answer: no second run (an error here would end the session)
        warnings.warn(f"lab {lab.name}: {item.name} failed; its array guest's kernel log could not be read ({exc})")
        return
    if stalls.lines:
        crash = getattr(failed.longrepr, "reprcrash", None)
        first = ((crash.message if crash else str(failed.longrepr or "")).splitlines() or ["?"])[0][:300]
        item.fxprobe_stalled = (stalls, first)
