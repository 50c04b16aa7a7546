"""A soak verifies its data for real (the CLI and fio on a directory target, no lab): a block of one of the
working set's files overwritten with zeros while the soak runs -> the soak FAILs naming the file, the offset,
the found and the expected header (exit 1); the clean soak beside it passes with the bytes it verified."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from fxprobe import soak


def start(target, run_dir, seconds: int, *extra: str, json_out: bool = True) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "fxprobe.cli.main", *(["--json"] if json_out else []),
                             "--run-dir", str(run_dir), "soak",
                             "small-file-dataset", "--duration", f"{seconds}s", "--target", str(target), "--size",
                             "8M", "--sample", "1", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_samples(path, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().count('"type":"sample"') >= count):
        assert time.monotonic() < deadline, f"fewer than {count} samples in {path}"
        time.sleep(0.2)


def test_zeros_written_into_a_file_the_soak_reads_fail_it_naming_file_and_offset(tmp_path):
    target, run_dir = tmp_path / "target", tmp_path / "run"
    target.mkdir()
    process = start(target, run_dir, 5)
    try:
        wait_for_samples(run_dir / soak.RECORDS, 2)
        victim = target / "kv.0.0"
        with open(victim, "r+b") as handle:          # below the soak: 4 KiB of zeros at 8 KiB into one file
            handle.seek(8192)
            handle.write(bytes(4096))
        out, err = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
    assert "Traceback" not in err and process.returncode == 1, err[-2000:]
    result = json.loads(out)
    check = {c["name"]: c for c in result["verdict"]["criteria"]}["data verified (mismatches)"]
    assert check["outcome"] == "fail" and check["measured"] >= 1
    assert check["detail"].startswith(f"data mismatch at offset 8192 of {victim} (4096 B): header magic found 0, "
                                      "expected acca"), check["detail"]
    assert result["io_errors"] == 0                                       # a bad block is not an I/O error
    assert not [i for i in result["interruptions"] if i["kind"] in ("io-error", "fio-exit")]   # nor stops fio
    records = [json.loads(line) for line in (run_dir / soak.RECORDS).read_text().splitlines()]
    [load, back] = [r for r in records if r["type"] == "verify"]
    assert load["seg"] == 1 and load["mismatches"] >= 1 and load["shown"][0]["offset"] == 8192
    assert back["source"] == "read-back after the load" and back["mismatches"] == back["bad_blocks"] == 1
    assert result["mismatches"] == load["mismatches"] + back["mismatches"]


@pytest.mark.alone   # PASS: no stall and the planned time covered, measured here
def test_a_clean_soak_passes_with_the_bytes_it_verified(tmp_path):
    target, run_dir = tmp_path / "target", tmp_path / "run"
    target.mkdir()
    process = start(target, run_dir, 4)            # more than the 3 s end tolerance: one segment runs
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-2000:]
    result = json.loads(out)
    check = {c["name"]: c for c in result["verdict"]["criteria"]}["data verified (mismatches)"]
    assert check["outcome"] == "pass" and check["detail"].startswith("0 mismatches over ")
    samples = [json.loads(line) for line in (run_dir / soak.RECORDS).read_text().splitlines()
               if '"type":"sample"' in line]
    assert samples[-1]["verified"] > 0 and samples[-1]["mismatches"] == 0
    assert result["verified_bytes"] >= samples[-1]["verified"] + 8 * 2**20 * 0.9   # the load and the read-back


def test_no_verify_needs_a_reason(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    refused = start(target, tmp_path / "r0", 5, "--no-verify", " ")
    _, err = refused.communicate(timeout=120)
    assert refused.returncode == 2 and "--no-verify needs a reason" in err
    assert not any(target.iterdir())


@pytest.mark.alone   # NOT RUN (exit 3) needs the other criteria to pass: no stall, the time covered, measured here
def test_no_verify_prints_its_reason_and_the_criterion_is_not_run(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    process = start(target, tmp_path / "r1", 4, "--no-verify", "the array scrubs itself", json_out=False)
    out, err = process.communicate(timeout=300)
    assert "data NOT verified: the array scrubs itself" in out and process.returncode == 3, out + err[-2000:]
    result = json.loads((tmp_path / "r1" / "results.json").read_text())
    check = {c["name"]: c for c in result["verdict"]["criteria"]}["data verified (mismatches)"]
    assert check["outcome"] == "not run" and check["detail"] == "not verified: the array scrubs itself"
    assert "verify=" not in (tmp_path / "r1" / "raw" / "soak.seg1.fio").read_text()
