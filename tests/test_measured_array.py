"""G2-G4 evidence is tied to one array and one period (fxprobe.gates.measured_array): a vendor cannot bring G2's
stress test from a golden unit, G4's soak from another array or last year's run and pass. Each bent case FAILs
(or is NOT RUN) naming the run and what it measured; its honest twin passes."""

from __future__ import annotations

import json
from pathlib import Path

from gate_helpers import ARRAY_NQN, ARRAY_PORTS, array_seen, fake_run, fxprobe, produced_multi_node, rewritten
from fxprobe.core.verdict import Outcome
from fxprobe.gates import GATES, Evidence
from fxprobe.gates.config import parse_config
from fxprobe.gates.measured_array import NAME
from fxprobe.tools.blockdev import SystemView

GOLDEN = "nqn.2026-12.com.vendor:golden-unit"


def array_rows(gate: str, paths: list[Path], gates_toml: str = "") -> list:
    verdict = GATES[gate].evaluate(Evidence.from_paths(paths), parse_config(gates_toml, "gates.toml"))
    return [c for c in verdict.criteria if c.name.startswith(NAME)]


def line_efficiency(base: Path, peer: str) -> Path:
    return fake_run(base, "line-efficiency", {"summary": {"line_efficiency": 0.9, "mean_bps": 90e9},
                                              "port_speed_bps": 100e9, "array_seen": [{"addresses": [peer]}]})


def soak(base: Path, nqn: str = ARRAY_NQN, ports: list[str] = ARRAY_PORTS) -> Path:
    return fake_run(base, "soak", {"duration_s": 72 * 3600.0, "interruptions": [], "stall_s": 5.0,
                                   "array_seen": array_seen("soak", nqn, ports)})


def test_without_a_named_array_the_runs_must_agree_on_one_and_the_criterion_says_it_was_not_named(tmp_path):
    honest = [line_efficiency(tmp_path, ARRAY_PORTS[0]), soak(tmp_path)]
    (g2,) = array_rows("g2", honest)
    (g4,) = array_rows("g4", honest)
    assert g2.outcome is g4.outcome is Outcome.PASS
    assert g4.measured == f"{ARRAY_NQN} (serial FXLABTEST, tcp) at 10.1.0.1, 10.2.0.1"
    assert g4.threshold == f"one array across the evidence ({ARRAY_NQN} at port 10.1.0.1, 10.2.0.1)"
    assert "not named in gates.toml [array]" in g4.detail and "no acceptance period named" in g4.detail
    # G2's stress test against a golden unit: its peer is none of the array's paths
    (bent,) = array_rows("g2", [line_efficiency(tmp_path, "10.9.9.9"), soak(tmp_path)])
    assert bent.outcome is Outcome.FAIL and "the evidence measured 2 arrays: " in bent.detail
    assert f"{ARRAY_NQN} at port 10.1.0.1, 10.2.0.1 (" in bent.detail and "port 10.9.9.9 (" in bent.detail
    # a soak of another array beside this one: both arrays named, with their runs
    (ours, golden) = array_rows("g4", [soak(tmp_path), soak(tmp_path, GOLDEN, ["10.9.9.9"])])
    assert ours.outcome is golden.outcome is Outcome.FAIL
    assert "the evidence measured 2 arrays" in golden.detail and GOLDEN in golden.detail and ARRAY_NQN in golden.detail
    # another subsystem of the same array (a second volume on the same ports) is the same array
    (one, other_volume) = array_rows("g4", [soak(tmp_path), soak(tmp_path, ARRAY_NQN + "-vol2", ARRAY_PORTS)])
    assert one.outcome is other_volume.outcome is Outcome.PASS, other_volume.detail


def test_a_named_array_fails_every_run_of_another_nqn_or_port_and_passes_its_own(tmp_path):
    named = f'[array]\nname = "array 7"\nnqns = ["{ARRAY_NQN}"]\naddresses = {json.dumps(ARRAY_PORTS)}\n'
    (own,) = array_rows("g4", [soak(tmp_path)], named)
    assert own.outcome is Outcome.PASS and own.threshold.startswith("the array named in [array] (array 7: ")
    (golden,) = array_rows("g4", [soak(tmp_path, GOLDEN, ARRAY_PORTS)], named)
    assert golden.outcome is Outcome.FAIL and f"measured {GOLDEN}" in golden.detail and "not the array's NQN" in golden.detail
    (stray,) = array_rows("g4", [soak(tmp_path, ARRAY_NQN, ["10.1.0.1", "10.7.0.1"])], named)
    assert stray.outcome is Outcome.FAIL and "reached it at 10.7.0.1: not the array's ports" in stray.detail
    (peer,) = array_rows("g2", [line_efficiency(tmp_path, "10.9.9.9")], named)
    assert peer.outcome is Outcome.FAIL and "10.9.9.9" in peer.detail
    (nqn_only,) = array_rows("g2", [line_efficiency(tmp_path, ARRAY_PORTS[0])], f'[array]\nnqns = ["{ARRAY_NQN}"]\n')
    assert nqn_only.outcome is Outcome.FAIL and "name the array's ports in [array] addresses" in nqn_only.detail


def test_a_local_drive_a_directory_and_a_run_that_records_nothing_are_not_the_array(tmp_path):
    pcie = [{"node": "local", "target": "/dev/nvme0n1", "nqn": "nqn.2014.08.org.nvmexpress:1b36Fx1", "serial": "S1",
             "transport": "pcie", "addresses": ["0000:00:04.0"]}]
    directory = [{"node": "local", "target": "/mnt/scratch"}]
    rows = array_rows("g4", [fake_run(tmp_path, "soak", {"duration_s": 1, "array_seen": pcie}),
                             fake_run(tmp_path, "soak", {"duration_s": 1, "array_seen": directory}),
                             fake_run(tmp_path, "soak", {"duration_s": 1, "array_seen": None})])
    assert [c.outcome for c in rows] == [Outcome.FAIL, Outcome.FAIL, Outcome.NOT_RUN]
    assert "a local PCIe drive, not an NVMe-oF array" in rows[0].detail
    assert "no NVMe subsystem (/mnt/scratch): not an NVMe-oF array" in rows[1].detail
    assert "records no array_seen" in rows[2].detail


def test_a_run_started_outside_the_acceptance_period_fails_naming_its_day(tmp_path):
    period = "[array]\nperiod_from = 2026-12-01\nperiod_until = 2026-12-31\n"
    inside, old = soak(tmp_path), soak(tmp_path)
    results = json.loads((old / "results.json").read_text())
    rewritten(old, {**results, "started": "2025-11-30T10:00:00.000Z"})     # last year's run, its manifest remade
    assert [c.outcome for c in array_rows("g4", [inside], period)] == [Outcome.PASS]
    (late,) = array_rows("g4", [old], period)
    assert late.outcome is Outcome.FAIL
    assert "started 2025-11-30 (UTC): outside the acceptance period 2026-12-01 .. 2026-12-31" in late.detail


def test_g3_ties_each_node_of_the_read_back_and_gate_all_prints_the_array(tmp_path, capsys):
    nodes = produced_multi_node(2, 0.95)
    seen = [{**array_seen("run")[0], "node": "host1"}, {**array_seen("run", GOLDEN)[0], "node": "host2"}]
    run = fake_run(tmp_path, "run", {**nodes, "array_seen": seen})
    (row,) = array_rows("g3", [run], f'[array]\nnqns = ["{ARRAY_NQN}"]\n')
    assert row.outcome is Outcome.FAIL and row.detail.startswith(f"host2: measured {GOLDEN}")
    config = tmp_path / "gates.toml"
    config.write_text(f'[array]\nnqns = ["{ARRAY_NQN}"]\n')
    assert fxprobe(tmp_path, "gate", "g3", "--evidence", str(run), "--config", str(config)) == 1
    assert f"FAIL    {NAME} (multi-node read-back run): {ARRAY_NQN}" in capsys.readouterr().out


def test_the_subsystem_of_a_namespace_is_read_from_sysfs_with_and_without_multipath(tmp_path):
    def write(path: str, text: str) -> None:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    # native multipath: the head's device is the subsystem, its controllers are links in it (as a lab host has it)
    subsys = "sys/devices/virtual/nvme-subsystem/nvme-subsys0"
    write(f"{subsys}/subsysnqn", f"{ARRAY_NQN}\n")
    write(f"{subsys}/serial", "FXLABMAIN\n")
    for n, ip in enumerate(ARRAY_PORTS):
        write(f"sys/devices/virtual/nvme-fabrics/ctl/nvme{n}/address", f"traddr={ip},trsvcid=4420,src_addr=10.{n + 1}.0.2\n")
        write(f"sys/devices/virtual/nvme-fabrics/ctl/nvme{n}/transport", "tcp\n")
        (tmp_path / subsys / f"nvme{n}").symlink_to(tmp_path / f"sys/devices/virtual/nvme-fabrics/ctl/nvme{n}")
    (tmp_path / "sys/class/block/nvme0n1").mkdir(parents=True)
    (tmp_path / "sys/class/block/nvme0n1/device").symlink_to(tmp_path / subsys)
    # no multipath: the namespace's device is its one controller (a local PCIe drive here)
    write("sys/devices/pci0000:00/0000:00:04.0/nvme/nvme2/subsysnqn", "nqn.2014.08.org.nvmexpress:1b36Fx1\n")
    write("sys/devices/pci0000:00/0000:00:04.0/nvme/nvme2/address", "0000:00:04.0\n")
    write("sys/devices/pci0000:00/0000:00:04.0/nvme/nvme2/transport", "pcie\n")
    write("sys/devices/pci0000:00/0000:00:04.0/nvme/nvme2/serial", "S1\n")
    (tmp_path / "sys/class/block/nvme2n1").mkdir(parents=True)
    (tmp_path / "sys/class/block/nvme2n1/device").symlink_to(tmp_path / "sys/devices/pci0000:00/0000:00:04.0/nvme/nvme2")
    (tmp_path / "sys/class/block/loop0").mkdir(parents=True)
    view = SystemView(tmp_path)
    assert view.nvme_subsystem("nvme0n1") == {"nqn": ARRAY_NQN, "serial": "FXLABMAIN", "transport": "tcp",
                                               "addresses": ARRAY_PORTS}
    assert view.nvme_subsystem("nvme2n1") == {"nqn": "nqn.2014.08.org.nvmexpress:1b36Fx1", "serial": "S1",
                                               "transport": "pcie", "addresses": ["0000:00:04.0"]}
    assert view.nvme_subsystem("loop0") == {}


def test_the_report_says_which_array_and_period_its_decision_is_about(tmp_path):
    from fxprobe.report.build import build_report
    from gate_helpers import runs_of
    runs = [line_efficiency(tmp_path, ARRAY_PORTS[0]), soak(tmp_path)]
    evidence = [a for p in runs for a in ("--evidence", str(p))]
    fxprobe(tmp_path, "gate", "all", *evidence)
    (head,) = build_report([*runs, runs_of(tmp_path, "gate all")[-1]], tmp_path / "agreed").headlines
    assert head.array == (f"one array across the evidence ({ARRAY_NQN} at port 10.1.0.1, 10.2.0.1) - not named in "
                          "gates.toml [array]; no acceptance period named")
    config = tmp_path / "gates.toml"
    config.write_text(f'[array]\nname = "array 7"\nnqns = ["{ARRAY_NQN}"]\naddresses = {json.dumps(ARRAY_PORTS)}\n'
                      "period_from = 2026-12-01\nperiod_until = 2026-12-31\n")
    fxprobe(tmp_path, "gate", "all", *evidence, "--config", str(config))
    (head,) = build_report([*runs, runs_of(tmp_path, "gate all")[-1]], tmp_path / "named").headlines
    assert head.array == (f"the array named in [array] (array 7: {ARRAY_NQN}; ports 10.1.0.1, 10.2.0.1); acceptance "
                          "period 2026-12-01 .. 2026-12-31")
    assert f"Array: {head.array}" in (tmp_path / "named" / "report.md").read_text()
