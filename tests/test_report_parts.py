"""The report's parts: folded commands, the headline, ceilings, the soak view, notes, machines (no lab)."""

from __future__ import annotations

import json
from pathlib import Path

from fxprobe.core.verdict import Criterion, Outcome, Verdict
from fxprobe.report import plots
from fxprobe.report.ceilings import artefact
from fxprobe.report.commands import fold, readable
from fxprobe.report.headline import Decision, headline
from fxprobe.report.soakview import soak_view

SSH = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-p", "48985", "-i", "/root/.local/state/fxprobe/labs/"
       "rehearse/id_ed25519", "-o", "UserKnownHostsFile=/root/.local/state/fxprobe/labs/rehearse/known_hosts",
       "-o", "ControlPath=/tmp/fxprobe-ssh-fgm7cj7t/%C", "root@127.0.0.1", "--"]


def ssh(command: str, host: str = "host1", code: int = 0) -> dict:
    return {"name": "x", "argv": SSH + [command], "exit_code": code,
            "host": {"name": host, "kind": "ssh", "address": "127.0.0.1", "port": 48985, "user": "root"}}


def test_the_ssh_wrapper_folds_to_host_and_command_and_stays_whole():
    command = fold(ssh("readlink -f /dev/nvme0n1"))
    assert (command.host, command.text) == ("host1", "readlink -f /dev/nvme0n1")
    assert command.full.startswith("ssh -o BatchMode=yes") and command.full.endswith("-- 'readlink -f /dev/nvme0n1'")
    (group,) = readable([ssh("readlink -f /dev/nvme0n1")])
    assert group.line() == "host1: readlink -f /dev/nvme0n1"


def test_repeated_probes_collapse_with_a_count_and_distinct_acts_stay_apart():
    attrs = ["alignment_offset", "bdi", "capability", "dev", "device"]
    records = [ssh(f"test -e /sys/class/block/nvme0n1/{a}/partition", code=1) for a in attrs]
    records += [ssh("cat /sys/class/block/nvme0n1/dev")] * 2 + [ssh("cat /proc/self/mountinfo")]
    records += [ssh("mdadm /dev/md/fxlab --re-add /dev/nvme0n1", "array", 1), ssh("mdadm /dev/md/fxlab --add /dev/nvme0n1", "array")]
    records += [{"argv": ["nvme", "smart-log", f"/dev/nvme{n}", "-o", "json"], "host": {"name": "local"}, "exit_code": 0}
                for n in (0, 1, 10, 11)]
    lines = [g.line() for g in readable(records)]
    assert lines == [
        "host1: test -e /sys/class/block/nvme0n1/{alignment_offset,bdi,capability,...}/partition  (x5)  [exit != 0: 5]",
        "host1: cat /sys/class/block/nvme0n1/dev  (x2)",
        "host1: cat /proc/self/mountinfo",
        "array: mdadm /dev/md/fxlab --re-add /dev/nvme0n1  [exit != 0: 1]",
        "array: mdadm /dev/md/fxlab --add /dev/nvme0n1",
        "local: nvme smart-log /dev/nvme{0,1,10,...} -o json  (x4)"]


def test_a_multi_line_script_shows_its_first_line_and_a_long_line_is_cut():
    (group,) = readable([ssh("sh -c 'for s in /sys/class/nvme-subsystem/*; do\n echo $s; done'")])
    assert group.line() == "host1: sh -c 'for s in /sys/class/nvme-subsystem/*; do ..."
    (long,) = readable([ssh("fio " + " ".join(f"--opt{i}=value" for i in range(40)))])
    assert len(long.line(80)) <= 80 and long.line(80).endswith(" ...")


def gate(name: str, *criteria: Criterion) -> Verdict:
    return Verdict(name, criteria)


PASS_G1 = gate("G1 delivery acceptance", Criterion.compare("drives recognized", 24, ">=", 24))
PASS_G2 = gate("G2 single-node baseline", Criterion.compare("line efficiency", 96.0, ">=", 83.0, unit="%"))
PASS_G3 = gate("G3 main joint test", Criterion.compare("nodes sharing one array", 8, ">=", 8))
G4 = [Criterion.compare("soak duration", 0.0188, ">=", 72.0, unit="h"),
      Criterion.compare("soak interruptions", 2, "<=", 0),
      Criterion("link cut invisible to the workload", Outcome.FAIL, "fail", "pass", "==")]


def test_headline_not_accepted_names_the_deciding_criterion_and_the_thresholds():
    results = {"thresholds": {"source": "/srv/fxprobe/gates.toml", "thresholds": {}}}
    h = headline("09-gate-all", results, (PASS_G1, PASS_G2, PASS_G3, gate("G4 stability and sign-off", *G4)))
    assert h.decision is Decision.NOT_ACCEPTED and h.thresholds == "buyer's thresholds"
    assert h.lines()[0] == "NOT ACCEPTED - judged with the buyer's thresholds (/srv/fxprobe/gates.toml)"
    assert h.lines()[4] == "  G4 stability and sign-off: FAIL - soak duration: 0.0188 h (need >= 72 h) (and 2 more fail)"
    assert h.lines()[1] == "  G1 delivery acceptance: PASS - drives recognized: 24 (need >= 24)"


def test_headline_accepted_incomplete_and_lab_scaled():
    g4 = gate("G4 stability and sign-off", Criterion.compare("soak duration", 0.25, ">=", 0.25, unit="h"))
    assert headline("g", {}, (PASS_G1, PASS_G2, PASS_G3, g4)).decision is Decision.ACCEPTED
    lab = {"thresholds": {"source": "gates-lab.toml"}}
    at_lab_scale = headline("g", lab, (PASS_G1, PASS_G2, PASS_G3, g4))      # never an acceptance
    assert (at_lab_scale.decision, at_lab_scale.thresholds) == (Decision.LAB_PASS, "lab-scaled thresholds")
    declared = {"thresholds": {"source": "gates.toml", "lab_scaled": True,        # named like the buyer's file
                               "scale": {"scaled": {"g4.soak_hours_min": "short"}, "not_judged": {}}}}
    head = headline("g", declared, (PASS_G1, PASS_G2, PASS_G3, g4))
    assert head.decision is Decision.LAB_PASS and head.thresholds == "lab-scaled thresholds"
    assert head.lines()[0].startswith("PASSED AT LAB SCALE - judged with the lab-scaled thresholds (gates.toml); "
                                      "not the buyer's: 1 threshold SCALED, 0 NOT JUDGED")
    assert headline("g", {}, (PASS_G1, PASS_G2, PASS_G3)).decision is Decision.INCOMPLETE     # G4 missing
    not_run = gate("G4 stability and sign-off", Criterion.compare("soak duration", None, ">=", 72.0, unit="h"))
    assert headline("g", {}, (PASS_G1, PASS_G2, PASS_G3, not_run)).decision is Decision.INCOMPLETE


def test_a_figure_above_its_physical_ceiling_is_an_artefact_not_a_pass():
    over = Criterion("protocol efficiency", Outcome.PASS, 1.0093)
    assert "above the physical ceiling 1" in artefact(over)
    assert artefact(Criterion("protocol efficiency", Outcome.PASS, 0.9797)) == ""
    g2 = gate("G2 single-node baseline", Criterion.compare("line efficiency", 100.93, ">=", 83.0, unit="%"))
    h = headline("g", {}, (PASS_G1, g2, PASS_G3, gate("G4 x", Criterion.compare("soak duration", 1, ">=", 1))))
    assert h.decision is Decision.INCOMPLETE and h.gates[1].word == "ARTEFACT"
    assert plots.GridRow("G2", g2.criteria[0]).word == "artefact"


def soak_records(sample_s: float = 5.0, seconds: int = 600, cut: tuple[int, int] = (300, 330)) -> list[dict]:
    """A 10-minute soak at 100 MB/s with a 30 s link cut: no bytes move in the cut; a 0.3 s last sample."""
    records = [{"type": "start", "ts": 1000.0, "planned_s": float(seconds), "profile": "p", "target": "/dev/x",
                "stall_s": 5.0, "sample_s": sample_s},
               {"type": "segment", "seg": 1, "ts": 1000.0}]
    done, t = 0.0, 1000.0
    while t < 1000 + seconds:
        t += sample_s
        if not cut[0] <= t - 1000 <= cut[1]:
            done += 100e6 * sample_s
        records.append({"type": "sample", "seg": 1, "ts": t, "io_bytes": done, "bw": 100e6})
    records.append({"type": "sample", "seg": 1, "ts": t + 0.3, "io_bytes": done + 60e6, "bw": 200e6})
    records.append({"type": "interruption", "id": 1, "kind": "link-cut", "start": "-", "start_ts": 1000.0 + cut[0],
                    "detail": "cut"})
    records.append({"type": "interruption-end", "id": 1, "end": "-", "end_ts": 1000.0 + cut[1], "seconds": 30.0})
    return records


def test_soak_view_is_in_hours_with_no_spike_from_a_short_last_sample():
    view = soak_view(soak_records())
    assert abs(view.duration_h - 600.3 / 3600) < 1e-9 and view.planned_h == 600 / 3600
    assert max(view.mean) <= 100e6 * 1.5          # the 0.3 s last interval (200 MB/s) does not spike
    assert min(view.minimum) == 0.0               # the cut shows as a zero minimum
    assert view.edges_h[0] == 0 and len(view.edges_h) == len(view.mean) + 1
    (cut,) = view.interruptions
    assert (cut.kind, round(cut.start_h * 3600), round(cut.end_h * 3600)) == ("link-cut", 300, 330)
    assert plots.soak(view).startswith(b"\x89PNG")


def test_72_hours_of_one_second_samples_draw_at_most_200_buckets():
    view = soak_view(soak_records(sample_s=60.0, seconds=72 * 3600, cut=(3600, 3630)))
    assert len(view.mean) <= 200 and round(view.duration_h) == 72


def test_gate_grid_shows_yes_no_criteria_and_margins_as_fractions_of_their_threshold():
    rows = [plots.GridRow("G4", c) for c in G4] + [plots.GridRow("G3", PASS_G3.criteria[0])]
    assert [r.margin_text for r in rows] == ["-100.0 % of threshold", "margin -2 (threshold 0)", "not met",
                                            "+0.0 % of threshold"]
    assert plots.gate_grid(rows, "t").startswith(b"\x89PNG")


def test_notes_carry_timeout_advice_and_degraded_figures(tmp_path):
    from fxprobe.report.collect import read_run
    from fxprobe.report.notes import notes
    from gate_helpers import fake_run
    stalled = "[  488.384783] nvme nvme20: I/O 865 (I/O Cmd) QID 1 timeout, aborting"
    link = fake_run(tmp_path, "fault run", {"verdict": "visible", "plan": {"kind": "link-down"}, "lab": "rehearse",
                                            "advice": {"lines": ["stall 16 s with 2 paths", "try: --keep-alive-tmo=2"]},
                                            "lab_drive_timeouts": [{"uptime_s": 488.384783, "controller": "nvme20",
                                                                    "line": stalled}]})
    drive = fake_run(tmp_path, "fault run", {"plan": {"kind": "drive-pull", "target": "S1"}, "impact": {
        "throughput_pct": 59.95, "window_iops": 222.4, "baseline_iops": 371.0, "p99_ratio": 1.44, "recover_s": 0.249,
        "inject_ms": 100_000}, "timeline": {"changes": [{"t": 90.0, "md": {"md127": "[22/22]"}},
                                                        {"t": 120.0, "md": {"md127": "[22/21]"}}]}})
    found = notes([read_run(link), read_run(drive)], [])
    assert [n.topic for n in found] == ["timeout advice", "lab emulator", "degraded array", "lab scale"]
    assert found[0].lines == ("stall 16 s with 2 paths", "try: --keep-alive-tmo=2")
    assert found[1].title.startswith("LAB DRIVE TIMED OUT") and found[1].lines == (
        f"nvme20: 1 timeout(s) from 488.384783 s to 488.384783 s of the kernel's clock; last: {stalled}",)
    assert "throughput while degraded: 60.0 % of the baseline" in found[2].lines[0]
    assert found[2].lines[-1] == "md127: [22/21] (at +20.0 s from the fault)"


def test_machines_list_inventory_and_risks_from_environment_json(tmp_path):
    from fxprobe.host.environment import snapshot
    from fxprobe.report.collect import read_run
    from fxprobe.report.machines import machines
    from gate_helpers import fake_run
    with_log, without = fake_run(tmp_path, "selftest", {}), fake_run(tmp_path, "soak", {})
    (with_log / "environment.json").write_text(json.dumps(snapshot()))
    found, missing = machines([read_run(with_log), read_run(without)])
    (machine,) = found
    assert machine.runs == (with_log.name,) and missing == [without.name]
    assert [what for what, _ in machine.items][:2] == ["system", "CPU"]
    assert all(": " in risk for risk in machine.risks)


def test_the_product_cites_only_files_inside_the_repository():
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    files = [root / "README.md", root / "gates.toml", *root.glob("gates*.toml"), *(root / "docs").rglob("*.md"),
             *(root / "examples").rglob("*.toml"), *(root / "fxprobe").rglob("*.py"), *(root / "fxprobe").rglob("*.md"),
             *(root / "fxprobe" / "report" / "templates").iterdir()]
    citing = [str(p.relative_to(root)) for p in files if "/work" "/shared" in p.read_text(errors="replace")]
    assert citing == []
    assert (root / "docs" / "gates.md").is_file() and "docs/gates.md" in (root / "gates.toml").read_text()


def test_a_long_command_line_wraps_with_backslashes_and_options_keep_their_values():
    import shlex
    from fxprobe.report.commands import wrapped
    argv = ["fxprobe", "gate", "all"] + [a for i in range(4) for a in ("--evidence", f"/srv/runs/2026/steps/0{i}-step")]
    text = wrapped(argv, 60)
    assert all(len(line) <= 60 for line in text.splitlines())
    assert "    --evidence /srv/runs/2026/steps/01-step \\" in text.splitlines()
    assert shlex.split(text.replace("\\\n", " ")) == argv         # the same command, pasted into a shell


def test_soak_view_of_a_real_lab_soak_joins_each_interruption_with_its_end():
    """soak.jsonl as `fxprobe soak` wrote it in the lab (10 min, one data link cut for 30 s): the
    interruption's end comes in its own 'interruption-end' record, and the plot spans it."""
    from fxprobe.soak.records import load_records          # strictly: every line a record the soak types
    view = soak_view(load_records(Path(__file__).parent / "fixtures" / "soak" / "lab-10min-link-cut.jsonl"))
    (lost,) = view.interruptions
    assert lost.kind == "path-lost" and lost.seconds == 39.956
    assert abs((lost.end_h - lost.start_h) * 3600 - 39.956) < 1e-3
    assert 0.07 < lost.start_h < 0.09 and abs(view.planned_h - 600 / 3600) < 1e-9
    assert plots.soak(view).startswith(b"\x89PNG")


def test_the_same_warning_on_many_drives_is_one_line_naming_them_in_slot_order():
    from fxprobe.report.machines import warning_lines
    why, fix = "a volatile write cache makes write results depend on flushes", \
        "record it in the report, or: echo 'write through' > /sys/block/{}/queue/write_cache"
    warnings = [{"knob": "write_cache", "observed": f"{d}: write back", "why": why, "fix": fix.format(d)}
                for d in ("nvme10n1", "nvme2n1", "md127", "nvme1n1")]
    warnings.append({"knob": "governor", "observed": "powersave", "why": "clock changes", "fix": "cpupower"})
    warnings.append({"knob": "write_cache", "observed": "nvme5n1: write through?", "why": why, "fix": fix.format("x")})
    lines = warning_lines(warnings)
    assert lines[0] == ("write_cache: write back on 4 devices (md127, nvme1n1, nvme2n1, nvme10n1) - " + why
                        + "; fix: " + fix.format("<device>"))
    assert lines[1] == "governor: powersave - clock changes; fix: cpupower"
    assert lines[2].startswith("write_cache: nvme5n1: write through? - ") and len(lines) == 3


def test_the_gate_grid_says_not_judged_only_for_what_a_lab_scale_left_out():
    """NOT RUN (no figure among the evidence) and NOT JUDGED (left out by a lab-scaled file) are two things."""
    missing = plots.GridRow("G2", Criterion("baseline within reference", Outcome.NOT_RUN))
    left_out = plots.GridRow("G2", Criterion("baseline within reference", Outcome.NOT_RUN), left_out=True)
    assert (missing.word, missing.margin_text) == ("not run", "no figure")
    assert (left_out.word, left_out.figures, left_out.fraction) == ("not judged", "not judged at lab scale", None)
