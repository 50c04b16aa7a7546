"""A loop device over a sparse file in a test's tmp_path (root and losetup, else the test skips)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


def loop_device(tmp_path: Path, size: int, direct_io: bool = False) -> Iterator[tuple[str, str]]:
    """Yield (/dev/loopN, its identity ``loop:<backing file>``); detach it afterwards."""
    if os.geteuid() != 0 or shutil.which("losetup") is None:
        pytest.skip("needs root and losetup")
    image = tmp_path / "disk.img"
    with open(image, "wb") as handle:
        handle.truncate(size)
    done = subprocess.run(["losetup", "-f", "--show", *(["--direct-io=on"] if direct_io else []), str(image)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"no loop device: {done.stderr.strip()}")
    yield done.stdout.strip(), f"loop:{image}"
    subprocess.run(["losetup", "-d", done.stdout.strip()], check=False)
