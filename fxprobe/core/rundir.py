"""The run directory: the evidence store every command writes and every gate reads.

Layout::

    runs/<UTC time>-<command>/
        commands.jsonl     one JSON record per subprocess (argv, host, cwd, env,
                           start/end UTC ms, exit code, stdout/stderr file names)
        raw/               stdout/stderr of each subprocess, tool outputs, logs
        results.json       the parsed results and verdicts of the command
        environment.json   what was known about the machine (preflight data)
        manifest.json      SHA-256 and size of every other file
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from fxprobe.core.errors import BadInput

MANIFEST = "manifest.json"
COMMANDS = "commands.jsonl"
RESULTS = "results.json"
ENVIRONMENT = "environment.json"


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def utc_stamp(moment: dt.datetime | None = None) -> str:
    """ISO-8601 UTC with milliseconds, e.g. 2026-12-02T17:19:14.123Z."""
    moment = moment or utc_now()
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:80] or "x"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=False, default=str)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class RunDir:
    """One command's evidence folder."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.raw = self.path / "raw"
        self._lock = threading.Lock()
        self._seq = 0

    @classmethod
    def create(cls, base: Path, command: str) -> "RunDir":
        base = Path(base)
        stamp = utc_now().strftime("%Y%m%dT%H%M%S.%fZ")
        path = base / f"{stamp}-{_safe_name(command)}"
        (path / "raw").mkdir(parents=True, exist_ok=False)
        run = cls(path)
        return run

    @classmethod
    def open(cls, path: Path) -> "RunDir":
        path = Path(path)
        if not path.is_dir():
            raise BadInput(f"{path}: not a run directory (it does not exist)",
                           hint="pass a folder made by an fxprobe command")
        if not (path / COMMANDS).exists() and not (path / RESULTS).exists():
            raise BadInput(f"{path}: not a run directory (no {RESULTS} or {COMMANDS})",
                           hint="pass a folder made by an fxprobe command")
        run = cls(path)
        run._seq = sum(1 for _ in run.commands())
        return run

    # -- writing ---------------------------------------------------------
    def next_name(self, label: str) -> str:
        with self._lock:
            self._seq += 1
            return f"{self._seq:04d}-{_safe_name(label)}"

    def raw_path(self, name: str) -> Path:
        self.raw.mkdir(parents=True, exist_ok=True)
        return self.raw / name

    def write_raw(self, name: str, data: str | bytes) -> Path:
        path = self.raw_path(name)
        mode = "wb" if isinstance(data, bytes) else "w"
        with open(path, mode) as handle:
            handle.write(data)
        return path

    def record_command(self, record: dict) -> None:
        line = json.dumps(record, default=str)
        with self._lock, open(self.path / COMMANDS, "a") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def write_results(self, results: dict) -> None:
        write_json(self.path / RESULTS, results)

    def write_environment(self, environment: dict) -> None:
        write_json(self.path / ENVIRONMENT, environment)

    def finalize(self) -> dict:
        """Write manifest.json: SHA-256 and size of every file but itself."""
        files = {}
        for path in sorted(self.path.rglob("*")):
            if path.is_file() and path.name != MANIFEST and not path.name.endswith(".tmp"):
                rel = path.relative_to(self.path).as_posix()
                files[rel] = {"sha256": sha256_file(path), "bytes": path.stat().st_size}
        manifest = {"created": utc_stamp(), "algorithm": "sha256", "files": files}
        write_json(self.path / MANIFEST, manifest)
        return manifest

    # -- reading ---------------------------------------------------------
    def commands(self):
        path = self.path / COMMANDS
        if not path.exists():
            return
        with open(path) as handle:
            for line in handle:
                if line.strip():
                    yield json.loads(line)

    def results(self) -> dict:
        path = self.path / RESULTS
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            raise BadInput(f"{path}: missing", hint="the run did not finish; run the command again") from None
        except json.JSONDecodeError as exc:
            raise BadInput(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None

    def verify_manifest(self) -> list[str]:
        """Names of files whose hash differs from the manifest, or that appeared/vanished."""
        manifest = json.loads((self.path / MANIFEST).read_text())
        problems = []
        seen = set()
        for rel, entry in manifest["files"].items():
            path = self.path / rel
            seen.add(rel)
            if not path.exists():
                problems.append(f"{rel}: missing")
            elif sha256_file(path) != entry["sha256"]:
                problems.append(f"{rel}: changed")
        for path in self.path.rglob("*"):
            rel = path.relative_to(self.path).as_posix()
            if path.is_file() and rel not in seen and path.name != MANIFEST and not rel.startswith("signature"):
                problems.append(f"{rel}: not in manifest")
        return problems
