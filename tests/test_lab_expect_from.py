"""Issue 18.6 in the lab: selftest names a pulled drive by slot and serial from an earlier run, no hand-written list."""

from __future__ import annotations

import pytest

from fxprobe.host.selftest import ExpectedDrive, natural_key, parse_expected_run
from labcli import criteria, fx

pytestmark = pytest.mark.lab

SPARE_SLOT = 23        # outside the session's raid6 (slots 0-19): pulling it degrades nothing


def test_expect_from_an_earlier_selftest_names_the_pulled_drive_by_slot_and_serial(lab):
    code, before, err = fx(lab, "array", "selftest", "--expect-drives", "24")
    assert code == 0, err
    slots = [d["slot"] for d in before["drives"]]
    assert None not in slots and slots == sorted(slots, key=natural_key)
    # QEMU's root-bus hotplug slots: lab slot N sits in PCI slot N + 3 (acpiphp names it)
    by_serial = {d["serial"]: d["slot"] for d in before["drives"]}
    assert by_serial[lab.drive(0).serial] == "3" and by_serial[lab.drive(SPARE_SLOT).serial] == str(SPARE_SLOT + 3)
    code, inventory, err = fx(lab, "array", "inventory", "--no-smart")     # the other delivery-inspection source
    assert code == 0, err
    assert parse_expected_run(inventory, "inventory") == [ExpectedDrive(s, by_serial[s]) for s in
                                                          sorted(by_serial, key=lambda s: natural_key(by_serial[s]))]
    pulled = lab.drive_pull(SPARE_SLOT)
    try:
        code, data, err = fx(lab, "array", "selftest", "--expect-from", before["run_dir"])
    finally:
        lab.drive_restore(SPARE_SLOT)
    assert code == 1, err
    c = criteria(data)
    assert c["drives recognized"]["measured"] == 23 and c["drives recognized"]["threshold"] == 24   # the list's count
    assert f"missing: slot {SPARE_SLOT + 3} {pulled['serial']}" in c["expected serials present"]["detail"]
