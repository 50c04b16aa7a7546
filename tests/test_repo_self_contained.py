"""The product's files name no path outside the repository: what a user needs is in the repo's own docs.

Captured evidence (``tests/fixtures/**`` JSON, JSONL and raw/ files written by the lab: environments and command
lines as they were) keeps the paths it was captured with; everything else is checked, this file too.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = ("/work" + "/", ".." + "/shared")       # split so this file does not name them itself


def tracked() -> list[Path]:
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name]


def captured(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return relative.startswith("tests/fixtures/") and (path.suffix in (".json", ".jsonl", ".stdout", ".stderr")
                                                       or "/raw/" in relative)


def test_no_file_names_a_path_outside_the_repository():
    found = []
    for path in tracked():
        if captured(path) or not path.is_file():
            continue
        text = path.read_bytes().decode(errors="replace")
        found += [f"{path.relative_to(ROOT)}: {needle}" for needle in OUTSIDE if needle in text]
    assert found == [], found
