"""Verified data in a soak (issue 14 Build 1): the plan per profile, the job files, fio's verify failures read
from its stderr, the records and the criterion - no fio run here (tests/test_soak_verify_host.py runs fio)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fxprobe import soak
from fxprobe.core.errors import BadInput
from fxprobe.core.verdict import Outcome
from fxprobe.soak import verify as soak_verify
from fxprobe.soak.records import as_record
from fxprobe.workload.jobfile import Target
from fxprobe.workload.profiles import derive, load_profile

FIXTURES = Path(__file__).parent / "fixtures" / "fio-verify"
DIR, DEV = Target("/mnt/kv", False), Target("/dev/nvme1n1", True)


def d_of(name: str, **overrides):
    return derive(load_profile(name), max_bytes=64 << 20, overrides=overrides)


def options(text: str) -> dict:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith(";"))


def test_a_read_profile_is_laid_out_with_headers_checked_on_every_read_and_read_back_whole():
    d = d_of("small-file-dataset")
    plan = soak_verify.plan_for(d, DIR)
    assert (plan.method, plan.interval, plan.layout, plan.readback) == ("crc32c", 4096, True, True)
    layout = options(soak_verify.layout_job(d, DIR, plan, "unused"))
    assert (layout["rw"], layout["verify"], layout["verify_interval"], layout["do_verify"]) == (
        "write", "crc32c", "4096", "0")
    load = options(soak_verify.measure_job(d, DIR, plan))
    assert (load["rw"], load["verify"], load["continue_on_error"], load["ioengine"]) == (
        "randread", "crc32c", "all", "psync")
    assert "verify_backlog" not in load and load["time_based"] == "1"
    back = options(soak_verify.readback_job(d, DIR, plan))
    assert (back["rw"], back["verify"], back["continue_on_error"]) == ("read", "crc32c", "all")
    assert back["size"] == layout["size"] and back["bs"] == layout["bs"]      # the laid-out set, once


def test_reads_after_a_header_are_laid_out_from_that_offset_so_the_headers_sit_where_reads_begin():
    d = d_of("qwen3-coder-480b-tp8-readback")          # fs:// backend: each read starts 28 B into its file
    assert d.offset == 28
    plan = soak_verify.plan_for(d, DIR)
    layout = options(soak_verify.layout_job(d, DIR, plan, "unused"))
    load = options(soak_verify.measure_job(d, DIR, plan))
    assert layout["offset"] == load["offset"] == "28" and layout["bs"] == load["bs"] == str(d.block_size)
    assert int(layout["size"]) == d.files_per_job * (d.file_size - 28)
    assert d.block_size % plan.interval == 0


def test_write_profiles_verify_a_backlog_and_only_a_block_region_is_read_back():
    d = d_of("kv-writeback-prefill")
    on_dir = soak_verify.plan_for(d, DIR)
    assert (on_dir.layout, on_dir.readback) == (False, False) and "unlinks them" in on_dir.reason
    assert soak_verify.layout_job(d, DIR, on_dir, None) is None
    load = options(soak_verify.measure_job(d, DIR, on_dir))
    assert int(load["verify_backlog"]) == on_dir.backlog >= 1
    assert on_dir.backlog * d.block_size <= soak_verify.BACKLOG_BYTES or on_dir.backlog == 1
    block = d_of("kv-writeback-prefill", backend="block")
    on_dev = soak_verify.plan_for(block, DEV)
    assert (on_dev.layout, on_dev.readback) == (True, True) and "own part of the region" in on_dev.reason
    for text in (soak_verify.layout_job(block, DEV, on_dev, None), soak_verify.measure_job(block, DEV, on_dev),
                 soak_verify.readback_job(block, DEV, on_dev)):
        got = options(text)           # writers sharing blocks would overwrite each other's headers
        assert got["offset_increment"] == got["size"] and int(got["size"]) % block.block_size == 0
        assert got["numjobs"] == str(block.jobs)


def test_an_async_verifying_read_load_is_refused_with_what_to_do():
    d = d_of("qwen25-32b-cold-restore", backend="block", iodepth=8)
    with pytest.raises(BadInput) as refused:
        soak_verify.plan_for(d, DEV)
    assert "after one pass" in str(refused.value) and "--set iodepth=1" in refused.value.hint
    assert not soak_verify.plan_for(d, DEV, "the array's own scrub covers it").enabled


def test_opting_out_takes_a_reason_which_is_printed_and_leaves_the_criterion_not_run(tmp_path):
    profile = tmp_path / "p.toml"
    profile.write_text('kind = "small-files"\n[verify]\nmethod = "off"\n')
    with pytest.raises(BadInput, match="no_verify_reason is required"):
        load_profile(str(profile))
    profile.write_text('kind = "small-files"\n[verify]\nmethod = "off"\nno_verify_reason = "read-only snapshot"\n')
    plan = soak_verify.plan_for(derive(load_profile(str(profile)), max_bytes=16 << 20), DIR)
    assert plan.lines("/mnt/kv") == ["data NOT verified: read-only snapshot"]
    assert "verify=" not in soak_verify.measure_job(derive(load_profile(str(profile)), max_bytes=16 << 20), DIR, plan)
    check = soak_verify.criterion(plan.to_dict(), 0, 0, 0, [], [])
    assert check.outcome is Outcome.NOT_RUN and check.detail == "not verified: read-only snapshot"


def test_the_stderr_tail_counts_every_failure_and_keeps_the_first_blocks(tmp_path):
    path = tmp_path / "fio.stderr"
    text = (FIXTURES / "loop-16-jobs-interleaved-3.33.stderr").read_text()
    tail = soak_verify.StderrTail(path)
    assert tail.poll() == 0                                  # no file yet
    path.write_text(text[:700])
    first = tail.poll()
    with open(path, "a") as handle:
        handle.write(text[700:])
    assert first < tail.finish().bad_reads == 12
    record = tail.record(1.0, "t", "load", 4096, seg=2)
    assert (record["mismatches"], record["bad_blocks"], record["seg"]) == (12, 1, 2)
    assert record["shown"][0]["offset"] == 409600 and as_record(record).type == "verify"


def records_with(verify_records: list[dict], samples: list[dict] | None = None, end: bool = True) -> list[dict]:
    plan = soak_verify.plan_for(d_of("small-file-dataset"), DIR).to_dict()
    out = [{"type": "start", "ts": 0.0, "profile": "p", "target": "/mnt/kv", "planned_s": 2, "stall_s": 5,
            "sample_s": 1, "verify": plan},
           {"type": "segment", "seg": 1, "ts": 0.0}, {"type": "segment", "seg": 2, "ts": 10.0}]
    out += samples or [{"type": "sample", "seg": 1, "ts": 1.0, "io_bytes": 10, "ios": 1, "errors": 0,
                        "verified": 8 << 30, "mismatches": 0}]
    return out + verify_records + ([{"type": "end", "ts": 20.0}] if end else [])


def mismatch(offset: int) -> dict:
    return {"file": "/mnt/kv/kv.0.3", "offset": offset, "length": 4096, "block_offset": 0, "block_length": 163840,
            "field": "magic", "found": "0", "expected": "acca", "method": ""}


def test_a_mismatch_fails_the_soak_naming_the_offset_found_and_expected():
    records = records_with([
        {"type": "verify", "seg": 1, "ts": 2.0, "source": "load", "verified_bytes": 8 << 30, "mismatches": 7,
         "bad_blocks": 2, "shown": [mismatch(8192), mismatch(12288)]},
        {"type": "verify", "ts": 21.0, "source": "read-back after the load", "verified_bytes": 1 << 30,
         "mismatches": 2, "bad_blocks": 2, "shown": [mismatch(8192), mismatch(12288)]}])
    summary = soak.summarize(records)
    assert (summary.verified_bytes, summary.mismatches, summary.bad_blocks) == (9 << 30, 9, 2)
    check = {c.name: c for c in summary.verdict().criteria}["data verified (mismatches)"]
    assert check.outcome is Outcome.FAIL and check.measured == 9
    assert check.detail.startswith("data mismatch at offset 8192 of /mnt/kv/kv.0.3 (4096 B): header magic found 0, "
                                   "expected acca; data mismatch at offset 12288")
    assert "9 bad reads of 2 blocks in bytes 8192..16383; over 9.000 GiB" in check.detail
    assert any(line.startswith("  data verified: data mismatch at offset 8192") for line in summary.lines())


def test_a_segment_without_its_verify_record_counts_its_last_sample_and_zero_verified_is_not_a_pass():
    summary = soak.summarize(records_with([], end=False))  # fxprobe killed, never resumed: no verify record
    assert (summary.verified_bytes, summary.mismatches) == (8 << 30, 0)
    check = summary.verify_criterion()
    assert check.outcome is Outcome.PASS and check.detail.startswith("0 mismatches over 8.000 GiB (fio verify=crc32c")
    nothing = soak.summarize(records_with([], end=False, samples=[{"type": "sample", "seg": 1, "ts": 1.0, "io_bytes": 10,
                                                        "ios": 1, "errors": 0, "verified": 0, "mismatches": 0}]))
    assert nothing.verify_criterion().outcome is Outcome.NOT_RUN
    assert "nothing was read back and checked" in nothing.verify_criterion().detail


def test_records_of_a_soak_without_verification_leave_the_criterion_not_run():
    records = records_with([])
    del records[0]["verify"]
    check = soak.summarize(records).verify_criterion()
    assert check.outcome is Outcome.NOT_RUN and "carry no verification" in check.detail


def test_verify_failures_are_mismatches_not_io_errors():
    monitor = soak.Monitor(5.0, verifying=True)
    monitor.new_segment(1, 100.0)
    point = soak.StatusPoint(101.0, 4096 * 10, 10, errors=3, job_error=84, read_bytes=4096 * 10)
    records = monitor.observe(point, 101.0, mismatches=3)
    assert records[0]["errors"] == 0 and records[0]["verified"] == 4096 * 10 and records[0]["mismatches"] == 3
    assert not [r for r in records if r.get("kind") == "io-error"]
    later = monitor.observe(soak.StatusPoint(102.0, 4096 * 20, 20, errors=5, job_error=5, read_bytes=4096 * 20),
                            102.0, mismatches=3)
    assert [r["kind"] for r in later if r["type"] == "interruption"] == ["io-error"]    # two real I/O errors


# -- the read-back pass after the soak: unreadable blocks fail it; no result, fio failing or no record: ERROR ---
def readback(**figures) -> dict:
    return {"type": "verify", "ts": 21.0, "source": "read-back after the load", "verified_bytes": 1 << 30,
            "mismatches": 0, "expected_bytes": 1 << 30, **figures}


def test_the_read_back_passes_only_over_the_whole_working_set_with_no_unreadable_block():
    plan = soak_verify.plan_for(d_of("qwen25-32b-cold-restore"), DEV).to_dict()
    def check(*verify_records, end=True):
        records = records_with(list(verify_records), end=end)
        records[0]["verify"] = plan
        return soak.summarize(records).verify_criterion()
    honest = check(readback())
    assert honest.outcome is Outcome.PASS and "unreadable blocks (read errors) 0; the read-back read 1024 of 1024 " \
                                              "MiB" in honest.detail
    eio = check(readback(verified_bytes=0, unreadable=8192))
    assert eio.outcome is Outcome.FAIL and eio.measured == 8192 and "unreadable blocks (read errors) 8192" in eio.detail
    exited = check(readback(problem="the read-back pass failed: fio exited 1"))
    assert exited.outcome is Outcome.ERROR and "ERROR: the read-back pass failed: fio exited 1" in exited.detail
    missing = check()
    assert missing.outcome is Outcome.ERROR and "the read-back pass after the load left no record" in missing.detail
    assert check(end=False).outcome is Outcome.PASS       # killed before its read-back: the soak is not finished


def test_the_read_back_figures_come_from_fio_s_json_its_errors_and_the_job_file():
    job = soak_verify.readback_job(d_of("qwen25-32b-cold-restore"), DEV, soak_verify.plan_for(d_of("qwen25-32b-cold-restore"),
                                                                                         DEV))
    expected = soak_verify.job_bytes(job)
    assert expected == int(options(job)["size"]) * int(options(job)["numjobs"]) > 0
    doc = '{"jobs": [{"jobname": "r", "error": 5, "total_err": 10, "read": {"io_bytes": 0}}]}'
    assert soak_verify.readback_outcome(doc, "", None, 2, expected) == {
        "verified_bytes": 0, "expected_bytes": expected, "unreadable": 8}
    none = soak_verify.readback_outcome("", "fio: failed opening file: No such device\n", "fio exited 1", 0, expected)
    assert none["problem"] == "the read-back pass gave no result: fio exited 1"
    whole = f'{{"jobs": [{{"jobname": "r", "error": 0, "total_err": 0, "read": {{"io_bytes": {expected}}}}}]}}'
    assert "problem" not in soak_verify.readback_outcome(whole, "", None, 0, expected)
    assert soak_verify.readback_outcome(whole, "", "fio exited 1", 0, expected)["problem"].endswith("fio exited 1")
    half = whole.replace(str(expected), str(expected // 2))
    assert "no error counted" in soak_verify.readback_outcome(half, "", None, 0, expected)["problem"]
