"""Issue 4 in the lab: G1 self-test (with issue 18.6's --expect-from), discover/connect/disconnect, inventory,
preflight, bad input."""

from __future__ import annotations

import json

import pytest

from fxprobe.lab.qemu import EMULATED_MODEL

from fxprobe.host.selftest import ExpectedDrive, natural_key, parse_expected_run
from labcli import criteria, fx

EMULATED = ("--emulated-drives", EMULATED_MODEL)     # QEMU's drives: 0 % spare, threshold 0 %

pytestmark = [pytest.mark.lab, pytest.mark.lab_parallel]   # no timing judged: on two labs at once

SPARE_SLOT = 23        # outside the session's raid6 (slots 0-19): pulling it degrades nothing
SMART_SLOT = 21        # likewise free: its SMART warning degrades nothing either


def serial_file(lab) -> str:
    return "".join(f"{d.slot} {d.serial}\n" for d in lab.state.drives)


def test_selftest_passes_then_names_a_pulled_drive_by_slot_and_serial_and_a_smart_critical_warning(lab):
    """G1 in the array guest: 24/24 PASS, every drive named by PCI slot in natural order; then two planted faults
    at once - slot 23 pulled, and a SMART critical warning on slot 21 (QEMU's NVMe model takes it through QMP
    qom-set) - and each failing criterion names its own drive: the pull by slot and serial from the earlier run
    (--expect-from, no hand-written list; issue 18.6), and again from a hand-written --serials list."""
    code, before, err = fx(lab, "array", "selftest", "--expect-drives", "24", *EMULATED)
    assert code == 0, err
    assert before["drives_recognized"] == 24 and before["sysfs_root"] == "/" and before["not_counted"] == []
    spare = criteria(before)["available spare >= max(threshold, 10 %)"]      # QEMU: 0 % with threshold 0 %, said
    assert "24 drive(s) of model 'QEMU NVMe Ctrl' report 0 % with threshold 0 %: emulated" in spare["detail"]
    assert criteria(before)["nvme-cli agrees with sysfs"]["measured"] == "24/24"
    assert sorted(d["serial"] for d in before["drives"]) == sorted(d.serial for d in lab.state.drives)
    slots = [d["slot"] for d in before["drives"]]
    assert None not in slots and slots == sorted(slots, key=natural_key)
    # QEMU's root-bus hotplug slots: lab slot N sits in PCI slot N + 3 (acpiphp names it)
    by_serial = {d["serial"]: d["slot"] for d in before["drives"]}
    assert by_serial[lab.drive(0).serial] == "3" and by_serial[lab.drive(SPARE_SLOT).serial] == str(SPARE_SLOT + 3)
    lab.exec("array", ["tee", "/tmp/serials.txt"], input=serial_file(lab), check=True)
    warned = f"/machine/peripheral/drive{SMART_SLOT}"
    pulled = lab.drive_pull(SPARE_SLOT)
    try:
        with lab.qmp("array") as qmp:
            qmp.command("qom-set", path=warned, property="smart_critical_warning", value=0x4)
        code, expect_from, err = fx(lab, "array", "selftest", "--expect-from", before["run_dir"], *EMULATED)
        assert code == 1, err
        code, hand_list, err = fx(lab, "array", "selftest", "--expect-drives", "24", "--serials", "/tmp/serials.txt",
                                    *EMULATED)
        assert code == 1, err
    finally:
        with lab.qmp("array") as qmp:
            qmp.command("qom-set", path=warned, property="smart_critical_warning", value=0)
        lab.drive_restore(SPARE_SLOT)
    c = criteria(expect_from)
    assert c["drives recognized"]["measured"] == 23 and c["drives recognized"]["threshold"] == 24   # the list's count
    assert c["drives recognized"]["outcome"] == "fail"
    assert f"missing: slot {SPARE_SLOT + 3} {pulled['serial']}" in c["expected serials present"]["detail"]
    warning = c["SMART critical_warning == 0"]
    assert warning["outcome"] == "fail" and warning["measured"] == "22/23"
    assert lab.drive(SMART_SLOT).serial in warning["detail"] and "reliability degraded" in warning["detail"]
    c = criteria(hand_list)
    assert c["drives recognized"]["measured"] == 23 and c["drives recognized"]["outcome"] == "fail"
    assert f"slot {SPARE_SLOT} {pulled['serial']}" in c["expected serials present"]["detail"]   # the list's slot names
    assert c["SMART critical_warning == 0"]["outcome"] == "fail"


def test_inventory_gives_the_same_expected_list_as_a_selftest(lab):
    """The other delivery-inspection source for --expect-from: an inventory run's drives and slots."""
    by_serial = {d.serial: str(d.slot + 3) for d in lab.state.drives if d.array == "array"}   # PCI slot = lab slot + 3
    code, inventory, err = fx(lab, "array", "inventory", "--no-smart")
    assert code == 0, err
    assert parse_expected_run(inventory, "inventory") == [ExpectedDrive(s, by_serial[s]) for s in
                                                          sorted(by_serial, key=lambda s: natural_key(by_serial[s]))]


def _host2_paths(lab, nqn):
    return lab.live_paths("host2", nqn)


@pytest.mark.parametrize("transport", ["tcp", "rdma"])
def test_discover_connect_two_links_then_disconnect(lab, transport):
    nqn = lab.spec.subsystem_nqn
    addresses = [link.array_ip for link in lab.links("host2")]
    code, _, err = fx(lab, "host2", "disconnect", "--nqn", nqn)
    assert code == 0, err
    try:
        assert _host2_paths(lab, nqn) == []
        code, data, err = fx(lab, "host2", "discover", "-t", transport, "-a", addresses[0])
        assert code == 0, err
        offered = {(r["subnqn"], r["trtype"]) for r in data["discovery"]["records"]}
        assert (nqn, transport) in offered
        argv = ["connect", "-t", transport, "--nqn", nqn, "--fast-io-fail-tmo", "5"]
        for address in addresses:
            argv += ["-a", address]
        code, data, err = fx(lab, "host2", *argv)
        assert code == 0, err
        assert sorted(p["traddr"] for p in data["connected"]) == sorted(addresses)
        live = lab.wait_paths("host2", nqn, 2)
        assert {p.transport for p in live} == {transport}
        code, data, err = fx(lab, "host2", "inventory", "--no-smart")
        assert code == 0, err
        ours = [c for c in data["inventory"]["controllers"] if c["subsysnqn"] == nqn]
        assert len(ours) == 2 and all(c["state"] == "live" and c["transport"] == transport for c in ours)
        assert all(c["timeouts"]["fast_io_fail_tmo"] == "5" for c in ours)
        assert [p["ana_state"] for c in ours for p in c["paths"]] == ["optimized", "optimized"]
        code, data, err = fx(lab, "host2", "disconnect", "--nqn", nqn)
        assert code == 0 and data["disconnected"] == 2, err
        assert _host2_paths(lab, nqn) == []
    finally:
        if not _host2_paths(lab, nqn):   # the session lab expects host2 on NVMe/TCP over both links
            for address in addresses:
                lab.exec("host2", ["nvme", "connect", "-t", "tcp", "-a", address, "-s", "4420", "-n", nqn],
                         timeout=60)
            lab.wait_paths("host2", nqn, 2)


def test_inventory_agrees_with_nvme_list_verbose(lab):
    code, data, err = fx(lab, "host1", "inventory")
    assert code == 0, err
    assert data["inventory"]["disagreements"] == []
    raw = json.loads(lab.exec("host1", ["nvme", "list", "-v", "-o", "json"], check=True).stdout)
    cli_ctrls = {c["Controller"]: c for d in raw["Devices"] for s in d["Subsystems"] for c in s["Controllers"]}
    inv_ctrls = {c["name"]: c for c in data["inventory"]["controllers"]}
    assert set(cli_ctrls) == set(inv_ctrls) and len(inv_ctrls) >= 2
    for name, c in cli_ctrls.items():
        assert inv_ctrls[name]["serial"].strip() == c["SerialNumber"].strip()
        assert inv_ctrls[name]["transport"] == c["Transport"] and inv_ctrls[name]["address"] == c["Address"]
    cli_ns = {n["NameSpace"] for d in raw["Devices"] for s in d["Subsystems"] for n in s["Namespaces"]}
    assert cli_ns == {n["name"] for n in data["inventory"]["namespaces"]}


def test_preflight_in_a_guest_fills_or_explains_every_item(lab):
    from test_preflight import EXPECTED
    code, data, err = fx(lab, "host1", "preflight", "--iface", "l1", "--iface", "l2")
    assert code == 0, err
    env = json.loads(lab.exec("host1", ["cat", data["run_dir"] + "/environment.json"], check=True).stdout)
    missing = {m["item"] for m in env["missing"]}
    assert EXPECTED <= set(env["items"]) | missing
    assert env["items"]["rdma_devices"] and env["items"]["nvme_controllers"]
    assert {n["name"] for n in env["items"]["nics"]} == {"l1", "l2"}
    # the guest's own dpkg judges the tools it runs (the host's Debian userland): packaged, unchanged, no warning
    origins = env["items"]["tool_origins"]
    assert {origins[t]["state"] for t in ("fio", "nvme-cli", "perftest", "iproute2")} == {"packaged, unchanged"}, origins
    assert (origins["fio"]["package"], origins["iproute2"]["package"]) == ("fio", "iproute2")
    assert not [w for w in env["warnings"] if w["knob"] == "tool_origin"]


def test_bad_input_leaves_nothing_half_connected(lab):
    nqn = lab.spec.subsystem_nqn
    before = _host2_paths(lab, nqn)
    nobody = lab.links("host2")[0].array_ip.rsplit(".", 1)[0] + ".77"   # on the lab's own link, no one there
    code, _, err = fx(lab, "host2", "connect", "-t", "tcp", "-a", nobody, "--nqn", nqn, timeout=400)
    assert code == 4 and nobody in err and err.strip().count("\n") == 0
    good = lab.links("host2")[0].array_ip
    code, _, err = fx(lab, "host2", "connect", "-t", "tcp", "-a", good, "--nqn", "nqn.2026-12.io.fxprobe:nope")
    assert code == 2 and "nqn.2026-12.io.fxprobe:nope" in err
    code, _, err = fx(lab, "array", "selftest", "--expect-drives", "0")
    assert code == 2 and "--expect-drives" in err
    lab.exec("array", ["tee", "/tmp/bad-serials.txt"], input="1 FX01 extra\n", check=True)
    code, _, err = fx(lab, "array", "selftest", "--serials", "/tmp/bad-serials.txt")
    assert code == 2 and "/tmp/bad-serials.txt:1" in err
    assert _host2_paths(lab, nqn) == before
