"""fio's ``--status-interval`` documents as live figures (pure).

Each status document holds cumulative counters since the job started. ``parse_status_totals`` reads
one into per-node totals (a local fio is node ``local``; fio's client names each server's rows with
its hostname); ``interval_figures`` turns two of them into the interval's MB/s, IOPS and latency
percentiles. The percentiles are exact when fio prints json+ (the difference of the cumulative
``clat_ns.bins``: the histogram of the I/Os completed in the interval); with plain JSON only
fio's cumulative percentiles exist, and the interval's percentiles are left out rather than
faked. ``LiveFio`` keeps the previous totals per node and hands the figures to a Status.
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass, field

from fxprobe.core.errors import ParseError
from fxprobe.core.status import Figures
from fxprobe.tools import fio
from fxprobe.tools.fields import arr, obj

MAX_BUFFER = 64 << 20        # a status document larger than this is not fio's


@dataclass(frozen=True)
class NodeTotals:
    node: str
    ts: float                       # epoch seconds (fio's timestamp_ms)
    io_bytes: int
    ios: int
    errors: int
    lat_sum_ns: float
    bins: dict = field(default_factory=dict)   # merged clat_ns bins over jobs and directions (json+)


def parse_status_totals(doc, source: str = "fio status", node: str = "local") -> dict[str, NodeTotals]:
    """node -> cumulative totals of one fio status document (JSON or json+; local or client/server)."""
    data = obj(doc, source, "(top level)")
    result = fio.parse_fio_json_doc(data, source)
    ts = (result.timestamp_ms or 0) / 1000
    per_node: dict[str, list] = {}
    for job in result.jobs:
        per_node.setdefault(job.hostname or node, []).append(job)
    errors = _errors(data, source)
    out = {}
    for name, jobs in per_node.items():
        stats = [d for j in jobs for d in j.directions.values()]
        out[name] = NodeTotals(
            node=name, ts=ts, io_bytes=sum(d.io_bytes for d in stats), ios=sum(d.total_ios for d in stats),
            errors=errors.get(name if result.client_server else None, 0) if result.client_server
            else errors.get(None, 0),
            lat_sum_ns=sum(d.clat.mean_ns * d.clat.samples for d in stats),
            bins=fio.merge_bins(*(d.clat.bins for d in stats)))
    return out


def _errors(data: dict, source: str) -> dict:
    """Errored I/O per hostname (None for a local fio), as errored_ios counts it."""
    rows = data.get("client_stats", data.get("jobs")) or []
    for i, row in enumerate(arr(rows, source, "jobs")):
        obj(row, source, f"jobs[{i}]")
    out: dict = {}
    for row in job_rows(data):
        key = row.get("hostname") if "client_stats" in data else None
        out[key] = out.get(key, 0) + errored_ios(row)
    return out


def job_rows(document: dict) -> list[dict]:
    """A fio JSON document's rows, one per job: ``jobs`` of a local fio, ``client_stats`` of fio's client
    (one per job and server), without the client's aggregate row."""
    rows = document.get("client_stats") or document.get("jobs") or []
    return [row for row in rows if isinstance(row, dict) and row.get("jobname") != fio.AGGREGATE_NAME]


def errored_ios(row: dict) -> int:
    """One job's errored I/O: ``total_err`` (what fio counts under continue_on_error), or 1 when the job
    stopped on an error (``error`` non-zero) it did not count. The one rule for the fault verdict, its
    error timeline and the live line."""
    value = row.get("total_err", 0)
    count = value if isinstance(value, int) and value >= 0 else int(value) if str(value).isdigit() else 0
    return count or (1 if row.get("error") else 0)


def interval_figures(before: NodeTotals | None, now: NodeTotals) -> Figures:
    """The interval between two documents of one node (from the job's start when ``before`` is None)."""
    dt = now.ts - before.ts if before is not None else None
    d_bytes = now.io_bytes - (before.io_bytes if before else 0)
    d_ios = now.ios - (before.ios if before else 0)
    bw = d_bytes / dt if dt and dt > 0.05 and d_bytes >= 0 else None
    iops = d_ios / dt if dt and dt > 0.05 and d_ios >= 0 else None
    bins = {k: v - (before.bins.get(k, 0) if before else 0) for k, v in now.bins.items()}
    bins = {k: v for k, v in bins.items() if v > 0}
    pct = lambda p: fio.percentile_from_bins(bins, p) if bins else None
    return Figures(node=now.node, ts=now.ts, bw=bw, iops=iops, p99_ns=pct(99.0), p50_ns=pct(50.0),
                   p999_ns=pct(99.9), errors=now.errors, ios=now.ios, lat_sum_ns=now.lat_sum_ns)


class LiveFio:
    """Feeds a Status from fio status documents as they arrive (one per --status-interval)."""

    def __init__(self, status, node: str = "local"):
        self.status, self.node = status, node
        self.previous: dict[str, NodeTotals] = {}

    def reset(self) -> None:
        """A new fio (a soak's next segment): its counters start from 0 again."""
        self.previous.clear()

    def doc(self, doc) -> None:
        if not self.status.active:
            return
        try:
            totals_by_node = parse_status_totals(doc, node=self.node)
        except ParseError:       # a document the live line cannot read does not stop the load
            return
        for name, totals in totals_by_node.items():
            before = self.previous.get(name)
            if before is not None and totals.ts <= before.ts:
                continue
            self.previous[name] = totals
            if before is not None:           # the first document only sets the base
                self.status.interval(interval_figures(before, totals))


class JsonStream:
    """Split fio's output - its ``--status-interval`` documents, then the final one, each opened by "{" and
    closed by "}" at a line start, with any other line (fio's warnings) between them - as it arrives.
    ``skipped`` keeps the other lines (the first 300 characters of each)."""

    def __init__(self) -> None:
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        self._decoder = json.JSONDecoder()
        self.buffer = ""
        self.skipped: list[str] = []

    def feed(self, data: bytes | str) -> list:
        """The documents completed by ``data`` (bytes are decoded as UTF-8, bad bytes replaced)."""
        self.buffer += self._decode(data) if isinstance(data, bytes) else data
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

    def close(self) -> list:
        """At the end of the stream: the documents left in it that were not closed by a "}" at a line start
        (one printed on a single line, say), each from a "{" that starts a JSON object."""
        docs, text, index = [], self.buffer, self.buffer.find("{")
        while index >= 0:
            try:
                doc, end = self._decoder.raw_decode(text, index)
            except json.JSONDecodeError:
                index = text.find("{", index + 1)
                continue
            docs.append(doc)
            index = text.find("{", end)
        self._skip(text if not docs else "")
        self.buffer = ""
        return docs

    def _skip(self, text: str) -> None:
        if text.strip():
            self.skipped.append(text.strip()[:300])


def json_documents(text: str) -> list[dict]:
    """Every JSON object fio printed in ``text`` (its status documents, then the final one), in order."""
    stream = JsonStream()
    return [doc for doc in stream.feed(text) + stream.close() if isinstance(doc, dict)]


def last_json(text: str | None) -> dict | None:
    """fio's last (final) JSON document in ``text``; None without one."""
    documents = json_documents(text or "")
    return documents[-1] if documents else None
