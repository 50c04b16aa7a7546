"""fio adapter: JSON / json+ / client-server results, latency bins, and per-second logs.

Formats: axboe/fio HOWTO.rst ("JSON output", "JSON+ output", "Log File Formats"),
stat.c (percentiles, plat_idx_to_val), client.c (client_stats, "All clients").
Units as fio prints them: ``bw`` KiB/s, ``bw_bytes`` bytes/s, latencies ns, runtime ms.
"""

from __future__ import annotations

import io
import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:     # imported where a log is parsed: a soak or fault run starts without them
    import numpy as np
    import pandas as pd

from fxprobe.core.data import AsDict
from fxprobe.core.errors import ParseError, ToolError
from fxprobe.core.hosts import LOCAL, Host
from fxprobe.core.runner import Runner
from fxprobe.tools.probe import parse_major_minor, probe_version
from fxprobe.tools.fields import Fields, integer, load_json, number, text

# -- fio's latency histogram layout (stat.h / stat.c) ------------------------
PLAT_BITS = 6
PLAT_VAL = 1 << PLAT_BITS
PLAT_GROUP_NR = 29
PLAT_NR = PLAT_GROUP_NR * PLAT_VAL  # 1856 bins

DIRECTIONS = ("read", "write", "trim")
AGGREGATE_NAME = "All clients"
FIO_PORT = 8765                     # fio --server's default port


def bin_value_ns(index: int) -> int:
    """The value fio reports for bin ``index`` (plat_idx_to_val: the middle of the bin, truncated)."""
    if not 0 <= index < PLAT_NR:
        raise ValueError(f"fio latency bin index {index} outside 0..{PLAT_NR - 1}")
    if index < (PLAT_VAL << 1):
        return index
    error_bits = (index >> PLAT_BITS) - 1
    base = 1 << (error_bits + PLAT_BITS)
    k = index % PLAT_VAL
    return int(base + (k + 0.5) * (1 << error_bits))


def bin_index_ns(value_ns: int) -> int:
    """The bin a latency sample of ``value_ns`` falls in (plat_val_to_idx)."""
    value_ns = int(value_ns)
    if value_ns < 0:
        raise ValueError("latency cannot be negative")
    msb = value_ns.bit_length() - 1 if value_ns else 0
    if msb <= PLAT_BITS:
        return value_ns
    error_bits = msb - PLAT_BITS
    base = (error_bits + 1) << PLAT_BITS
    offset = (PLAT_VAL - 1) & (value_ns >> error_bits)
    return min(base + offset, PLAT_NR - 1)


def bin_bounds_ns(index: int) -> tuple[int, int]:
    """[low, high) sample values that land in bin ``index``."""
    if index < (PLAT_VAL << 1):
        return index, index + 1
    error_bits = (index >> PLAT_BITS) - 1
    low = (1 << (error_bits + PLAT_BITS)) + (index % PLAT_VAL) * (1 << error_bits)
    return low, low + (1 << error_bits)


def merge_bins(*bin_sets: Mapping[int, int]) -> dict[int, int]:
    """Sum json+ ``clat_ns.bins`` over jobs, repeats and hosts (exact: same bin layout everywhere)."""
    merged: dict[int, int] = {}
    for bins in bin_sets:
        for value, count in bins.items():
            merged[int(value)] = merged.get(int(value), 0) + int(count)
    return dict(sorted(merged.items()))


def percentile_from_bins(bins: Mapping[int, int], percent: float) -> int | None:
    """fio's own rule (stat.c calc_clat_percentiles): the first bin whose running sum reaches p % of N."""
    if not 0 < percent <= 100:
        raise ValueError(f"percentile {percent} outside (0, 100]")
    total = sum(bins.values())
    if total == 0:
        return None
    goal = percent / 100.0 * total
    running = 0
    for value in sorted(bins):
        running += bins[value]
        if running >= goal:
            return int(value)
    return int(max(bins))


# -- results ------------------------------------------------------------------
@dataclass(frozen=True)
class Node:
    """One load-generating node: where ``fio --server`` runs and the address ``fio --client`` dials.

    ``fio --server`` listens on ``listen_address:listen_port`` when they are given (a lab guest
    listens on 0.0.0.0 inside, reached through a forwarded loopback port), else on the dial
    endpoint ``address:port``. ``label`` names the node in reports (e.g. the lab guest).
    """

    host: Host
    address: str
    port: int = FIO_PORT
    listen_address: str | None = None
    listen_port: int | None = None
    label: str | None = None

    @property
    def name(self) -> str:
        return self.label or self.address

    @property
    def listen(self) -> str:
        """The ``--server=ip:ADDR,PORT`` endpoint."""
        return f"ip:{self.listen_address or self.address},{self.listen_port or self.port}"

    def to_dict(self) -> dict:
        data = {"host": self.host.to_dict(), "address": self.address, "port": self.port}
        if self.listen_address or self.listen_port:
            data["listen"] = self.listen
        if self.label:
            data["label"] = self.label
        return data


@dataclass(frozen=True)
class LatencyStats:
    min_ns: float
    max_ns: float
    mean_ns: float
    stddev_ns: float
    samples: int
    percentiles: dict[float, int] = field(default_factory=dict)
    bins: dict[int, int] = field(default_factory=dict)

    def percentile(self, percent: float) -> int | None:
        """From bins when json+ gave them (exact), else from fio's printed percentile list."""
        if self.bins:
            return percentile_from_bins(self.bins, percent)
        for key, value in self.percentiles.items():
            if math.isclose(key, percent):
                return value
        return None

    def to_dict(self) -> dict:
        data = asdict(self)
        data["percentiles"] = {f"{k:g}": v for k, v in self.percentiles.items()}
        data["bins"] = {str(k): v for k, v in self.bins.items()}
        return data


EMPTY_LATENCY = LatencyStats(0.0, 0.0, 0.0, 0.0, 0)


@dataclass(frozen=True)
class DirectionStats:
    io_bytes: int
    bw_bytes: float          # bytes/s
    iops: float
    runtime_ms: int
    total_ios: int
    short_ios: int
    drop_ios: int
    slat: LatencyStats
    clat: LatencyStats
    lat: LatencyStats

    def to_dict(self) -> dict:
        data = {k: v for k, v in asdict(self).items() if k not in ("slat", "clat", "lat")}
        data.update(slat=self.slat.to_dict(), clat=self.clat.to_dict(), lat=self.lat.to_dict())
        return data


@dataclass(frozen=True)
class SteadyState(AsDict):
    criterion_spec: str
    duration_s: float
    attained: bool
    criterion: float
    max_deviation: float
    slope: float
    data: dict = field(default_factory=dict)


@dataclass(frozen=True)
class FioJob:
    jobname: str
    groupid: int
    error: int
    directions: dict[str, DirectionStats]
    usr_cpu: float = 0.0
    sys_cpu: float = 0.0
    hostname: str | None = None
    port: int | None = None
    steadystate: SteadyState | None = None
    options: dict = field(default_factory=dict)

    def direction(self, name: str) -> DirectionStats | None:
        return self.directions.get(name)

    def to_dict(self) -> dict:
        return {"jobname": self.jobname, "groupid": self.groupid, "error": self.error,
                "hostname": self.hostname, "port": self.port, "usr_cpu": self.usr_cpu,
                "sys_cpu": self.sys_cpu, "options": dict(self.options),
                "steadystate": self.steadystate.to_dict() if self.steadystate else None,
                "directions": {k: v.to_dict() for k, v in self.directions.items()}}


@dataclass(frozen=True)
class FioResult:
    source: str
    version: str
    timestamp_ms: int | None
    jobs: tuple[FioJob, ...]             # local runs: ``jobs[]``; client/server: per-host rows
    aggregate: FioJob | None = None     # the "All clients" row when fio printed it
    client_server: bool = False

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(j.hostname for j in self.jobs if j.hostname))

    def failed_jobs(self) -> tuple[FioJob, ...]:
        return tuple(job for job in self.jobs if job.error)

    def merged_bins(self, direction: str = "read", kind: str = "clat") -> dict[int, int]:
        """Bins of every job and host merged: percentiles over the union of all samples."""
        return merge_bins(*(getattr(d, kind).bins for j in self.jobs
                            if (d := j.direction(direction)) is not None))

    def total(self, direction: str, attribute: str) -> float:
        """Sum of an additive field (bw_bytes, iops, io_bytes, total_ios) over every job and host."""
        return sum(getattr(d, attribute) for j in self.jobs if (d := j.direction(direction)))

    def to_dict(self) -> dict:
        return {"source": self.source, "version": self.version, "timestamp_ms": self.timestamp_ms,
                "client_server": self.client_server, "jobs": [j.to_dict() for j in self.jobs],
                "aggregate": self.aggregate.to_dict() if self.aggregate else None}


# -- JSON parsing -----------------------------------------------------------
def _latency(raw, source: str, where: str) -> LatencyStats:
    if raw is None:
        return EMPTY_LATENCY
    f = Fields(raw, source, where)
    percentiles = {}
    for key, value in f.sub("percentile").data.items():
        percentiles[number(key, source, f"{where}.percentile")] = integer(value, source, f"{where}.percentile[{key}]")
    bins = {}
    for key, value in f.sub("bins").data.items():
        count = integer(value, source, f"{where}.bins[{key}]")
        if count < 0:
            raise ParseError(source, f"{where}.bins[{key}]", "negative count")
        bins[integer(key, source, f"{where}.bins")] = count
    return LatencyStats(min_ns=f.number("min"), max_ns=f.number("max"), mean_ns=f.number("mean"),
                        stddev_ns=f.number("stddev"), samples=f.int("N", 0),
                        percentiles=dict(sorted(percentiles.items())), bins=dict(sorted(bins.items())))


def _direction(raw, source: str, where: str) -> DirectionStats:
    f = Fields(raw, source, where)
    bw_bytes = f.need("bw_bytes", number) if "bw_bytes" in f.data else f.need("bw", number) * 1024  # older fio: KiB/s
    io_bytes = f.int("io_bytes")
    if io_bytes is None:
        io_bytes = f.int("io_kbytes", 0) * 1024
    latency = {name: _latency(f.data.get(f"{name}_ns"), source, f.at(f"{name}_ns"))
               for name in ("slat", "clat", "lat")}
    return DirectionStats(io_bytes=io_bytes, bw_bytes=bw_bytes, iops=f.number("iops"), runtime_ms=f.int("runtime", 0),
                          total_ios=f.int("total_ios", 0), short_ios=f.int("short_ios", 0),
                          drop_ios=f.int("drop_ios", 0), **latency)


def _steadystate(raw, source: str, where: str) -> SteadyState | None:
    if raw is None:
        return None
    f = Fields(raw, source, where)
    return SteadyState(criterion_spec=f.text("ss"), duration_s=f.number("duration"),
                       attained=bool(f.int("attained", 0)), criterion=f.number("criterion"),
                       max_deviation=f.number("max_deviation"), slope=f.number("slope"), data=f.sub("data").data)


def _job(raw, source: str, where: str) -> FioJob:
    f = Fields(raw, source, where)
    directions = {name: _direction(f.data[name], source, f.at(name))
                  for name in DIRECTIONS if f.data.get(name) is not None}
    return FioJob(jobname=f.need("jobname"), groupid=f.int("groupid", 0), error=f.int("error", 0),
                  directions=directions, usr_cpu=f.number("usr_cpu"), sys_cpu=f.number("sys_cpu"),
                  hostname=f.opt("hostname", text), port=f.int("port"),
                  steadystate=_steadystate(f.data.get("steadystate"), source, f.at("steadystate")),
                  options=f.sub("job options").data)


def parse_fio_json(output: str, source: str = "fio") -> FioResult:
    """Parse fio ``--output-format=json`` or ``json+`` (local or ``--client``); warning lines before the JSON are skipped."""
    return parse_fio_json_doc(load_json(output, source), source)


def parse_fio_json_doc(doc, source: str = "fio") -> FioResult:
    """The same, from a decoded document (fio's --status-interval dumps arrive as documents)."""
    f = Fields(doc, source)
    version = f.text("fio version")
    timestamp_ms = f.int("timestamp_ms")
    if timestamp_ms is None and f.data.get("timestamp") is not None:
        timestamp_ms = f.need("timestamp", integer) * 1000
    if "client_stats" in f.data:
        rows = f.each("client_stats", _job)
        aggregate = next((r for r in rows if r.jobname == AGGREGATE_NAME), None)
        jobs = tuple(r for r in rows if r.jobname != AGGREGATE_NAME)
        return FioResult(source, version, timestamp_ms, jobs, aggregate, client_server=True)
    return FioResult(source, version, timestamp_ms, f.each("jobs", _job, required=True))


# -- logs (pandas: 72 h x 8 hosts of 1 s samples must load in seconds) -------------
LOG_COLUMNS = {  # extra columns after time_ms, value, ddir, bs (fio iolog.c flush_samples)
    4: [], 5: ["prio"], 6: ["offset", "prio"], 7: ["offset", "prio", "issue_time_ns"],
    8: ["offset", "prio", "issue_time_ns", "extra"],
}
EPOCH_MS_THRESHOLD = 10**12  # 2001-09-09: smaller values are ms since the job started


def _read_csv(log: str | os.PathLike, source: str) -> pd.DataFrame:
    import pandas as pd
    handle = io.StringIO(log) if isinstance(log, str) else log
    try:
        frame = pd.read_csv(handle, header=None, skipinitialspace=True, engine="c",
                            skip_blank_lines=True)
    except pd.errors.EmptyDataError:
        raise ParseError(source, "log", "empty log (no samples)") from None
    except (pd.errors.ParserError, ValueError, UnicodeDecodeError) as exc:
        raise ParseError(source, "log", f"not a comma-separated fio log: {str(exc).splitlines()[0][:120]}") from None
    except OSError as exc:
        raise ParseError(source, "log", f"cannot read: {exc.strerror or exc}") from None
    return frame


def _numeric(frame: pd.DataFrame, source: str, names: Sequence[str]) -> pd.DataFrame:
    """Every cell a finite number within int64 range, else ParseError naming the column and line."""
    import numpy as np
    import pandas as pd
    raw = {}
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(frame[column]):
            raw[column] = frame[column]
            frame[column] = pd.to_numeric(frame[column].astype(str).str.strip(), errors="coerce")
    with np.errstate(invalid="ignore"):
        values = frame.to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values) | (np.abs(values) >= 2.0**62)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        column = frame.columns[col]
        shown = raw[column].iloc[row] if column in raw else values[row, col]
        raise ParseError(source, str(names[col]), f"line {row + 1}: not a number in range: {str(shown)[:40]!r}")
    return frame


def parse_fio_log(log: str | os.PathLike, source: str | None = None) -> pd.DataFrame:
    """Parse a bw/iops/lat/clat/slat log: columns time_ms, value, ddir, bs[, offset, prio, ...].

    ``log`` is the log text (str) or a file (Path). ``frame.attrs["epoch"]`` is True when fio wrote
    epoch-ms timestamps (log_unix_epoch=1); else time_ms counts from the job start.
    bw values are KiB/s, latencies ns, iops per second.
    """
    source = source or (Path(log).name if not isinstance(log, str) else "fio log")
    frame = _read_csv(log, source)
    width = frame.shape[1]
    if width not in LOG_COLUMNS:
        raise ParseError(source, "log", f"{width} fields per line; fio logs have 4 to 8")
    names = ["time_ms", "value", "ddir", "bs"] + LOG_COLUMNS[width]
    frame = _numeric(frame, source, names)
    frame.columns = names
    frame = frame.astype({"time_ms": "int64", "ddir": "int64", "bs": "int64"})
    frame.attrs["source"] = source
    frame.attrs["epoch"] = bool(len(frame) and frame["time_ms"].iloc[0] >= EPOCH_MS_THRESHOLD)
    return frame


def hist_bin_values_ns(count: int, coarseness: int) -> list[int]:
    """Value of each of ``count`` logged hist bins: fio's own for coarseness 0; else the middle of
    the 2^c merged fio bins (as fio's tools/hist/fiologparser_hist.py does)."""
    if coarseness == 0:
        return [bin_value_ns(i) for i in range(count)]
    step = 1 << coarseness
    return [(bin_bounds_ns(i * step)[0] + bin_bounds_ns(i * step + step - 1)[1]) // 2 for i in range(count)]


@dataclass(frozen=True)
class FioHistLog:
    """A ``write_hist_log`` file: per window, the latency bins (coarseness folds 2^c fio bins into one)."""

    source: str
    time_ms: np.ndarray
    ddir: np.ndarray
    bs: np.ndarray
    counts: np.ndarray      # rows x bins
    coarseness: int

    def bin_values_ns(self) -> list[int]:
        return hist_bin_values_ns(self.counts.shape[1], self.coarseness)

    def merged_bins(self, ddir: int | None = None) -> dict[int, int]:
        rows = self.counts if ddir is None else self.counts[self.ddir == ddir]
        sums = rows.sum(axis=0)
        return {v: int(c) for v, c in zip(self.bin_values_ns(), sums) if c}

    def to_dict(self) -> dict:
        return {"source": self.source, "windows": int(len(self.time_ms)), "coarseness": self.coarseness}


def parse_fio_hist_log(log: str | os.PathLike, source: str | None = None) -> FioHistLog:
    """Parse a clat hist log: time_ms, ddir, bs[, prio], then PLAT_NR >> coarseness bin counts."""
    import numpy as np
    source = source or (Path(log).name if not isinstance(log, str) else "fio hist log")
    frame = _read_csv(log, source)
    sizes = {PLAT_NR >> c: c for c in range(0, 7)}
    for prefix in (3, 4):
        if frame.shape[1] - prefix in sizes:
            break
    else:
        raise ParseError(source, "bins", f"{frame.shape[1]} fields per line fit no fio histogram layout")
    names = ["time_ms", "ddir", "bs", "prio"][:prefix] + [f"bin{i}" for i in range(frame.shape[1] - prefix)]
    frame = _numeric(frame, source, names)
    values = frame.to_numpy(dtype=np.float64)
    counts = values[:, prefix:]
    if (counts < 0).any():
        raise ParseError(source, "bins", "negative bin count")
    return FioHistLog(source, values[:, 0].astype(np.int64), values[:, 1].astype(np.int64),
                      values[:, 2].astype(np.int64), counts.astype(np.int64),
                      sizes[frame.shape[1] - prefix])


# -- running fio -------------------------------------------------------------
VERSION_ARGV = ("fio", "--version")
VERSION_PATTERN = r"fio-(?P<version>(?P<major>\d+)\.(?P<minor>\d+)\S*)"     # also what `fxprobe doctor` prints


def parse_fio_version(output: str, source: str = "fio --version") -> tuple[int, int]:
    return parse_major_minor(output, source, VERSION_PATTERN, "fio-X.Y")


def probe_fio(runner: Runner, host: Host = LOCAL, minimum: tuple[int, int] = (3, 1)) -> str | None:
    """None when fio runs on host and is new enough for json+ and clat_ns; else the reason."""
    version, reason = probe_version(runner, VERSION_ARGV, parse_fio_version, host=host, label="fio-version")
    if reason is None and version < minimum:
        reason = f"fio {version[0]}.{version[1]} is older than {minimum[0]}.{minimum[1]} (no clat_ns/json+)"
    return reason


def run_fio(runner: Runner, args: Sequence[str], *, timeout: float, host: Host = LOCAL,
            output_format: str = "json+", label: str = "fio") -> FioResult:
    """Run ``fio --output-format=<json|json+> ARGS`` (job options or a job file, or --client=...).

    fio exits non-zero when a job fails but still prints JSON; the result then
    carries the job ``error`` codes. Without JSON the run is a ToolError.
    """
    result = runner.run(["fio", f"--output-format={output_format}", *args], timeout=timeout,
                        host=host, label=label)
    if result.dry_run:
        return FioResult(result.command_line, "", None, ())
    if result.timed_out:
        raise ToolError(result.failure("fio"))
    try:
        return parse_fio_json(result.stdout, source=result.command_line[:200])
    except ParseError:
        if not result.ok:
            raise ToolError(result.failure("fio")) from None
        raise


# -- verify failures (fio verify.c: verify_header, log_verify_failure) -------------------------------
# A header failure is two writes to stderr: "verify: bad magic header 0, wanted acca" then
# " at file F offset 1048576, length 4096 (requested block: offset=..., length=...)\n". Job processes share
# stderr, so with several jobs another job's write can come between the two (seen with 16 jobs:
# "wanted accaverify: bad magic header 0, wanted acca at file ..."): heads and tails are paired in order.
_VERIFY_HEAD = re.compile(
    r"verify: bad (?P<field>magic header|header length|header rand_seed|header offset|header numberio|header crc) "
    r"(?P<found>[^\s,]+), (?:wanted|calculated) (?P<expected>[0-9A-Za-z]+?)(?= at file |verify: bad |\s|$)")
_VERIFY_TAIL = re.compile(
    r" at file (?P<file>[^\n]+?) offset (?P<offset>\d+), length (?P<length>\d+) "
    r"\(requested block: offset=(?P<block>\d+), length=(?P<block_len>\d+)\)")
# "crc32c: verify failed at file F offset 3276800, length 4096 (requested block: offset=..., length=..., flags=8)"
_VERIFY_DATA = re.compile(
    r"(?P<method>[\w-]+): verify failed at file (?P<file>[^\n]+?) offset (?P<offset>\d+), length (?P<length>\d+) "
    r"\(requested block: offset=(?P<block>\d+), length=(?P<block_len>\d+)")
_VERIFY_CRC = re.compile(r"(?P<which>Expected|Received) CRC: (?P<value>[0-9a-fA-F]+)")
_HEADER_FIELDS = {"magic header": "magic", "header length": "length", "header rand_seed": "rand_seed",
                  "header offset": "offset", "header numberio": "numberio", "header crc": "header crc"}


@dataclass(frozen=True)
class VerifyMismatch(AsDict):
    """One block fio's verify found wrong: where, and which header field or checksum disagreed.

    ``field``: magic / length / rand_seed / offset / numberio / header crc (the verify header), or
    ``data`` (the block's checksum, ``method`` names it: crc32c, md5...). ``found`` and ``expected`` as
    fio printed them (hex for magic and checksums, decimal for offsets and lengths)."""

    file: str
    offset: int            # byte offset of the bad verify interval
    length: int
    block_offset: int      # the I/O that read it
    block_length: int
    field: str
    found: str
    expected: str
    method: str = ""

    def text(self) -> str:
        what = "checksum" if self.field == "data" else f"header {self.field}"
        return (f"data mismatch at offset {self.offset} of {self.file} ({self.length} B): {what} found "
                f"{self.found or '?'}, expected {self.expected or '?'}")


def first_reports(mismatches: Sequence[VerifyMismatch]) -> list[VerifyMismatch]:
    """The first report of each bad block (a block read several times is reported each time), by file and offset."""
    first: dict = {}
    for m in mismatches:
        first.setdefault((m.file, m.offset), m)
    return [first[key] for key in sorted(first)]


def describe_mismatches(blocks: Sequence[VerifyMismatch], bad_reads: int, shown: int = 5,
                        total_blocks: int | None = None) -> str:
    """'data mismatch at offset ... (found, expected); ...; N bad reads of M blocks in bytes A..B' from the
    bad blocks' first reports (``total_blocks``: how many there were, when only some are given)."""
    ordered = sorted(blocks, key=lambda m: (m.file, m.offset))
    total = max(total_blocks or 0, len(ordered))
    text = "; ".join(m.text() for m in ordered[:shown]) + (f" (+{total - shown} more blocks)" if total > shown else "")
    files = {m.file for m in ordered}
    if len(files) == 1 and total == len(ordered):
        where = f" in bytes {ordered[0].offset}..{ordered[-1].offset + ordered[-1].length - 1}"
    else:
        where = f" in {len(files)} files" if len(files) > 1 else ""
    return f"{text}; {bad_reads} bad reads of {total} blocks{where}"


class VerifyErrorParser:
    """fio's verify failures from its stderr as it grows (``feed`` the new text, ``finish`` at the end): each
    failure once, in order; a header failure's two parts are paired in the order they were written."""

    def __init__(self) -> None:
        self.buffer = ""
        self.heads: list[dict] = []          # "verify: bad ..." parts still waiting for their " at file ..." part
        self.pending: dict | None = None     # a checksum failure waiting for its Expected/Received CRC lines

    def feed(self, text: str) -> list[VerifyMismatch]:
        """The failures completed by ``text`` (a failure whose last line has not ended yet waits)."""
        self.buffer += text or ""
        cut = self.buffer.rfind("\n") + 1       # every write before the last newline is whole
        ready, self.buffer = self.buffer[:cut], self.buffer[cut:]
        out: list[VerifyMismatch] = []
        for line in ready.splitlines():
            out += self._line(line)
        return out

    def finish(self) -> list[VerifyMismatch]:
        out = self.feed("\n") if self.buffer else []
        if self.pending is not None:
            out.append(VerifyMismatch(**self.pending))
            self.pending = None
        return out

    def _line(self, line: str) -> list[VerifyMismatch]:
        out: list[VerifyMismatch] = []
        crc = _VERIFY_CRC.search(line) if " CRC: " in line else None
        if crc and self.pending is not None:
            self.pending["expected" if crc.group("which") == "Expected" else "found"] = crc.group("value").lower()
            if self.pending["expected"] and self.pending["found"]:
                out.append(VerifyMismatch(**self.pending))
                self.pending = None
            return out
        if "verify" not in line and " at file " not in line:
            return out
        events = [(m.start(), "head", m) for m in _VERIFY_HEAD.finditer(line)]
        events += [(m.start(), "tail", m) for m in _VERIFY_TAIL.finditer(line)]
        data = _VERIFY_DATA.search(line) if ": verify failed at file " in line else None
        if data and not line.lstrip().startswith("trim:"):
            events.append((data.start(), "data", data))
        for _, kind, match in sorted(events, key=lambda e: e[0]):
            out += self._event(kind, match.groupdict())
        return out

    def _event(self, kind: str, g: dict) -> list[VerifyMismatch]:
        if kind == "head":
            self.heads.append(g)
            return []
        out = []
        if self.pending is not None:          # a checksum failure whose CRC lines never came
            out.append(VerifyMismatch(**self.pending))
            self.pending = None
        where = {"file": g["file"], "offset": int(g["offset"]), "length": int(g["length"]),
                 "block_offset": int(g["block"]), "block_length": int(g["block_len"])}
        if kind == "data":
            self.pending = {**where, "field": "data", "found": "", "expected": "", "method": g["method"]}
            return out
        head = self.heads.pop(0) if self.heads else {"field": "", "found": "", "expected": ""}
        out.append(VerifyMismatch(**where, field=_HEADER_FIELDS.get(head["field"], "header"), found=head["found"],
                                  expected=head["expected"]))
        return out


def parse_fio_verify_errors(stderr: str) -> list[VerifyMismatch]:
    """Every verify failure fio printed on stderr, in order (``Expected/Received CRC`` lines join the
    data failure above them). Lines of other kinds are ignored."""
    parser = VerifyErrorParser()
    return parser.feed(stderr or "") + parser.finish()
