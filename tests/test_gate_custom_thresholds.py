"""A gates file that departs from the buyer's defaults (a ./gates.toml picked up from the working directory too)
is "custom thresholds": each departure (key, the buyer's value, this value) is printed above the gate, beside the
criteria judged with it, in the gate run's results and in the report's headline, which is never ACCEPTED. The
honest twin - a file with the buyer's values - keeps the plain heading and can be ACCEPTED; the lab-scaled file
keeps its own label and reasons."""

from __future__ import annotations

from pathlib import Path

from fxprobe.core.verdict import Criterion, Verdict
from fxprobe.gates.config import LAB_FILE, load_config, parse_config
from fxprobe.report.build import build_report
from fxprobe.report.headline import Decision, headline
from gate_helpers import fake_run, fxprobe, results_of, runs_of

ROOT = Path(__file__).parent.parent
LINE = "line efficiency vs the gate's line rate"


def line_efficiency(base: Path, mean_bps: float = 70.5e9) -> Path:
    return fake_run(base, "line-efficiency", {"summary": {"mean_bps": mean_bps, "line_efficiency": 0.705},
                                              "port_speed_bps": 100e9, "interface": "eth0", "label": "planted"})


def test_a_gates_toml_in_the_working_directory_that_loosens_a_threshold_says_so(tmp_path, monkeypatch, capsys):
    """Review proof (cwd/gates.toml, line_efficiency_min_pct = 60): 70.5 % passed under the plain heading."""
    run = line_efficiency(tmp_path / "ev")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gates.toml").write_text((ROOT / "gates.toml").read_text())           # the buyer's values
    fxprobe(tmp_path, "gate", "g2", "--evidence", str(run))
    out = capsys.readouterr().out
    assert out.startswith("G2 single-node baseline: ") and "CUSTOM" not in out and f"FAIL    {LINE}: 70.5 %" in out
    assert "label" not in results_of(runs_of(tmp_path, "gate g2")[-1])["thresholds"]
    (tmp_path / "gates.toml").write_text("[g2]\nline_efficiency_min_pct = 60.0\n")
    fxprobe(tmp_path, "gate", "g2", "--evidence", str(run))
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == ["CUSTOM thresholds (gates.toml), not the buyer's: 1 value differs from the buyer's defaults; "
                       "a pass here is not an acceptance",
                       "CUSTOM g2.line_efficiency_min_pct = 60 (the buyer's 83)",
                       "G2 single-node baseline (custom thresholds): NOT RUN - no baseline comparison run among the "
                       "evidence"]
    line = next(text for text in out if LINE in text)
    assert line.startswith(f"  PASS    {LINE}: 70.5 % (need >= 60.0 %") and \
        "CUSTOM g2.line_efficiency_min_pct = 60 (the buyer's 83)" in line
    thresholds = results_of(runs_of(tmp_path, "gate g2")[-1])["thresholds"]
    assert thresholds["label"] == "custom thresholds"
    assert thresholds["custom"] == [{"key": "g2.line_efficiency_min_pct", "default": 83.0, "value": 60.0}]


def test_gate_all_prints_every_departure_and_the_lab_scaled_file_keeps_its_own_label(tmp_path, capsys):
    config = tmp_path / "gates.toml"
    config.write_text("[g3]\nconcurrency_levels = [16]\n[g4]\nsoak_hours_min = 1.0\n")
    assert load_config(config).label == "custom thresholds"
    fxprobe(tmp_path, "gate", "all", "--config", str(config))
    out = capsys.readouterr().out
    assert "CUSTOM g4.soak_hours_min = 1 (the buyer's 72)" in out and "CUSTOM g3.concurrency_levels = [16] (the " \
        "buyer's [8, 16, 32])" in out and "G4 stability and sign-off (custom thresholds)" in out
    lab = load_config(LAB_FILE)
    assert (lab.label, lab.custom, lab.scaled("g4", ("soak_hours_min",))[0][:7]) == ("gates-lab", False, "SCALED ")
    assert parse_config('[g4]\ntrusted_signers = ["0123456789abcdef"]\n[g1]\narrays = ["a1"]\n', "gates.toml").label \
        == ""                                   # who is trusted and which arrays: not thresholds, never custom


G1 = Verdict("G1 delivery acceptance", (Criterion.compare("drives recognized", 24, ">=", 24),))
G2 = Verdict("G2 single-node baseline", (Criterion.compare(LINE, 70.5, ">=", 60.0, unit="%"),))
G3 = Verdict("G3 main joint test", (Criterion.compare("nodes sharing one array", 8, ">=", 8),))
G4 = Verdict("G4 stability and sign-off", (Criterion.compare("soak duration", 72.5, ">=", 72.0, unit="h"),))


def recorded(text: str) -> dict:
    """A gate run's results as `gate all` records them, with the gates file ``text``."""
    return {"thresholds": parse_config(text, "gates.toml").to_dict(), "evidence_runs": []}


def test_a_report_over_custom_thresholds_is_never_accepted_and_names_each_departure():
    honest = headline("g", recorded(""), (G1, G2, G3, G4))
    assert (honest.decision, honest.thresholds) == (Decision.ACCEPTED, "buyer's thresholds")
    custom = headline("g", recorded("[g2]\nline_efficiency_min_pct = 60.0\n"), (G1, G2, G3, G4))
    assert (custom.decision, custom.thresholds) == (Decision.CUSTOM_PASS, "custom thresholds")
    assert custom.lines()[0] == ("PASSED WITH CUSTOM THRESHOLDS - judged with the custom thresholds (gates.toml); not "
                                 "the buyer's: 1 value differs from the buyer's defaults: g2.line_efficiency_min_pct = "
                                 "60 (the buyer's 83)")
    # recomputed from the values recorded, whatever label a run carries (an older one carries none)
    older = recorded("[g2]\nline_efficiency_min_pct = 60.0\n")
    del older["thresholds"]["label"], older["thresholds"]["custom"]
    assert headline("g", older, (G1, G2, G3, G4)).decision is Decision.CUSTOM_PASS


def test_the_report_bundle_of_a_custom_gate_run_says_custom_in_its_headline_notes_and_table(tmp_path, capsys):
    run = line_efficiency(tmp_path / "ev")
    config = tmp_path / "cfg" / "gates.toml"
    config.parent.mkdir()
    config.write_text("[g2]\nline_efficiency_min_pct = 60.0\n")
    fxprobe(tmp_path, "gate", "g2", "--evidence", str(run), "--config", str(config))
    built = build_report([run, runs_of(tmp_path, "gate g2")[-1]], tmp_path / "rep")
    (head,) = built.headlines
    assert head.thresholds == "custom thresholds" and head.decision is Decision.INCOMPLETE     # G1, G3, G4 missing
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "judged with the custom thresholds" in md and "buyer's thresholds" not in md
    assert "| `g2.line_efficiency_min_pct` | 60 CUSTOM |" in md
    assert "CUSTOM g2.line_efficiency_min_pct = 60 (the buyer's 83)" in md
