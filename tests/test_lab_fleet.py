"""Issue 17.2 in the lab: selftest over a fleet of two array guests, a pull in one, gate g1 naming it.

The second array is a small extra guest (4 drives, no links) booted into the session lab and stopped at the
end, so the session lab itself stays as it is."""

from __future__ import annotations

import json

import pytest

from fxprobe.lab.qemu import EMULATED_MODEL

from labcli import fx_here as fx

EMULATED = ("--emulated-drives", EMULATED_MODEL)     # QEMU's drives: 0 % spare, threshold 0 %

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel]   # no timing judged: on two labs at once

EXTRA = "array2"


@pytest.fixture
def two_arrays(lab):
    from fxprobe.lab.arrays import add_array, remove_array
    added = EXTRA not in lab.state.guests
    if added:
        add_array(lab, EXTRA, drives=4)
    yield lab
    if added:
        remove_array(lab, EXTRA)


def test_selftest_over_two_arrays_then_a_pull_in_one_fails_only_that_array_and_gate_g1(two_arrays, tmp_path):
    lab = two_arrays
    fleet = ["--nodes", f"array,{EXTRA}", "--lab", lab.name]
    code, inventory, err = fx(tmp_path, "--run-dir", str(tmp_path / "delivery"), "inventory", *fleet)
    assert code == 0, err
    assert [n["node"] for n in inventory["nodes"]] == ["array", EXTRA]
    assert (tmp_path / "delivery" / "nodes" / EXTRA / "commands.jsonl").is_file()
    code, both, err = fx(tmp_path, "--run-dir", str(tmp_path / "both"), "selftest", *fleet, *EMULATED,
                         "--expect-from", str(tmp_path / "delivery"))
    assert code == 0, (err, both and both["verdict"])
    assert {n["node"]: n["results"]["drives_recognized"] for n in both["nodes"]} == {"array": 24, EXTRA: 4}
    drive = next(d for d in lab.state.drives if d.array == EXTRA and d.position == 1)
    lab.drive_pull(drive.slot)
    try:
        code, pulled, err = fx(tmp_path, "--run-dir", str(tmp_path / "pulled"), "selftest", *fleet, *EMULATED,
                               "--expect-from", str(tmp_path / "delivery"))
    finally:
        lab.drive_restore(drive.slot)
    assert code == 1, err
    nodes = {n["node"]: n for n in pulled["nodes"]}
    assert nodes["array"]["outcome"] == "pass" and nodes[EXTRA]["outcome"] == "fail"
    sub = {c["name"]: c for c in nodes[EXTRA]["results"]["verdict"]["criteria"]}
    assert f"missing: slot 4 {drive.serial}" in sub["expected serials present"]["detail"]   # PCI slot 3 + 1
    # the small extra array's count; QEMU's drives account no spare (0 % with threshold 0 %), as in gates-lab.toml
    (tmp_path / "g.toml").write_text("[g1]\ndrives_expected = 4\nspare_unaccounted_max = 24\n")
    code, gate, err = fx(tmp_path, "gate", "g1", "--config", str(tmp_path / "g.toml"),
                         "--arrays", f"array,{EXTRA}", "--evidence", str(tmp_path / "pulled"))
    assert code == 1, err
    c = {x["name"]: x for x in gate["verdict"]["criteria"]}
    assert c[f"self-test passed [{EXTRA}]"]["outcome"] == "fail" and c["self-test passed [array]"]["outcome"] == "pass"
    assert c["every array self-tested"]["outcome"] == "pass"
    code, gate, err = fx(tmp_path, "gate", "g1", "--config", str(tmp_path / "g.toml"),
                         "--arrays", f"array,{EXTRA},array3", "--evidence", str(tmp_path / "both"))
    assert code == 3 and "no selftest of array3" in json.dumps(gate["verdict"])


def test_an_extra_array_whose_qemu_exits_is_named_with_its_exit_code_and_message(lab, monkeypatch):
    """add_array watches the QEMU it started through its own handle: one that exits at once (an option QEMU
    refuses) is reported with QEMU's exit code and last line, and remove_array forgets it."""
    from fxprobe.core.errors import ToolError
    from fxprobe.lab import arrays
    real = arrays.guest_argv
    monkeypatch.setattr(arrays, "guest_argv", lambda *a, **k: [*real(*a, **k), "-no-such-option"])
    name = "array3"
    assert name not in lab.state.guests
    try:
        with pytest.raises(ToolError, match=r"QEMU for guest array3 exited with code 1: .*no-such-option"):
            arrays.add_array(lab, name, drives=1)
    finally:
        arrays.remove_array(lab, name)
    assert name not in lab.state.guests and not [d for d in lab.state.drives if d.array == name]
