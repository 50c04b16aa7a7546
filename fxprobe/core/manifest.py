"""SHA-256 manifests of a folder: the one way they are written (run directories, report bundles) and checked.

A manifest is canonical JSON (sorted keys, two-space indent, one final newline), so its exact bytes can be
signed: ``{"algorithm": "sha256", "created": ..., "files": {relpath: {"bytes": n, "sha256": hex}}, ...}``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

ALGORITHM = "sha256"

Skip = Callable[[str], bool]          # relpath -> True when the file is not listed (the manifest itself...)
SIGNED_TREE_MARKERS = ("manifest.sig", "signer.pub", "VERIFY.md", "SHA256SUMS")   # a report bundle has these


def is_bundle(folder: Path) -> bool:
    """A signed or hashed report folder (fxprobe.report.bundle): its tree must not change after signing."""
    folder = Path(folder)
    return (folder / "manifest.json").is_file() and any((folder / name).exists() for name in SIGNED_TREE_MARKERS)


def bundle_around(path: Path) -> Path | None:
    """The report bundle that ``path`` lies in (or is), if any."""
    path = Path(path).resolve()
    for folder in (path, *path.parents):
        if is_bundle(folder):
            return folder
    return None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_table(folder: Path, skip: Skip) -> dict[str, dict]:
    """SHA-256 and size of every file under ``folder`` that ``skip`` does not exclude, by POSIX relpath."""
    folder = Path(folder)
    files = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and not skip(rel):
            files[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
    return files


def canonical(manifest: dict) -> bytes:
    """The exact bytes of a manifest file (what a signature covers)."""
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()


def write(path: Path, folder: Path, skip: Skip, created: str, **extra) -> tuple[dict, bytes]:
    """Hash ``folder`` into the manifest file ``path``; returns the manifest and its bytes."""
    manifest = {"created": created, "algorithm": ALGORITHM, **extra, "files": file_table(folder, skip)}
    data = canonical(manifest)
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return manifest, data


def compare(folder: Path, listed: dict, skip: Skip, *, added: str = "not in the manifest") -> list[str]:
    """Each listed file missing or changed, and each file present but not listed, one line each."""
    folder = Path(folder)
    problems = []
    for rel, entry in sorted(listed.items()):
        path = folder / rel
        if not path.is_file():
            problems.append(f"{rel}: missing")
        elif not isinstance(entry, dict) or sha256_file(path) != entry.get("sha256"):
            problems.append(f"{rel}: changed (SHA-256 differs from the manifest)")
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and rel not in listed and not skip(rel):
            problems.append(f"{rel}: {added}")
    return problems
