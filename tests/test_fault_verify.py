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
    return parse_scenario('[fault]\nkind = "drive-pull"\nslot = 1\n[timing]\n[criteria]\n[load]\n' + load, "x.toml")


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


def test_raid0_offset_maps_to_the_member_below_md_from_md_sysfs():
    from fxprobe.tools.mdadm import parse_md_geometry
    text = "level raid0\nchunk 524288\nmember nvme21n1 1 2048\nmember nvme20n1 0 2048\nmember nvme22n1 none 0\n"
    geometry = parse_md_geometry(text)
    assert [m[1] for m in geometry.members] == ["nvme20n1", "nvme21n1"]     # by slot; a spare left out
    assert geometry.raid0_member_offset(0) == ("nvme20n1", 1 << 20)          # data offset 2048 sectors
    assert geometry.raid0_member_offset((1 << 20) + 4096) == ("nvme20n1", (1 << 20) + 512 * 1024 + 4096)
    assert geometry.raid0_member_offset(3 * 524288) == ("nvme21n1", (1 << 20) + 524288)
    with pytest.raises(ValueError, match="raid0 only"):
        parse_md_geometry("level raid6\nchunk 524288\n").raid0_member_offset(0)


def test_lab_corrupt_writes_zeros_on_the_member_that_holds_the_export_offset():
    from types import SimpleNamespace
    from fxprobe.faults import methods
    from fxprobe.faults.corrupt import LabCorrupt
    calls = []

    class FakeLab:
        name = "vfy"
        state = SimpleNamespace(export_named=lambda name: SimpleNamespace(backing="/dev/md126") if name == "twin" else None)

        def exec(self, guest, argv, **kwargs):
            calls.append((guest, argv))
            out = "level raid0\nchunk 524288\nmember nvme20n1 0 2048\nmember nvme21n1 1 2048\n" if argv[0] == "sh" else ""
            return SimpleNamespace(stdout=out)

    env = methods.Env(runner=None, lab=FakeLab(), export="twin")
    method = methods.choose(env, {"kind": "corrupt", "via": "auto", "array_offset": "1M", "length": "256k"})
    assert isinstance(method, LabCorrupt)
    record = method.restore_record()
    assert record == {"method": "lab-corrupt", "lab": "vfy", "device": "/dev/nvme20n1",
                      "offset": (1 << 20) + 524288, "length": 262144, "array_offset": 1 << 20}
    method.inject()
    assert calls[-1] == ("array", ["dd", "if=/dev/zero", "of=/dev/nvme20n1", "bs=4096", f"seek={((1 << 20) + 524288) // 4096}",
                                   "count=64", "oflag=direct", "conv=notrunc", "status=none"])
    assert "stay overwritten" in methods.restore_from_record(record, env)
    crossing = methods.choose(env, {"kind": "corrupt", "via": "dd", "array_offset": "768k", "length": "512k"})
    with pytest.raises(BadInput, match="multiple of the length|crosses a chunk"):
        crossing.restore_record()


# -- the read-back itself must read the region: unreadable blocks fail, a failed or missing pass is an ERROR ----
EIO = "fio: io_u error on file /dev/nvme0n1: Input/output error: read offset=0, buflen=4096\n"


def readback_json(io_bytes: int, total_err: int = 0) -> dict:
    return {"jobs": [{"jobname": "fault-readback", "error": 5 if total_err else 0, "total_err": total_err,
                      "read": {"io_bytes": io_bytes, "total_ios": io_bytes // 4096}}]}


def write_result(*backs: "verify.Pass", problems: tuple = ()) -> "verify.VerifyResult":
    plan = verify.plan_for(scenario('rw = "randwrite"\nregion = "32M"\n').load)
    load = verify.make_pass(verify.LOAD, {"jobs": [{"read": {"io_bytes": 32 << 20}}]}, "")
    return verify.VerifyResult(plan, (load, *backs), problems)


def test_an_honest_read_back_of_the_whole_region_passes_printing_read_against_region():
    item = verify.criterion(write_result(verify.make_pass("read-back after restore", readback_json(32 << 20), "")))
    assert item.outcome.value == "pass" and item.measured == 0
    assert item.detail.startswith("0 mismatches over 0.062 GiB")
    assert "unreadable blocks (read errors) 0; read-back after restore read 32 of 32 MiB (0 unreadable)" in item.detail


def test_a_read_back_that_could_not_read_the_region_fails_counting_and_naming_the_unreadable_blocks():
    # the reviewer's proof: total_err 8192, EIO, io_bytes 0 gave "pass | 0 | 0 mismatches over 0.031 GiB"
    item = verify.criterion(write_result(verify.make_pass("read-back after restore", readback_json(0, 8192), EIO)))
    assert item.outcome.value == "fail" and item.measured == 8192
    assert "unreadable blocks (read errors) 8192 (first: fio: io_u error on file /dev/nvme0n1: Input/output " \
           "error: read offset=0, buflen=4096)" in item.detail
    assert "read-back after restore read 0 of 32 MiB (8192 unreadable)" in item.detail


def test_a_read_back_without_a_result_or_short_of_the_region_or_missing_is_an_error_never_a_note():
    none = verify.make_pass("read-back after md resync", None, "fio: failed opening file /dev/nvme0n1: No such device\n")
    item = verify.criterion(write_result(verify.make_pass("read-back after restore", readback_json(32 << 20), ""),
                                         none))
    assert item.outcome.value == "error"
    assert "ERROR: read-back after md resync: no result: fio: failed opening file /dev/nvme0n1: No such device" \
        in item.detail
    short = verify.criterion(write_result(verify.make_pass("read-back after restore", readback_json(16 << 20), "")))
    assert short.outcome.value == "error" and f"read {16 << 20} of the {32 << 20} B region, no error counted" \
        in short.detail
    failed = verify.make_pass("read-back after restore", readback_json(32 << 20), "", failure="fio exited 1: oops")
    assert verify.criterion(write_result(failed)).outcome.value == "error"
    assert verify.criterion(write_result()).outcome.value == "error"                  # no read-back at all
    assert "no read-back after the restore" in verify.criterion(write_result()).detail
    resync = verify.criterion(write_result(verify.make_pass("read-back after restore", readback_json(32 << 20), ""),
                                           problems=("md still resyncing after 600 s: no read-back after the resync",)))
    assert resync.outcome.value == "error"


def test_a_corrupted_block_in_the_read_back_still_fails_and_the_verdict_word_of_an_error_is_error():
    from fxprobe.faults.analysis import verdict_word
    from fxprobe.faults.command import OUTCOME_OF_VERDICT
    bad = verify.make_pass("read-back after restore", readback_json(32 << 20, 3), STDERR)
    item = verify.criterion(write_result(bad))
    assert item.outcome.value == "fail" and item.measured == 3 and "(0 unreadable)" in item.detail
    assert verdict_word([item]) == "visible"
    error = verify.criterion(write_result())
    assert verdict_word([item, error]) == "error" and OUTCOME_OF_VERDICT["error"].value == "error"
