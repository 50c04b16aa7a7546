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

from dataclasses import dataclass, field

from fxprobe.core.errors import ParseError
from fxprobe.core.status import Figures
from fxprobe.tools import fio
from fxprobe.tools.fields import arr, obj


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
    """total_err per hostname (None for a local fio), fio's continue_on_error count."""
    rows = data.get("client_stats", data.get("jobs")) or []
    out: dict = {}
    for i, row in enumerate(arr(rows, source, "jobs")):
        row = obj(row, source, f"jobs[{i}]")
        if row.get("jobname") == fio.AGGREGATE_NAME:
            continue
        key = row.get("hostname") if "client_stats" in data else None
        value = row.get("total_err", 0)
        out[key] = out.get(key, 0) + (int(value) if str(value).isdigit() else 0)
    return out


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
