"""Paths a person names for fxprobe to write: output files and folders, and the system folders never written.

Every check is one BadInput line naming the option and the path (exit 2), before anything is written.
"""

from __future__ import annotations

import os
from pathlib import Path

from fxprobe.core.errors import BadInput

SYSTEM_DIRECTORIES = ("/", "/dev", "/proc", "/sys", "/etc", "/usr", "/boot")


def cache_folder() -> Path:
    """fxprobe's cache: $FXPROBE_CACHE, else $XDG_CACHE_HOME/fxprobe, else ~/.cache/fxprobe (lab kernels, tool
    versions)."""
    base = os.environ.get("FXPROBE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "fxprobe")
    return Path(base)


def system_directory(path: str | Path, realpath=os.path.realpath) -> str | None:
    """The system folder ``path`` is (or is inside: /etc/x), after following links; None for any other path.
    ``/`` itself is a system folder, its other children (/tmp, /srv, /mnt ...) are not."""
    real = realpath(str(path)).rstrip("/") or "/"
    if real == "/":
        return "/"
    for folder in SYSTEM_DIRECTORIES[1:]:
        if real == folder or real.startswith(folder + "/"):
            return folder
    return None


def system_refusal(path: str | Path, realpath=os.path.realpath) -> str | None:
    """Why fxprobe does not write at ``path`` ("the system folder /etc", "inside the system folder /usr")."""
    folder = system_directory(path, realpath)
    if folder is None:
        return None
    exact = (realpath(str(path)).rstrip("/") or "/") == folder
    return f"{'is the' if exact else 'is inside the'} system folder {folder}: fxprobe does not write there"


def _refuse_system(path: Path, option: str) -> None:
    refusal = system_refusal(path)
    if refusal:
        raise BadInput(f"{option} {path}: {refusal}", hint="name a path under a data or scratch folder")


def output_file(path: str | Path, option: str) -> Path:
    """A file fxprobe may write (created or replaced): not a folder, not in a system folder, its folder exists."""
    path = Path(path)
    if path.is_dir():
        raise BadInput(f"{option} {path}: is a folder", hint="name a file, e.g. " + str(path / "job.fio"))
    _refuse_system(path, option)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.exists():
        raise BadInput(f"{option} {path}: folder {parent} does not exist", hint="create it first")
    if not parent.is_dir():
        raise BadInput(f"{option} {path}: {parent} is not a folder")
    return path


def output_folder(path: str | Path, option: str) -> Path:
    """A folder fxprobe may create and fill: not an existing file, not a system folder, no file on the way."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise BadInput(f"{option} {path}: exists and is not a folder", hint="name a folder")
    _refuse_system(path, option)
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise BadInput(f"{option} {path}: {parent} is a file, not a folder")
            break
    return path
