"""fio's status stream: one JSON document per interval, cumulative counters, read from a pipe."""

from __future__ import annotations

from dataclasses import dataclass

from fxprobe.core.errors import ParseError
from fxprobe.tools import fio
from fxprobe.tools.fields import arr, integer, number, obj
from fxprobe.tools.fio_status import errored_ios


@dataclass(frozen=True)
class StatusPoint:
    """One fio status document: cumulative counters over every job and direction."""

    ts: float            # epoch seconds (fio's timestamp_ms)
    io_bytes: int
    ios: int
    errors: int          # errored I/O over jobs: total_err, or 1 for a job stopped on an error it did not count
    job_error: int       # the first non-zero job error code, 0 if none
    max_lat_ns: int = 0  # the longest I/O so far (lat_ns.max, else clat_ns.max, over jobs and directions)
    read_bytes: int = 0  # of io_bytes, those read (a verifying load checks each: the verified bytes)


def parse_status_doc(doc, source: str = "fio status") -> StatusPoint:
    data = obj(doc, source, "(top level)")
    if "timestamp_ms" not in data:
        raise ParseError(source, "timestamp_ms", "missing (not a fio JSON status document)")
    ts = integer(data["timestamp_ms"], source, "timestamp_ms") / 1000
    rows = arr(data.get("jobs", data.get("client_stats")), source, "jobs")
    io_bytes = ios = errors = max_lat = read_bytes = 0
    job_error = 0
    for i, row in enumerate(rows):
        row = obj(row, source, f"jobs[{i}]")
        if row.get("jobname") == fio.AGGREGATE_NAME:
            continue
        for direction in fio.DIRECTIONS:
            stats = row.get(direction)
            if isinstance(stats, dict):
                moved = integer(stats.get("io_bytes", 0), source, f"jobs[{i}].{direction}.io_bytes")
                io_bytes += moved
                read_bytes += moved if direction == "read" else 0
                ios += integer(stats.get("total_ios", 0), source, f"jobs[{i}].{direction}.total_ios")
                lat = stats.get("lat_ns") or stats.get("clat_ns") or {}
                if isinstance(lat, dict) and lat.get("max") is not None:
                    max_lat = max(max_lat, int(number(lat["max"], source, f"jobs[{i}].{direction}.lat_ns.max")))
        integer(row.get("total_err", 0), source, f"jobs[{i}].total_err")      # a count, or a ParseError
        code = integer(row.get("error", 0), source, f"jobs[{i}].error")
        errors += errored_ios(row)          # the fault verdict's and the live line's rule
        job_error = job_error or code
    return StatusPoint(ts, io_bytes, ios, errors, job_error, max_lat, read_bytes)
