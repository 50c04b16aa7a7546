"""G1 judgement over drive records (the lab tests run it against real emulated drives)."""

import pytest
from hypothesis import given, strategies as st

from fxprobe.core.errors import BadInput
from fxprobe.host.selftest import Drive, Limits, evaluate, parse_expected_serials
from fxprobe.core.verdict import Outcome

SMART_OK = {"critical_warning": 0, "media_errors": 0, "avail_spare": 100, "spare_thresh": 10, "percent_used": 1}
NS = ({"name": "nvme0n1", "size_bytes": 1 << 30, "read_only": False},)


def drive(i, **smart):
    return Drive(f"nvme{i}", f"SN{i:02d}", "QEMU NVMe Ctrl", "8.0.0", "pcie", "live", f"nqn.x:{i}",
                 {**SMART_OK, **smart}, namespaces=NS)


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


def test_zero_spare_with_threshold_zero_fails_unless_the_drives_are_named_emulated():
    """Review G1 item 4: 0 % spare with threshold 0 % was "not judged" on any drive; now it fails (no spare left,
    or no accounting) unless --emulated-drives names the model, and then the line says so."""
    drives = [drive(i, avail_spare=0, spare_thresh=0) for i in range(2)]
    spare = next(c for c in evaluate(drives, Limits(2)).criteria if c.name.startswith("available spare"))
    assert spare.outcome is Outcome.FAIL and spare.measured == "0/2 judged drives" and "SN01 (nvme1): spare 0 %" in spare.detail
    spare = next(c for c in evaluate(drives, Limits(2, emulated_model="QEMU NVMe Ctrl")).criteria
                 if c.name.startswith("available spare"))
    assert spare.outcome is Outcome.PASS and "2 drive(s) of model 'QEMU NVMe Ctrl' report 0 % with threshold 0 %: " \
        "emulated drives (--emulated-drives), their spare not judged" in spare.detail
    other = evaluate(drives, Limits(2, emulated_model="Other Model"))    # another model's name excuses nothing
    assert next(c for c in other.criteria if c.name.startswith("available spare")).outcome is Outcome.FAIL


def test_mixed_firmware_fails_unless_allowed():
    drives = [drive(0), Drive("nvme1", "SN01", "m", "9.9", "pcie", "live", "n", SMART_OK, namespaces=NS)]
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


# -- issue 18.6: slots from sysfs, natural order, the expected list from an earlier run ----------------------

import json
import os

from fxprobe.host.selftest import ExpectedDrive, natural_key, parse_expected_run, with_expected_slots


def test_drives_sort_naturally_by_slot():
    drives = [Drive(f"nvme{i}", f"S{i}", "m", "1", "pcie", "live", "n", SMART_OK, slot=f"S{i:d}") for i in (10, 2, 1)]
    assert [d.slot for d in with_expected_slots(drives, None)] == ["S1", "S2", "S10"]
    assert sorted(["S10", "S02", "S1", None], key=natural_key) == ["S1", "S02", "S10", None]


def _selftest_results(drives):
    return {"command": "selftest", "drives": [{"serial": s, "slot": slot} for s, slot in drives]}


def test_expected_from_a_selftest_run_names_the_missing_drive_by_slot_and_serial():
    expected = parse_expected_run(_selftest_results([(f"SN{i:02d}", str(3 + i)) for i in range(24)]), "r")
    assert expected[0] == ExpectedDrive("SN00", "3") and expected[-1] == ExpectedDrive("SN23", "26")
    verdict = evaluate([drive(i) for i in range(24) if i != 7], Limits(24), expected)
    assert "missing: slot 10 SN07" in by_name(verdict)["expected serials present"].detail


def test_expected_from_an_inventory_run_takes_its_pcie_drives_only():
    results = {"command": "inventory", "inventory": {"controllers": [
        {"serial": "A1", "slot": None, "pci_address": "0000:00:03.0", "transport": "pcie"},
        {"serial": "FABRIC", "slot": None, "transport": "tcp"}]}}
    assert parse_expected_run(results, "r") == [ExpectedDrive("A1", "0000:00:03.0")]


def test_expected_from_a_fleet_run_takes_the_node_s_drives():
    results = {"command": "selftest", "nodes": [{"node": "array2", "results": _selftest_results([("B1", "3")])}]}
    assert parse_expected_run(results, "r", "array2") == [ExpectedDrive("B1", "3")]
    with pytest.raises(BadInput, match="no node 'array'"):
        parse_expected_run(results, "r", "array")


@pytest.mark.parametrize("results, message", [
    ({"command": "run"}, "takes a selftest or inventory run"),
    ({"command": "selftest", "drives": []}, "lists no drives"),
    ({"command": "selftest", "drives": [{"serial": "A"}, {"serial": "A"}]}, "listed twice"),
    ({"command": "selftest", "drives": [{"serial": "x" * 30}]}, "not an NVMe serial"),
])
def test_expected_from_a_wrong_run_is_one_line(results, message):
    with pytest.raises(BadInput, match=message):
        parse_expected_run(results, "r/results.json")


def test_selftest_without_a_list_says_how_to_name_a_missing_drive():
    c = by_name(evaluate([drive(i) for i in range(23)], Limits(24)))["drives recognized"]
    assert c.outcome is Outcome.FAIL and "--expect-from RUNDIR" in c.detail


def test_pci_slot_of_a_controller_from_sysfs(tmp_path, monkeypatch):
    from fxprobe.core import sysfs
    from fxprobe.tools import nvme_sysfs
    ctrl = tmp_path / "sys/class/nvme/nvme0"
    ctrl.mkdir(parents=True)
    (ctrl / "serial").write_text("SN00\n")
    (ctrl / "transport").write_text("pcie\n")
    device = tmp_path / "sys/devices/pci0000:00/0000:00:03.0"
    device.mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:03.0", ctrl / "device")
    slot = tmp_path / "sys/bus/pci/slots/3"
    slot.mkdir(parents=True)
    (slot / "address").write_text("0000:00:03\n")
    monkeypatch.setattr(sysfs, "ROOT", tmp_path)
    (found,) = nvme_sysfs.controllers()
    assert (found.pci_address, found.slot) == ("0000:00:03.0", "3")


def test_selftest_cli_expect_from_refuses_a_folder_that_is_no_run(tmp_path, capsys):
    from fxprobe.cli.main import main
    runs = ["--runs", str(tmp_path / "runs")]
    assert main(runs + ["selftest", "--expect-from", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err
    (tmp_path / "results.json").write_text(json.dumps({"command": "run"}))
    assert main(runs + ["selftest", "--expect-from", str(tmp_path)]) == 2
    assert "takes a selftest or inventory run" in capsys.readouterr().err
