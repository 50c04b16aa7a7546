"""fio's status stream: one JSON document per interval, cumulative counters, read from a pipe."""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass

from fxprobe.core.errors import ParseError
from fxprobe.tools import fio
from fxprobe.tools.fields import arr, integer, number, obj

MAX_BUFFER = 64 << 20        # a status document larger than this is not fio's


@dataclass(frozen=True)
class StatusPoint:
    """One fio status document: cumulative counters over every job and direction."""

    ts: float            # epoch seconds (fio's timestamp_ms)
    io_bytes: int
    ios: int
    errors: int          # total_err over jobs (continue_on_error)
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
        errors += integer(row.get("total_err", 0), source, f"jobs[{i}].total_err")
        code = integer(row.get("error", 0), source, f"jobs[{i}].error")
        job_error = job_error or code
    return StatusPoint(ts, io_bytes, ios, errors, job_error, max_lat, read_bytes)


class JsonStream:
    """Split a byte stream of concatenated JSON documents (fio's status dumps) as it arrives."""

    def __init__(self) -> None:
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        self._decoder = json.JSONDecoder()
        self.buffer = ""
        self.skipped: list[str] = []

    def feed(self, data: bytes) -> list:
        self.buffer += self._decode(data)
        docs = []
        while True:
            start = 0 if self.buffer.startswith("{") else self.buffer.find("\n{") + 1
            if start == 0 and not self.buffer.startswith("{"):   # no document starts yet
                cut = self.buffer.rfind("\n") + 1                # keep a partial line for later
                self._skip(self.buffer[:cut])
                self.buffer = self.buffer[cut:]
                break
            if start:
                self._skip(self.buffer[:start])
                self.buffer = self.buffer[start:]
            if "\n}" not in self.buffer:   # fio closes each document with "}" at a line start
                if len(self.buffer) > MAX_BUFFER:
                    raise ParseError("fio status stream", "(document)", f"no complete JSON in {MAX_BUFFER} bytes")
                break
            try:
                doc, end = self._decoder.raw_decode(self.buffer)
            except json.JSONDecodeError:           # a "{" line that is not fio's document
                cut = self.buffer.find("\n") + 1 or len(self.buffer)
                self._skip(self.buffer[:cut])
                self.buffer = self.buffer[cut:]
                continue
            docs.append(doc)
            self.buffer = self.buffer[end:]
        return docs

    def _skip(self, text: str) -> None:
        if text.strip():
            self.skipped.append(text.strip()[:300])
