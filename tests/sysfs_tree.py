"""A sysfs/procfs tree rebuilt from a capture (scripts/capture-nvme-sysfs), for tests that read it under a
redirected root (core.sysfs.ROOT), with nvme-cli's captured output on PATH (STANDIN: an nvme stand-in)."""

from __future__ import annotations

import json
from pathlib import Path

ARRAY = Path(__file__).parent / "fixtures" / "lab" / "selftest-array"
STANDIN = Path(__file__).parent / "standin" / "selftest-array"      # nvme-cli over ARRAY's captured output


def build(root: Path, capture: Path = ARRAY / "sysfs.json") -> Path:
    data = json.loads(capture.read_text())
    for folder in data["dirs"]:
        (root / folder.lstrip("/")).mkdir(parents=True, exist_ok=True)
    for path, text in data["files"].items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for path, link in data["links"].items():
        (root / path.lstrip("/")).symlink_to(link)
    return root


def write(root: Path, path: str, text: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
