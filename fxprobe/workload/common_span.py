"""What several nodes moved while ALL of them were running: the figure G3 judges against the NIC ceiling.

fio's own total for a client/server run adds up each job's rate, each over its own runtime, so nodes that
never ran at the same time still add up: eight nodes run one after another, each alone on the array, are
credited with eight times one node's rate. Here the bytes come from the nodes' bw logs instead
(``log_unix_epoch``: every sample is stamped with the epoch ms at the end of its window), per repeat:

- the logs of all nodes are laid on one grid of windows (``tools.fio_logs.fleet_series``: window k holds the
  samples stamped within half a window of origin + k x log_msec, and spans the log_msec before that stamp);
- each node ran from its first window to its last (a window with a sample: fio logs a window only when an I/O
  completed in it);
- the common span is every window from the latest node's first window to the earliest node's last window,
  BOTH EDGE WINDOWS COUNTED WHOLE (each holds a completion of the node that bounds the span, so that node was
  running in it); a window inside the span in which no node completed anything counts as 0 bytes;
- a window's bytes are its bandwidth summed over the nodes x log_msec; the aggregate is the bytes of the
  windows inside the span / (their number x log_msec);
- when the latest node's first window comes after the earliest node's last, the nodes never all ran at once:
  there is no aggregate, and the reason says which nodes and when.

The sum of the nodes' own rates stays beside it as information, never judged. Clocks: the stamps are each
node's own epoch clock, so nodes whose clocks disagree by more than a window shift the span by that much.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from pydantic import ConfigDict, TypeAdapter, ValidationError

from fxprobe.core.data import AsDict
from fxprobe.core.verdict import exact, format_fixed
from fxprobe.tools import fio_logs
from fxprobe.workload import fleet

RULE = ("log windows from the latest node's first bw-log window to the earliest node's last, both edge windows "
        "counted whole; a window's bytes are its bandwidth summed over the nodes x the window")


@dataclass(frozen=True)
class CommonSpan(AsDict):
    """One repeat's common span (epoch ms; fio stamps a window at its end, so window k spans the log_msec before
    its stamp) and the bytes all nodes moved in it."""

    __pydantic_config__ = ConfigDict(strict=True, extra="forbid")    # how a reader checks it (Concurrent.from_dict)
    nodes: tuple[str, ...]
    log_msec: int
    whole_s: float                 # the fleet's first window start to its last window end
    windows: int                   # log windows inside the common span (0: none)
    span_s: float                  # windows x log_msec
    start_ms: int | None           # the common span's first window start (epoch ms)
    end_ms: int | None             # its last window end
    offset_s: float | None         # its start after the fleet's first window start
    latest_start: str | None       # the node whose first window opens the span
    earliest_end: str | None       # the node whose last window closes it
    ran_ms: dict[str, list[int]]   # node -> [its first window start, its last window end] (epoch ms)
    bytes: float                   # moved by all nodes in the windows inside
    aggregate_bps: float | None    # bytes / span_s; None when the nodes never all ran at once
    reason: str | None = None      # why there is no aggregate
    logged_bytes: float | None = None   # in all the repeat's bw-log windows, span or not
    io_bytes: int | None = None    # fio's count for the repeat: a job's last I/O, done after its last log window, is
    #                                in no window (fio logs a window's bytes at the next sample; a job that ends takes none)

    def line(self) -> str:
        logged = (f"; the bw logs hold {self.logged_bytes / 1e6:,.1f} MB of the {self.io_bytes / 1e6:,.1f} MB fio "
                  "counted (a job's I/O done after its last log window is in none)"
                  if self.logged_bytes is not None and self.io_bytes else "")
        if self.aggregate_bps is None:
            return f"NO common span: {self.reason}{logged}"
        return (f"all {len(self.nodes)} nodes ran at once for {self.span_s:.2f} s of {self.whole_s:.2f} s "
                f"({self.windows} windows of {self.log_msec} ms, {self.offset_s:.2f} s in, from "
                f"{self.latest_start}'s first to {self.earliest_end}'s last, edge windows counted whole): "
                f"{self.bytes / 1e6:,.1f} MB moved, {self.aggregate_bps / 1e6:,.1f} MB/s{logged}")


def common_span(bw: Mapping[str, Sequence[Path]], nodes: Sequence[str], log_msec: int, direction: str,
                io_bytes: int | None = None) -> CommonSpan:
    """The common span of one repeat from every node's bw logs (``bw``: node -> its logs, fio_client names);
    ``io_bytes``: fio's count for the repeat, recorded beside what the logs hold."""
    nodes = tuple(nodes)
    logs = [log for node in nodes for log in bw.get(node, ())]
    owner = {Path(log).name: node for node in nodes for log in bw.get(node, ())}
    series = fio_logs.fleet_series(logs, log_msec, ddir=fleet.DDIR[direction])
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for host in series.hosts:
        if host.first_ms is not None:
            node = owner[host.source]
            first[node] = min(first.get(node, host.first_ms), host.first_ms)
            last[node] = max(last.get(node, host.last_ms), host.last_ms)
    windows = {n: (series.window_of(first[n]), series.window_of(last[n])) for n in first}
    ran = {n: [series.origin_ms + (a - 1) * log_msec, series.origin_ms + b * log_msec] for n, (a, b) in windows.items()}
    low = min((a for a, _ in windows.values()), default=0)
    high = max((b for _, b in windows.values()), default=-1)
    whole_s = (high - low + 1) * log_msec / 1000
    logged = {"logged_bytes": float(series.values.sum()) * log_msec / 1000, "io_bytes": io_bytes}
    silent = [n for n in nodes if n not in windows]
    if silent:
        return _empty(nodes, log_msec, whole_s, ran, logged, f"{', '.join(silent)} logged no {direction} bandwidth window "
                      "(no I/O completed in any log window), so the nodes never all ran at once")
    latest = max(nodes, key=lambda n: (windows[n][0], n))
    earliest = min(nodes, key=lambda n: (windows[n][1], n))
    k0, k1 = windows[latest][0], windows[earliest][1]

    def starts(k: int) -> float:          # window k's start, in s after the fleet's first window start
        return (k - low) * log_msec / 1000

    if k0 > k1:
        return _empty(nodes, log_msec, whole_s, ran, logged, f"the nodes never all ran at once: {latest}'s first window starts "
                      f"{starts(k0):.2f} s in, after {earliest}'s last window ended ({starts(k1 + 1):.2f} s in)")
    index = (series.stamps_ms - series.origin_ms) // log_msec
    inside = (index >= k0) & (index <= k1)
    count = k1 - k0 + 1
    moved = float(series.values[inside].sum()) * log_msec / 1000
    return CommonSpan(nodes, log_msec, whole_s, count, count * log_msec / 1000,
                      series.origin_ms + (k0 - 1) * log_msec, series.origin_ms + k1 * log_msec, starts(k0),
                      latest, earliest, ran, moved, moved / (count * log_msec / 1000), **logged)


def _empty(nodes: tuple[str, ...], log_msec: int, whole_s: float, ran: dict, logged: dict, reason: str) -> CommonSpan:
    return CommonSpan(nodes, log_msec, whole_s, 0, 0.0, None, None, None, None, None, ran, 0.0, None, reason, **logged)


@dataclass(frozen=True)
class Concurrent(AsDict):
    """What G3 judges of a run of two or more nodes: the mean over repeats of each repeat's common-span aggregate,
    as a fraction of the ceiling (None when a repeat's nodes never all ran at once). The nodes' own rates added
    (fio's total) stand beside it, never judged. Written by ``to_dict`` and read back by ``from_dict`` through the
    same strict check (pydantic over these dataclasses: every field, its type, nothing else)."""

    __pydantic_config__ = ConfigDict(strict=True, extra="forbid")
    nodes: int
    rule: str
    spans: tuple[CommonSpan, ...]          # one per repeat
    aggregate_bps: float | None
    sum_of_rates_bps: float                # information only
    ceiling_bps: float | None
    fraction_of_ceiling: float | None
    reason: str | None = None

    def to_dict(self) -> dict:
        data = json.loads(json.dumps(super().to_dict()))
        Concurrent.from_dict(data)                  # what is written is what a reader accepts, or it fails here
        return data

    @classmethod
    def from_dict(cls, data) -> "Concurrent":
        """The record as written in results.json; ValueError naming the first field that is missing, unknown or
        of another type."""
        try:
            return _RECORD.validate_json(json.dumps(data))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "the record"
            raise ValueError(f"{where}: {first['msg']}") from None

    def line(self, aggregate_places: int | None = None) -> str:
        """The sentence the terminal and the gate print: what is judged, over which span, and what is not. The gate
        gives ``aggregate_places`` (Gb/s digits enough that the printed aggregate decides as its criterion does) and
        prints the fraction itself: then no rounded fraction of the run's own ceiling stands beside the verdict."""
        many = len(self.spans) > 1
        spans = ", ".join(f"{s.span_s:.2f}" for s in self.spans)
        wholes = ", ".join(f"{s.whole_s:.2f}" for s in self.spans)
        unjudged = f"the sum of the nodes' own rates, {_gbps(self.sum_of_rates_bps, aggregate_places)}, is not judged"
        if self.aggregate_bps is None:
            return f"no aggregate: {self.reason} ({unjudged})"
        share = (f" = {self.fraction_of_ceiling * 100:.1f} % of the {self.ceiling_bps / 1e9:g} Gb/s ceiling"
                 if self.fraction_of_ceiling is not None and aggregate_places is None else "")
        aggregate = _gbps(self.aggregate_bps, aggregate_places)
        return (f"aggregate {aggregate}{share}{f' (mean of {len(self.spans)} repeats)' if many else ''}"
                f" over the {spans} s all {self.nodes} nodes ran at once (of {wholes} s"
                f"{'' if not many else ' in repeats ' + ', '.join(str(i) for i in range(1, len(self.spans) + 1))}; "
                f"{RULE}; {unjudged})")


_RECORD = TypeAdapter(Concurrent)


def concurrent(spans: Sequence[CommonSpan], sum_of_rates_bps: float, ceiling_bps: float | None) -> Concurrent:
    """The run's figure from its repeats' spans: no aggregate when any repeat's nodes never all ran at once."""
    nodes = len(spans[0].nodes) if spans else 0
    empty = [(i, s) for i, s in enumerate(spans, start=1) if s.aggregate_bps is None]
    if empty or not spans:
        reason = "; ".join(f"repeat {i}: {s.reason}" for i, s in empty) or "no repeat"
        return Concurrent(nodes, RULE, tuple(spans), None, sum_of_rates_bps, ceiling_bps, None, reason)
    aggregate = statistics.fmean(s.aggregate_bps for s in spans)
    return Concurrent(nodes, RULE, tuple(spans), aggregate, sum_of_rates_bps, ceiling_bps,
                      aggregate * 8 / ceiling_bps if ceiling_bps else None)


def _gbps(bps: float, places: int | None = None) -> str:
    if places is not None:
        return f"{format_fixed(exact(bps) * 8 / 10 ** 9, places)} Gb/s"
    gbps = bps * 8 / 1e9
    return f"{gbps:.2f} Gb/s" if gbps >= 0.1 else f"{gbps:.3g} Gb/s"
