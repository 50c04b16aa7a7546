"""A soak's bandwidth over time as a report draws it: hours from the start, mean and minimum per bucket,
interruptions by kind.

Read from the run's ``soak.jsonl`` records (``start``, ``segment``, ``sample`` with fio's cumulative
``io_bytes`` per segment, ``interruption`` with ``start_ts``/``end_ts``/``kind`` and its ``interruption-end``),
through the soak's typed records (``fxprobe.soak.records``). Bandwidth per interval is
bytes moved over the interval's length, so a short last interval cannot spike; a bucket's mean is its bytes
over its covered time, its minimum the slowest full-length interval in it (an interval shorter than half the
median is left out of the minimum, its bytes still counted in the mean). At most ``MAX_BUCKETS`` buckets, so
72 h of 1 s samples draw as fast as one minute's.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from fxprobe.soak.records import (InterruptionEndRecord, InterruptionRecord, Record, SampleRecord, SegmentRecord,
                                  StartRecord, as_records, load_records)

MAX_BUCKETS = 200
PER_BUCKET = 3           # intervals per bucket when there are few


@dataclass(frozen=True)
class Interval:
    start: float          # epoch s
    end: float
    nbytes: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Interruption:
    start_h: float
    end_h: float
    kind: str
    seconds: float | None
    detail: str = ""


@dataclass(frozen=True)
class SoakView:
    edges_h: tuple[float, ...]        # bucket edges, h from the start of the load (one more than buckets)
    mean: tuple[float, ...]           # bytes/s per bucket (NaN: no sample fell in it)
    minimum: tuple[float, ...]        # bytes/s, the slowest full-length interval of the bucket
    bucket_s: float
    duration_h: float                 # first record to last sample
    planned_h: float | None
    interruptions: tuple[Interruption, ...] = field(default_factory=tuple)
    profile: str = ""


def intervals(records: list[Record]) -> list[Interval]:
    """Bytes per interval between consecutive samples of a segment (the first from the segment's start)."""
    out: list[Interval] = []
    last: dict[int, tuple[float, float]] = {}
    for record in records:
        if isinstance(record, SegmentRecord):
            last[record.seg] = (record.ts, 0.0)
        elif isinstance(record, SampleRecord):
            ts, done, bw = record.ts, record.io_bytes, record.bw
            previous = last.get(record.seg)
            if previous is not None and ts > previous[0]:
                nbytes = done - previous[1] if done is not None else (bw or 0.0) * (ts - previous[0])
                out.append(Interval(previous[0], ts, max(0.0, nbytes)))
            last[record.seg] = (ts, done if done is not None else 0.0)
    return out


def _breaks(records: list[Record], origin: float) -> list[Interruption]:
    """Each interruption, ending where its own record or its ``interruption-end`` says (else at its start)."""
    ends = {r.id: r for r in records if isinstance(r, InterruptionEndRecord)}
    out = []
    for r in records:
        if isinstance(r, InterruptionRecord):
            close = ends.get(r.id)
            end = r.end_ts if r.end is not None else (close.end_ts if close else None)
            seconds = r.seconds if r.end is not None else (close.seconds if close else None)
            out.append(Interruption((r.start_ts - origin) / 3600, ((end or r.start_ts) - origin) / 3600, r.kind,
                                    seconds, r.detail))
    return out


def _buckets(spans: list[Interval], origin: float) -> tuple[list[float], list[float], list[float], float]:
    """Bucket edges (h), mean and minimum (bytes/s; NaN where no interval fell) and the bucket width (s)."""
    end = max(i.end for i in spans)
    count = max(1, min(MAX_BUCKETS, len(spans) // PER_BUCKET))
    width = (end - origin) / count or 1.0
    full = 0.5 * statistics.median(i.seconds for i in spans)
    moved, covered = [0.0] * count, [0.0] * count
    slowest: list[float | None] = [None] * count
    for span in spans:
        k = min(count - 1, int(((span.start + span.end) / 2 - origin) / width))
        moved[k] += span.nbytes
        covered[k] += span.seconds
        if span.seconds >= full:
            rate = span.nbytes / span.seconds
            slowest[k] = rate if slowest[k] is None else min(slowest[k], rate)
    mean = [moved[k] / covered[k] if covered[k] else math.nan for k in range(count)]
    minimum = [slowest[k] if slowest[k] is not None else mean[k] for k in range(count)]
    return [k * width / 3600 for k in range(count + 1)], mean, minimum, width


def soak_view(records: list) -> SoakView | None:
    """The view of a soak's records (typed, or dicts checked against their types)."""
    records = as_records(records)
    spans = intervals(records)
    if not spans:
        return None
    start = next((r for r in records if isinstance(r, StartRecord)), None)
    origin = spans[0].start               # the load's start (its first segment), after the untimed layout
    edges, mean, minimum, width = _buckets(spans, origin)
    planned = start.planned_s if start else None
    return SoakView(tuple(edges), tuple(mean), tuple(minimum), width, (spans[-1].end - origin) / 3600,
                    planned / 3600 if planned else None, tuple(_breaks(records, origin)),
                    start.profile if start else "")


def soak_of(run_path: Path, results: dict) -> SoakView | None:
    """The soak view of a run folder holding soak records (``results.records``, default soak.jsonl), read
    through the soak's own record types (what is not a record is left out)."""
    path = Path(run_path) / str(results.get("records") or "soak.jsonl")
    return soak_view(load_records(path, lenient=True)) if path.is_file() else None
