"""An independent common span for the tests: Python's csv module over fio's bw logs and plain integers, nothing
shared with fxprobe.tools.fio_logs or fxprobe.workload.common_span but the rule they are to follow:

every log's samples go on one grid of windows (origin: the earliest first stamp of any log; a sample stamped t is
in window floor((t - origin) / L + 1/2), and window k spans the L ms before origin + k x L); a node ran from its
first window to its last; the common span is the windows from the latest node's first to the earliest node's
last, both included; its bytes are every sample inside x 1024 (KiB/s) x L / 1000.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path


def _samples(path: Path, ddir: int) -> list[tuple[int, int]]:
    with open(path, newline="") as handle:
        return [(int(row[0]), int(row[1])) for row in csv.reader(handle, skipinitialspace=True)
                if row and int(row[2]) == ddir]


def _first_stamp(path: Path) -> int | None:
    with open(path, newline="") as handle:
        for row in csv.reader(handle, skipinitialspace=True):
            if row:
                return int(row[0])
    return None


def independent_span(logs: dict[str, list[Path]], log_msec: int, ddir: int = 0) -> dict:
    """node -> its logs: {"windows", "span_s", "bytes", "aggregate_bps", "start_ms", "end_ms", "whole_s", "ran_ms"}
    (aggregate None when the latest node's first window comes after the earliest node's last; ran_ms: node ->
    [its first window's start, its last window's end])."""
    firsts = [s for paths in logs.values() for p in paths if (s := _first_stamp(p)) is not None]
    origin = min(firsts)
    window = lambda t: math.floor((t - origin) / log_msec + 0.5)     # noqa: E731
    samples = {node: [s for p in paths for s in _samples(p, ddir)] for node, paths in logs.items()}
    ran = {node: (min(window(t) for t, _ in got), max(window(t) for t, _ in got)) for node, got in samples.items()}
    low, high = min(a for a, _ in ran.values()), max(b for _, b in ran.values())
    k0, k1 = max(a for a, _ in ran.values()), min(b for _, b in ran.values())
    whole_s = (high - low + 1) * log_msec / 1000
    ran_ms = {node: [origin + (a - 1) * log_msec, origin + b * log_msec] for node, (a, b) in ran.items()}
    if k0 > k1:
        return {"windows": 0, "span_s": 0.0, "bytes": 0.0, "aggregate_bps": None, "start_ms": None,
                "end_ms": None, "whole_s": whole_s, "ran_ms": ran_ms}
    kib_per_s = sum(v for got in samples.values() for t, v in got if k0 <= window(t) <= k1)
    moved = kib_per_s * 1024 * log_msec / 1000
    span_s = (k1 - k0 + 1) * log_msec / 1000
    return {"windows": k1 - k0 + 1, "span_s": span_s, "bytes": moved, "aggregate_bps": moved / span_s,
            "start_ms": origin + (k0 - 1) * log_msec, "end_ms": origin + k1 * log_msec, "whole_s": whole_s,
            "ran_ms": ran_ms}
