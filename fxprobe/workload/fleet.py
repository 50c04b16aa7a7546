"""Many nodes in one run: each node's own figures, the fleet's latency from the raw histogram logs, and
the straggler view.

fio's client brings every node's logs back with the address it dialed appended to the name
(``PREFIX_bw.3.log.127.0.1.2``, ``PREFIX_clat_hist.3.log.127.0.1.2``), so a log is assigned to its node
by that suffix; a run without client/server has one node and no suffix.

- ``node_figures``: per node, bandwidth, IOPS and p50/p99 from the node's own json+ bins (merged over its
  jobs and the repeats, never an average of percentiles).
- ``hist_logs``: the clat_hist logs of every node and repeat merged bin by bin (``tools.fio_logs``, which
  undoes what fio's server does to them on the way to the client), the percentiles of the fleet as a
  third party re-merges them from the raw files. fio writes a hist line when an I/O completes at least
  ``log_hist_msec`` after the last line: the I/O after a job's last line is in json+ but not in the
  logs, so the samples are counted beside json+'s.
- ``stragglers``: when the first and when the last node finished (their logs' last stamp; each started
  its fio runtime before), and the aggregate bandwidth of all nodes from the earliest start until each
  of those moments: the first is what the fleet delivered while every node was still reading, the
  second what the run delivered over its whole span, the straggler's tail included. fio's own total
  adds up each job's rate as if every node had run at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from fxprobe.core.data import AsDict
from fxprobe.core.errors import ParseError
from fxprobe.tools import fio, fio_logs

HIST_PERCENTILES = (50.0, 99.0, 99.9)
DDIR = {name: ddir for ddir, name in fio_logs.DDIR_NAMES.items()}      # fio's direction numbers, one map


def node_of(log: Path, labels: Mapping[str, str]) -> str:
    """The node a log belongs to: its dialed-address suffix (``….log.127.0.1.2``) as the node's label."""
    _, _, address = log.name.partition(".log.")
    return labels.get(address, address) if address else "local"


def by_node(logs: Sequence[Path], labels: Mapping[str, str]) -> dict[str, list[Path]]:
    grouped: dict[str, list[Path]] = {}
    for log in logs:
        grouped.setdefault(node_of(log, labels), []).append(log)
    return dict(sorted(grouped.items()))


@dataclass(frozen=True)
class NodeIO(AsDict):
    """One node's totals in one repeat, from fio's json: bytes, I/Os, and its longest job's runtime."""

    io_bytes: int
    ios: int
    runtime_ms: int


@dataclass(frozen=True)
class NodeSpan(AsDict):
    """One node's part of a repeat (epoch ms): it finished at its logs' last stamp and started its runtime before."""

    node: str
    started_ms: int
    finished_ms: int
    bytes: int                # fio's json
    ios: int
    logged_ios: int           # of those, counted in its hist-log windows (the rest completed after the last one)
    impossible: str | None = None   # why its windows were not used (its bytes spread evenly over its span instead)


@dataclass(frozen=True)
class Stragglers(AsDict):
    """When the first and the last node finished, and the fleet's aggregate bandwidth until each."""

    spans: tuple[NodeSpan, ...]
    start_skew_s: float               # latest start - earliest start
    first_node: str
    first_finished_s: float           # after the earliest start
    first_aggregate_bps: float        # bytes/s of all nodes from the earliest start until the first finished
    last_node: str
    last_finished_s: float
    last_aggregate_bps: float         # bytes/s of all nodes from the earliest start until the last finished

    def line(self) -> str:
        spread = [s.node for s in self.spans if s.impossible]
        return (f"first node finished: {self.first_node} at {self.first_finished_s:.2f} s, aggregate "
                f"{self.first_aggregate_bps / 1e6:,.1f} MB/s until then; last: {self.last_node} at "
                f"{self.last_finished_s:.2f} s, aggregate {self.last_aggregate_bps / 1e6:,.1f} MB/s over the whole span "
                f"(starts {self.start_skew_s:.2f} s apart)"
                + (f"; hist-log windows NOT USED for {', '.join(spread)} (impossible counts, axboe/fio#827): "
                   "bytes spread evenly over the node's span" if spread else ""))


def _last_stamp(logs: Sequence[Path]) -> int | None:
    stamps = [host.last_ms for host in fio_logs.fleet_series(logs, 1000).hosts if host.last_ms is not None] if logs else []
    return max(stamps) if stamps else None


def _node_events(node: str, io: NodeIO, hist: Sequence[Path], bw: Sequence[Path], ddir: int,
                 fio_client: bool) -> tuple[NodeSpan, list[tuple[int, float]]] | None:
    """A node's span and its bytes in time: each hist-log window's completions x bytes per I/O, and the I/O
    after its last window at the node's end (its last bw or hist stamp); None when no log placed it in time."""
    per_io = io.io_bytes / io.ios if io.ios else 0.0
    events: list[tuple[int, float]] = []
    unreadable = None
    try:
        for log in hist:
            windows = fio_logs.hist_window_counts(log, fio_client=fio_client)
            keep = windows.ddir == ddir
            events += [(int(t), int(c) * per_io) for t, c in zip(windows.time_ms[keep], windows.completions[keep])]
    except ParseError as exc:     # fio#827 again: a count fio printed as 2**64 - n does not fit a signed count
        events, unreadable = [], f"a hist log cannot be read as counts ({exc}; axboe/fio#827)"
    stamps = [t for t, _ in events] + ([last] if (last := _last_stamp(bw)) is not None else [])
    if not stamps:
        return None
    end = max(stamps)
    logged = round(sum(b for _, b in events) / per_io) if per_io else 0
    impossible = unreadable or _impossible(events, logged, io.ios)
    if impossible:
        return NodeSpan(node, end - io.runtime_ms, end, io.io_bytes, io.ios, 0, impossible), \
            _spread(io.io_bytes, end - io.runtime_ms, end)
    events.append((end, max(io.ios - logged, 0) * per_io))
    return NodeSpan(node, end - io.runtime_ms, end, io.io_bytes, io.ios, logged), events


def _impossible(events: list[tuple[int, float]], logged: int, ios: int) -> str | None:
    """Why a node's hist-log windows cannot be its completions: a window that counts fewer than none, or more
    I/O in the windows than fio's json has (fio has written impossible counts into hist logs, axboe/fio#827)."""
    if any(b < 0 for _, b in events):
        return "a hist-log window counts fewer than 0 completions (fio wrote impossible counts, axboe/fio#827)"
    if logged > ios:
        return (f"its hist-log windows count {logged:,} I/Os where fio's json has {ios:,} "
                "(fio wrote impossible counts, axboe/fio#827)")
    return None


def _spread(io_bytes: int, start: int, end: int, step_ms: int = 100) -> list[tuple[int, float]]:
    """A node's bytes spread evenly over its span, one event per ``step_ms`` (the last at its end)."""
    stamps = list(range(start + step_ms, end, step_ms)) + [end]
    return [(t, io_bytes / len(stamps)) for t in stamps]


def stragglers(io: Mapping[str, NodeIO], hist: Mapping[str, list[Path]], bw: Mapping[str, list[Path]],
               direction: str = "read", fio_client: bool = True) -> Stragglers | None:
    """The straggler view of one repeat (None for fewer than 2 nodes placed in time). Bytes are fio's (json);
    when they moved comes from the hist logs, whose windows count every completion (exact to one window:
    fio's bw-log averages are not, on a guest whose logging thread runs late)."""
    placed = [r for node in sorted(io) if (r := _node_events(node, io[node], hist.get(node, []), bw.get(node, []),
                                                             DDIR[direction], fio_client))]
    if len(placed) < 2:
        return None
    spans = tuple(span for span, _ in placed)
    start = min(s.started_ms for s in spans)
    first = min(spans, key=lambda s: (s.finished_ms, s.node))
    last = max(spans, key=lambda s: (s.finished_ms, s.node))
    until_first = sum(b for _, events in placed for t, b in events if t <= first.finished_ms)
    total = sum(s.bytes for s in spans)
    return Stragglers(spans, (max(s.started_ms for s in spans) - start) / 1000,
                      first.node, (first.finished_ms - start) / 1000,
                      until_first / max(first.finished_ms - start, 1) * 1000,
                      last.node, (last.finished_ms - start) / 1000, total / max(last.finished_ms - start, 1) * 1000)


@dataclass(frozen=True)
class HistLogs(AsDict):
    """The fleet's latency from the raw clat_hist logs of every node and repeat, merged bin by bin;
    ``problem`` says why they were not used (then there are no percentiles)."""

    files: int
    nodes: tuple[str, ...]
    windows: int
    samples: int
    json_samples: int                 # the same run's json+ samples, for comparison (the logs miss each job's tail)
    coarseness: int
    percentiles_ns: dict
    problem: str | None = None

    def line(self) -> str:
        if self.problem:
            return f"latency from the raw clat_hist logs of {len(self.nodes)} nodes: NOT USED: {self.problem}"
        shares = f"{self.samples / self.json_samples * 100:.1f} %" if self.json_samples else "-"
        return (f"latency from the raw clat_hist logs of {len(self.nodes)} nodes ({self.files} files, "
                f"{self.samples:,} samples = {shares} of json+'s): "
                + ", ".join(f"{k} {_ms(v)}" for k, v in self.percentiles_ns.items()))


def hist_logs(logs: Sequence[Path], labels: Mapping[str, str], direction: str, json_samples: int,
              fio_client: bool = True) -> HistLogs | None:
    """Merge every hist log (all nodes, all repeats) for ``direction``; None when there are none.
    ``fio_client``: the logs came back through fio's client (every multi-node run). Logs that are not
    a consistent histogram, or that hold more samples than the run's json+ (they can only hold
    fewer), are reported with the reason and give no percentiles."""
    if not logs:
        return None
    nodes = tuple(by_node(logs, labels))
    try:
        merged = fio_logs.merge_hist_logs(logs, fio_client=fio_client)
    except ParseError as exc:
        return HistLogs(len(logs), nodes, 0, 0, json_samples, 0, {}, str(exc))
    ddir = DDIR[direction]
    samples = merged.samples(ddir)
    if samples > json_samples:
        return HistLogs(len(logs), nodes, merged.windows, samples, json_samples, merged.coarseness, {},
                        f"they hold {samples:,} {direction} samples where the run's json+ has {json_samples:,} "
                        "(a log can only miss I/O, never add it): fio wrote impossible counts")
    percentiles = {f"p{p:g}": merged.percentile(p, ddir) for p in HIST_PERCENTILES}
    return HistLogs(len(logs), nodes, merged.windows, samples, json_samples, merged.coarseness, percentiles)


@dataclass(frozen=True)
class NodeFigures(AsDict):
    """One node's own figures over the repeats: mean bandwidth and IOPS, p50/p99 of its merged bins."""

    bw_bytes: float
    iops: float
    samples: int
    p50_ns: int | None
    p99_ns: int | None


def node_figures(bw: Mapping[str, Sequence[float]], iops: Mapping[str, Sequence[float]],
                 bins: Mapping[str, Sequence[Mapping[int, int]]]) -> dict[str, NodeFigures]:
    """Per node: bandwidth and IOPS as the mean over repeats, latency from its bins of every repeat."""
    figures = {}
    for node in sorted(bw):
        merged = fio.merge_bins(*bins.get(node, ()))
        figures[node] = NodeFigures(sum(bw[node]) / len(bw[node]), sum(iops[node]) / len(iops[node]),
                                    sum(merged.values()), fio.percentile_from_bins(merged, 50.0),
                                    fio.percentile_from_bins(merged, 99.0))
    return figures


def _ms(ns) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f} ms"
