"""Trusted signers: a re-signed bundle never passes G4; `report verify` changes nothing it verifies; a missing or
edited manifest is named; VERIFY.md's plain openssl/sha256sum commands work without fxprobe."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from fxprobe.cli.main import main
from fxprobe.report.build import build_report
from fxprobe.report.bundle import write_manifest
from fxprobe.report.signing import generate_keypair
from gate_helpers import fake_run, fxprobe, results_of, runs_of


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    base = tmp_path_factory.mktemp("signers")
    run = fake_run(base / "runs", "soak", {"duration_s": 30.0, "interruptions": []})
    keys = base / "keys"
    real = generate_keypair(keys / "vendor.pem", keys / "vendor.pub")
    generate_keypair(keys / "attacker.pem", keys / "attacker.pub")
    build_report([run], base / "report", keys / "vendor.pem")
    return base / "report", keys, real


def copy(signed, tmp_path, name="copy") -> Path:
    target = tmp_path / name
    shutil.copytree(signed[0], target)
    return target


def resigned(signed, tmp_path) -> Path:
    """Edit report.md, make a new key, re-sign: the attack of the finding."""
    bundle = copy(signed, tmp_path, "resigned")
    (bundle / "report.md").write_text((bundle / "report.md").read_text() + "\nAll gates PASS.\n")
    write_manifest(bundle, signed[1] / "attacker.pem")
    return bundle


def verify_run(tmp_path, bundle: Path, *key: str) -> tuple[int, Path]:
    code = fxprobe(tmp_path, "report", "verify", str(bundle), *key)
    return code, runs_of(tmp_path, "report verify")[-1]


def g4_signed(tmp_path, evidence: Path, config: str | None = None, *more: Path) -> dict:
    args = ["gate", "g4", "--evidence", str(evidence), *[str(p) for p in more]]
    if config is not None:
        (tmp_path / "gates.toml").write_text(config)
        args += ["--config", str(tmp_path / "gates.toml")]
    fxprobe(tmp_path, *args)
    results = results_of(runs_of(tmp_path, "gate g4")[-1])
    return next(c for c in results["verdict"]["criteria"] if c["name"] == "signed joint-test report verified")


def test_a_resigned_bundle_fails_against_the_pinned_key(signed, tmp_path, capsys):
    bundle = resigned(signed, tmp_path)
    code, run = verify_run(tmp_path, bundle, "--public-key", str(signed[1] / "vendor.pub"))
    out = capsys.readouterr().out
    assert code == 1 and "NOT VERIFIED" in out and "signed by another key" in out
    assert g4_signed(tmp_path, run)["outcome"] == "fail"


def test_a_resigned_bundle_is_never_a_pass_without_a_pinned_key(signed, tmp_path, capsys):
    bundle = resigned(signed, tmp_path)
    code, run = verify_run(tmp_path, bundle)                     # today: exit 0, VERIFIED, G4 PASS
    out = capsys.readouterr().out
    assert code == 3 and "INTACT, SIGNER NOT CHECKED" in out and "VERIFIED (" not in out
    criterion = g4_signed(tmp_path, run)
    assert criterion["outcome"] == "not run" and "no trusted signer configured" in criterion["detail"]
    # the buyer pins the vendor's key in gates.toml: the attacker's signature fails
    pinned = g4_signed(tmp_path, run, f'[g4]\ntrusted_signers = ["{signed[2]}"]\n')
    assert pinned["outcome"] == "fail" and "not one of the trusted signers" in pinned["detail"]


def test_the_genuine_bundle_passes_with_its_signer_trusted_either_way(signed, tmp_path):
    soak = signed[0].parent / "runs"
    (soak,) = [p for p in soak.iterdir() if p.is_dir()]
    code, run = verify_run(tmp_path, signed[0], "--public-key", str(signed[1] / "vendor.pub"))
    assert code == 0 and g4_signed(tmp_path, run, None, soak)["outcome"] == "not run"    # pinned by the verifier
    assert g4_signed(tmp_path, run, f'[g4]\ntrusted_signers = ["{signed[2]}"]\n', soak)["outcome"] == "pass"
    code, run = verify_run(tmp_path, signed[0])
    assert code == 3
    assert g4_signed(tmp_path, run, f'[g4]\ntrusted_signers = ["{signed[2]}"]\n', soak)["outcome"] == "pass"


def tree_hashes(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()} | {"dirs": str(sorted(
                p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_dir()))}


def test_verify_run_twice_inside_the_bundle_changes_nothing(signed, tmp_path, monkeypatch, capsys):
    bundle = copy(signed, tmp_path)
    monkeypatch.chdir(bundle)
    monkeypatch.delenv("FXPROBE_RUNS", raising=False)
    from fxprobe.cli import app as app_module
    monkeypatch.setattr(app_module.App, "runs_base", Path("runs"))
    monkeypatch.setattr(app_module.App, "runs_given", False)
    before = tree_hashes(bundle)
    key = str(signed[1] / "vendor.pub")
    assert main(["report", "verify", ".", "--public-key", key]) == 0
    assert main(["report", "verify", ".", "--public-key", key]) == 0        # today: "runs/...: added after signing"
    out = capsys.readouterr().out
    assert out.count("VERIFIED (") == 2 and "record not written" in out
    assert tree_hashes(bundle) == before
    # asked to keep its record inside the bundle, it refuses (exit 2, naming the bundle); so does any command
    assert main(["--runs", "runs", "report", "verify", ".", "--public-key", key]) == 2
    assert main(["gate", "g1"]) == 2 and "inside the signed report" in capsys.readouterr().err
    assert tree_hashes(bundle) == before


@pytest.mark.parametrize("damage, words", [
    (lambda b: (b / "manifest.json").unlink(), "manifest.json: missing"),
    (lambda b: (b / "manifest.json").write_text("[1, 2]"), "manifest.json: not a valid manifest"),
    (lambda b: (b / "manifest.json").write_bytes(b"\xff\xfe{"), "manifest.json: not a valid manifest"),
])
def test_a_missing_or_unparsable_manifest_is_not_verified_naming_it(signed, tmp_path, capsys, damage, words):
    bundle = copy(signed, tmp_path)
    damage(bundle)
    assert fxprobe(tmp_path, "report", "verify", str(bundle)) == 1
    assert words in capsys.readouterr().out


def test_an_edited_manifest_is_blamed_on_the_manifest(signed, tmp_path):
    bundle = copy(signed, tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"]["report.md"]["sha256"] = "0" * 64
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    code, run = verify_run(tmp_path, bundle, "--public-key", str(signed[1] / "vendor.pub"))
    problems = results_of(run)["verification"]["problems"]
    assert code == 1 and problems[0].startswith("manifest.json: changed after signing"), problems
    assert all("unverified manifest.json" in p for p in problems[1:])


def bash(script: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def commands_of(verify_md: str) -> list[str]:
    """The indented command blocks of VERIFY.md, continuation lines joined."""
    blocks, current = [], []
    for line in verify_md.splitlines() + [""]:
        if line.startswith("       ") and line.strip():
            current.append(line.strip())
        elif current:
            blocks.append("\n".join(current).replace("\\\n", " "))
            current = []
    return blocks


def test_verify_md_commands_check_the_bundle_without_fxprobe(signed, tmp_path):
    bundle = copy(signed, tmp_path)
    shutil.copy(signed[1] / "vendor.pub", bundle.parent / "SIGNER.pub")
    text = (bundle / "VERIFY.md").read_text()
    fingerprint, signature, sums, added = (c.replace("SIGNER.pub", "../SIGNER.pub") for c in commands_of(text))
    assert bash(fingerprint, bundle).stdout.strip() == signed[2] and signed[2] in text
    done = bash(signature, bundle)
    assert done.returncode == 0 and "Signature Verified Successfully" in done.stdout, done.stderr
    assert bash(sums, bundle).returncode == 0 and bash(added, bundle).stdout == ""
    (bundle / "report.md").write_text("edited")
    (bundle / "evidence" / "extra.txt").write_text("planted")
    assert bash(sums, bundle).returncode != 0
    assert "extra.txt" in bash(f"{added} || true", bundle).stdout
