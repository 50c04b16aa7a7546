"""The evidence bundle: files, their SHA-256 manifest, Ed25519 signatures, and verification.

Layout of a report folder::

    manifest.json    {"algorithm": "sha256", "files": {relpath: {"sha256", "bytes"}}, "signer": fingerprint}
    manifest.sig     base64 Ed25519 signature over the exact bytes of manifest.json
    SHA256SUMS       the same hashes in `sha256sum -c` form (listed in the manifest)
    SHA256SUMS.sig   base64 Ed25519 signature over SHA256SUMS (for openssl, without fxprobe)
    VERIFY.md        the plain openssl / sha256sum commands an auditor runs (listed in the manifest)
    signer.pub       the signer's public key (listed in the manifest)
    everything else (report.md, report.html, junit.xml, plots/, evidence/<run>/...)

``verify_bundle`` checks the signature first: only a manifest whose signature verifies is a list worth
comparing the files with, so an edited manifest is blamed on the manifest. Then it re-hashes every file and
names each changed, missing or unlisted one, and checks each bundled run folder against its own manifest. Who
signed counts only when the key is pinned (``--public-key``): against the bundle's own ``signer.pub`` alone, the
files are shown unchanged since *someone* signed them, and the outcome is NOT RUN. (G4's sign-off goes further:
the signer must be among gates.toml ``[g4] trusted_signers``, whoever verified, see fxprobe.gates.catalog.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from fxprobe.core import manifest as manifests
from fxprobe.core.errors import BadInput
from fxprobe.core.rundir import RunDir, utc_stamp
from fxprobe.core.verdict import Outcome
from fxprobe.report import signing

MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
SUMS = "SHA256SUMS"
SUMS_SIGNATURE = "SHA256SUMS.sig"
VERIFY_NOTE = "VERIFY.md"
PUBLIC_KEY = "signer.pub"
UNLISTED = {MANIFEST, SIGNATURE, SUMS_SIGNATURE}
NOT_SUMMED = UNLISTED | {SUMS}


VERIFY_TEXT = """# Verifying this report without fxprobe

Everything below uses only openssl (3.0 or later), sha256sum, base64 and bash. Run it inside this folder.

1. Take the signer's public key from the signer, not from this folder, and check its fingerprint
   (the first 16 hex digits of SHA-256 over the raw Ed25519 key). This report was signed by `{signer}`:

       openssl pkey -pubin -in SIGNER.pub -outform DER | tail -c 32 | sha256sum | cut -c1-16

   (`signer.pub` in this folder is the key that signed it; it proves the files are unchanged since signing,
   not who signed. Use it for SIGNER.pub only if its fingerprint is the one you were given.)

2. Check the signature over the list of hashes:

       base64 -d SHA256SUMS.sig > /tmp/SHA256SUMS.sig.bin
       openssl pkeyutl -verify -pubin -inkey SIGNER.pub -rawin -in SHA256SUMS -sigfile /tmp/SHA256SUMS.sig.bin

   It must print `Signature Verified Successfully`. (`manifest.json`/`manifest.sig` carry the same hashes for
   `fxprobe report verify`; check them the same way with `-in manifest.json` and `manifest.sig`.)

3. Check every file against the list; every line must end in `OK`:

       sha256sum --strict -c SHA256SUMS

4. Check that no file was added after signing; this must print nothing:

       find . -type f ! -path ./SHA256SUMS ! -path ./SHA256SUMS.sig ! -path ./manifest.json ! -path ./manifest.sig \\
           -printf '%P\\n' | LC_ALL=C sort | diff - <(cut -c67- SHA256SUMS | LC_ALL=C sort)
"""


UNSIGNED_TEXT = """# Checking this report without fxprobe

This report is UNSIGNED: nothing shows who made it. The files can still be checked against their list of
hashes, with sha256sum only (every line must end in `OK`):

    sha256sum --strict -c SHA256SUMS
"""


def write_manifest(folder: Path, private_key_path: Path | None = None) -> dict:
    """Hash every file of ``folder`` into manifest.json and SHA256SUMS (with VERIFY.md); sign both when a
    key is given."""
    folder = Path(folder)
    signer, key = None, None
    if private_key_path is not None:
        key = signing.load_private_key(private_key_path)
        (folder / PUBLIC_KEY).write_bytes(signing.public_pem(key.public_key()))
        signer = signing.fingerprint(key.public_key())
    (folder / VERIFY_NOTE).write_text(VERIFY_TEXT.format(signer=signer) if signer else UNSIGNED_TEXT)
    table = manifests.file_table(folder, lambda rel: rel in NOT_SUMMED)
    sums = "".join(f"{entry['sha256']}  {rel}\n" for rel, entry in sorted(table.items()))
    (folder / SUMS).write_text(sums)
    manifest, data = manifests.write(folder / MANIFEST, folder, lambda rel: rel in UNLISTED, utc_stamp(),
                                     signer=signer)
    if key is not None:
        (folder / SIGNATURE).write_text(signing.sign(key, data) + "\n")
        (folder / SUMS_SIGNATURE).write_text(signing.sign(key, sums.encode()) + "\n")
    return manifest


@dataclass(frozen=True)
class Verification:
    folder: str
    files_checked: int
    problems: tuple[str, ...] = ()
    signature: str = ""             # "valid", "BAD", "missing"
    signer: str = ""                # fingerprint of the key the signature verified with
    key_source: str = ""
    pinned: bool = False            # that key was given by the verifier (--public-key, trusted_signers)
    notes: tuple[str, ...] = field(default_factory=tuple)
    runs: tuple[tuple[str, str | None], ...] = ()    # evidence/<run> bundled: (name, SHA-256 of its manifest.json)

    @property
    def ok(self) -> bool:
        """Files unchanged since signing and the signature valid (with whichever key was used)."""
        return not self.problems and self.signature == "valid"

    @property
    def outcome(self) -> Outcome:
        """PASS only against a pinned key; intact but checked only against the bundled key: NOT RUN."""
        if not self.ok:
            return Outcome.FAIL
        return Outcome.PASS if self.pinned else Outcome.NOT_RUN

    @property
    def reason(self) -> str:
        if self.outcome is Outcome.NOT_RUN:
            return (f"signer {self.signer} not checked: verified only against the bundle's own {PUBLIC_KEY}; pin "
                    "the signer with --public-key SIGNER.pub or gates.toml [g4] trusted_signers")
        return "; ".join(self.problems)

    def lines(self) -> list[str]:
        word = {Outcome.PASS: "VERIFIED", Outcome.FAIL: "NOT VERIFIED",
                Outcome.NOT_RUN: "INTACT, SIGNER NOT CHECKED"}[self.outcome]
        head = f"report {self.folder}: {word} ({self.files_checked} files hashed, signature {self.signature}"
        head += f", signer {self.signer} from {self.key_source})" if self.signer else ")"
        lines = [head] + [f"  {p}" for p in self.problems] + [f"  note: {n}" for n in self.notes]
        return lines + ([f"  {self.reason}"] if self.outcome is Outcome.NOT_RUN else [])

    def to_dict(self) -> dict:
        return {"folder": self.folder, "ok": self.ok, "verified": self.outcome is Outcome.PASS,
                "files_checked": self.files_checked, "problems": list(self.problems), "signature": self.signature,
                "signer": self.signer, "key_source": self.key_source, "pinned": self.pinned,
                "notes": list(self.notes), "runs": [{"name": name, "manifest_sha256": sha} for name, sha in self.runs]}


def _read_manifest(folder: Path) -> tuple[bytes | None, dict | None, str]:
    path = folder / MANIFEST
    if not path.is_file():
        return None, None, f"{MANIFEST}: missing (not a signed report, or the manifest was removed)"
    data = path.read_bytes()
    try:
        manifest = json.loads(data)
        if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
            raise ValueError("no 'files' table")
    except ValueError as exc:                   # JSON and UTF-8 errors are ValueErrors
        return data, None, f"{MANIFEST}: not a valid manifest ({exc}); it changed or was never one"
    return data, manifest, ""


def _key(folder: Path, public_key_path: Path | None, trusted: tuple[str, ...]):
    """(key, where it came from, pinned?, problem)."""
    path = Path(public_key_path) if public_key_path is not None else folder / PUBLIC_KEY
    source = str(public_key_path) if public_key_path is not None else f"the bundled {PUBLIC_KEY}"
    if not path.is_file():
        return None, source, False, f"{path}: public key missing"
    try:
        key = signing.load_public_key(path)
    except BadInput as exc:
        return None, source, False, str(exc)
    pinned = public_key_path is not None or signing.fingerprint(key) in trusted
    if public_key_path is None and pinned:
        source += " (its fingerprint is among the trusted signers)"
    return key, source, pinned, ""


def verify_bundle(folder: Path, public_key_path: Path | None = None,
                  trusted: tuple[str, ...] = ()) -> Verification:
    """Signature first (an edited manifest is the manifest's fault), then every file; see the module doc."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BadInput(f"{folder}: not a folder", hint="pass the --out folder of `fxprobe report`")
    data, manifest, problem = _read_manifest(folder)
    if manifest is None:
        return Verification(str(folder), 0, (problem,), "BAD" if data is not None else "missing")
    listed = manifest["files"]
    key, source, pinned, problem = _key(folder, public_key_path, tuple(trusted))
    if not (folder / SIGNATURE).is_file():
        problem = f"{SIGNATURE}: missing (unsigned report)"
    if problem:
        return Verification(str(folder), len(listed), (problem, *_files(folder, listed)), "missing"
                            if "unsigned" in problem else "BAD", "", source)
    text = (folder / SIGNATURE).read_bytes().decode("ascii", errors="replace")
    if not signing.verify(key, data, text):
        return Verification(str(folder), len(listed), _bad_signature(folder, listed, data, text, public_key_path),
                            "BAD", "", source)
    problems = _files(folder, listed) + _sums_signature(folder, key) + evidence_problems(folder)
    return Verification(str(folder), len(listed), tuple(problems), "valid", signing.fingerprint(key), source, pinned,
                        runs=bundled_runs(folder))


def bundled_runs(folder: Path) -> tuple[tuple[str, str | None], ...]:
    """Each evidence/<run> of a bundle and the SHA-256 of its manifest.json: which runs the signature covers (G4
    finds the soak and fault runs it judged among them)."""
    evidence = Path(folder) / "evidence"
    return tuple((run.name, RunDir(run).manifest_sha256()) for run in sorted(evidence.iterdir()) if run.is_dir()) \
        if evidence.is_dir() else ()


def evidence_problems(folder: Path) -> list[str]:
    """Each bundled run folder (evidence/<run>/) checked against its own manifest.json (RunDir.integrity): a run
    edited before it was bundled and signed is signed as edited; its own manifest still tells."""
    evidence = Path(folder) / "evidence"
    if not evidence.is_dir():
        return []
    return [f"evidence/{run.name}: {problem} (the run's own {MANIFEST})" for run in sorted(evidence.iterdir())
            if run.is_dir() for problem in RunDir(run).integrity()]


def _sums_signature(folder: Path, key) -> list[str]:
    """SHA256SUMS.sig (what an auditor checks with openssl) must verify with the same key."""
    if not (folder / SUMS).is_file():
        return []                       # a bundle from before SHA256SUMS existed: the manifest covers it all
    path = folder / SUMS_SIGNATURE
    if not path.is_file():
        return [f"{SUMS_SIGNATURE}: missing (the openssl check of VERIFY.md cannot be made)"]
    if not signing.verify(key, (folder / SUMS).read_bytes(), path.read_bytes().decode("ascii", errors="replace")):
        return [f"{SUMS_SIGNATURE}: BAD signature over {SUMS}"]
    return []


def _files(folder: Path, listed: dict) -> list[str]:
    return manifests.compare(folder, listed, lambda rel: rel in UNLISTED, added="not in the manifest (added after signing)")


def _bad_signature(folder: Path, listed: dict, data: bytes, text: str, pinned_path: Path | None) -> tuple[str, ...]:
    """The manifest's signature does not verify: say whether another key signed it or the manifest changed;
    the files are compared with a list nobody vouches for, so they come second."""
    bundled = folder / PUBLIC_KEY
    other = None
    if pinned_path is not None and bundled.is_file():
        try:
            candidate = signing.load_public_key(bundled)
            other = signing.fingerprint(candidate) if signing.verify(candidate, data, text) else None
        except BadInput:
            other = None
    if other is not None:
        head = (f"{SIGNATURE}: signed by another key ({other}, the bundled {PUBLIC_KEY}), not by {pinned_path}: "
                "the bundle was re-signed")
    else:
        head = (f"{MANIFEST}: changed after signing ({SIGNATURE} does not verify it), or {SIGNATURE} itself changed")
    rest = [f"{p} (compared with the unverified {MANIFEST})" for p in _files(folder, listed)]
    return (head, *rest)
