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
- ``stragglers``: when the first and when the last node finished (their last bandwidth log window),
  and the aggregate bandwidth of all nodes from the earliest start until each of those moments:
  the first is what the fleet delivered while every node was still reading, the second what the
  run delivered over its whole span, the straggler's tail included.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from fxprobe.core.data import AsDict
from fxprobe.core.errors import ParseError
from fxprobe.tools import fio, fio_logs

HIST_PERCENTILES = (50.0, 99.0, 99.9)
DDIR = {"read": 0, "write": 1}


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
class NodeSpan(AsDict):
    """One node's part of a repeat, from its bandwidth log windows (epoch ms)."""

    node: str
    started_ms: int          # start of its first window
    finished_ms: int         # end of its last window
    bytes: float             # read or written in its windows


@dataclass(frozen=True)
class Stragglers(AsDict):
    """When the first and the last node finished, and the fleet's aggregate bandwidth until each."""

    log_msec: int
    spans: tuple[NodeSpan, ...]
    start_skew_s: float               # latest start - earliest start
    first_node: str
    first_finished_s: float           # after the earliest start
    first_aggregate_bps: float        # bytes/s of all nodes from the earliest start until the first finished
    last_node: str
    last_finished_s: float
    last_aggregate_bps: float         # bytes/s of all nodes from the earliest start until the last finished

    def line(self) -> str:
        return (f"first node finished: {self.first_node} at {self.first_finished_s:.2f} s, aggregate "
                f"{self.first_aggregate_bps / 1e6:,.1f} MB/s until then; last: {self.last_node} at "
                f"{self.last_finished_s:.2f} s, aggregate {self.last_aggregate_bps / 1e6:,.1f} MB/s over the whole span "
                f"(starts {self.start_skew_s:.2f} s apart)")


def stragglers(logs: Mapping[str, list[Path]], log_msec: int) -> Stragglers | None:
    """The straggler view of one repeat from each node's bandwidth logs (None for fewer than 2 nodes
    with samples). A window's bytes are its logged rate x ``log_msec``: each figure is exact to one
    window per node."""
    series = {node: fio_logs.fleet_series(files, log_msec).pairs() for node, files in logs.items()}
    series = {node: pairs for node, pairs in series.items() if pairs}
    if len(series) < 2:
        return None
    window_s = log_msec / 1000
    spans = tuple(NodeSpan(node, pairs[0][0] - log_msec, pairs[-1][0], sum(v for _, v in pairs) * window_s)
                  for node, pairs in series.items())
    start = min(s.started_ms for s in spans)
    first = min(spans, key=lambda s: (s.finished_ms, s.node))
    last = max(spans, key=lambda s: (s.finished_ms, s.node))
    until_first = sum(v for pairs in series.values() for t, v in pairs if t <= first.finished_ms) * window_s
    total = sum(s.bytes for s in spans)
    return Stragglers(log_msec, spans, (max(s.started_ms for s in spans) - start) / 1000,
                      first.node, (first.finished_ms - start) / 1000, until_first / (first.finished_ms - start) * 1000,
                      last.node, (last.finished_ms - start) / 1000, total / (last.finished_ms - start) * 1000)


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
