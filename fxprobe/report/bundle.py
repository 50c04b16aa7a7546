"""The evidence bundle: files, their SHA-256 manifest, an Ed25519 signature, and verification.

Layout of a report folder::

    manifest.json   {"algorithm": "sha256", "files": {relpath: {"sha256", "bytes"}}, "signer": fingerprint}
    manifest.sig    base64 Ed25519 signature over the exact bytes of manifest.json
    signer.pub      the signer's public key (listed in the manifest)
    everything else (report.md, report.html, junit.xml, plots/, evidence/<run>/...)

``verify_bundle`` re-hashes every file, names each changed, missing or unlisted one, and
checks the signature (against ``--public-key`` when given; the bundled ``signer.pub`` only
proves integrity, not who signed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from fxprobe.report import signing
from fxprobe.core.errors import BadInput
from fxprobe.core.rundir import sha256_file, utc_stamp

MANIFEST = "manifest.json"
SIGNATURE = "manifest.sig"
PUBLIC_KEY = "signer.pub"
UNLISTED = {MANIFEST, SIGNATURE}


def write_manifest(folder: Path, private_key_path: Path | None = None) -> dict:
    """Hash every file of ``folder`` into manifest.json; sign it when a key is given."""
    folder = Path(folder)
    signer = None
    if private_key_path is not None:
        key = signing.load_private_key(private_key_path)
        (folder / PUBLIC_KEY).write_bytes(signing.public_pem(key.public_key()))
        signer = signing.fingerprint(key.public_key())
    files = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and rel not in UNLISTED:
            files[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    manifest = {"created": utc_stamp(), "algorithm": "sha256", "signer": signer, "files": files}
    data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()
    (folder / MANIFEST).write_bytes(data)
    if private_key_path is not None:
        (folder / SIGNATURE).write_text(signing.sign(key, data) + "\n")
    return manifest


@dataclass(frozen=True)
class Verification:
    folder: str
    files_checked: int
    problems: tuple[str, ...] = ()
    signature: str = ""             # "valid", "BAD", "missing"
    signer: str = ""
    key_source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return not self.problems and self.signature == "valid"

    def lines(self) -> list[str]:
        head = f"report {self.folder}: {'VERIFIED' if self.ok else 'NOT VERIFIED'} " \
               f"({self.files_checked} files hashed, signature {self.signature}"
        head += f", signer {self.signer} from {self.key_source})" if self.signer else ")"
        return [head] + [f"  {p}" for p in self.problems] + [f"  note: {n}" for n in self.notes]

    def to_dict(self) -> dict:
        return {"folder": self.folder, "ok": self.ok, "files_checked": self.files_checked,
                "problems": list(self.problems), "signature": self.signature, "signer": self.signer,
                "key_source": self.key_source, "notes": list(self.notes)}


def verify_bundle(folder: Path, public_key_path: Path | None = None) -> Verification:
    folder = Path(folder)
    if not (folder / MANIFEST).is_file():
        raise BadInput(f"{folder}: no {MANIFEST}; not a report folder", hint="pass the --out folder of `fxprobe report`")
    data = (folder / MANIFEST).read_bytes()
    try:
        manifest = json.loads(data)
        listed = manifest["files"]
    except (ValueError, KeyError, TypeError):        # JSON and UTF-8 errors are ValueErrors
        return Verification(str(folder), 0, (f"{MANIFEST}: changed (no longer a valid manifest)",), "BAD")
    problems = []
    for rel, entry in sorted(listed.items()):
        path = folder / rel
        if not path.is_file():
            problems.append(f"{rel}: missing")
        elif not isinstance(entry, dict) or sha256_file(path) != entry.get("sha256"):
            problems.append(f"{rel}: changed (SHA-256 differs from the manifest)")
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and rel not in listed and rel not in UNLISTED:
            problems.append(f"{rel}: not in the manifest (added after signing)")
    notes = []
    if public_key_path is not None:
        key_path, key_source = Path(public_key_path), str(public_key_path)
    else:
        key_path, key_source = folder / PUBLIC_KEY, f"the bundled {PUBLIC_KEY}"
        notes.append(f"checked against the bundled {PUBLIC_KEY}: proves the files are unchanged since signing, "
                     "not who signed; pass --public-key with the signer's key to prove that")
    if not (folder / SIGNATURE).is_file():
        return Verification(str(folder), len(listed), tuple(problems + [f"{SIGNATURE}: missing (unsigned report)"]),
                            "missing", "", key_source, tuple(notes))
    if not key_path.is_file():
        return Verification(str(folder), len(listed), tuple(problems + [f"{key_path}: public key missing"]),
                            "BAD", "", key_source, tuple(notes))
    try:
        key = signing.load_public_key(key_path)
    except BadInput as exc:
        return Verification(str(folder), len(listed), tuple(problems + [f"{exc}"]), "BAD", "", key_source,
                            tuple(notes))
    valid = signing.verify(key, data, (folder / SIGNATURE).read_bytes().decode("ascii", errors="replace"))
    if not valid:
        problems.append(f"{SIGNATURE}: BAD signature ({MANIFEST} or the signature changed, or another key signed it)")
    return Verification(str(folder), len(listed), tuple(problems), "valid" if valid else "BAD",
                        signing.fingerprint(key), key_source, tuple(notes))
