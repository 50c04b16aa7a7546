"""Issue 4 in the lab: G1 self-test, discover/connect/disconnect, inventory, preflight, bad input."""

from __future__ import annotations

import json

import pytest

from labcli import criteria, fx

pytestmark = pytest.mark.lab

SPARE_SLOT = 23        # outside the session's raid6 (slots 0-19): pulling it degrades nothing


def serial_file(lab) -> str:
    return "".join(f"{d.slot} {d.serial}\n" for d in lab.state.drives)


def test_selftest_passes_with_24_drives_and_names_a_pulled_one(lab):
    code, data, err = fx(lab, "array", "selftest", "--expect-drives", "24")
    assert code == 0, err
    assert data["drives_recognized"] == 24
    assert sorted(d["serial"] for d in data["drives"]) == sorted(d.serial for d in lab.state.drives)
    lab.exec("array", ["tee", "/tmp/serials.txt"], input=serial_file(lab), check=True)
    pulled = lab.drive_pull(SPARE_SLOT)
    try:
        code, data, err = fx(lab, "array", "selftest", "--expect-drives", "24", "--serials", "/tmp/serials.txt")
    finally:
        lab.drive_restore(SPARE_SLOT)
    assert code == 1, err
    c = criteria(data)
    assert c["drives recognized"]["measured"] == 23 and c["drives recognized"]["outcome"] == "fail"
    assert f"slot {SPARE_SLOT} {pulled['serial']}" in c["expected serials present"]["detail"]


def test_selftest_fails_naming_the_drive_with_a_smart_critical_warning(lab):
    """QEMU's NVMe model takes a SMART critical warning through QMP (qom-set smart_critical_warning)."""
    slot = 21
    path = f"/machine/peripheral/drive{slot}"
    with lab.qmp("array") as qmp:
        qmp.command("qom-set", path=path, property="smart_critical_warning", value=0x4)
    try:
        code, data, err = fx(lab, "array", "selftest", "--expect-drives", "24")
    finally:
        with lab.qmp("array") as qmp:
            qmp.command("qom-set", path=path, property="smart_critical_warning", value=0)
    assert code == 1, err
    warning = criteria(data)["SMART critical_warning == 0"]
    assert warning["outcome"] == "fail" and warning["measured"] == "23/24"
    assert lab.drive(slot).serial in warning["detail"] and "reliability degraded" in warning["detail"]


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
