"""The restore journal: the undo of an injected fault, on disk (fsync'd) BEFORE the fault happens.

``fxprobe fault restore`` replays whatever is still open after a crash or ``kill -9``; a normal
run closes its entry once it has restored. One JSON file holds the open entries::

    {"entries": [{"id": "...", "written": "...", "pid": 123, "owner_started": 1764800000.1,
                  "scenario": "drive-pull",
                  "restores": [{"method": "lab-drive", "lab": "default", "slot": 3}],
                  "loads": [{"lab": "default", "guest": "host1", "where": "lab default host1",
                             "pid": 4711, "argv": ["fio", "..."], "started": "..."}]}]}

``restores`` are undone last-first (the fault itself is the last one written). ``loads`` are the
processes the run started (the fio load), recorded as soon as they run; a run whose owner
(``pid`` + ``owner_started``) is gone left them orphaned, and they are stopped before anything else.
Every change is a read-modify-write under an flock, so concurrent runs do not lose entries.
"""

from __future__ import annotations

import fcntl
import json
import os
from contextlib import contextmanager
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

    @contextmanager
    def _locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def _store(self, entries: list[dict]) -> None:
        if entries:
            self._write(entries)
        elif self.path.exists():
            self.path.unlink()
            _fsync_dir(self.path.parent)

    def open(self, entry_id: str, scenario: str, restores: list[dict], run_dir: str = "") -> dict:
        """Write down how to undo a fault (and the preparation before it). Call it before injecting.
        The entry keeps the loads recorded in it, and its first owner (``fault restore`` rewrites it)."""
        from fxprobe.tools.procs import own_start_time
        with self._locked():
            entries = self.entries()
            old = next((e for e in entries if e.get("id") == entry_id), {})
            entry = {"id": entry_id, "written": utc_stamp(), "pid": old.get("pid", os.getpid()),
                     "owner_started": old.get("owner_started", own_start_time() if not old else None),
                     "scenario": scenario, "run_dir": run_dir, "restores": list(restores),
                     "loads": old.get("loads", [])}
            self._write([e for e in entries if e.get("id") != entry_id] + [entry])
        return entry

    def add_load(self, entry_id: str, load: dict, scenario: str = "", run_dir: str = "") -> None:
        """Record a process the run started (host, pid, argv) in its entry (opened if need be)."""
        from fxprobe.tools.procs import own_start_time
        with self._locked():
            entries = self.entries()
            entry = next((e for e in entries if e.get("id") == entry_id), None)
            if entry is None:
                entry = {"id": entry_id, "written": utc_stamp(), "pid": os.getpid(),
                         "owner_started": own_start_time(), "scenario": scenario, "run_dir": run_dir,
                         "restores": [], "loads": []}
                entries.append(entry)
            entry["loads"] = [*entry.get("loads", []), {**load, "started": utc_stamp()}]
            self._write(entries)

    def drop_load(self, entry_id: str, pid: int | None) -> None:
        """The load ended (or was stopped): forget it."""
        with self._locked():
            entries = self.entries()
            for entry in entries:
                if entry.get("id") == entry_id:
                    entry["loads"] = [l for l in entry.get("loads", []) if l.get("pid") != pid]
            self._store([e for e in entries if e.get("restores") or e.get("loads") or e.get("id") != entry_id])

    def close(self, entry_id: str) -> None:
        """The fault was restored (and its loads have ended): forget it."""
        with self._locked():
            self._store([e for e in self.entries() if e.get("id") != entry_id])
