"""The restore journal: the undo of an injected fault, on disk (fsync'd) BEFORE the fault happens.

``fxprobe fault restore`` replays whatever is still open after a crash or ``kill -9``; a normal
run closes its entry once it has restored. One JSON file holds the open entries::

    {"entries": [{"id": "...", "written": "...", "pid": 123, "scenario": "drive-pull",
                  "restores": [{"method": "lab-drive", "lab": "default", "slot": 3}]}]}

``restores`` are undone last-first (the fault itself is the last one written).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from fxprobe.core.errors import BadInput
from fxprobe.core.rundir import utc_stamp


def journal_path() -> Path:
    base = os.environ.get("FXPROBE_FAULT_JOURNAL")
    if base:
        return Path(base)
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(state) / "fxprobe" / "fault-journal.json"


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class Journal:
    path: Path

    @classmethod
    def default(cls) -> "Journal":
        return cls(journal_path())

    def entries(self) -> list[dict]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return []
        except json.JSONDecodeError as exc:
            raise BadInput(f"restore journal {self.path}: not valid JSON ({exc.msg})",
                           hint="read it and undo the fault by hand, then delete the file") from None
        if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
            raise BadInput(f"restore journal {self.path}: key 'entries' missing",
                           hint="read it and undo the fault by hand, then delete the file")
        return data["entries"]

    def _write(self, entries: list[dict]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as handle:
            json.dump({"entries": entries}, handle, indent=1)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)

    def open(self, entry_id: str, scenario: str, restores: list[dict], run_dir: str = "") -> dict:
        """Write down how to undo a fault (and the preparation before it). Call it before injecting."""
        entry = {"id": entry_id, "written": utc_stamp(), "pid": os.getpid(), "scenario": scenario,
                 "run_dir": run_dir, "restores": list(restores)}
        self._write([e for e in self.entries() if e.get("id") != entry_id] + [entry])
        return entry

    def close(self, entry_id: str) -> None:
        """The fault was restored: forget it."""
        remaining = [e for e in self.entries() if e.get("id") != entry_id]
        if remaining:
            self._write(remaining)
        elif self.path.exists():
            self.path.unlink()
            _fsync_dir(self.path.parent)
