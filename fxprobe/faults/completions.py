"""Exact load timing from fio's per-I/O completion logs (``write_lat_log`` with ``log_avg_msec=0``).

fio writes one line per *successful* completion (io_u.c ``io_completed`` accounts an I/O only when
it has no error; errored I/O is counted in ``total_err`` and never logged), stamped with the
completion instant in epoch milliseconds (``log_unix_epoch=1``), and the completion latency in ns.
So from the log alone:

- the longest stall is the longest interval with no successful completion, to the millisecond
  (no averaging window);
- throughput in any interval is the count (and bytes) of successful completions in it;
- the first effect of a fault is the first gap after the injection longer than any gap of the
  pre-fault steady state;
- recovery is the first instant after the restore at which the trailing window (L ms) is back at the
  wanted share of the steady-state rate (a sliding window, not one on a grid).

Every job's log is merged: a gap means no job completed anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Completions:
    t_ms: np.ndarray        # completion instants (epoch ms, node clock), sorted
    nbytes: np.ndarray      # bytes of each completed I/O
    clat_ns: np.ndarray     # completion latency of each

    @classmethod
    def from_logs(cls, frames: Sequence[pd.DataFrame]) -> "Completions":
        """From parsed per-I/O clat logs (tools.fio.parse_fio_log), all jobs and directions merged."""
        frames = [f for f in frames if len(f)]
        if not frames:
            return cls(np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.array([], dtype=np.int64))
        data = pd.concat([f[["time_ms", "value", "bs"]] for f in frames], ignore_index=True)
        data = data.sort_values("time_ms", kind="stable")
        return cls(data["time_ms"].to_numpy(dtype=np.int64), data["bs"].to_numpy(dtype=np.int64),
                   data["value"].to_numpy(dtype=np.int64))

    def __len__(self) -> int:
        return len(self.t_ms)

    @property
    def first_issue_ms(self) -> int | None:
        """When the load's first I/O was issued (its completion minus its latency)."""
        if not len(self):
            return None
        return int(np.min(self.t_ms - self.clat_ns // 1_000_000))

    def count_between(self, start_ms: float, end_ms: float) -> int:
        """Completions in (start, end]."""
        return int(np.searchsorted(self.t_ms, end_ms, side="right") - np.searchsorted(self.t_ms, start_ms, side="right"))

    def bytes_between(self, start_ms: float, end_ms: float) -> int:
        lo = np.searchsorted(self.t_ms, start_ms, side="right")
        hi = np.searchsorted(self.t_ms, end_ms, side="right")
        return int(self.nbytes[lo:hi].sum())

    def windows(self, log_msec: int) -> tuple[pd.Series, pd.Series]:
        """(IOPS, KiB/s) per window (t - L, t] on the L grid, index = window end: exact counts, not averages."""
        if not len(self):
            return pd.Series(dtype=float), pd.Series(dtype=float)
        grid = ((self.t_ms + log_msec - 1) // log_msec) * log_msec
        frame = pd.DataFrame({"grid": grid, "n": 1, "bytes": self.nbytes})
        sums = frame.groupby("grid")[["n", "bytes"]].sum().sort_index()
        seconds = log_msec / 1000.0
        return (sums["n"].astype(float) / seconds).rename(None), (sums["bytes"].astype(float) / 1024 / seconds).rename(None)


def longest_gap(t_ms: np.ndarray, start_ms: int, end_ms: int) -> tuple[int, int | None]:
    """(ms, start) of the longest interval inside [start, end] with no completion: between two
    consecutive completions, or from ``start`` to the first one, or from the last one to ``end``."""
    inside = t_ms[(t_ms > start_ms) & (t_ms < end_ms)]
    edges = np.concatenate([[start_ms], inside, [end_ms]]).astype(np.int64)
    if len(edges) < 2 or end_ms <= start_ms:
        return 0, None
    gaps = np.diff(edges)
    i = int(np.argmax(gaps))
    return int(gaps[i]), int(edges[i])


def first_effect(t_ms: np.ndarray, base_start_ms: int, inject_ms: int, end_ms: int) -> int | None:
    """Start of the first gap after the injection longer than every gap of the steady state
    (base_start .. inject); None when the load never paused longer than it did before the fault."""
    base = t_ms[(t_ms >= base_start_ms) & (t_ms <= inject_ms)]
    if len(base) < 2:
        return None
    normal = int(np.max(np.diff(base)))
    after = t_ms[(t_ms >= inject_ms) & (t_ms <= end_ms)]
    edges = np.concatenate([[inject_ms], after, [end_ms]]).astype(np.int64)
    longer = np.nonzero(np.diff(edges) > normal)[0]
    return int(edges[longer[0]]) if len(longer) else None


def recovered_at(t_ms: np.ndarray, after_ms: int, window_ms: int, min_count: float) -> int | None:
    """The first completion after ``after_ms`` at which the trailing ``window_ms`` (t - W, t] holds at
    least ``min_count`` completions (a sliding window, exact to the millisecond); None if never."""
    later = t_ms[t_ms > after_ms]
    if not len(later):
        return None
    counts = np.searchsorted(t_ms, later, side="right") - np.searchsorted(t_ms, later - window_ms, side="right")
    hit = np.nonzero(counts >= min_count)[0]
    return int(later[hit[0]]) if len(hit) else None
