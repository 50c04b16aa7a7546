"""The soak's records: append-only JSON lines, each flushed and fsync'd; a torn last line is cut.

Every record is one of the typed records below (``type`` names which): the soak writes through them
(``RecordLog.append`` checks each record against its type before it is written) and everything that reads
a ``soak.jsonl`` - the summary, ``--resume``, the report - reads through them (``load_records``), so a
field a producer stops writing fails where it is written, not silently where it is read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from fxprobe.core.errors import ParseError


class Record(BaseModel):
    """Fields every record may carry: its type, the UTC stamp and epoch seconds it speaks of."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: str
    t: str | None = None
    ts: float | None = None

    def to_dict(self) -> dict:
        """The record as written: the fields it was given (none added), extra ones included."""
        return self.model_dump(exclude_unset=True)


class StartRecord(Record):
    profile: str
    target: str
    planned_s: float
    stall_s: float
    sample_s: float
    health_s: float | None = None
    pid: int | None = None
    verify: dict | None = None      # soak.verify.SoakVerifyPlan: how the data is verified (None: not recorded)
    target_check: dict | None = None   # host.safety.TargetCheck of the target (its NVMe subsystem: what array)


class SegmentRecord(Record):
    seg: int
    ts: float
    mono: float | None = None       # the monotonic clock at its start (covered time is counted on it)
    planned_s: float | None = None
    pid: int | None = None


class SampleRecord(Record):
    """fio's cumulative counters of one status report and the rates over the interval before it."""

    seg: int
    ts: float
    io_bytes: float | None = None
    ios: int | None = None
    errors: int = 0
    bw: float | None = None
    iops: float | None = None
    verified: int | None = None     # bytes read and checked against their verify headers in this segment
    mismatches: int | None = None   # verify failures fio printed in this segment so far (not in ``errors``)
    mono: float | None = None       # the monotonic clock when the report was received (covered time counts on it)


class InterruptionRecord(Record):
    """An interruption opened (``end`` later in an ``interruption-end``) or an instant one (with its end)."""

    id: int
    kind: str
    start: str
    start_ts: float
    detail: str
    end: str | None = None
    end_ts: float | None = None
    seconds: float | None = None


class InterruptionEndRecord(Record):
    id: int
    end: str
    end_ts: float | None = None
    seconds: float | None = None
    detail: str = ""


class VerifyRecord(Record):
    """What a load segment (``seg``) or the read-back pass after the load (no ``seg``) verified: bytes read and
    checked, verify failures (bad reads) on how many blocks, and the first of them (offset, found, expected)."""

    source: str
    verified_bytes: int
    mismatches: int
    bad_blocks: int = 0
    bad_blocks_more: bool = False   # more bad blocks than were counted one by one
    shown: list[dict] = []
    seg: int | None = None
    problem: str = ""               # the read-back pass did not give a whole result (why): the criterion is an ERROR
    unreadable: int = 0             # the read-back pass: blocks fio could not read (errors beyond verify failures)
    expected_bytes: int | None = None   # the read-back pass: the bytes of the working set it had to read


class NoteRecord(Record):
    detail: str


class TelemetryRecord(Record):
    nvme_temp_c: dict[str, float] = {}
    host: Any = None
    paths: Any = None
    md: Any = None


class HealthRecord(Record):
    smart: Any = None


class ResumeRecord(Record):
    pid: int | None = None
    orphan: str = ""
    covered_s: float | None = None


class EndRecord(Record):
    reason: str = ""


RECORD_TYPES: dict[str, type[Record]] = {
    "start": StartRecord, "segment": SegmentRecord, "sample": SampleRecord, "interruption": InterruptionRecord,
    "interruption-end": InterruptionEndRecord, "note": NoteRecord, "telemetry": TelemetryRecord,
    "health": HealthRecord, "resume": ResumeRecord, "end": EndRecord, "verify": VerifyRecord}


def as_record(data: "Record | dict", source: str = "soak record") -> Record:
    """The typed record of ``data`` (a record passes through); ParseError names the field that is wrong."""
    if isinstance(data, Record):
        return data
    kind = data.get("type") if isinstance(data, dict) else None
    model = RECORD_TYPES.get(kind) if isinstance(kind, str) else None
    if model is None:
        raise ParseError(source, "type", f"not a soak record type: {kind!r} (known: {', '.join(RECORD_TYPES)})")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(p) for p in error["loc"]) or "record"
        raise ParseError(source, f"{kind}.{field}", error["msg"]) from None


def as_records(records: list) -> list[Record]:
    return [as_record(r, f"soak record {n}") for n, r in enumerate(records, 1)]


def load_records(path: Path, lenient: bool = False) -> list[Record]:
    """The typed records of a soak.jsonl. ``lenient`` (a report over someone's evidence) skips what is
    not a record instead of refusing it."""
    if not lenient:
        return [as_record(r, f"{path} line {n}") for n, r in enumerate(read_records(path), 1)]
    out = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                out.append(as_record(json.loads(line)))
            except (json.JSONDecodeError, ParseError):
                continue
    return out


class RecordLog:
    """Append-only JSON lines; every record is flushed and fsync'd before ``append`` returns."""

    def __init__(self, path: Path):
        self.path = Path(path)
        repair_tail(self.path)
        self._handle = open(self.path, "a")

    def append(self, record: "Record | dict") -> dict:
        """Write one record (checked against its type first); returns it as written."""
        data = as_record(record, str(self.path)).to_dict()
        self._handle.write(json.dumps(data, separators=(",", ":"), default=str) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        return data

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
    """The JSON objects of a records file as written (``load_records`` gives them typed)."""
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
