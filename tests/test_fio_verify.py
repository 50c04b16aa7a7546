"""fio's verify failures parsed from real stderr (fio 3.33: verify.c verify_header / log_verify_failure)."""

from pathlib import Path

from hypothesis import given, strategies as st

from fxprobe.tools.fio import parse_fio_verify_errors

FIXTURES = Path(__file__).parent / "fixtures" / "fio-verify"


def test_header_and_checksum_failures_from_a_real_run():
    # captured: a 16 MiB file laid out with verify=crc32c, then one block zeroed, one block copied
    # from 4 MiB to 2400 KiB (misplaced), two bytes changed in a third; read back with verify
    found = parse_fio_verify_errors((FIXTURES / "file-read-3.33.stderr").read_text())
    assert [(m.field, m.offset, m.found, m.expected) for m in found] == [
        ("magic", 1048576, "0", "acca"),
        ("offset", 2457600, "4194304", "2457600"),
        ("data", 3276800, "a201efd7", "3a87b663"),
    ]
    assert found[2].method == "crc32c" and found[0].file == "g.img" and found[0].length == 4096
    assert found[1].text() == ("data mismatch at offset 2457600 of g.img (4096 B): header offset found 4194304, "
                               "expected 2457600")


def test_other_lines_are_ignored():
    text = ("fio: io_u error on file /dev/nvme1n1: Input/output error: read offset=4096, buflen=4096\n"
            "trim: verify failed at file f offset 0, length 4096, block offset 12\n")
    assert parse_fio_verify_errors(text) == []
    assert parse_fio_verify_errors("") == []


@given(st.text(max_size=400))
def test_any_text_parses_without_raising(text):
    for mismatch in parse_fio_verify_errors(text):
        assert mismatch.offset >= 0


def test_failures_captured_in_the_lab_below_md_parse():
    # captured: tests/test_lab_verify.py, zeros over 256 KiB at 1 MiB of a raid0 twin, written on a member
    found = parse_fio_verify_errors((FIXTURES / "lab-raid0-below-md-3.33.stderr").read_text())
    assert len(found) == 18 and all(m.field == "magic" and (m.found, m.expected) == ("0", "acca") for m in found)
    assert all(1048576 <= m.offset < 1048576 + 262144 and m.file.startswith("/dev/nvme") for m in found)


def test_interleaved_writes_of_several_jobs_are_paired_and_none_is_lost():
    # captured: 16 psync jobs reading a loop device with 16 KiB zeroed at 400 KiB (fio 3.33); each header
    # failure is two writes, and another job's write came between them three times here
    text = (FIXTURES / "loop-16-jobs-interleaved-3.33.stderr").read_text()
    assert text.count("wanted accaverify: bad") == 3
    found = parse_fio_verify_errors(text)
    assert len(found) == text.count(" at file ") == 12
    assert {(m.field, m.found, m.expected, m.offset, m.block_offset) for m in found} == {
        ("magic", "0", "acca", 409600, 393216)}


@given(st.lists(st.integers(min_value=0, max_value=3000), max_size=8))
def test_fed_in_pieces_it_finds_what_it_finds_in_one_go(cuts):
    from fxprobe.tools.fio import VerifyErrorParser
    text = "".join((FIXTURES / name).read_text() for name in
                   ("file-read-3.33.stderr", "loop-16-jobs-interleaved-3.33.stderr"))
    parser, found, last = VerifyErrorParser(), [], 0
    for cut in sorted(cuts) + [len(text)]:
        found += parser.feed(text[last:cut])
        last = max(last, cut)
    assert found + parser.finish() == parse_fio_verify_errors(text)
