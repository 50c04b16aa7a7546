"""G4's "signed report" criterion: the signer must be one the buyer named in the gates config ([g4]
trusted_signers; none named: NOT RUN saying which key to set), and the verified bundle must carry the soak and
fault runs the gate judged (the same folders, by their manifests' SHA-256). Each test plants the "fail" twin beside
the honest sign-off, which still passes."""

from __future__ import annotations

from pathlib import Path

from fxprobe.core.verdict import Outcome
from fxprobe.gates import GATES, Evidence, load_config
from gate_helpers import fake_run, produced_fault, results_of, rewritten, signed_verification, trusting

SIGNED = "signed joint-test report verified"


def evidence(base: Path) -> list[Path]:
    return [fake_run(base, "soak", {"duration_s": 30.0, "interruptions": []}),
            fake_run(base, "fault run", produced_fault("drive-pull")),
            fake_run(base, "fault run", produced_fault("link-down"))]


def signoff(paths: list[Path], config) -> object:
    return {c.name: c for c in GATES["g4"].evaluate(Evidence.from_paths(paths), config).criteria}[SIGNED]


def test_a_report_signed_with_any_key_is_not_run_until_the_buyer_names_its_signer(tmp_path):
    """Review: the vendor's own key, pinned with --public-key at verify time, passed (default trusted_signers [])."""
    runs = evidence(tmp_path / "runs")
    verify_run, signer = signed_verification(tmp_path / "vendor", runs)
    assert results_of(verify_run)["verification"]["pinned"] is True
    anyone = signoff([*runs, verify_run], load_config(None))
    assert anyone.outcome is Outcome.NOT_RUN
    assert anyone.detail.startswith(f'no trusted signer configured: set gates.toml [g4] trusted_signers = ["{signer}"]')
    honest = signoff([*runs, verify_run], trusting(signer))
    assert honest.outcome is Outcome.PASS and "carries the soak " in honest.detail
    assert signoff([*runs, verify_run], trusting("0123456789abcdef")).outcome is Outcome.FAIL   # another signer


def test_a_verified_bundle_that_does_not_carry_the_judged_soak_and_faults_fails(tmp_path):
    runs = evidence(tmp_path / "runs")
    verify_run, signer = signed_verification(tmp_path / "vendor", runs[:1])          # the soak alone signed
    found = signoff([*runs, verify_run], trusting(signer))
    assert found.outcome is Outcome.FAIL
    assert f"does not carry drive pull {runs[1].name}, link cut {runs[2].name}" in found.detail
    # the soak the gate judges re-written after signing (its manifest made again): another version, not signed
    data = results_of(runs[0])
    rewritten(runs[0], {**data, "duration_s": 72 * 3600.0})
    found = signoff([runs[0], verify_run], trusting(signer))
    assert found.outcome is Outcome.FAIL and f"does not carry soak {runs[0].name}" in found.detail


def test_a_verification_without_its_bundled_runs_or_without_judged_runs_is_not_run(tmp_path):
    runs = evidence(tmp_path / "runs")
    verify_run, signer = signed_verification(tmp_path / "vendor", runs)
    assert signoff([verify_run], trusting(signer)).detail.endswith(
        "no soak or fault run among the evidence: nothing for the signed report to carry")
    data = results_of(verify_run)
    del data["verification"]["runs"]                                   # as an fxprobe before it listed them
    rewritten(verify_run, data)
    older = signoff([*runs, verify_run], trusting(signer))
    assert older.outcome is Outcome.NOT_RUN and "lists no bundled runs" in older.detail
