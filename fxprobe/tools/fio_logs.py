"""fio's per-second logs at fleet scale: streamed in blocks, merged across hosts in one pass.

A 72 h soak on 64 hosts is 16.6 million bandwidth lines; its latency histogram logs hold 1,856 bins
per line. Nothing here holds a whole fleet, or even a whole file: each file is read in blocks
(bw/IOPS logs by polars' streaming CSV reader, the fastest maintained reader measured on them;
hist logs by numpy's C ``loadtxt``, the fastest on 1,859-field lines: see ``scripts/bench_logs.py``),
and each block is folded into running sums at once; hosts are read side by side on the cores:

- ``fleet_series``: bandwidth (or IOPS) logs of many hosts -> one series of log windows, the sum
  over hosts per window (the tests check it against an independent pandas sum of the parsed logs), with
  per-host line counts and zero windows (stalled seconds).
- ``merge_hist_logs``: ``write_hist_log`` files of many hosts -> one histogram per direction,
  summed bin by bin (exact: every host logs the same bin layout), so fleet percentiles follow
  fio's own rule over all samples (percentiles themselves can never be averaged).

Hist logs that fio's client wrote for a ``fio --server`` (named ``….log.<address>``) are not per-window
counts: the server turns its cumulative snapshots C1, C2, … into differences in place before sending
them (server.c ``__fio_append_iolog_gz_hist``), so each one is taken from the previous, already
differenced entry: line i holds Di = Ci - D(i-1). Every Di is >= 0, and the lines summed overcount (seen:
64 samples in one job's log where its json+ had 40). The job's histogram at its last line is
Cn = Dn + D(n-1) (a window's own counts are Di - D(i-2)); ``merge_hist_logs(..., fio_client=True)``
takes that, per direction, and agrees bin for bin with the job's json+ up to the I/O after its last line.

Peak memory is one block per core plus the sums (a series of windows, or bins per direction).
Formats: axboe/fio HOWTO.rst "Log File Formats"; histogram bins as stat.h lays them out
(``fio.bin_value_ns``), folded by ``log_hist_coarseness`` as tools/hist/fiologparser_hist.py does.
"""

from __future__ import annotations

import io
import os
import re
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import polars as pl

from fxprobe.core.errors import ParseError
from fxprobe.tools.fio import LOG_COLUMNS, PLAT_NR, hist_bin_values_ns, percentile_from_bins

BLOCK_ROWS = 500_000            # lines per block of a bw/IOPS log (~19 MiB of text, 20 MiB of columns)
BLOCK_BYTES = 16 << 20          # text per block of a hist log: ~3,000 lines of 1,859 fields
LIMIT = 2.0**62                 # larger magnitudes are not fio's numbers (and lose int64 exactness)
HIST_SIZES = {PLAT_NR >> c: c for c in range(0, 7)}   # bins per line -> log_hist_coarseness
DDIR_NAMES = {0: "read", 1: "write", 2: "trim"}

LogSource = str | os.PathLike | bytes     # a file (str or path), or the log's content (bytes)


def _name(log: LogSource, source: str | None) -> str:
    if source:
        return source
    return "fio log" if isinstance(log, bytes) else Path(log).name


def _first_line(log: LogSource, source: str) -> str | None:
    """The first non-blank line (to count the fields), None for an empty log."""
    try:
        handle = io.BytesIO(log) if isinstance(log, bytes) else open(log, "rb")
    except OSError as exc:
        raise ParseError(source, "log", f"cannot read: {exc.strerror or exc}") from None
    with handle:
        for line in handle:
            if line.strip():
                return line.decode("utf-8", "replace")
    return None


def field_count(log: LogSource, source: str | None = None) -> int:
    """Fields per line of a fio log (0 for an empty one)."""
    line = _first_line(log, _name(log, source))
    return 0 if line is None else line.count(",") + 1


def iter_blocks(log: LogSource, source: str | None = None, *, width: int | None = None,
                float_columns: Sequence[int] = (), block_rows: int = BLOCK_ROWS) -> Iterator[list[np.ndarray]]:
    """The columns of a comma-separated fio log, about ``block_rows`` lines at a time (polars'
    streaming CSV reader).

    Every column is int64 except ``float_columns`` (float64); a value that is not a number, an
    empty field, a line with another field count, or a magnitude of 2^62 or more is a ParseError
    naming the source (and the column where it is known). Blank lines are skipped."""
    source = _name(log, source)
    width = field_count(log, source) if width is None else width
    if width == 0:
        return
    names = [f"f{i}" for i in range(width)]
    schema = {n: (pl.Float64 if i in float_columns else pl.Int64) for i, n in enumerate(names)}
    try:
        frame = pl.scan_csv(io.BytesIO(log) if isinstance(log, bytes) else os.fspath(log), has_header=False,
                            new_columns=names, schema_overrides=schema)
        for batch in frame.collect_batches(chunk_size=block_rows):
            if any(batch.null_count().row(0)):
                batch = batch.filter(~pl.all_horizontal(pl.all().is_null()))     # blank lines
                for name, nulls in zip(names, batch.null_count().row(0)):
                    if nulls:
                        raise ParseError(source, name, f"empty field or fewer than {width} fields on a line")
            columns = [batch.get_column(name).to_numpy() for name in names]
            for i in float_columns:
                if not np.isfinite(columns[i]).all():
                    raise ParseError(source, names[i], "not a finite number")
            _check_range(columns, source)
            if len(columns[0]):
                yield columns
    except pl.exceptions.PolarsError as exc:
        raise ParseError(source, "log", f"not a comma-separated fio log: {str(exc).splitlines()[0][:160]}") from None
    except OSError as exc:
        raise ParseError(source, "log", f"cannot read: {exc.strerror or exc}") from None


def _check_range(columns: list[np.ndarray], source: str) -> None:
    for i, values in enumerate(columns):
        if len(values) and (np.abs(values.max()) >= LIMIT or np.abs(values.min()) >= LIMIT):
            raise ParseError(source, f"f{i}", "a number out of range (|value| >= 2^62)")


# -- bandwidth / IOPS logs of a fleet -------------------------------------------------------
@dataclass(frozen=True)
class HostLog:
    """What one host's log contributed."""

    source: str
    lines: int
    windows: int             # log windows with a sample
    zero_windows: int        # samples with value 0 (a stalled window)
    first_ms: int | None
    last_ms: int | None

    def to_dict(self) -> dict:
        return {"source": self.source, "lines": self.lines, "windows": self.windows,
                "zero_windows": self.zero_windows, "first_ms": self.first_ms, "last_ms": self.last_ms}


@dataclass(frozen=True)
class FleetSeries:
    """Per log window, the sum over hosts (value x factor: bw KiB/s x 1024 -> bytes/s)."""

    log_msec: int
    stamps_ms: np.ndarray    # window k's stamp: origin_ms + k x log_msec (fio stamps a window at its end)
    values: np.ndarray       # float64
    hosts: tuple[HostLog, ...]
    origin_ms: int | None = None    # the fleet's first stamp (window 0); None without samples

    def window_of(self, stamp_ms: int) -> int:
        """The window a sample stamped ``stamp_ms`` falls in (round((t - origin) / log_msec), as the sums do)."""
        return (stamp_ms - (self.origin_ms or 0) + self.log_msec // 2) // self.log_msec

    @property
    def lines(self) -> int:
        return sum(h.lines for h in self.hosts)

    def pairs(self) -> tuple[tuple[int, float], ...]:
        """((epoch ms, value), ...), one pair per window."""
        return tuple(zip(self.stamps_ms.tolist(), self.values.tolist()))


class _Windows:
    """Running per-window sums over a window index that grows in either direction."""

    def __init__(self):
        self.low = 0
        self.sums = np.zeros(0)
        self.seen = np.zeros(0, dtype=np.int64)

    def add(self, index: np.ndarray, values: np.ndarray | None) -> None:
        """Add ``values`` (None: only count) at window ``index``."""
        low, high = int(index.min()), int(index.max()) + 1
        at = self._cover(low, high)
        if values is not None:
            self.sums[at:at + high - low] += np.bincount(index - low, weights=values)
        self.seen[at:at + high - low] += np.bincount(index - low)

    def merge(self, other: "_Windows") -> None:
        at = self._cover(other.low, other.low + len(other.seen))
        self.sums[at:at + len(other.sums)] += other.sums
        self.seen[at:at + len(other.seen)] += other.seen

    def _cover(self, low: int, high: int) -> int:
        """Grow to hold windows low..high-1; returns where ``low`` is."""
        if not len(self.sums):
            self.low, self.sums, self.seen = low, np.zeros(high - low), np.zeros(high - low, dtype=np.int64)
        if low < self.low or high > self.low + len(self.sums):
            new_low, new_high = min(low, self.low), max(high, self.low + len(self.sums))
            sums, seen = np.zeros(new_high - new_low), np.zeros(new_high - new_low, dtype=np.int64)
            sums[self.low - new_low:self.low - new_low + len(self.sums)] = self.sums
            seen[self.low - new_low:self.low - new_low + len(self.seen)] = self.seen
            self.low, self.sums, self.seen = new_low, sums, seen
        return low - self.low


def fleet_series(logs: Iterable[LogSource], log_msec: int, factor: float = 1024, *,
                 ddir: int | None = None, block_rows: int = BLOCK_ROWS) -> FleetSeries:
    """Sum bw (factor 1024: KiB/s -> bytes/s) or IOPS (factor 1) logs of many hosts per log window.

    Windows are counted from the earliest first stamp of any log
    (a sample at t falls in window round((t - start) / log_msec)); only windows with a sample
    appear. ``ddir`` keeps one direction (0 read, 1 write); None sums all lines, as fio's own
    bandwidth totals do. Each log is read once, block by block."""
    if log_msec <= 0:
        raise ValueError("log_msec must be > 0")
    logs = list(logs)
    names = [_name(log, None) for log in logs]
    widths = [field_count(log, name) for log, name in zip(logs, names)]
    for name, width in zip(names, widths):
        if width and width not in LOG_COLUMNS:
            raise ParseError(name, "log", f"{width} fields per line; fio logs have 4 to 8")
    firsts = [int(float(_first_line(log, name).split(",")[0]))
              for log, name, width in zip(logs, names, widths) if width]
    if not firsts:
        return FleetSeries(log_msec, np.zeros(0, dtype=np.int64), np.zeros(0), ())
    start = min(firsts)
    windows, hosts = _Windows(), []
    jobs = [(log, name, width) for log, name, width in zip(logs, names, widths)]
    for own, host in _bounded_map(lambda job: _host_windows(*job, start, log_msec, ddir, block_rows), jobs):
        if own.seen.size:
            windows.merge(own)
        hosts.append(host)
    present = np.flatnonzero(windows.seen)
    stamps = (present + windows.low).astype(np.int64) * log_msec + start
    return FleetSeries(log_msec, stamps, windows.sums[present] * factor, tuple(hosts), start)


def _host_windows(log: LogSource, name: str, width: int, start: int, log_msec: int, ddir: int | None,
                  block_rows: int) -> tuple[_Windows, HostLog]:
    """One host's log folded into per-window sums, block by block."""
    own, lines, zeros, first, last = _Windows(), 0, 0, None, None
    for columns in iter_blocks(log, name, width=width, float_columns=(1,), block_rows=block_rows):
        stamps, values = columns[0], columns[1]
        if ddir is not None:
            keep = columns[2] == ddir
            stamps, values = stamps[keep], values[keep]
        if not len(stamps):
            continue
        own.add((stamps - start + log_msec // 2) // log_msec, values)
        lines += len(stamps)
        zeros += int(np.count_nonzero(values == 0))
        first = int(stamps[0]) if first is None else first
        last = int(stamps[-1])
    return own, HostLog(name, lines, int(np.count_nonzero(own.seen)), zeros, first, last)


def _bounded_map(function, items: list, workers: int | None = None) -> Iterator:
    """``function`` over ``items`` in order, at most ``workers`` (the cores, up to 4) at once: polars
    parses without the GIL, so hosts are read side by side, and only that many hosts' sums exist at a time."""
    workers = max(1, min(workers or os.cpu_count() or 1, 4, len(items)))
    if workers == 1:
        yield from map(function, items)
        return
    with ThreadPoolExecutor(workers) as pool:
        pending = deque(pool.submit(function, item) for item in items[:workers])
        for item in items[workers:]:
            yield pending.popleft().result()
            pending.append(pool.submit(function, item))
        while pending:
            yield pending.popleft().result()


# -- latency histogram logs of a fleet ------------------------------------------------------
@dataclass(frozen=True)
class FleetHistogram:
    """``write_hist_log`` files of many hosts, summed bin by bin per direction (0 read, 1 write, 2 trim)."""

    coarseness: int
    bin_values_ns: tuple[int, ...]
    counts: dict[int, np.ndarray]            # ddir -> bin counts over every window of every host
    windows: int
    hosts: tuple[str, ...]

    def bins(self, ddir: int | None = None) -> dict[int, int]:
        """{bin value ns: count} for one direction, or all together (as ``FioHistLog.merged_bins``)."""
        chosen = [c for d, c in self.counts.items() if ddir is None or d == ddir]
        if not chosen:
            return {}
        total = np.sum(chosen, axis=0)
        return {v: int(c) for v, c in zip(self.bin_values_ns, total) if c}

    def samples(self, ddir: int | None = None) -> int:
        return sum(self.bins(ddir).values())

    def percentile(self, percent: float, ddir: int | None = None) -> int | None:
        """fio's rule over the fleet's merged bins: the first bin whose running sum reaches p % of N."""
        return percentile_from_bins(self.bins(ddir), percent)

    def to_dict(self) -> dict:
        return {"coarseness": self.coarseness, "windows": self.windows, "hosts": list(self.hosts),
                "samples": {str(d): int(c.sum()) for d, c in sorted(self.counts.items())}}


def hist_layout(width: int, source: str) -> tuple[int, int]:
    """(prefix fields, coarseness) of a hist log line of ``width`` fields: time, ddir, bs[, prio], bins."""
    for prefix in (3, 4):
        if width - prefix in HIST_SIZES:
            return prefix, HIST_SIZES[width - prefix]
    raise ParseError(source, "bins", f"{width} fields per line fit no fio histogram layout")


def _text_blocks(log: LogSource, source: str, block_bytes: int) -> Iterator[tuple[int, str]]:
    """(line number of the block's first line, text of whole lines) of about ``block_bytes`` each."""
    try:
        handle = io.BytesIO(log) if isinstance(log, bytes) else open(log, "rb")
    except OSError as exc:
        raise ParseError(source, "log", f"cannot read: {exc.strerror or exc}") from None
    line, rest = 1, b""
    with handle:
        while True:
            data = handle.read(block_bytes)
            if not data:
                break
            data = rest + data
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                yield line, data[:cut].decode("utf-8", "replace")
                line += data.count(b"\n", 0, cut)
    if rest.strip():
        yield line, rest.decode("utf-8", "replace")


def iter_hist_blocks(log: LogSource, source: str | None = None, *,
                     block_bytes: int = BLOCK_BYTES) -> Iterator[np.ndarray]:
    """A hist log as int64 arrays (lines x fields), one block at a time. numpy's C ``loadtxt`` and
    not polars or pyarrow: with 1,859 fields per line, their per-column work costs more than parsing
    (see scripts/bench_logs.py)."""
    source = _name(log, source)
    for first, text in _text_blocks(log, source, block_bytes):
        try:
            block = np.loadtxt(io.StringIO(text), delimiter=",", dtype=np.int64, ndmin=2, comments=None)
        except ValueError as exc:
            where = re.sub(r"at row (\d+)", lambda m: f"at line {int(m.group(1)) + first}", str(exc).splitlines()[0])
            raise ParseError(source, "bins", f"not a fio histogram log: {where[:160]}") from None
        if block.size:
            yield block


def _client_tail(name: str, ddir: int, tail: tuple[np.ndarray, np.ndarray] | None, rows: np.ndarray,
                 numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The last two lines (and their line numbers) of one direction of a client-side hist log, after
    checking that the job's histogram the lines stand for (line i + line i-1, see the module's note)
    never falls in any bin: a histogram that does is not the job's (fio has written impossible bin
    counts into hist logs, axboe/fio#827; one seen here came back from a server holding 9.5e13 samples
    where the job's json+ had 437), so the log is refused rather than merged."""
    if tail is not None:
        rows, numbers = np.concatenate([tail[0], rows]), np.concatenate([tail[1], numbers])
    if len(rows) >= 3:
        cumulative = rows[1:] + rows[:-1]
        falls = np.argwhere(np.diff(cumulative, axis=0) < 0)
        if len(falls):
            at, b = int(falls[0][0]) + 1, int(falls[0][1])
            raise ParseError(name, "bins", f"lines {int(numbers[at - 1])} and {int(numbers[at + 1])} ({DDIR_NAMES.get(ddir, ddir)}): "
                             f"bin {b} holds {int(rows[at - 1][b]):,} then {int(rows[at + 1][b]):,}, so the job's "
                             f"histogram falls from {int(cumulative[at - 1][b]):,} to {int(cumulative[at][b]):,} "
                             "samples: not a consistent histogram log (fio wrote impossible counts); its percentiles "
                             "are not used")
    return rows[-2:], numbers[-2:]


def merge_hist_logs(logs: Iterable[LogSource], *, block_bytes: int = BLOCK_BYTES,
                    fio_client: bool = False) -> FleetHistogram:
    """Sum the latency histograms of many hosts' hist logs bin by bin, block by block.

    Every log must have the same bin layout (``log_hist_coarseness``); one that differs is a
    ParseError naming it, since bins of different widths cannot be summed exactly. ``fio_client``:
    the logs came back through fio's client from ``fio --server`` (see the module's note), so each
    log's histogram is its last two lines per direction added, not all its lines."""
    counts: dict[int, np.ndarray] = {}
    layout = None
    windows, hosts = 0, []
    for log in logs:
        name = _name(log, None)
        width = field_count(log, name)
        if not width:
            continue
        prefix, coarseness = hist_layout(width, name)
        if layout is None:
            layout = (width - prefix, coarseness, name)
        elif layout[:2] != (width - prefix, coarseness):
            raise ParseError(name, "bins", f"{width - prefix} bins per line (log_hist_coarseness {coarseness}); "
                             f"{layout[2]} has {layout[0]} (coarseness {layout[1]}): cannot merge bin by bin")
        hosts.append(name)
        tails: dict[int, tuple[np.ndarray, np.ndarray]] = {}   # fio_client: each direction's last two lines
        lines_before = 0
        for block in iter_hist_blocks(log, name, block_bytes=block_bytes):
            if block.shape[1] != width:
                raise ParseError(name, "bins", f"{block.shape[1]} fields per line after {width} on the first")
            bins, ddirs = block[:, prefix:], block[:, 1]
            if bins.min() < 0:
                raise ParseError(name, "bins", "negative bin count")
            windows += len(ddirs)
            present = np.unique(ddirs).tolist()
            for d in present:
                rows = bins if len(present) == 1 else bins[ddirs == d]
                if fio_client:
                    numbers = lines_before + 1 + np.flatnonzero(ddirs == d)
                    tails[d] = _client_tail(name, d, tails.get(d), rows, numbers)
                    continue
                total = rows.sum(axis=0)
                counts[d] = counts[d] + total if d in counts else total
            lines_before += len(ddirs)
        for d, (rows, _) in tails.items():
            total = rows.sum(axis=0)
            counts[d] = counts[d] + total if d in counts else total
    if layout is None:
        return FleetHistogram(0, (), {}, 0, ())
    return FleetHistogram(layout[1], tuple(hist_bin_values_ns(layout[0], layout[1])), counts, windows, tuple(hosts))


@dataclass(frozen=True)
class HistWindows:
    """Each line of one hist log as a window of its own: its time (epoch ms with log_unix_epoch), direction,
    and the completions counted in it (a client-written log's D(i) - D(i-2) of its direction)."""

    time_ms: np.ndarray
    ddir: np.ndarray
    completions: np.ndarray


def hist_window_counts(log: LogSource, *, fio_client: bool = False, block_bytes: int = BLOCK_BYTES) -> HistWindows:
    """The completions of every window of a hist log, streamed block by block (only line totals are kept)."""
    name = _name(log, None)
    width = field_count(log, name)
    if not width:
        empty = np.zeros(0, dtype=np.int64)
        return HistWindows(empty, empty, empty)
    prefix, _ = hist_layout(width, name)
    times, ddirs, counts = [], [], []
    before: dict[int, np.ndarray] = {}        # fio_client: each direction's last two line totals D(i-2), D(i-1)
    for block in iter_hist_blocks(log, name, block_bytes=block_bytes):
        totals = block[:, prefix:].sum(axis=1)
        if fio_client:
            own = np.empty_like(totals)
            for d in np.unique(block[:, 1]).tolist():
                rows = block[:, 1] == d
                chain = np.concatenate([before.get(d, np.zeros(2, dtype=np.int64)), totals[rows]])
                own[rows] = chain[2:] - chain[:-2]
                before[d] = chain[-2:]
            totals = own
        times.append(block[:, 0])
        ddirs.append(block[:, 1])
        counts.append(totals)
    return HistWindows(np.concatenate(times), np.concatenate(ddirs), np.concatenate(counts))
