"""The planted corruption twin on this host, for real: a verifying fault run on a loop device, zeros written
into the region the load reads -> VISIBLE naming the offset (exit 1); the same zeros outside it -> invisible.

Only the invisible run is ``alone``: its verdict needs every criterion to pass, the fault window's throughput,
p99 and stall measured here among them. The visible one judges the data criterion (the zeros read back), which
no load on the machine changes."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import loopdev

from fxprobe.tools.fio import parse_fio_verify_errors

FIXTURES = Path(__file__).parent / "fixtures" / "fio-verify"


@pytest.fixture
def loop(tmp_path):
    if shutil.which("fio") is None:
        pytest.skip("needs fio")
    yield from loopdev.loop_device(tmp_path, 48 << 20, direct_io=True)


def run(tmp_path: Path, device: str, identity: str, offset: str, timing: str = "steady_s = 3\nsettle_s = 1\n"
        "fault_s = 2\nrecover_s = 1", region: str = "24M") -> tuple[int, dict]:
    scenario = tmp_path / f"corrupt-{offset}.toml"
    scenario.write_text(f'[fault]\nkind = "corrupt"\ndevice = "{device}"\narray_offset = "{offset}"\nlength = "64k"\n'
                        f'[timing]\n{timing}\n[criteria]\n'
                        f'[load]\ntarget = "{device}"\nregion = "{region}"\n')   # 256 passes outlast the load
    done = subprocess.run([sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp_path / "runs"), "--json",
                           "fault", "run", str(scenario), "--yes", "--allow-serial", device, "--allow-serial",
                           identity], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "FXPROBE_FAULT_JOURNAL": str(tmp_path / "journal.json")})
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout)


def test_zeros_in_the_region_read_are_visible_naming_the_offset(tmp_path, loop):
    device, identity = loop
    # judged on the data alone: 2 s of load after the zeros read the 8M region's blocks several times over
    code, result = run(tmp_path, device, identity, "1M", "steady_s = 2\nsettle_s = 1\nfault_s = 1\nrecover_s = 1", "8M")
    data = next(c for c in result["criteria"] if c["name"].startswith("data verified"))
    assert result["verdict"] == "visible" and code == 1 and data["outcome"] == "fail"
    assert data["detail"].startswith(f"data mismatch at offset 1048576 of {device} (4096 B): header magic found 0, "
                                     "expected acca")
    assert "blocks in bytes 1048576..1114111" in data["detail"]


@pytest.mark.alone   # invisible = every criterion passes, the throughput/p99/stall measured here among them
def test_zeros_outside_the_region_read_are_invisible(tmp_path, loop):
    device, identity = loop
    code, result = run(tmp_path, device, identity, "32M")           # past the 24M region: never read
    data = next(c for c in result["criteria"] if c["name"].startswith("data verified"))
    assert data["outcome"] == "pass" and data["detail"].startswith("0 mismatches over ")
    assert result["verdict"] == "invisible" and code == 0, result["criteria"]


def test_libaio_verify_failures_captured_from_a_fault_run_parse():
    found = parse_fio_verify_errors((FIXTURES / "loop-randread-libaio-3.33.stderr").read_text())
    assert found and all(m.field == "magic" and m.found == "0" and m.expected == "acca" for m in found)
    assert all(1048576 <= m.offset < 1048576 + 262144 and m.file == "/dev/loop0" for m in found)


# -- review G1 item 7: the corrupt target goes through the target check, allowed by its identity -----------------
def corrupt_plan(device: str, allow: tuple[str, ...], dry_run: bool = True, allow_visible: bool = False):
    from fxprobe.core.runner import Runner
    from fxprobe.faults import engine
    from fxprobe.faults.scenario import parse_scenario
    scenario = parse_scenario(f'[fault]\nkind = "corrupt"\ndevice = "{device}"\narray_offset = "1M"\nlength = "256k"\n'
                              '[timing]\nsteady_s = 3\nsettle_s = 1\nfault_s = 2\nrecover_s = 1\n'
                              '[criteria]\nmax_errors = 0\n'
                              '[load]\nrw = "randread"\ntarget = "/dev/null-load"\nverify = "off"\n'
                              'no_verify_reason = "plan only"\n', "corrupt-plan.toml")
    return engine.build_plan(scenario, Runner(None), engine.Options(dry_run=dry_run, yes=not dry_run, allow=allow,
                                                                     allow_visible=allow_visible))


def root_disk() -> str | None:
    from fxprobe.tools.blockdev import SystemView
    view = SystemView()
    disks = sorted(d for d in view.root_devices() if not view.is_partition(d) and os.path.exists(f"/dev/{d}"))
    return f"/dev/{disks[0]}" if disks else None


@pytest.mark.skipif(root_disk() is None, reason="the root filesystem is not on a /dev disk here")
def test_corrupt_aimed_at_this_machine_s_root_disk_is_refused_even_when_its_path_is_allowed():
    from fxprobe.core.errors import UnsafeTarget
    device = root_disk()
    plan = corrupt_plan(device, allow=(device,))
    refused = [line for line in plan.lines if line.startswith("REFUSED")]
    assert any("root filesystem" in line for line in refused) and any("mounted" in line for line in refused), plan.lines
    with pytest.raises(UnsafeTarget):
        corrupt_plan(device, allow=(device,), dry_run=False)
    # --allow-visible (a planted visible fault) lets no unsafe target through: refused at the plan, nothing started
    shown = corrupt_plan(device, allow=(device, plan.method.target), allow_visible=True)
    assert shown.unsafe and not [line for line in shown.lines if "allowed by --allow-visible" in line], shown.lines
    with pytest.raises(UnsafeTarget, match="root filesystem.*--allow-visible does not allow"):
        corrupt_plan(device, allow=(device, plan.method.target), dry_run=False, allow_visible=True)
    with pytest.raises(UnsafeTarget, match="root filesystem"):     # and again at the moment of writing
        shown.method.inject()


def test_corrupt_is_allowed_by_the_identity_of_the_device_a_link_leads_to(tmp_path, loop):
    from fxprobe.core.errors import UnsafeTarget
    device, identity = loop
    link = tmp_path / "by-id-link"
    link.symlink_to(device)
    with pytest.raises(UnsafeTarget, match="not on the allow-list"):      # the path is no identity
        corrupt_plan(str(link), allow=(str(link), device), dry_run=False)
    plan = corrupt_plan(str(link), allow=(identity,), dry_run=False)
    assert plan.method.target == identity and plan.refusals == [] and plan.method.resolved == device
    held = os.open(device, os.O_RDONLY | os.O_EXCL)        # someone holds it exclusively (as a mount or md would)
    try:
        plan = corrupt_plan(str(link), allow=(identity,))
        assert any("exclusive open" in r and "EBUSY" in r for r in plan.refusals), plan.refusals
    finally:
        os.close(held)
