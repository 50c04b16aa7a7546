"""Reports: bundle, signature, and verify naming any changed file (property test)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from xml.etree import ElementTree

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fxprobe.report import plots
from fxprobe.report.build import build_report
from fxprobe.report.bundle import MANIFEST, SIGNATURE, verify_bundle
from fxprobe.report.signing import generate_keypair, load_private_key, sign
from gate_helpers import fake_run, fxprobe, g3_args, rewritten, runs_of


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """One signed report over a G3 run and a soak run with a time series and events."""
    base = tmp_path_factory.mktemp("report")
    assert fxprobe(base, *g3_args()) == 1
    (g3_run,) = runs_of(base, "gate g3")
    soak = fake_run(base / "runs", "soak", {"records": "soak.jsonl"})
    records = [{"type": "start", "ts": 999}, {"type": "segment", "seg": 1, "ts": 999}]
    records += [{"type": "sample", "seg": 1, "ts": 1000 + i, "bw": 2e9 if i != 3 else 0} for i in range(6)]
    records.append({"type": "interruption", "kind": "stall", "start_ts": 1003})
    (soak / "soak.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n{\"type\": \"sam")
    (soak / "timeline.png").write_bytes(plots_png())
    rewritten(soak)
    keys = base / "keys"
    generate_keypair(keys / "k.pem", keys / "k.pub")
    generate_keypair(keys / "other.pem", keys / "other.pub")
    out = base / "report"
    built = build_report([g3_run, soak], out, keys / "k.pem")
    return out, keys, built


def plots_png() -> bytes:
    from fxprobe.core.verdict import Criterion
    return plots.gate_grid([plots.GridRow("G1", Criterion.compare("drives recognized", 24, ">=", 24))], "a run's own plot")


def copy_of(bundle, tmp_path) -> Path:
    target = tmp_path / "copy"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(bundle[0], target)
    return target


def test_signed_bundle_verifies(bundle):
    out, keys, built = bundle
    result = verify_bundle(out, keys / "k.pub")
    assert result.ok, result.lines()
    assert result.signer == built.signer
    assert (out / "report.md").read_text().count("| FAIL | c8 throughput gain (band low) | 28.9 %") == 1
    html = (out / "report.html").read_text()
    assert "data:image/png;base64," in html and "src='http" not in html and 'src="http' not in html
    names = sorted(p.name for p in (out / "plots").iterdir())
    for prefix in ("gate-grid", "g3-", "soak-"):
        assert any(n.startswith(prefix) for n in names), (prefix, names)
    assert any(n.endswith("-soak-timeline.png") for n in names), names   # the run's own PNG, inlined too
    suites = ElementTree.parse(out / "junit.xml").getroot().findall("testsuite")
    assert suites[0].get("name").startswith("G3 main joint test (")     # 1 fail + 2 not run: all red (junit.py)
    assert suites[0].get("failures") == "3" and suites[0].get("skipped") == "0"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_one_byte_change_in_any_file_is_named(bundle, tmp_path, data):
    copy = copy_of(bundle, tmp_path)
    files = sorted(p for p in copy.rglob("*") if p.is_file())
    victim = data.draw(st.sampled_from(files), label="file")
    content = bytearray(victim.read_bytes())
    position = data.draw(st.integers(0, len(content) - 1), label="position")
    content[position] ^= data.draw(st.integers(1, 255), label="xor")
    victim.write_bytes(bytes(content))
    result = verify_bundle(copy, bundle[1] / "k.pub")
    rel = victim.relative_to(copy).as_posix()
    assert not result.ok
    if rel in (MANIFEST, SIGNATURE):
        assert any(p.startswith(SIGNATURE) or p.startswith(MANIFEST) for p in result.problems), result.problems
    elif rel == "SHA256SUMS.sig":
        assert any(p.startswith("SHA256SUMS.sig: BAD") for p in result.problems), result.problems
    else:
        assert any(p.startswith(f"{rel}: changed") for p in result.problems), result.problems


def test_signature_by_another_key_is_bad(bundle, tmp_path):
    copy = copy_of(bundle, tmp_path)
    other = load_private_key(bundle[1] / "other.pem")
    (copy / SIGNATURE).write_text(sign(other, (copy / MANIFEST).read_bytes()))
    result = verify_bundle(copy, bundle[1] / "k.pub")
    assert result.signature == "BAD" and not result.ok


def test_resigned_by_another_key_fails_against_the_real_public_key(bundle, tmp_path):
    copy = copy_of(bundle, tmp_path)
    (copy / "evidence" / "extra.txt").write_text("added")
    from fxprobe.report.bundle import write_manifest
    write_manifest(copy, bundle[1] / "other.pem")        # an attacker re-hashes and re-signs
    assert verify_bundle(copy).ok                       # the bundled key only proves integrity
    assert verify_bundle(copy, bundle[1] / "k.pub").signature == "BAD"


def test_added_and_removed_files_are_named(bundle, tmp_path):
    copy = copy_of(bundle, tmp_path)
    (copy / "evidence" / "note.txt").write_text("hi")
    (copy / "junit.xml").unlink()
    problems = verify_bundle(copy, bundle[1] / "k.pub").problems
    assert "junit.xml: missing" in problems
    assert "evidence/note.txt: not in the manifest (added after signing)" in problems


def test_cli_verify_and_unsigned_report(bundle, tmp_path, capsys):
    out, keys, _ = bundle
    assert fxprobe(tmp_path, "report", "verify", str(out), "--public-key", str(keys / "k.pub")) == 0
    assert "VERIFIED" in capsys.readouterr().out
    copy = copy_of(bundle, tmp_path)
    victim = copy / "evidence"
    target = next(p for p in sorted(victim.rglob("results.json")))
    target.write_bytes(target.read_bytes().replace(b"fail", b"pass", 1))
    assert fxprobe(tmp_path, "report", "verify", str(copy)) == 1
    assert f"{target.relative_to(copy).as_posix()}: changed" in capsys.readouterr().out
    (g3,) = [p for p in (out / "evidence").iterdir() if p.name.endswith("gate-g3")]
    assert fxprobe(tmp_path, "report", str(g3), "--out", str(tmp_path / "unsigned")) == 0
    assert "UNSIGNED" in capsys.readouterr().out
    assert fxprobe(tmp_path, "report", "verify", str(tmp_path / "unsigned")) == 1
    assert "manifest.sig: missing (unsigned report)" in capsys.readouterr().out


def test_keygen_refuses_to_overwrite(tmp_path, capsys):
    args = ["report", "keygen", "--private", str(tmp_path / "k.pem"), "--public", str(tmp_path / "k.pub")]
    assert fxprobe(tmp_path, *args) == 0
    assert (tmp_path / "k.pem").stat().st_mode & 0o777 == 0o600
    assert fxprobe(tmp_path, *args) == 2
    assert "refusing to overwrite" in capsys.readouterr().err


def test_report_into_a_non_empty_folder_is_refused(bundle, tmp_path, capsys):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "x").write_text("x")
    g3 = next(p for p in (bundle[0] / "evidence").iterdir())
    assert fxprobe(tmp_path, "report", str(g3), "--out", str(tmp_path / "busy")) == 2


def test_html_links_criteria_to_the_bundled_evidence_and_lists_commands(bundle):
    out = bundle[0]
    html = (out / "report.html").read_text()
    (g3,) = [p.name for p in (out / "evidence").iterdir() if p.name.endswith("gate-g3")]
    link = f'href="evidence/{g3}/raw/candidate/r2-array-c8.json"'
    assert link in html and (out / "evidence" / g3 / "raw" / "candidate" / "r2-array-c8.json").is_file()
    md = (out / "report.md").read_text()
    assert f"[raw/candidate/r2-array-c8.json](evidence/{g3}/raw/candidate/r2-array-c8.json)" in md
    assert f"### Run `{g3}`" in md and "\n```\n" in md.split(f"### Run `{g3}`")[1]   # its command line


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_change_to_the_signature_file_is_a_bad_signature(bundle, tmp_path, data):
    from fxprobe.report.signing import load_public_key, verify
    original = (bundle[0] / SIGNATURE).read_bytes()
    position = data.draw(st.integers(0, len(original) - 1), label="position")
    changed = bytearray(original)
    changed[position] ^= data.draw(st.integers(1, 255), label="xor")
    text = bytes(changed).decode("ascii", errors="replace")
    assert not verify(load_public_key(bundle[1] / "k.pub"), (bundle[0] / MANIFEST).read_bytes(), text)


def test_a_fault_run_shows_its_criteria(tmp_path):
    from fxprobe.report.collect import read_run
    run = fake_run(tmp_path, "fault run", {"verdict": "visible", "plan": {"scenario": "link-down"}, "criteria": [
        {"name": "I/O errors", "outcome": "fail", "measured": 12, "threshold": 0, "comparator": "<="},
        {"name": "odd", "outcome": "strange"}, "not a dict"]})
    (verdict,) = read_run(run).verdicts
    assert verdict.name == "fault run link-down"         # a stable name, never the verdict word (JUnit history)
    assert [c.outcome.value for c in verdict.criteria] == ["fail", "error"]


def test_gate_table_holds_only_gate_verdicts(bundle):
    md = (bundle[0] / "report.md").read_text()
    table = md.split("## Gate table", 1)[1].split("\n\n")[1]
    assert "| G3 main joint test | FAIL |" in table
    assert all(line.startswith(("| gate", "| ---", "| G")) for line in table.splitlines())
    assert bundle[2].outcome_rows == (("G3 main joint test", "fail"),)


def test_a_run_verdict_named_like_a_gate_stays_out_of_the_gate_table(tmp_path):
    from fxprobe.report.render import gate_verdicts
    from fxprobe.report.collect import read_run
    selftest = fake_run(tmp_path, "selftest", {"verdict": {"name": "G1 self-test", "criteria": []}})
    gate = fake_run(tmp_path, "gate all", {"gates": [{"name": "G1 delivery acceptance", "criteria": []}]})
    runs = [read_run(selftest), read_run(gate)]
    assert [v.name for v in gate_verdicts(runs)] == ["G1 delivery acceptance"]
    assert [v.name for v in runs[0].verdicts] == ["G1 self-test"]


def test_summary_plot_rows_are_the_gates_or_else_each_run_labelled(tmp_path):
    from fxprobe.report.build import summary_rows
    from fxprobe.report.collect import read_run
    criterion = {"name": "I/O errors", "outcome": "pass", "measured": 0, "threshold": 0, "comparator": "<="}
    faults = [read_run(fake_run(tmp_path, "fault run", {"verdict": "invisible", "criteria": [criterion]}))
              for _ in range(2)]
    labels = [label for label, _ in summary_rows(faults)]
    assert len(set(labels)) == 2                     # two runs' "I/O errors" never share a bar
    gate = read_run(fake_run(tmp_path, "gate all", {"gates": [{"name": "G4 stability", "criteria": [criterion]}]}))
    assert [(label, v.name) for label, v in summary_rows([*faults, gate])] == [("G4", "G4 stability")]


def test_the_terminal_and_the_report_give_the_same_decision(bundle, capsys):
    from fxprobe.report.headline import Decision, bundle_headlines
    out, _, built = bundle
    assert [h.lines() for h in bundle_headlines(out)] == [h.lines() for h in built.headlines]
    (head,) = built.headlines
    assert head.decision is Decision.NOT_ACCEPTED and head.missing == ("G1", "G2", "G4")
    assert (out / "report.md").read_text().split("\n\n")[1].startswith("**NOT ACCEPTED** - judged with the buyer's")
    assert built.lines()[0] == head.lines()[0]
