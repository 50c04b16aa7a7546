"""I/O-pattern capture (audit checklist) and comparison with a profile's run.

``capture`` uses blktrace where it can run (debugfs mounted, root) and otherwise samples
/proc/diskstats: request sizes, read/write mix, queue depth and (blktrace only)
sequentiality. ``compare`` puts a capture beside a ``fxprobe run`` result and says where
they differ.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, asdict
from pathlib import Path
from typing import Callable

from fxprobe.core import sysfs
from fxprobe.core.data import AsDict
from fxprobe.core.errors import BadInput, NotRunnable, ParseError
from fxprobe.core.kernel import BLOCK_DEVICES, DEBUGFS, DEBUGFS_BLOCK, DISKSTATS, block_attribute
from fxprobe.core.runner import Runner

SECTOR = 512
DISKSTAT_FIELDS = ("reads", "reads_merged", "sectors_read", "ms_reading", "writes", "writes_merged",
                   "sectors_written", "ms_writing", "in_flight", "ms_io", "weighted_ms")


@dataclass(frozen=True)
class DiskStat:
    name: str
    values: dict

    def __getitem__(self, key: str) -> int:
        return self.values[key]


def parse_diskstats(text: str, source: str = DISKSTATS) -> dict[str, DiskStat]:
    """Lines ``major minor name`` + 11, 15, 17 or more counters (iostats.rst)."""
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 3 + len(DISKSTAT_FIELDS):
            raise ParseError(source, f"line {number}", f"{len(fields)} fields; diskstats has at least 14")
        try:
            counters = [int(v) for v in fields[3:3 + len(DISKSTAT_FIELDS)]]
        except ValueError:
            raise ParseError(source, f"line {number}", "counters are not whole numbers") from None
        out[fields[2]] = DiskStat(fields[2], dict(zip(DISKSTAT_FIELDS, counters)))
    return out


@dataclass(frozen=True)
class PatternSummary:
    method: str                     # blktrace or diskstats
    device: str
    seconds: float
    reads: int
    writes: int
    read_bytes: int
    write_bytes: int
    mean_read_bytes: float | None
    mean_write_bytes: float | None
    size_histogram: dict            # request bytes -> count (blktrace), per-interval mean sizes (diskstats)
    queue_depth_mean: float | None
    sequential_fraction: float | None
    max_request_bytes: int | None   # the device's max_sectors_kb: the kernel splits larger requests
    notes: tuple[str, ...] = ()

    @property
    def read_fraction(self) -> float | None:
        total = self.reads + self.writes
        return self.reads / total if total else None

    def lines(self) -> list[str]:
        rf = self.read_fraction
        out = [f"pattern on {self.device} over {self.seconds:.1f} s ({self.method})",
               f"  requests: {self.reads:,} reads, {self.writes:,} writes"
               + (f" ({rf * 100:.1f} % reads)" if rf is not None else ""),
               f"  mean request: read {_size(self.mean_read_bytes)}, write {_size(self.mean_write_bytes)}"
               + (f" (device splits above {_size(self.max_request_bytes)})" if self.max_request_bytes else ""),
               f"  mean queue depth: {'-' if self.queue_depth_mean is None else f'{self.queue_depth_mean:.2f}'}",
               "  sequential: " + ("unknown (diskstats has no offsets)" if self.sequential_fraction is None
                                    else f"{self.sequential_fraction * 100:.1f} % of requests follow the previous one")]
        if self.size_histogram:
            top = sorted(self.size_histogram.items(), key=lambda kv: -kv[1])[:6]
            out.append("  sizes: " + ", ".join(f"{_size(float(k))} x{v}" for k, v in top))
        out += [f"  note: {n}" for n in self.notes]
        return out

    def to_dict(self) -> dict:
        data = asdict(self)
        data["read_fraction"] = self.read_fraction
        data["size_histogram"] = {str(k): v for k, v in self.size_histogram.items()}
        data["notes"] = list(self.notes)
        return data


def _size(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


# --------------------------------------------------------------------------- diskstats
def summarise_diskstats(samples: list[tuple[float, DiskStat]], device: str,
                        max_request_bytes: int | None = None) -> PatternSummary:
    """Deltas between consecutive samples (time in seconds, the device's counters)."""
    if len(samples) < 2:
        raise BadInput(f"pattern capture of {device}: need at least two samples; capture longer")
    (t0, first), (t1, last) = samples[0], samples[-1]
    delta = {k: last[k] - first[k] for k in DISKSTAT_FIELDS if k != "in_flight"}
    elapsed = max(t1 - t0, 1e-9)
    sizes: dict[int, int] = {}
    for (_, a), (_, b) in zip(samples, samples[1:]):
        ios = (b["reads"] - a["reads"]) + (b["writes"] - a["writes"])
        sectors = (b["sectors_read"] - a["sectors_read"]) + (b["sectors_written"] - a["sectors_written"])
        if ios:
            mean = int(round(sectors * SECTOR / ios / 4096)) * 4096 or sectors * SECTOR // ios
            sizes[mean] = sizes.get(mean, 0) + ios
    merged = delta["reads_merged"] + delta["writes_merged"]
    ios = delta["reads"] + delta["writes"]
    notes = ["diskstats: sizes are per-interval means, sequentiality is unknown"]
    if ios and merged:
        notes.append(f"{merged / (ios + merged) * 100:.1f} % of submitted requests were merged by the block layer")
    return PatternSummary(
        "diskstats", device, elapsed, delta["reads"], delta["writes"], delta["sectors_read"] * SECTOR,
        delta["sectors_written"] * SECTOR,
        delta["sectors_read"] * SECTOR / delta["reads"] if delta["reads"] else None,
        delta["sectors_written"] * SECTOR / delta["writes"] if delta["writes"] else None,
        dict(sorted(sizes.items())), delta["weighted_ms"] / (elapsed * 1000), None, max_request_bytes,
        tuple(notes))


def sample_diskstats(device: str, seconds: float, interval: float = 0.5, root: Path | None = None,
                     sleep: Callable[[float], None] = time.sleep) -> list[tuple[float, DiskStat]]:
    path = sysfs.path(DISKSTATS, root)
    samples = []
    deadline = time.monotonic() + seconds
    while True:
        now = time.monotonic()
        stats = parse_diskstats(path.read_text())
        if device not in stats:
            raise BadInput(f"pattern capture: {device} is not in {path}", hint="name a block device, e.g. nvme0n1")
        samples.append((now, stats[device]))
        if now >= deadline:
            return samples
        sleep(min(interval, max(0.0, deadline - now)))


# --------------------------------------------------------------------------- blktrace
def parse_blkparse(text: str, device: str, seconds: float, max_request_bytes: int | None = None,
                   source: str = "blkparse") -> PatternSummary:
    """blkparse -f '%a %d %S %n %T.%9t\\n' lines: action, RWBS, sector, sectors, time.
    Issues (D) give sizes, mix and sequentiality; D minus C gives the queue depth at each issue."""
    reads = writes = read_bytes = write_bytes = 0
    sizes: dict[int, int] = {}
    next_sector = {"R": None, "W": None}
    sequential = 0
    in_flight = 0
    depth_sum = 0
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if len(fields) < 4 or fields[0] not in ("D", "C"):
            continue
        action, rwbs = fields[0], fields[1]
        try:
            sector, count = int(fields[2]), int(fields[3])
        except ValueError:
            raise ParseError(source, f"line {number}", f"sector/size not numbers: {line[:60]!r}") from None
        kind = "W" if "W" in rwbs else "R" if "R" in rwbs else None
        if action == "C":
            in_flight = max(0, in_flight - 1)
            continue
        if kind is None or count == 0:
            continue
        in_flight += 1
        depth_sum += in_flight
        nbytes = count * SECTOR
        sizes[nbytes] = sizes.get(nbytes, 0) + 1
        if next_sector[kind] == sector:
            sequential += 1
        next_sector[kind] = sector + count
        if kind == "R":
            reads, read_bytes = reads + 1, read_bytes + nbytes
        else:
            writes, write_bytes = writes + 1, write_bytes + nbytes
    total = reads + writes
    return PatternSummary(
        "blktrace", device, seconds, reads, writes, read_bytes, write_bytes,
        read_bytes / reads if reads else None, write_bytes / writes if writes else None,
        dict(sorted(sizes.items())), depth_sum / total if total else None,
        sequential / total if total else None, max_request_bytes)


def probe_blktrace(root: Path | None = None) -> str | None:
    if not sysfs.path(DEBUGFS_BLOCK, root).is_dir():
        return f"blktrace needs debugfs at {DEBUGFS} (mount -t debugfs none {DEBUGFS})"
    return None


def capture(device: str, seconds: float, *, runner: Runner, method: str = "auto", interval: float = 0.5,
            root: Path | None = None) -> PatternSummary:
    """Capture the I/O pattern of /dev/NAME (or NAME) for ``seconds``."""
    if seconds <= 0:
        raise BadInput(f"--seconds must be > 0 (got {seconds})")
    name = Path(device).name
    if not sysfs.exists(f"{BLOCK_DEVICES}/{name}", root):
        raise BadInput(f"pattern capture: {device} is not a block device here")
    max_kb = sysfs.read(block_attribute(name, "queue/max_sectors_kb"), None, root)
    max_bytes = int(max_kb) * 1024 if max_kb and max_kb.isdigit() else None
    reason = probe_blktrace(root)
    if method == "blktrace" and reason:
        raise NotRunnable(reason)
    if method in ("auto", "blktrace") and not reason:
        return _capture_blktrace(name, seconds, runner, max_bytes)
    summary = summarise_diskstats(sample_diskstats(name, seconds, interval, root), name, max_bytes)
    if reason and method == "auto":
        summary = PatternSummary(**{**asdict(summary), "notes": summary.notes + (f"not blktrace: {reason}",)})
    return summary


def _capture_blktrace(name: str, seconds: float, runner: Runner, max_bytes: int | None) -> PatternSummary:
    import tempfile
    folder = Path(runner.rundir.raw if runner.rundir else tempfile.mkdtemp(prefix="fxprobe-blktrace-"))
    runner.run(["blktrace", "-d", f"/dev/{name}", "-w", str(max(1, math.ceil(seconds))), "-D", str(folder),
                "-o", "trace"], timeout=seconds + 60, check=True, what="blktrace")
    parsed = runner.run(["blkparse", "-q", "-i", "trace", "-D", str(folder), "-f", "%a %d %S %n %T.%9t\\n"],
                        timeout=300, check=True, what="blkparse")
    return parse_blkparse(parsed.stdout, name, seconds, max_bytes)


# --------------------------------------------------------------------------- compare
@dataclass(frozen=True)
class Difference(AsDict):
    aspect: str
    captured: str
    profile: str
    same: bool
    detail: str = ""

    def line(self) -> str:
        return f"  {'same   ' if self.same else 'DIFFERS'} {self.aspect}: captured {self.captured}, profile {self.profile}" \
            + (f" ({self.detail})" if self.detail else "")


def compare(pattern: dict, workload: dict, tolerance: float = 0.25) -> list[Difference]:
    """A capture (PatternSummary.to_dict) beside a run (WorkloadResult.to_dict)."""
    d = workload["derivation"]
    out = []
    writes = d["writes"]
    rf = pattern.get("read_fraction")
    want = 0.0 if writes else 1.0
    out.append(Difference("read/write mix", "-" if rf is None else f"{rf * 100:.1f} % reads",
                          f"{want * 100:.0f} % reads", rf is not None and abs(rf - want) <= 0.1))
    mean = pattern.get("mean_write_bytes" if writes else "mean_read_bytes")
    bs = d["block_size"]
    limit = pattern.get("max_request_bytes")
    expect = min(bs, limit) if limit else bs
    ok = mean is not None and abs(mean - expect) <= tolerance * expect
    out.append(Difference("request size", _size(mean), _size(bs), ok,
                          f"the kernel splits above {_size(limit)}, so expect {_size(expect)}" if limit and limit < bs else ""))
    qd = pattern.get("queue_depth_mean")
    nodes = max(1, len(workload.get("nodes", [])))
    depth = d["jobs"] * d["iodepth"]
    pieces = max(1, math.ceil(bs / limit)) if limit else 1
    ok = qd is not None and qd <= depth * pieces * (1 + tolerance) and qd >= depth * (1 - tolerance) * 0.5
    out.append(Difference("queue depth", "-" if qd is None else f"{qd:.1f}",
                          f"{depth} (jobs {d['jobs']} x iodepth {d['iodepth']}"
                          + (f", per node of {nodes}" if nodes > 1 else "") + ")", ok,
                          "buffered I/O and request splitting change the depth the device sees"))
    seq = pattern.get("sequential_fraction")
    random_profile = d["rw"].startswith("rand")
    if seq is None:
        out.append(Difference("sequentiality", "unknown", "random" if random_profile else "sequential", True,
                              "diskstats cannot tell; capture with blktrace"))
    else:
        captured_random = seq < 0.5
        out.append(Difference("sequentiality", f"{seq * 100:.0f} % sequential",
                              "random" if random_profile else "sequential", captured_random == random_profile,
                              "whole-chunk reads split by the kernel look sequential inside one chunk"
                              if random_profile and limit and limit < bs else ""))
    return out
