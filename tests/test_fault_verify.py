"""Verified data in a fault run: layout, load and read-back argv, the 'data verified' criterion."""

import json
from pathlib import Path

import pytest

from fxprobe.core.errors import BadInput
from fxprobe.faults import verify
from fxprobe.faults.engine import load_argv
from fxprobe.faults.scenario import parse_scenario

STDERR = (Path(__file__).parent / "fixtures" / "fio-verify" / "file-read-3.33.stderr").read_text()


def scenario(load: str = ""):
    return parse_scenario('[fault]\nkind = "drive-pull"\nslot = 1\n[load]\n' + load, "x.toml")


def test_read_load_is_confined_to_the_laid_out_region_and_verifies_every_read():
    s = scenario('region = "32M"\n')
    plan = verify.plan_for(s.load)
    assert plan.enabled and not plan.writes and plan.region_bytes == 32 * 2**20
    argv = load_argv(s, "/dev/nvme1n1", "/tmp/d")
    assert {f"--filesize={32 * 2**20}", "--verify=crc32c", "--verify_interval=4k"} <= set(argv)
    assert not any(a.startswith("--verify_backlog") for a in argv)
    layout = verify.layout_argv(plan, "/dev/nvme1n1")
    assert {"--rw=write", "--do_verify=0", "--verify=crc32c", "--verify_interval=4k", f"--size={32 * 2**20}",
            "--filename=/dev/nvme1n1"} <= set(layout)
    assert "offset in every 4k header" in " ".join(plan.lines())


def test_write_load_verifies_a_backlog_and_reads_the_region_back():
    plan = verify.plan_for(scenario('rw = "randwrite"\n').load)
    assert plan.writes
    assert f"--verify_backlog={verify.BACKLOG}" in verify.load_flags(plan)
    back = verify.readback_argv(plan, "/dev/x")
    assert "--rw=read" in back and "--bs=4k" in back and "--continue_on_error=all" in back


def test_opting_out_needs_a_reason_which_is_printed():
    with pytest.raises(BadInput, match="no_verify_reason"):
        scenario('verify = "off"\n')
    plan = verify.plan_for(scenario('verify = "off"\nno_verify_reason = "read-only production LUN"\n').load)
    assert not plan.enabled and verify.load_flags(plan) == []
    assert plan.lines() == ["data NOT verified: read-only production LUN"]
    item = verify.criterion(verify.VerifyResult(plan))
    assert item.outcome.value == "not run" and "read-only production LUN" in item.detail


def test_zero_mismatches_passes_with_the_bytes_verified():
    plan = verify.plan_for(scenario().load)
    load = {"jobs": [{"read": {"io_bytes": 3 * 2**29}}, {"read": {"io_bytes": 2**29}}]}
    result = verify.VerifyResult(plan, (verify.make_pass("load", load, "fio: some warning\n"),))
    item = verify.criterion(result)
    assert item.outcome.value == "pass" and item.measured == 0
    assert item.detail.startswith("0 mismatches over 2.000 GiB (fio verify=crc32c")
    assert json.dumps(result.to_dict())


def test_a_mismatch_fails_and_names_offset_found_and_expected():
    plan = verify.plan_for(scenario().load)
    result = verify.VerifyResult(plan, (verify.make_pass("load", {"jobs": [{"read": {"io_bytes": 4096}}]}, STDERR),))
    item = verify.criterion(result)
    assert item.outcome.value == "fail" and item.measured == 3
    assert item.detail.startswith("data mismatch at offset 1048576 of g.img (4096 B): header magic found 0, "
                                  "expected acca; data mismatch at offset 2457600")


def test_the_load_goes_over_the_region_pass_after_pass_and_a_load_that_ran_out_is_an_error():
    s = scenario('region = "8M"\n')
    plan = verify.plan_for(s.load)
    argv = load_argv(s, "/dev/nvme1n1", "/tmp/d")
    filename = next(a for a in argv if a.startswith("--filename="))
    assert filename == "--filename=" + ":".join(["/dev/nvme1n1"] * verify.PASSES)
    assert {f"--filesize={8 * 2**20}", f"--size={8 * 2**20 * verify.PASSES}",
            "--file_service_type=sequential"} <= set(argv)
    assert verify.ended_early(plan, 31_500, 32) is None
    assert "make load.region larger" in verify.ended_early(plan, 12_000, 32)


def test_layout_writes_large_blocks_that_end_at_the_region_and_a_ragged_region_is_refused():
    assert "--bs=4194304" in verify.layout_argv(verify.plan_for(scenario('region = "32M"\n').load), "/dev/x")
    assert "--bs=65536" in verify.layout_argv(verify.plan_for(scenario('region = "1088k"\n').load), "/dev/x")
    with pytest.raises(BadInput, match="load.region"):
        verify.plan_for(scenario('region = "10000"\n').load)
