"""The gate engine over run directories: four outcomes, thresholds from gates.toml, the catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from fxprobe.core.errors import BadInput
from fxprobe.gates import GATES, Evidence, load_config
from fxprobe.gates.config import DEFAULTS, parse_config
from fxprobe.gates.engine import lookup
from fxprobe.core.verdict import Outcome
from gate_helpers import (fake_run, fxprobe, produced_fault, produced_multi_node, produced_selftest,
                          rewritten,
                          signed_verification, trusting)

ROOT = Path(__file__).parent.parent


def selftest(base, drives, outcome="pass"):
    return fake_run(base, "selftest", produced_selftest(drives), outcome)


def verified(bad: int = 0, gib: str = "0.500", outcome: str | None = None, detail: str | None = None) -> dict:
    """A run's own 'data verified (mismatches)' criterion, as the soak and the fault engine write it."""
    text = detail or (f"0 mismatches over {gib} GiB (fio verify=crc32c)" if not bad else
                      f"data mismatch at offset 1064960 of /dev/nvme1n1 (4096 B): header magic found 0, expected "
                      f"acca; {bad} bad reads of 1 blocks in bytes 1064960..1069055; over {gib} GiB (fio verify)")
    return {"name": "data verified (mismatches)", "outcome": outcome or ("fail" if bad else "pass"),
            "measured": None if outcome == "not run" else bad, "threshold": 0, "comparator": "<=", "detail": text}


def full_evidence(base) -> list[Path]:
    """Every run G1, G2 and G4 read, passing, the soak and fault runs in a signed, verified joint-test report
    (its signer: SIGNER, which ``trusting`` configures)."""
    paths = [
        selftest(base, 24),
        fake_run(base, "line-efficiency", {"summary": {"line_efficiency": 0.8412, "mean_bps": 84.12e9},
                                           "line_rate_bps": 100e9, "port_speed_bps": 100e9, "interface": "ens1f0",
                                           "line_rate_source": "/sys/class/net/ens1f0/speed"}),
        fake_run(base, "run", {"baseline_comparison": {
            "ttft_p50_s": {"measured": 7.9, "reference": 7.53, "reference_file": "r2.toml", "column": "array_ttft_s"},
            "tok_s": {"measured": 55.0, "reference": 56.6, "reference_file": "r2.toml", "column": "array_tok_s"}}}),
        fake_run(base, "run", produced_multi_node(8, 0.9306, 98e9)),
        fake_run(base, "run", {"workload": {"direction": "read", "nodes": ["host1"],      # single node: not G3
                                            "fraction_of_ceiling": 0.5}}),
        fake_run(base, "soak", {"duration_s": 72 * 3600 + 5, "interruptions": [], "stall_s": 5.0, "coverage_clock": "monotonic",
                                "verdict": {"name": "soak", "criteria": [verified(gib="812.250")]}}),
        fake_run(base, "fault run", produced_fault("drive-pull")),
        fake_run(base, "fault run", produced_fault("link-down")),
        fake_run(base, "fault run", {"dry_run": True, "plan": {"kind": "link-down"}}),  # ignored
    ]
    verify_run, SIGNER[0] = signed_verification(Path(base) / "signing", paths[-4:-1])
    return paths + [verify_run]


SIGNER = [""]       # the fingerprint of full_evidence's signer


def test_defaults_match_the_shipped_gates_toml():
    assert load_config(ROOT / "gates.toml").values == DEFAULTS


@pytest.mark.parametrize("text, words", [
    ("[g9]\nx = 1\n", "field 'g9': unknown key; allowed here: array, g1, g2, g3, g4"),
    ("[g3]\nttft_reduction = 25\n", "field 'g3.ttft_reduction': unknown key; allowed here: concurrency_levels, nic_ceiling_gbps, nic_ceiling_min_pct"),
    ("[g3]\nttft_reduction_min_pct = 'a'\n", "field 'g3.ttft_reduction_min_pct': expected a number (got 'a')"),
    ("[g3]\nthroughput_gain_min_pct = 50\n", "field 'g3.throughput_gain_max_pct': is below "
                                              "throughput_gain_min_pct (40 < 50)"),
    ("[g3\n", "not valid TOML"),
    # impossible thresholds (issue 13, "Impossible inputs are judged"): each used to be taken and judged
    ("[g1]\ndrives_expected = 0\n", "field 'g1.drives_expected': must be >= 1 (got 0)"),
    ("[g1]\ndrives_expected = -3\n", "field 'g1.drives_expected': must be >= 1 (got -3)"),
    ("[g1]\ndrives_expected = 23.5\n", "field 'g1.drives_expected': expected a whole number (got 23.5)"),
    ("[g3]\nttft_reduction_min_pct = nan\n", "field 'g3.ttft_reduction_min_pct': must be a finite number"),
    ("[g4]\nsoak_hours_min = inf\n", "field 'g4.soak_hours_min': must be a finite number"),
    ("[g2]\nline_efficiency_min_pct = 830\n", "field 'g2.line_efficiency_min_pct': must be <= 100"),
    ("[g4]\ninterruptions_max = -1\n", "field 'g4.interruptions_max': must be >= 0"),
    ("[g3]\nnodes_sharing = true\n", "field 'g3.nodes_sharing': expected a whole number (got True)"),
    ("g3 = 5\n", "field 'g3': expected a table (got 5)"),
])
def test_bad_config_is_named(text, words):
    with pytest.raises(BadInput, match=None) as info:
        parse_config(text, "mine.toml")
    assert words in str(info.value) and "mine.toml" in str(info.value)


def test_lookup_paths():
    data = {"a": {"b": [{"name": "x y", "v": 1}, {"name": "z", "v": 2}]}}
    assert lookup(data, "a.b.name=z.v") == 2
    assert lookup(data, "a.b.0.v") == 1
    assert lookup(data, "nope|a.b.1.v") == 2
    assert lookup(data, "a.c", None) is None


def test_gate_without_evidence_is_not_run_naming_the_missing_run(tmp_path, capsys):
    assert fxprobe(tmp_path, "gate", "g4") == 3
    out = capsys.readouterr().out
    assert "G4 stability and sign-off: NOT RUN" in out
    for missing in ("no soak run among the evidence", "no drive-pull fault run", "no link-cut fault run"):
        assert missing in out
    assert "`fxprobe soak PROFILE --duration 72h`" in out


def test_all_gates_pass_from_complete_evidence(tmp_path, capsys):
    paths = full_evidence(tmp_path / "ev")
    evidence = Evidence.from_paths(paths)
    config = trusting(SIGNER[0], (ROOT / "gates.toml").read_text())
    verdicts = {key: gate.evaluate(evidence, config) for key, gate in GATES.items()}
    for key in ("g1", "g2", "g4"):
        assert verdicts[key].outcome is Outcome.PASS, verdicts[key].lines()
    signed = {c.name: c for c in verdicts["g4"].criteria}["signed joint-test report verified"]
    assert "a trusted signer (gates.toml [g4] trusted_signers); carries the soak " in signed.detail
    untrusted = {c.name: c for c in GATES["g4"].evaluate(evidence, load_config(ROOT / "gates.toml")).criteria}
    assert untrusted["signed joint-test report verified"].outcome is Outcome.NOT_RUN   # no signer named: not run
    g2 = {c.name: c for c in verdicts["g2"].criteria}
    assert g2["line efficiency vs the gate's line rate"].measured == pytest.approx(84.12)
    assert g2["baseline ttft_p50_s deviation"].measured == pytest.approx(4.913, abs=1e-3)
    assert g2["line efficiency vs the gate's line rate"].evidence.endswith("results.json")
    # G3 has its multi-node part but no benchmark comparison: not run, naming it
    g3 = {c.name: c for c in verdicts["g3"].criteria}
    assert g3["multi-node read-back vs NIC ceiling"].outcome is Outcome.PASS
    # 93.06 % of the run's own 98 Gb/s ceiling is 91.20 Gb/s: judged against the configured 100 Gb/s, 91.1988 %
    assert g3["multi-node read-back vs NIC ceiling"].measured == pytest.approx(91.1988, abs=1e-9)
    assert g3["nodes sharing one array"].measured == 8
    assert verdicts["g3"].outcome is Outcome.NOT_RUN
    assert "no G3 benchmark comparison" in g3["TTFT reduction and throughput gain"].detail
    (tmp_path / "buyer").mkdir()
    (tmp_path / "buyer" / "gates.toml").write_text(f'[g4]\ntrusted_signers = ["{SIGNER[0]}"]\n')
    args = ["gate", "all", "--config", str(tmp_path / "buyer" / "gates.toml")]
    args += [a for p in paths for a in ("--evidence", str(p))]
    assert fxprobe(tmp_path, *args) == 3
    out = capsys.readouterr().out
    assert "G1 delivery acceptance                   PASS" in out


def test_each_array_is_judged_and_a_failing_one_fails_g1(tmp_path):
    paths = [selftest(tmp_path, 24), selftest(tmp_path, 23, outcome="fail")]
    verdict = GATES["g1"].evaluate(Evidence.from_paths(paths), load_config(None))
    assert verdict.outcome is Outcome.FAIL
    recognized = [c for c in verdict.criteria if c.name.startswith("drives recognized")]
    assert [c.outcome for c in recognized] == [Outcome.PASS, Outcome.FAIL]
    assert all(paths[i].name in recognized[i].name for i in range(2))


def test_missing_field_is_an_error_and_a_not_run_run_passes_its_reason_on(tmp_path):
    broken = fake_run(tmp_path, "soak", {"duration_s": "long", "interruptions": 0})
    skipped = fake_run(tmp_path, "fault run", {"plan": {"kind": "drive-pull"}})
    rewritten(skipped, '{"command": "fault run", "outcome": "not run", '
                       '"reason": "no spare drive slot", "plan": {"kind": "drive-pull"}}')
    verdict = GATES["g4"].evaluate(Evidence.from_paths([broken, skipped]), load_config(None))
    by_name = {c.name: c for c in verdict.criteria}
    assert by_name["soak duration"].outcome is Outcome.ERROR
    assert "is not a number" in by_name["soak duration"].detail
    drive_pull = {name: c for name, c in by_name.items() if name.startswith("drive pull: ")}
    assert len(drive_pull) == 9 and all(c.outcome is Outcome.NOT_RUN and "no spare drive slot" in c.detail
                                        for c in drive_pull.values())
    assert verdict.outcome is Outcome.ERROR


def test_a_visible_link_fault_fails_g4(tmp_path):
    link = fake_run(tmp_path, "fault run", produced_fault("link-flap", errors=12, verdict="visible"), "fail")
    verdict = GATES["g4"].evaluate(Evidence.from_paths([link]), load_config(None))
    by_name = {c.name: c for c in verdict.criteria}
    assert by_name["link cut: I/O errors seen by the workload"].measured == 12
    assert by_name["link cut: I/O errors seen by the workload"].outcome is Outcome.FAIL
    assert "its own verdict visible" in by_name["link cut: I/O errors seen by the workload"].detail
    assert verdict.outcome is Outcome.FAIL


@pytest.mark.parametrize("figures, failed", [
    ({"stall_s": 2.001}, "longest stall (no completed I/O)"),
    ({"throughput_pct": 49.99}, "throughput in the fault window vs pre-fault"),
    ({"p99_ratio": 10.5}, "p99 latency in the fault window / pre-fault p99"),
    ({"hung": True}, "load ended by its planned end"),
])
def test_each_figure_of_a_fault_run_is_judged_against_the_gates_threshold(tmp_path, figures, failed):
    """G4 judges each fault run's own figures against gates.toml [g4]; exactly at the threshold passes."""
    run = fake_run(tmp_path, "fault run", produced_fault("drive-pull", **figures))
    edge = fake_run(tmp_path, "fault run", produced_fault("link-down", stall_s=2.0, throughput_pct=50.0,
                                                          p99_ratio=10.0))
    verdict = GATES["g4"].evaluate(Evidence.from_paths([run, edge]), load_config(ROOT / "gates.toml"))
    outcomes = {c.name: c.outcome for c in verdict.criteria if c.name.startswith(("drive pull", "link cut"))}
    assert [name for name, o in outcomes.items() if o is Outcome.FAIL] == [f"drive pull: {failed}"]
    assert all(o is Outcome.PASS for name, o in outcomes.items() if name.startswith("link cut"))


def test_a_scenario_with_lax_criteria_cannot_pass_g4(tmp_path):
    """A vendor's scenario file that allows a 60 s stall gives its own verdict 'invisible'; G4 judges the measured
    12 s stall against the buyer's 2 s and fails it, printing the scenario's verdict beside as information."""
    lax = produced_fault("link-down", stall_s=12.0, verdict="invisible")
    lax["scenario"] = {"criteria": {"max_stall_s": 60.0}}
    run = fake_run(tmp_path, "fault run", lax)
    verdict = GATES["g4"].evaluate(Evidence.from_paths([run]), load_config(ROOT / "gates.toml"))
    stall = next(c for c in verdict.criteria if c.name == "link cut: longest stall (no completed I/O)")
    assert stall.outcome is Outcome.FAIL and "need <= 2 s" in stall.line() and "own limit s 60" in stall.detail
    errors = next(c for c in verdict.criteria if c.name == "link cut: I/O errors seen by the workload")
    assert "its own verdict invisible" in errors.detail


def test_unverified_data_and_an_unmeasured_window_are_not_run_never_pass(tmp_path):
    run = fake_run(tmp_path, "fault run", produced_fault("drive-pull", verify="off", p99_ratio=None))
    verdict = GATES["g4"].evaluate(Evidence.from_paths([run]), load_config(None))
    by_name = {c.name: c for c in verdict.criteria}
    verified = by_name["data verified (mismatches)"]              # G4's one data row, the fault run's own criterion
    assert verified.outcome is Outcome.NOT_RUN and "not verified: the test said so" in verified.detail
    p99 = by_name["drive pull: p99 latency in the fault window / pre-fault p99"]
    assert p99.outcome is Outcome.NOT_RUN and "no latency histogram" in p99.detail


def test_soak_with_interruptions_fails_with_its_count(tmp_path):
    soak = fake_run(tmp_path, "soak", {"duration_s": 3600, "interruptions": [{"t": 5}, {"t": 9}]})
    verdict = GATES["g4"].evaluate(Evidence.from_paths([soak]), load_config(None))
    by_name = {c.name: c for c in verdict.criteria}
    assert by_name["soak interruptions"].measured == 2 and by_name["soak interruptions"].outcome is Outcome.FAIL
    assert by_name["soak duration"].measured == pytest.approx(1.0)
    assert "need >= 72 h" in by_name["soak duration"].line()


def test_g4_fails_a_soak_whose_stall_limit_would_hide_stalls_printing_its_limit_beside_the_gate_s(tmp_path):
    # the review's soak-stall3600: --stall 3600 hid a 30-minute zero-I/O period and G4 never read stall_s
    def row(stall_s, config=None):
        results = {"duration_s": 72 * 3600 + 5, "interruptions": []}
        soak = fake_run(tmp_path, "soak", {**results, "stall_s": stall_s} if stall_s is not None else results)
        verdict = GATES["g4"].evaluate(Evidence.from_paths([soak]), config or load_config(None))
        return {c.name: c for c in verdict.criteria}["soak stall limit (--stall)"]
    lax = row(3600.0)
    assert lax.outcome is Outcome.FAIL and (lax.measured, lax.threshold) == (3600, 5) and "3600 s" in lax.line()
    assert row(5.0).outcome is Outcome.PASS and row(2.5).outcome is Outcome.PASS
    assert row(None).outcome is Outcome.ERROR and "no field 'stall_s'" in row(None).detail
    assert row(30.0, parse_config("[g4]\nsoak_stall_max_s = 30\n", "gates.toml")).outcome is Outcome.PASS


def test_g4_errors_on_a_soak_whose_covered_time_was_counted_on_the_wall_clock(tmp_path):
    # the review's soak-clockjump: records with fio's wall-clock stamps only - a +71 h step gave 72 h of "load"
    def row(clock):
        results = {"duration_s": 72 * 3600 + 5, "interruptions": [], "stall_s": 5.0}
        soak = fake_run(tmp_path, "soak", {**results, "coverage_clock": clock} if clock else results)
        verdict = GATES["g4"].evaluate(Evidence.from_paths([soak]), load_config(None))
        return {c.name: c for c in verdict.criteria}["soak covered time on the monotonic clock"]
    assert row("monotonic").outcome is Outcome.PASS
    assert row("wall").outcome is Outcome.ERROR and "counted its covered time on the wall clock" in row("wall").detail
    assert row(None).outcome is Outcome.ERROR and "records no 'coverage_clock'" in row(None).detail


def test_g4_fails_a_fault_run_whose_window_recovery_or_region_is_below_its_minimums(tmp_path):
    # the review: fault_s = 0, recover_s = 0 and a 4k region parsed and passed G4 (a stall 2.5 s after the restore
    # of a 0 s recovery was never judged)
    def rows(config=None, **figures):
        run = fake_run(tmp_path, "fault run", produced_fault("drive-pull", **figures))
        verdict = GATES["g4"].evaluate(Evidence.from_paths([run]), config or load_config(None))
        return {c.name.removeprefix("drive pull: "): c for c in verdict.criteria if c.name.startswith("drive pull")}
    names = ("fault lasted (timing.fault_s)", "load judged after the restore (timing.recover_s)",
             "region verified (load.region)")
    bent = rows(fault_s=0.0, recover_s=0.0, region_bytes=4096)
    assert [bent[n].outcome for n in names] == [Outcome.FAIL] * 3
    assert [bent[n].measured for n in names[:2]] == [0, 0] and [bent[n].threshold for n in names] == [30, 30, 1024]
    assert "4096" in bent[names[2]].detail and "need >= 1024 MiB" in bent[names[2]].line()
    honest = rows()
    assert [honest[n].outcome for n in names] == [Outcome.PASS] * 3
    lab = rows(load_config(ROOT / "gates-lab.toml"), fault_s=4.0, recover_s=3.0, region_bytes=2 << 20)
    assert [lab[n].outcome for n in names] == [Outcome.PASS] * 3
    assert any("SCALED g4.fault_window_min_s = 3" in line for line in load_config(ROOT / "gates-lab.toml").scale_lines())


def test_g4_errors_on_a_fault_run_that_did_not_see_its_fault_or_did_not_look(tmp_path):
    def row(seen, outcome="pass"):
        run = fake_run(tmp_path, "fault run", produced_fault("link-down", seen=seen), outcome=outcome)
        verdict = GATES["g4"].evaluate(Evidence.from_paths([run]), load_config(None))
        return {c.name: c for c in verdict.criteria}["link cut: fault seen in its window"]
    assert row(True).outcome is Outcome.PASS and "md127" in row(True).detail
    assert row(False).outcome is Outcome.ERROR and row(False).detail.startswith("the fault was not seen: no md")
    assert row(None).outcome is Outcome.ERROR and "records no 'fault_seen'" in row(None).detail
    assert row(False, "error").outcome is Outcome.ERROR             # the run's own outcome: error, its reason shown


def test_evidence_that_is_not_a_run_directory_is_bad_input(tmp_path, capsys):
    assert fxprobe(tmp_path, "gate", "g1", "--evidence", str(tmp_path / "nowhere")) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_g2_reads_a_real_line_efficiency_run(tmp_path, capsys):
    """A real (TCP, loopback, 1 s) line-efficiency run is evidence G2 can judge: no mock."""
    import shutil
    import socket
    if shutil.which("iperf3") is None:
        pytest.skip("iperf3 not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code = fxprobe(tmp_path, "line-efficiency", "--peer", "127.0.0.1", "--server-node", "local",
                   "--transport", "tcp", "--duration", "1", "--line-rate", "100", "--port", str(port))
    assert code in (0, 1), capsys.readouterr()
    (run,) = [p for p in (tmp_path / "runs").iterdir() if p.name.endswith("line-efficiency")]
    capsys.readouterr()
    assert fxprobe(tmp_path, "gate", "g2", "--evidence", str(run)) == 4     # lo reports no speed: ERROR
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if "line efficiency vs the gate's line rate:" in l)
    assert "(need >= 83.0 %" in line and "TCP" in line and str(run) in line
    assert "line rate 100 Gb/s (g2.line_rate_gbps" in line


def test_g2_compares_measured_benchmarks_with_the_reference_table(tmp_path, capsys):
    from gate_helpers import r2
    ref = str(ROOT / "examples" / "claims" / "reference-r2.toml")
    args = ["gate", "g2", "--reference", ref] + [a for p in r2("array") for a in ("--measured", p)]
    assert fxprobe(tmp_path, *args) == 3                 # baseline passes; no line-efficiency run yet
    out = capsys.readouterr().out
    assert "PASS    baseline c16 throughput deviation: 0.0 %" in out
    assert "no line-efficiency run among the evidence" in out
    args = ["gate", "g2", "--reference", ref, "--measured", r2("local-nvme")[0]]
    assert fxprobe(tmp_path, *args) == 1                  # local NVMe is 35.1 % off the array's TTFT
    out = capsys.readouterr().out
    assert "FAIL    baseline c8 TTFT p50 deviation: 35.1 % (need <= 10.0 %, margin -25.1 %)" in out
    (first, second) = sorted(p for p in (tmp_path / "runs").iterdir() if p.name.endswith("gate-g2"))
    assert (first / "raw" / "measured" / "r2-array-c8.json").exists() and (first / "raw" / "reference.toml").exists()
    capsys.readouterr()
    line_eff = fake_run(tmp_path / "ev", "line-efficiency", {"summary": {"line_efficiency": 0.9, "mean_bps": 90e9},
                                                             "port_speed_bps": 100e9})
    assert fxprobe(tmp_path, "gate", "g2", "--evidence", str(first), "--evidence", str(line_eff)) == 0


def test_g2_reference_errors_are_bad_input(tmp_path, capsys):
    from gate_helpers import r2
    ref = str(ROOT / "examples" / "claims" / "reference-r2.toml")
    assert fxprobe(tmp_path, "gate", "g2", "--reference", ref, "--measured", r2("array")[0],
                   "--ttft-column", "nope") == 2
    assert "no row has column 'nope'" in capsys.readouterr().err
    assert fxprobe(tmp_path, "gate", "g2", "--measured", r2("array")[0]) == 2


def test_g2_judges_the_gate_s_line_rate_not_the_port_s(tmp_path):
    """A 10 GbE port at 95 % of ITS speed used to pass the "83 % on 100 GbE" criterion."""
    ten_gbe = fake_run(tmp_path, "line-efficiency", {
        "summary": {"line_efficiency": 0.95, "mean_bps": 9.5e9}, "label": "RDMA READ (ib_read_bw)",
        "line_rate_bps": 10e9, "line_rate_source": "/sys/class/net/eth1/speed", "port_speed_bps": 10e9,
        "interface": "eth1"})
    g2 = GATES["g2"].evaluate(Evidence.from_paths([ten_gbe]), load_config(ROOT / "gates.toml"))
    by_name = {c.name: c for c in g2.criteria}
    efficiency = by_name["line efficiency vs the gate's line rate"]
    port = by_name["port nominal speed vs the gate's line rate"]
    assert efficiency.outcome is Outcome.FAIL and efficiency.measured == pytest.approx(9.5)
    assert "9.5 % (need >= 83.0 %" in efficiency.line() and "line rate 100 Gb/s (g2.line_rate_gbps" in efficiency.line()
    assert port.outcome is Outcome.FAIL and "10 Gb/s (need >= 100 Gb/s" in port.line() and "eth1" in port.line()
    # the same goodput on a 100 GbE port that reports 100 Gb/s: the port criterion passes, efficiency still fails
    hundred = fake_run(tmp_path, "line-efficiency", {"summary": {"line_efficiency": 0.095, "mean_bps": 9.5e9},
                                                     "port_speed_bps": 100e9})
    g2 = GATES["g2"].evaluate(Evidence.from_paths([hundred]), load_config(ROOT / "gates.toml"))
    assert [c.outcome for c in g2.criteria][:2] == [Outcome.FAIL, Outcome.PASS]


def test_a_line_rate_asserted_with_the_option_is_not_the_port_s_speed(tmp_path):
    """--line-rate 100 on a port that does not say its speed: the port criterion is ERROR, never PASS."""
    claimed = fake_run(tmp_path, "line-efficiency", {"summary": {"line_efficiency": 0.9, "mean_bps": 90e9},
                                                     "line_rate_bps": 100e9, "line_rate_source": "--line-rate",
                                                     "port_speed_bps": None})
    g2 = GATES["g2"].evaluate(Evidence.from_paths([claimed]), load_config(ROOT / "gates.toml"))
    port = next(c for c in g2.criteria if c.name.startswith("port nominal speed"))
    assert port.outcome is Outcome.ERROR and "not recorded" in port.detail


def test_g4_data_row_re_judges_the_soak_and_fault_runs_own_verification(tmp_path):
    """Invisible to the workload includes the data (issue 14): one row over the soak's and the fault runs' own
    'data verified' criteria - their bad reads together against g4.data_mismatches_max."""
    def row(paths):
        verdict = GATES["g4"].evaluate(Evidence.from_paths(paths), load_config(None))
        return {c.name: c for c in verdict.criteria}["data verified (mismatches)"]
    soak = fake_run(tmp_path, "soak", {"verdict": {"name": "soak", "criteria": [verified(gib="812.250")]}})
    pull = fake_run(tmp_path, "fault run", {"plan": {"kind": "drive-pull"}, "criteria": [verified(gib="0.004")]})
    good = row([soak, pull])
    assert good.outcome is Outcome.PASS and good.measured == 0
    assert good.detail == "soak 0 over 812.250 GiB; drive pull 0 over 0.004 GiB"
    bad = fake_run(tmp_path, "fault run", {"plan": {"kind": "link-down"}, "criteria": [verified(3, "0.006")]})
    failed = row([soak, pull, bad])
    assert failed.outcome is Outcome.FAIL and failed.measured == 3
    assert "link cut 3 over 0.006 GiB (data mismatch at offset 1064960 of /dev/nvme1n1 (4096 B): header magic " \
           "found 0, expected acca)" in failed.detail
    opted = fake_run(tmp_path, "soak", {"verdict": {"name": "soak", "criteria": [
        verified(outcome="not run", detail="not verified: the array scrubs itself")]}})
    not_run = row([opted, pull])
    assert not_run.outcome is Outcome.NOT_RUN and "soak: not verified: the array scrubs itself" in not_run.detail
    old = fake_run(tmp_path, "fault run", {"plan": {"kind": "drive-pull"}, "criteria": []})
    assert row([soak, old]).outcome is Outcome.ERROR and "records no 'data verified" in row([soak, old]).detail
    # a run whose own read-back failed (its criterion an ERROR, measured 0): an ERROR here too, never a pass
    unread = fake_run(tmp_path, "fault run", {"plan": {"kind": "drive-pull"}, "criteria": [verified(
        outcome="error", detail="0 mismatches over 0.031 GiB; ERROR: read-back after md resync: no result")]})
    assert row([soak, unread]).outcome is Outcome.ERROR and "no result" in row([soak, unread]).detail
    assert row([]).outcome is Outcome.NOT_RUN and "no soak run among the evidence" in row([]).detail
