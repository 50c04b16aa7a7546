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

from fxprobe.tools.fio import parse_fio_verify_errors

FIXTURES = Path(__file__).parent / "fixtures" / "fio-verify"


@pytest.fixture
def loop(tmp_path):
    if os.geteuid() != 0 or shutil.which("losetup") is None or shutil.which("fio") is None:
        pytest.skip("needs root, losetup and fio")
    image = tmp_path / "disk.img"
    with open(image, "wb") as handle:
        handle.truncate(48 << 20)
    done = subprocess.run(["losetup", "-f", "--show", "--direct-io=on", str(image)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"no loop device: {done.stderr.strip()}")
    yield done.stdout.strip(), f"loop:{image}"
    subprocess.run(["losetup", "-d", done.stdout.strip()], check=False)


def run(tmp_path: Path, device: str, identity: str, offset: str, timing: str = "steady_s = 3\nsettle_s = 1\n"
        "fault_s = 2\nrecover_s = 1", region: str = "24M") -> tuple[int, dict]:
    scenario = tmp_path / f"corrupt-{offset}.toml"
    scenario.write_text(f'[fault]\nkind = "corrupt"\ndevice = "{device}"\narray_offset = "{offset}"\nlength = "64k"\n'
                        f'[timing]\n{timing}\n'
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
