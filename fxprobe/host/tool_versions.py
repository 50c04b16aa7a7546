"""Tool versions read before, kept with the identity of the binary that gave them.

Every run folder's environment.json lists the version of each wrapped tool. Asking ten programs for their version
at every command costs ~0.3 s here and 3-4 s in an emulated (TCG) lab guest, where a command that takes 10 s spent
a third of it there. A version is the binary's: while the same file sits at the same path - same inode, size, mtime
and ctime (a ctime cannot be set back: any write, rename or chmod moves it) - the answer is the same. So the
environment log reads each version once per binary and says, per tool, when it was read and that the binary has
not changed since. ``fxprobe doctor`` and ``fxprobe preflight`` always ask again.

The cache is ``$FXPROBE_CACHE`` (default ``~/.cache/fxprobe``) ``/tool-versions.json``; a file that cannot be read
or written is ignored (the versions are then read as before).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from fxprobe.core.paths import cache_folder

RULE = ("a tool's version is read again when its binary's path, inode, size, mtime or ctime changes; "
        "'read' is when each version was read")


class CachedVersion(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    argv: list[str]
    binary: list[str | int]     # resolved path, st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns
    output: str                 # what the binary answered (stdout + stderr)
    read: str                   # UTC stamp
    origin: dict | None = None  # tools.dpkg.ToolOrigin of the same binary (None: written before origins were kept)


class CacheFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    versions: dict[str, CachedVersion] = {}


def binary_identity(path: str) -> list[str | int] | None:
    """The binary at ``path`` as the cache knows it, or None when it cannot be stat'ed."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return [real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


class ToolVersionCache:
    def __init__(self, path: Path | None = None):
        self.path = path or cache_folder() / "tool-versions.json"
        try:
            self.file = CacheFile.model_validate(json.loads(self.path.read_text()))
        except (OSError, ValueError, ValidationError):
            self.file = CacheFile()
        self.changed = False

    def get(self, name: str, argv: list[str], binary: list[str | int] | None) -> CachedVersion | None:
        cached = self.file.versions.get(name)
        if binary is None or cached is None or cached.argv != argv or cached.binary != binary:
            return None
        return cached

    def put(self, name: str, entry: CachedVersion) -> None:
        self.file.versions[name] = entry
        self.changed = True

    def save(self) -> None:
        if not self.changed:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            temporary.write_text(self.file.model_dump_json(indent=1))
            temporary.replace(self.path)
        except OSError:
            pass            # a read-only home: the versions are read again next time
