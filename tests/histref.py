"""An independent merge of fio clat_hist logs for the tests: Python's csv module and a Counter per
direction, percentiles by numpy's inverted CDF - nothing shared with fxprobe.tools.fio_logs but fio's
bin values.

Logs that fio's client wrote for a ``fio --server`` hold, per direction, D(i) = C(i) - D(i-1) of the
server's cumulative snapshots C (fio server.c subtracts in place from the entry it already
differenced), so a job's histogram is its last two lines of each direction added.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd


def _rows(path: Path):
    with open(path, newline="") as handle:
        yield from csv.reader(handle, skipinitialspace=True)


def independent_merge(paths: list[Path], prefix: int, values: list[int], fio_client: bool = False) -> dict:
    """{direction (None: all): Counter of bin value -> samples} over every log."""
    merged: dict = {None: Counter(), 0: Counter(), 1: Counter()}
    for path in paths:
        rows_by_ddir: dict[int, list] = {}
        for row in _rows(path):
            rows_by_ddir.setdefault(int(row[1]), []).append(row)
        for ddir, rows in rows_by_ddir.items():
            for row in (rows[-2:] if fio_client else rows):
                counts = {v: int(c) for v, c in zip(values, row[prefix:]) if c != "0"}
                merged[ddir].update(counts)
                merged[None].update(counts)
    return merged


def numpy_percentile(merged: Counter, percent: float) -> int:
    """The inverted-CDF percentile of every sample, expanded (fio's rule, computed another way)."""
    values = sorted(v for v, c in merged.items() if c)
    samples = np.repeat(values, [merged[v] for v in values])
    return int(np.percentile(samples, percent, method="inverted_cdf"))


def client_log_falls(paths: list[Path], prefix: int) -> list[str]:
    """Client-side logs whose job histogram (line i + line i-1 of a direction) falls in some bin from
    one line to the next: 'file:direction' for each (a cumulative count cannot fall)."""
    found = []
    for path in paths:
        rows_by_ddir: dict[int, list] = {}
        for row in _rows(path):
            rows_by_ddir.setdefault(int(row[1]), []).append([int(c) for c in row[prefix:]])
        for ddir, rows in rows_by_ddir.items():
            jobs = [[a + b for a, b in zip(x, y)] for x, y in zip(rows, rows[1:])]
            if any(b < a for before, after in zip(jobs, jobs[1:]) for a, b in zip(before, after)):
                found.append(f"{path.name}:{ddir}")
    return found


def hist_view_checked(hist, logs: list[Path], json_samples: int) -> bool:
    """True when the fleet's hist-log view is a usable one; when fxprobe refused it, assert that an
    independent look at the same logs finds them impossible too (fio writes impossible counts now
    and then, axboe/fio#827: seen once in CI, 9.5e13 samples in a 437-sample run)."""
    problem = hist["problem"] if isinstance(hist, dict) else hist.problem
    if not problem:
        return True
    merged = independent_merge(logs, 3, list(range(10_000)), fio_client=True)[None]
    assert client_log_falls(logs, 3) or sum(merged.values()) > json_samples, problem
    return False


def bandwidth_series(logs: Sequence[pd.DataFrame], log_msec: int, factor: float = 1024) -> tuple[tuple[int, float], ...]:
    """An independent sum of parsed per-job logs (pandas) into one series of (epoch ms, value x factor) per log
    window, window round((t - first stamp) / log_msec): bw logs (KiB/s, factor 1024 -> bytes/s) or iops logs
    (factor 1). What ``fio_logs.fleet_series`` (polars, streamed) must equal."""
    frames = [f[["time_ms", "value"]] for f in logs if len(f)]
    if not frames:
        return ()
    data = pd.concat(frames)
    start = int(data["time_ms"].min())
    bucket = ((data["time_ms"] - start + log_msec // 2) // log_msec).astype("int64")
    summed = data.groupby(bucket)["value"].sum().sort_index()
    stamps = (summed.index.to_numpy(dtype="int64") * log_msec + start).tolist()
    return tuple(zip(stamps, (summed.to_numpy(dtype="float64") * factor).tolist()))
