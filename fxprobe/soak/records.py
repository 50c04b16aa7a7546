"""The soak's records: append-only JSON lines, each flushed and fsync'd; a torn last line is cut."""

from __future__ import annotations

import json
import os
from pathlib import Path

from fxprobe.core.errors import ParseError


class RecordLog:
    """Append-only JSON lines; every record is flushed and fsync'd before ``append`` returns."""

    def __init__(self, path: Path):
        self.path = Path(path)
        repair_tail(self.path)
        self._handle = open(self.path, "a")

    def append(self, record: dict) -> dict:
        self._handle.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        return record

    def close(self) -> None:
        self._handle.close()


def repair_tail(path: Path) -> int:
    """Cut a torn last line (a crash in the middle of a write); returns the bytes removed."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with open(path, "rb+") as handle:
        data = handle.read()
        if data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
        return len(data) - keep


def read_records(path: Path) -> list[dict]:
    records = []
    with open(path) as handle:
        lines = handle.read().split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):     # a torn last line: the crash we are here to survive
                break
            raise ParseError(str(path), f"line {number}", "not JSON") from None
    return records
