"""G1 judgement over drive records (the lab tests run it against real emulated drives)."""

import pytest
from hypothesis import given, strategies as st

from fxprobe.core.errors import BadInput
from fxprobe.host.selftest import Drive, Limits, evaluate, parse_expected_serials
from fxprobe.core.verdict import Outcome

SMART_OK = {"critical_warning": 0, "media_errors": 0, "avail_spare": 100, "spare_thresh": 10, "percent_used": 1}


def drive(i, **smart):
    return Drive(f"nvme{i}", f"SN{i:02d}", "QEMU NVMe Ctrl", "8.0.0", "pcie", "live", "nqn.x", {**SMART_OK, **smart})


def by_name(verdict):
    return {c.name: c for c in verdict.criteria}


def test_all_healthy_passes():
    assert evaluate([drive(i) for i in range(24)], Limits(24)).outcome is Outcome.PASS


def test_missing_drive_is_named_by_slot_and_serial():
    expected = parse_expected_serials("\n".join(f"{i} SN{i:02d}" for i in range(24)), "serials.txt")
    verdict = evaluate([drive(i) for i in range(24) if i != 7], Limits(24), expected)
    assert verdict.outcome is Outcome.FAIL
    c = by_name(verdict)
    assert c["drives recognized"].measured == 23
    assert "slot 7 SN07" in c["expected serials present"].detail


def test_critical_warning_names_the_drive_and_the_bit():
    verdict = evaluate([drive(i, critical_warning=0x4 if i == 3 else 0) for i in range(24)], Limits(24))
    c = by_name(verdict)["SMART critical_warning == 0"]
    assert c.outcome is Outcome.FAIL and "SN03" in c.detail and "reliability degraded" in c.detail


def test_emulated_zero_spare_is_not_judged_but_said():
    verdict = evaluate([drive(i, avail_spare=0, spare_thresh=0) for i in range(2)], Limits(2))
    spare = next(c for c in verdict.criteria if c.name.startswith("available spare"))
    assert spare.outcome is Outcome.PASS and "not judged" in spare.detail


def test_mixed_firmware_fails_unless_allowed():
    drives = [drive(0), Drive("nvme1", "SN01", "m", "9.9", "pcie", "live", "n", SMART_OK)]
    assert by_name(evaluate(drives, Limits(2)))["firmware versions agree"].outcome is Outcome.FAIL
    assert evaluate(drives, Limits(2, allow_mixed_firmware=True)).outcome is Outcome.PASS


@pytest.mark.parametrize("text", ["", "# only a comment\n", "1 2 3\n", "S1\nS1\n", "x" * 21, "bad\x01serial"])
def test_malformed_serial_lists_name_the_file(text):
    with pytest.raises(BadInput, match="serials.txt"):
        parse_expected_serials(text, "serials.txt")


@given(st.text(max_size=200))
def test_serial_parser_raises_only_bad_input(text):
    try:
        parse_expected_serials(text, "f")
    except BadInput:
        pass
