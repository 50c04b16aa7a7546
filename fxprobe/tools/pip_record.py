"""pip adapter: which installed Python distribution a program belongs to, and whether every file of that
distribution is still the one pip installed.

A benchmark program installed by pip (``vllm``: a console script in ``<prefix>/bin`` whose code lives in
``<prefix>/lib/pythonX.Y/site-packages/vllm``) is traced as :mod:`fxprobe.tools.dpkg` traces a Debian package's
program, from pip's own records in the distribution's ``<name>-<version>.dist-info`` folder:

- ``RECORD``: one CSV row per installed file, ``path,sha256=<digest>,size``. The path is relative to the folder that
  holds the ``.dist-info`` (``../../../bin/vllm`` for the console script). The digest is URL-safe base64 without
  padding. RECORD itself and compiled ``.pyc`` files have no digest;
- ``METADATA``: the ``Name:`` and ``Version:`` header lines.

The program is traced when a RECORD lists its file. Then every file that RECORD hashes is compared: the code that
computes the figures is the distribution's, not the few lines of its console script. The interpreter that runs it
is not traced here.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from fxprobe.core.errors import ParseError
from fxprobe.tools.dpkg import CHANGED, PACKAGED, ToolOrigin

CHUNK = 1 << 20
SHOWN = 5              # changed files named in a detail line


@dataclass(frozen=True)
class RecordEntry:
    path: str              # relative to the folder holding the .dist-info
    algorithm: str         # "" when RECORD keeps no digest of the file
    digest: str            # URL-safe base64, no padding
    size: int | None


@dataclass(frozen=True)
class Distribution:
    folder: Path           # the .dist-info folder
    name: str
    version: str
    entries: tuple[RecordEntry, ...]

    def file(self, entry: RecordEntry) -> Path:
        return Path(os.path.normpath(self.folder.parent / entry.path))


def parse_record(text: str, source: str) -> tuple[RecordEntry, ...]:
    """The rows of a RECORD file (``path,algorithm=digest,size``; the last two may be empty)."""
    entries = []
    for number, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row:
            continue
        if len(row) != 3 or not row[0]:
            raise ParseError(source, f"row {number}", f"expected path,hash,size; got {len(row)} fields")
        path, hashed, size = row
        algorithm, _, digest = hashed.partition("=")
        if hashed and (algorithm not in hashlib.algorithms_guaranteed or not digest):
            raise ParseError(source, f"row {number}", f"hash {hashed!r} is not ALGORITHM=DIGEST")
        if size and not size.isdigit():
            raise ParseError(source, f"row {number}", f"size {size!r} is not a number of bytes")
        entries.append(RecordEntry(path, algorithm, digest, int(size) if size else None))
    return tuple(entries)


def parse_metadata(text: str) -> tuple[str, str]:
    """(Name, Version) from a METADATA file's header (before its first blank line)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    return fields.get("name", ""), fields.get("version", "")


def site_folders(program: Path) -> list[Path]:
    """Where a distribution that installed ``program`` keeps its .dist-info: beside the program's prefix
    (``<prefix>/bin/x`` -> ``<prefix>/lib/python3*/site-packages``, ``dist-packages`` on Debian), then the folders
    of this Python's own path."""
    prefix = program.parent.parent
    found = [*prefix.glob("lib/python3*/site-packages"), *prefix.glob("lib/python3*/dist-packages"),
             *prefix.glob("local/lib/python3*/dist-packages"), *prefix.glob("lib/python3/dist-packages")]
    found += [Path(p) for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    return [p for p in dict.fromkeys(found) if p.is_dir()]


def owner(program: Path, folders: list[Path]) -> Distribution | None:
    """The distribution whose RECORD lists ``program`` (as PATH found it, or with its links resolved)."""
    wanted = {os.path.normpath(program), str(program.resolve())}
    for folder in folders:
        for record in sorted(folder.glob("*.dist-info/RECORD")):
            try:
                text = record.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            # a cheap look at each row's path first: only the owner's RECORD is parsed (a malformed RECORD of
            # another distribution does not stop the trace)
            if not any(os.path.normpath(folder / row.split(",")[0]) in wanted for row in text.splitlines() if row):
                continue
            entries = parse_record(text, str(record))
            try:
                name, version = parse_metadata((record.parent / "METADATA").read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                name, version = record.parent.name.removesuffix(".dist-info"), ""
            return Distribution(record.parent, name, version, entries)
    return None


def digest_of(path: Path, algorithm: str) -> str:
    """A file's digest as RECORD writes it."""
    h = hashlib.new(algorithm)
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode("ascii")


def differences(dist: Distribution) -> tuple[int, list[str], str]:
    """(files compared, the ones unlike their RECORD row: "PATH changed" or "PATH missing", the distribution's
    digest: the SHA-256 of one ``PATH ALGORITHM=DIGEST`` line per compared file as found, sorted by path)."""
    compared, unlike, found = 0, [], []
    for entry in sorted(dist.entries, key=lambda e: e.path):
        if not entry.algorithm:
            continue
        compared += 1
        try:
            digest = digest_of(dist.file(entry), entry.algorithm)
        except OSError:
            unlike.append(f"{entry.path} missing")
            found.append(f"{entry.path} missing")
            continue
        found.append(f"{entry.path} {entry.algorithm}={digest}")
        if digest != entry.digest:
            unlike.append(f"{entry.path} changed")
    return compared, unlike, hashlib.sha256("\n".join(found).encode()).hexdigest()


def origin(program: Path, folders: list[Path] | None = None) -> ToolOrigin | None:
    """Where ``program`` came from by pip's records: None when no RECORD lists it (ask dpkg). Its ``sha256`` is the
    distribution's digest as found (``differences``): what gates.toml [provenance] trusted_builds names to trust
    exactly these files."""
    dist = owner(program, site_folders(program) if folders is None else folders)
    if dist is None:
        return None
    compared, unlike, digest = differences(dist)
    real, package = program.resolve(), f"{dist.name} (pip)"
    if unlike:
        shown = "; ".join(unlike[:SHOWN]) + (f" (+{len(unlike) - SHOWN} more)" if len(unlike) > SHOWN else "")
        return ToolOrigin(str(real), digest, CHANGED, package, dist.version,
                          f"{len(unlike)} of {compared} files unlike {dist.folder.name}/RECORD: {shown}")
    return ToolOrigin(str(real), digest, PACKAGED, package, dist.version, f"{compared} files as {dist.folder}/RECORD")
