"""Small readers of sysfs/procfs with a redirectable root (tests point it at a captured tree)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(os.environ.get("FXPROBE_SYSROOT", "/"))


def root() -> str:
    """The root every reader here reads under, as a run records it: "/" is this machine's kernel; anything else
    (FXPROBE_SYSROOT, a test's tree) is not evidence about this machine."""
    return str(ROOT)


def path(rel: str, root: Path | None = None) -> Path:
    return (root or ROOT) / rel.lstrip("/")


def read(rel: str, default: str | None = None, root: Path | None = None) -> str | None:
    """The stripped text of a sysfs/procfs file, or ``default`` when it cannot be read.
    (Plain strings, not pathlib: a soak's 1 Hz sampler reads ~50 files a second.)"""
    try:
        with open(os.path.join(root or ROOT, rel.lstrip("/")), errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return default


def listdir(rel: str, root: Path | None = None) -> list[str]:
    try:
        return sorted(os.listdir(os.path.join(root or ROOT, rel.lstrip("/"))))
    except OSError:
        return []


def link_name(rel: str, root: Path | None = None) -> str | None:
    """The last component of where the symlink ``rel`` points (``.../0000:00:03.0``), or None."""
    try:
        return os.path.basename(os.readlink(path(rel, root)).rstrip("/")) or None
    except OSError:
        return None


def exists(rel: str, root: Path | None = None) -> bool:
    return path(rel, root).exists()


def filesystems(root: Path | None = None) -> set[str]:
    text = read("/proc/filesystems", "", root) or ""
    return {line.split()[-1] for line in text.splitlines() if line.strip()}
