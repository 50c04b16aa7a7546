"""Soak runs (G4: continuous load without interruption) and their evidence.

A profile's fio job runs for the whole period with ``--status-interval=1
--output-format=json``: fio prints one JSON document per second (cumulative counters) on
a pipe that is read as it comes. Each document becomes a sample (interval bandwidth, IOPS,
error count); telemetry (psutil counters, NVMe temperatures, path states, md state) is
sampled every ``sample_s`` seconds, ``nvme smart-log`` every ``health_s`` seconds.

Interruptions (kind, start, end, detail):
  stall      no completed I/O for more than ``stall_s`` seconds (start = the last progress)
  io-error   fio counted new I/O errors (the job runs with continue_on_error=io)
  fio-exit   fio ended before the planned time (the load is restarted for the remaining time)
  path-lost  an NVMe controller that was live is not (or vanished); ends when it is live again
  gap        fxprobe itself was not running (crash, kill -9) until ``--resume``

Evidence: ``soak.jsonl`` in the run directory, append-only JSON lines, each flushed and
fsync'd, so a crash loses nothing already written; ``soak-state.json`` holds what
``--resume`` needs (parameters, the fio pid and command line). The summary is always
recomputed from the records (``summarize``).
"""

from __future__ import annotations

import codecs
import datetime as dt
import json
import math
import os
import re
import selectors
import signal
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import psutil

from fxprobe import telemetry
from fxprobe.errors import BadInput, NotRunnable, ParseError, ToolError
from fxprobe.rundir import RESULTS, RunDir, utc_stamp, write_json
from fxprobe.runner import Runner
from fxprobe.tools import fio
from fxprobe.tools.fields import arr, integer, number, obj
from fxprobe.verdict import Criterion, Verdict

RECORDS = "soak.jsonl"
STATE = "soak-state.json"
DEFAULT_STALL_S = 5.0
DEFAULT_SAMPLE_S = 10.0
DEFAULT_HEALTH_S = 300.0
STARTUP_GRACE_S = 60.0       # fio may take this long to open its files before the first I/O
MAX_RESTARTS = 5             # fio deaths tolerated before the soak gives up
END_TOLERANCE_S = 3.0        # fio ending this close to the planned end is a normal end
MAX_BUFFER = 64 << 20        # a status document larger than this is not fio's

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


# --------------------------------------------------------------------------- small helpers
def parse_duration(text: str, option: str = "--duration") -> float:
    """``90``, ``90s``, ``10m``, ``72h``, ``1h30m``, ``2d`` -> seconds (> 0)."""
    raw = str(text).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        seconds = float(raw)
    elif raw and _DURATION.sub("", raw) == "" and re.fullmatch(r"(\d+(\.\d+)?[smhd])+", raw):
        seconds = sum(float(n) * _UNIT[u] for n, u in _DURATION.findall(raw))
    else:
        raise BadInput(f"{option} {text!r}: expected a duration such as 90s, 10m, 72h or 1h30m")
    if not math.isfinite(seconds) or seconds <= 0:
        raise BadInput(f"{option} {text!r}: must be more than 0 seconds")
    return seconds


def stamp(ts: float) -> str:
    return utc_stamp(dt.datetime.fromtimestamp(ts, dt.timezone.utc))


def hms(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


# --------------------------------------------------------------------------- fio's status stream
@dataclass(frozen=True)
class StatusPoint:
    """One fio status document: cumulative counters over every job and direction."""

    ts: float            # epoch seconds (fio's timestamp_ms)
    io_bytes: int
    ios: int
    errors: int          # total_err over jobs (continue_on_error)
    job_error: int       # the first non-zero job error code, 0 if none
    max_lat_ns: int = 0  # the longest I/O so far (lat_ns.max, else clat_ns.max, over jobs and directions)


def parse_status_doc(doc, source: str = "fio status") -> StatusPoint:
    data = obj(doc, source, "(top level)")
    if "timestamp_ms" not in data:
        raise ParseError(source, "timestamp_ms", "missing (not a fio JSON status document)")
    ts = integer(data["timestamp_ms"], source, "timestamp_ms") / 1000
    rows = arr(data.get("jobs", data.get("client_stats")), source, "jobs")
    io_bytes = ios = errors = max_lat = 0
    job_error = 0
    for i, row in enumerate(rows):
        row = obj(row, source, f"jobs[{i}]")
        if row.get("jobname") == fio.AGGREGATE_NAME:
            continue
        for direction in fio.DIRECTIONS:
            stats = row.get(direction)
            if isinstance(stats, dict):
                io_bytes += integer(stats.get("io_bytes", 0), source, f"jobs[{i}].{direction}.io_bytes")
                ios += integer(stats.get("total_ios", 0), source, f"jobs[{i}].{direction}.total_ios")
                lat = stats.get("lat_ns") or stats.get("clat_ns") or {}
                if isinstance(lat, dict) and lat.get("max") is not None:
                    max_lat = max(max_lat, int(number(lat["max"], source, f"jobs[{i}].{direction}.lat_ns.max")))
        errors += integer(row.get("total_err", 0), source, f"jobs[{i}].total_err")
        code = integer(row.get("error", 0), source, f"jobs[{i}].error")
        job_error = job_error or code
    return StatusPoint(ts, io_bytes, ios, errors, job_error, max_lat)


class JsonStream:
    """Split a byte stream of concatenated JSON documents (fio's status dumps) as it arrives."""

    def __init__(self) -> None:
        self._decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        self._decoder = json.JSONDecoder()
        self.buffer = ""
        self.skipped: list[str] = []

    def feed(self, data: bytes) -> list:
        self.buffer += self._decode(data)
        docs = []
        while True:
            start = 0 if self.buffer.startswith("{") else self.buffer.find("\n{") + 1
            if start == 0 and not self.buffer.startswith("{"):   # no document starts yet
                cut = self.buffer.rfind("\n") + 1                # keep a partial line for later
                self._skip(self.buffer[:cut])
                self.buffer = self.buffer[cut:]
                break
            if start:
                self._skip(self.buffer[:start])
                self.buffer = self.buffer[start:]
            if "\n}" not in self.buffer:   # fio closes each document with "}" at a line start
                if len(self.buffer) > MAX_BUFFER:
                    raise ParseError("fio status stream", "(document)", f"no complete JSON in {MAX_BUFFER} bytes")
                break
            try:
                doc, end = self._decoder.raw_decode(self.buffer)
            except json.JSONDecodeError:           # a "{" line that is not fio's document
                cut = self.buffer.find("\n") + 1 or len(self.buffer)
                self._skip(self.buffer[:cut])
                self.buffer = self.buffer[cut:]
                continue
            docs.append(doc)
            self.buffer = self.buffer[end:]
        return docs

    def _skip(self, text: str) -> None:
        if text.strip():
            self.skipped.append(text.strip()[:300])


# --------------------------------------------------------------------------- records
class RecordLog:
    """Append-only JSON lines; every record is flushed and fsync'd before ``append`` returns."""

    def __init__(self, path: Path):
        self.path = Path(path)
        repair_tail(self.path)
        self._handle = open(self.path, "a")

    def append(self, record: dict) -> dict:
        self._handle.write(json.dumps(record, separators=(",", ":"), default=str) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        return record

    def close(self) -> None:
        self._handle.close()


def repair_tail(path: Path) -> int:
    """Cut a torn last line (a crash in the middle of a write); returns the bytes removed."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with open(path, "rb+") as handle:
        data = handle.read()
        if data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
        return len(data) - keep


def read_records(path: Path) -> list[dict]:
    records = []
    with open(path) as handle:
        lines = handle.read().split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines):     # a torn last line: the crash we are here to survive
                break
            raise ParseError(str(path), f"line {number}", "not JSON") from None
    return records


# --------------------------------------------------------------------------- interruptions
@dataclass(frozen=True)
class Interruption:
    kind: str
    start: str
    end: str | None
    seconds: float | None
    detail: str
    id: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        length = f"{self.seconds:.1f} s" if self.seconds is not None else "not ended"
        return f"{self.kind} from {self.start} to {self.end or '-'} ({length}): {self.detail}"


class Monitor:
    """Turns status points, path states and clock ticks into records (pure: no I/O)."""

    def __init__(self, stall_s: float, next_id: int = 1):
        self.stall_s = stall_s
        self.next_id = next_id
        self.open: dict[str, dict] = {}        # key -> the opening record
        self.segment = 0
        self.previous: StatusPoint | None = None
        self.segment_start = 0.0
        self.last_progress: float | None = None
        self.last_report = 0.0                 # when the last status document arrived (our clock)
        self.last_bw: float | None = None
        self.count = 0

    @property
    def silence_limit(self) -> float:
        """fio printing nothing for this long counts as a stall. Shorter silences are judged
        from fio's next report (its status thread starves on an overloaded machine while the
        I/O goes on; the cumulative counters then show whether I/O completed)."""
        return max(60.0, 10 * self.stall_s)

    def opened(self, key: str, kind: str, start: float, detail: str) -> dict:
        record = {"type": "interruption", "id": self.next_id, "kind": kind, "start": stamp(start),
                  "start_ts": start, "detail": detail}
        self.next_id += 1
        self.count += 1
        self.open[key] = record
        return record

    def closed(self, key: str, end: float, detail: str = "") -> dict:
        record = self.open.pop(key)
        out = {"type": "interruption-end", "id": record["id"], "end": stamp(end), "end_ts": end,
               "seconds": round(end - record["start_ts"], 3)}
        return {**out, "detail": detail} if detail else out

    def instant(self, kind: str, start: float, end: float, detail: str) -> dict:
        record = {"type": "interruption", "id": self.next_id, "kind": kind, "start": stamp(start),
                  "start_ts": start, "end": stamp(end), "end_ts": end, "seconds": round(end - start, 3),
                  "detail": detail}
        self.next_id += 1
        self.count += 1
        return record

    def new_segment(self, segment: int, ts: float) -> list[dict]:
        self.segment, self.segment_start, self.previous, self.last_progress = segment, ts, None, None
        self.last_report = ts
        return [self.closed("fio", ts, f"load restarted (segment {segment})")] if "fio" in self.open else []

    def observe(self, point: StatusPoint, received: float | None = None) -> list[dict]:
        """One status document. A stall opens when fio's own report shows no new completed
        I/O for more than ``stall_s`` since the last progress, and closes at the next progress."""
        received = received if received is not None else point.ts
        silent, self.last_report = received - self.last_report, received
        previous = self.previous
        base_ts = previous.ts if previous else self.segment_start
        base_bytes = previous.io_bytes if previous else 0
        base_ios = previous.ios if previous else 0
        base_errors = previous.errors if previous else 0
        dt_s = point.ts - base_ts
        bw = (point.io_bytes - base_bytes) / dt_s if dt_s > 0.05 else None
        iops = (point.ios - base_ios) / dt_s if dt_s > 0.05 else None
        out = [{"type": "sample", "seg": self.segment, "t": stamp(point.ts), "ts": point.ts,
                "io_bytes": point.io_bytes, "ios": point.ios, "errors": point.errors,
                "bw": None if bw is None else round(bw, 1), "iops": None if iops is None else round(iops, 2)}]
        if bw is not None:
            self.last_bw = bw
        longest = point.max_lat_ns / 1e9
        long_io = point.max_lat_ns > (previous.max_lat_ns if previous else 0) and longest > self.stall_s
        if point.ios > base_ios:
            if long_io and "stall" not in self.open:
                # fio cannot report while an I/O is stuck (its status waits for the jobs): the
                # latency of the stuck I/O, once it completes, tells how long it waited
                out.append(self.instant("stall", point.ts - longest, point.ts,
                                        f"an I/O took {longest:.1f} s (fio's longest latency, over the "
                                        f"{self.stall_s:g} s stall limit); fio reported nothing for {silent:.1f} s"))
            elif point.ts - (self.last_progress or self.segment_start) > self.stall_s and "stall" not in self.open:
                out.append({"type": "note", "t": stamp(point.ts), "ts": point.ts, "detail":
                            f"fio reported nothing for {silent:.1f} s, then {point.ios - base_ios} completed I/Os "
                            f"over {dt_s:.1f} s: not counted as a stall (fio's status thread was late)"})
            self.last_progress = point.ts
            if "stall" in self.open:
                out.append(self.closed("stall", point.ts))
        elif self.last_progress is not None and point.ts - self.last_progress > self.stall_s \
                and "stall" not in self.open:
            out.append(self.opened("stall", "stall", self.last_progress,
                                   f"no completed I/O for more than {self.stall_s:g} s (stall limit)"))
        if point.errors > base_errors:
            out.append(self.instant("io-error", base_ts, point.ts,
                                    f"{point.errors - base_errors} new I/O error(s), {point.errors} in this "
                                    f"segment" + (f"; fio error {point.job_error} ({_errno(point.job_error)})"
                                                  if point.job_error else "")))
        self.previous = point
        return out

    def tick(self, now: float) -> list[dict]:
        if "stall" in self.open or "fio" in self.open:
            return []
        if self.last_progress is None:
            if now - self.segment_start > max(STARTUP_GRACE_S, self.stall_s):
                return [self.opened("stall", "stall", self.segment_start,
                                    f"fio completed no I/O in the first {max(STARTUP_GRACE_S, self.stall_s):g} s "
                                    f"of segment {self.segment}")]
            return []
        if now - self.last_report > self.silence_limit:
            return [self.opened("stall", "stall", self.last_progress,
                                f"fio reported nothing for {now - self.last_report:.0f} s; no completed I/O "
                                f"seen for more than {self.stall_s:g} s (stall limit)")]
        return []

    def paths(self, baseline: dict[str, dict], states: dict[str, dict], now: float) -> list[dict]:
        out = []
        for name, before in baseline.items():
            key = f"path:{name}"
            now_state = states.get(name, {}).get("state") if name in states else "gone"
            where = f"{name} ({before.get('transport')} {before.get('address') or ''})".replace(" )", ")")
            if now_state != "live" and key not in self.open:
                out.append(self.opened(key, "path-lost", now, f"{where} is {now_state}"))
            elif now_state == "live" and key in self.open:
                out.append(self.closed(key, now, f"{name} live again"))
        return out

    def fio_ended(self, now: float, detail: str) -> list[dict]:
        out = [self.closed("stall", now, "fio ended")] if "stall" in self.open else []
        return out + [self.opened("fio", "fio-exit", now, detail)]


def _errno(code: int) -> str:
    import errno
    return errno.errorcode.get(code, "?")


# --------------------------------------------------------------------------- summary
@dataclass(frozen=True)
class SoakSummary:
    profile: str
    target: str
    planned_s: float
    duration_s: float
    samples: int
    segments: int
    resumes: int
    interruptions: tuple[Interruption, ...]
    bandwidth: dict
    iops_mean: float | None
    io_errors: int
    telemetry_samples: int
    health_samples: int
    nvme_temp_max_c: dict
    stall_s: float
    sample_s: float
    completed: bool
    end_reason: str
    first_sample: str | None
    last_sample: str | None
    notes: tuple[str, ...] = ()

    MAX_NOTES = 20

    def to_dict(self) -> dict:
        data = asdict(self)
        data["interruptions"] = [i.to_dict() for i in self.interruptions]
        return data

    def verdict(self) -> Verdict:
        tolerance = max(END_TOLERANCE_S, self.planned_s * 0.001)
        kinds = ", ".join(f"{k} {n}" for k, n in _counts(self.interruptions).items()) or "none"
        return Verdict("soak", (
            Criterion.compare("interruptions", len(self.interruptions), "<=", 0,
                              detail=f"{kinds}; stall limit {self.stall_s:g} s"),
            Criterion.compare("load covered the planned time", round(self.duration_s, 1), ">=",
                              round(self.planned_s - tolerance, 1), unit="s",
                              detail=f"planned {self.planned_s:g} s, {tolerance:g} s end tolerance"),
        ))

    def lines(self) -> list[str]:
        bw = self.bandwidth
        out = [f"soak {self.profile} on {self.target}: {hms(self.duration_s)} of load covered "
               f"(planned {hms(self.planned_s)}), {self.samples} samples, {self.segments} fio segment(s)"
               + (f", resumed {self.resumes}x" if self.resumes else "")]
        if bw.get("mean_bytes") is not None:
            out.append(f"  bandwidth: mean {bw['mean_bytes'] / 1e6:,.2f} MB/s, p5 {bw['p5_bytes'] / 1e6:,.2f}, "
                       f"min {bw['min_bytes'] / 1e6:,.2f}, max {bw['max_bytes'] / 1e6:,.2f} MB/s; "
                       f"{bw['zero_intervals']} interval(s) with no I/O; IOPS mean {self.iops_mean:,.1f}")
        out.append(f"  I/O errors: {self.io_errors}; telemetry samples {self.telemetry_samples}, "
                   f"health reads {self.health_samples}")
        if self.nvme_temp_max_c:
            out.append("  NVMe max temperature: " + ", ".join(f"{k} {v:g} C" for k, v in self.nvme_temp_max_c.items()))
        out.append(f"  interruptions: {len(self.interruptions)}")
        out += [f"    {i.line()}" for i in self.interruptions]
        out += [f"  note: {n}" for n in self.notes]
        if not self.completed:
            out.append(f"  NOT finished: {self.end_reason or 'no end record (crashed? use --resume)'}")
        return out


def _counts(items) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[item.kind] = counts.get(item.kind, 0) + 1
    return counts


def summarize(records: list[dict]) -> SoakSummary:
    """The soak's results, recomputed from its records (after a crash as after a clean end)."""
    start = next((r for r in records if r.get("type") == "start"), None)
    if start is None:
        raise ParseError(RECORDS, "start", "no start record: not a soak record file")
    segments: dict[int, dict] = {}
    opened: dict[int, dict] = {}
    ended: dict[int, dict] = {}
    bws, iopss, temps = [], [], {}
    errors_by_segment: dict[int, int] = {}
    samples = telemetry_n = health_n = resumes = 0
    first = last = None
    end = None
    notes: list[str] = []
    for r in records:
        kind = r.get("type")
        if kind == "segment":
            segments[r["seg"]] = {"start": r["ts"], "last": None}
        elif kind == "sample":
            samples += 1
            seg = segments.setdefault(r["seg"], {"start": r["ts"], "last": None})
            seg["last"] = r["ts"]
            first = first or r["t"]
            last = r["t"]
            if r.get("bw") is not None:
                bws.append(r["bw"])
                iopss.append(r.get("iops") or 0.0)
            errors_by_segment[r["seg"]] = r.get("errors", 0)
        elif kind == "interruption":
            opened[r["id"]] = r
        elif kind == "interruption-end":
            ended[r["id"]] = r
        elif kind == "telemetry":
            telemetry_n += 1
            for ctrl, value in (r.get("nvme_temp_c") or {}).items():
                temps[ctrl] = max(temps.get(ctrl, value), value)
        elif kind == "health":
            health_n += 1
        elif kind == "resume":
            resumes += 1
        elif kind == "end":
            end = r
        elif kind == "note" and len(notes) < SoakSummary.MAX_NOTES:
            notes.append(f"{r.get('t', '')} {r['detail']}")
    covered = sum(s["last"] - s["start"] for s in segments.values() if s["last"] is not None)
    interruptions = []
    for ident, r in sorted(opened.items()):
        close = ended.get(ident, {})
        end_text = r.get("end") or close.get("end")
        seconds = r.get("seconds", close.get("seconds"))
        detail = r["detail"] + (f"; {close['detail']}" if close.get("detail") else "")
        interruptions.append(Interruption(r["kind"], r["start"], end_text, seconds, detail, ident))
    ordered = sorted(bws)
    bandwidth = {"mean_bytes": None} if not bws else {
        "mean_bytes": statistics.fmean(bws), "min_bytes": ordered[0], "max_bytes": ordered[-1],
        "p5_bytes": ordered[int(0.05 * (len(ordered) - 1))], "p50_bytes": statistics.median(ordered),
        "zero_intervals": sum(1 for v in bws if v == 0), "intervals": len(bws)}
    return SoakSummary(
        profile=start["profile"], target=start["target"], planned_s=start["planned_s"], duration_s=round(covered, 3),
        samples=samples, segments=len(segments), resumes=resumes, interruptions=tuple(interruptions),
        bandwidth=bandwidth, iops_mean=statistics.fmean(iopss) if iopss else None,
        io_errors=sum(errors_by_segment.values()), telemetry_samples=telemetry_n, health_samples=health_n,
        nvme_temp_max_c=temps, stall_s=start["stall_s"], sample_s=start["sample_s"], completed=end is not None,
        end_reason=(end or {}).get("reason", ""), first_sample=first, last_sample=last,
        notes=tuple(notes))


# --------------------------------------------------------------------------- configuration and state
@dataclass(frozen=True)
class SoakConfig:
    profile: str
    target: str
    planned_s: float
    stall_s: float = DEFAULT_STALL_S
    sample_s: float = DEFAULT_SAMPLE_S
    health_s: float = DEFAULT_HEALTH_S
    scale: float = 1.0
    max_bytes: int | None = None
    allow: tuple[str, ...] = ()
    overrides: dict = field(default_factory=dict)

    def validate(self) -> "SoakConfig":
        for name in ("stall_s", "sample_s", "health_s"):
            if not getattr(self, name) > 0:
                raise BadInput(f"--{name[:-2]} must be more than 0 seconds (got {getattr(self, name)})")
        return self

    def to_dict(self) -> dict:
        data = asdict(self)
        data["allow"] = list(self.allow)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "SoakConfig":
        data = dict(data)
        data["allow"] = tuple(data.get("allow", ()))
        return cls(**data)


def load_state(path: Path) -> tuple[RunDir, dict]:
    """Open RUNDIR for --resume; BadInput (one line) when it is not a resumable soak run."""
    run = RunDir.open(path)
    state_path = run.path / STATE
    records = run.path / RECORDS
    if not state_path.exists() or not records.exists():
        raise BadInput(f"{path}: not a soak run (no {STATE} and {RECORDS})",
                       hint="pass the run directory a `fxprobe soak` made")
    try:
        state = json.loads(state_path.read_text())
        SoakConfig.from_dict(state["config"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise BadInput(f"{state_path}: not a valid soak state ({type(exc).__name__}: {exc})") from None
    if (run.path / RESULTS).exists():
        raise BadInput(f"{path}: this soak has finished already (results.json exists)",
                       hint="start a new soak instead of resuming this one")
    owner = _same_process(state.get("fxprobe_pid"), None, None)
    if owner is not None and owner.pid != os.getpid() and "soak" in " ".join(owner.cmdline()):
        raise BadInput(f"{path}: the soak is still running (fxprobe pid {owner.pid})",
                       hint="resume only after it stopped")
    return run, state


def plan_soak(config: SoakConfig, runtime: float | None = None):
    """The profile's job for ``runtime`` (default: the whole period), the target checked before
    anything is written (BadInput/UnsafeTarget)."""
    from fxprobe import workload
    config.validate()
    return workload.plan_run(config.profile, config.target, repeats=1, ramp=0, runtime=runtime or config.planned_s,
                             scale=config.scale, max_bytes=config.max_bytes, overrides=config.overrides,
                             allow=config.allow)


def _same_process(pid: int | None, argv: list[str] | None, create_time: float | None) -> psutil.Process | None:
    """The process ``pid`` if it is still the one recorded (same command line and start time)."""
    if not pid:
        return None
    try:
        process = psutil.Process(pid)
        if argv is not None and process.cmdline() != argv:
            return None
        if create_time is not None and abs(process.create_time() - create_time) > 1.0:
            return None
        return process if process.status() != psutil.STATUS_ZOMBIE else None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def kill_orphan(fio_state: dict) -> str:
    """Stop an fio left running by a crashed soak (its process group: fio's job processes too)."""
    process = _same_process(fio_state.get("pid"), fio_state.get("argv"), fio_state.get("create_time"))
    if process is None:
        return "no orphaned fio (it had ended or its pid now belongs to another program)"
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        try:
            process.wait(timeout=10)
            break
        except psutil.TimeoutExpired:
            continue
    return f"orphaned fio pid {process.pid} stopped"


# --------------------------------------------------------------------------- the run
class Soak:
    """One soak run in a run directory: fresh (``start``) or continued (``resume``)."""

    def __init__(self, run: RunDir, runner: Runner, config: SoakConfig,
                 progress: Callable[[str], None] = lambda text: None, state: dict | None = None):
        self.run, self.runner, self.config, self.progress = run, runner, config.validate(), progress
        self.state = state or {"command": "soak", "version": 1, "config": config.to_dict(), "segments": 0,
                               "baseline_paths": {}, "fio": {}}
        self.log: RecordLog | None = None
        self.monitor = Monitor(config.stall_s)
        self.covered_before = 0.0
        # side readings run in worker threads: reading an NVMe temperature or smart-log sends an
        # admin command, which waits (up to the admin timeout) while a controller reconnects
        self._side = ThreadPoolExecutor(max_workers=2, thread_name_prefix="soak-side")
        self._pending: dict[str, object] = {}

    # -- entry points ------------------------------------------------------------
    def start(self) -> SoakSummary:
        plan = plan_soak(self.config)
        reason = fio.probe_fio(self.runner)
        if reason:
            raise NotRunnable(reason)
        self.state["baseline_paths"] = {k: v for k, v in telemetry.path_states().items() if v["state"] == "live"}
        self._save_state()
        self.log = RecordLog(self.run.path / RECORDS)
        now = time.time()
        self.log.append({"type": "start", "t": stamp(now), "ts": now, "profile": plan.derivation.profile,
                         "target": self.config.target, "planned_s": self.config.planned_s,
                         "stall_s": self.config.stall_s, "sample_s": self.config.sample_s,
                         "health_s": self.config.health_s, "pid": os.getpid(),
                         "paths": self.state["baseline_paths"], "md": telemetry.md_states(),
                         "target_check": plan.check.to_dict()})
        if not plan.derivation.writes:
            self.progress(f"laying out the working set on {self.config.target} (not timed)")
            job = self.run.raw_path(f"{plan.derivation.profile}.layout.fio")
            job.write_text(plan.layout_job)
            fio.run_fio(self.runner, [str(job)], timeout=600 + plan.derivation.total_bytes / 20e6,
                        output_format="json", label="fio-layout")
        return self._loop(0.0)

    def resume(self) -> SoakSummary:
        path = self.run.path / RECORDS
        orphan = kill_orphan(self.state.get("fio") or {})
        repair_tail(path)
        records = read_records(path)
        done = summarize(records)
        self.monitor.next_id = max([r.get("id", 0) for r in records if r.get("type") == "interruption"] + [0]) + 1
        self.log = RecordLog(path)
        last_ts = max((r.get("end_ts") or r.get("ts") or r.get("start_ts") or 0) for r in records)
        now = time.time()
        self.log.append({"type": "resume", "t": stamp(now), "ts": now, "pid": os.getpid(), "orphan": orphan,
                         "covered_s": done.duration_s})
        for item in done.interruptions:
            if item.end is None:
                self.log.append({"type": "interruption-end", "id": item.id, "end": stamp(last_ts), "end_ts": last_ts,
                                 "seconds": None, "detail": "end not observed: fxprobe stopped"})
        self.monitor.count = len(done.interruptions)
        self.log.append(self.monitor.instant("gap", last_ts, now,
                                             f"fxprobe was not running for {now - last_ts:.1f} s (crash or kill); "
                                             f"no load was monitored; {orphan}"))
        self.progress(f"resuming: {hms(done.duration_s)} of {hms(self.config.planned_s)} covered, "
                      f"{orphan}")
        return self._loop(done.duration_s)

    # -- the loop ------------------------------------------------------------------
    def _loop(self, covered: float) -> SoakSummary:
        self.state["fxprobe_pid"] = os.getpid()
        self._save_state()
        restarts = 0
        reason = "planned time covered"
        try:
            while self.config.planned_s - covered > END_TOLERANCE_S:
                segment = self.state["segments"] + 1
                self.covered_before = covered
                code, ran = self._segment(segment, self.config.planned_s - covered)
                covered += ran
                left = self.config.planned_s - covered
                if left <= END_TOLERANCE_S:
                    break
                restarts += 1
                if restarts > MAX_RESTARTS:
                    reason = f"fio ended early {restarts} times; gave up with {left:.0f} s left"
                    break
                time.sleep(1.0)
            self._collect_side_readings()
            now = time.time()
            for key in list(self.monitor.open):
                self.log.append(self.monitor.closed(key, now, "soak ended"))
            self.log.append({"type": "end", "t": stamp(now), "ts": now, "reason": reason})
        finally:
            self._side.shutdown(wait=False, cancel_futures=True)
            self.log.close()
        return summarize(read_records(self.run.path / RECORDS))

    def _segment(self, segment: int, remaining_s: float) -> tuple[int | None, float]:
        """Run fio for ``remaining_s``; returns (exit code, seconds covered by samples)."""
        runtime = max(1, math.ceil(remaining_s))
        plan = plan_soak(self.config, runtime)
        job = self.run.raw_path(f"soak.seg{segment}.fio")
        job.write_text(plan.measure_job.replace("[global]\n", "[global]\ncontinue_on_error=io\ngroup_reporting=1\n", 1))
        argv = ["fio", "--output-format=json", "--status-interval=1", str(job)]
        background = self.runner.start(argv, label=f"fio-soak-seg{segment}", stdout_pipe=True)
        started = time.time()
        try:
            create_time = psutil.Process(background.pid).create_time()
        except psutil.NoSuchProcess:
            create_time = None
        self.state["segments"] = segment
        self.state["fio"] = {"pid": background.pid, "argv": argv, "create_time": create_time, "segment": segment}
        self._save_state()
        for record in self.monitor.new_segment(segment, started):
            self.log.append(record)
        self.log.append({"type": "segment", "seg": segment, "t": stamp(started), "ts": started,
                         "planned_s": runtime, "pid": background.pid, "argv": argv})
        first_ts = last_ts = None
        try:
            first_ts, last_ts = self._watch(background, started, runtime)
        finally:
            if background.alive():
                background.stop(timeout=10)
            background.process.stdout.close()
        code = background.finish()
        ended = time.time()
        ran = (last_ts - started) if last_ts else 0.0
        if runtime - (ended - started) > END_TOLERANCE_S:
            _, err = background.output()
            tail = (err.strip().splitlines() or ["no message"])[-1][:200]
            for record in self.monitor.fio_ended(ended, f"fio exited with code {code} after {ended - started:.1f} "
                                                        f"of {runtime} s: {tail}"):
                self.log.append(record)
            if segment == 1 and first_ts is None and code:
                raise ToolError(f"fio could not run the soak load (exit {code}): {tail}",
                                hint=f"job file {job}")
        return code, ran

    def _watch(self, background, started: float, runtime: float) -> tuple[float | None, float | None]:
        fd = background.process.stdout.fileno()
        os.set_blocking(fd, False)
        stream = JsonStream()
        selector = selectors.DefaultSelector()
        selector.register(fd, selectors.EVENT_READ)
        deadline = started + runtime + max(60.0, runtime * 0.05)
        next_path = next_telemetry = started
        next_health = started + min(self.config.health_s, 60.0)
        next_progress = started + 1.0
        first_ts = last_ts = None
        eof = False
        try:
            while not eof:
                selector.select(timeout=0.5)
                chunks = []
                while True:
                    try:
                        data = os.read(fd, 1 << 16)
                    except BlockingIOError:
                        break
                    if not data:
                        eof = True
                        break
                    chunks.append(data)
                for doc in stream.feed(b"".join(chunks)) if chunks else ():
                    point = parse_status_doc(doc)
                    first_ts = first_ts or point.ts
                    last_ts = point.ts
                    for record in self.monitor.observe(point, time.time()):
                        self.log.append(record)
                now = time.time()
                for record in self.monitor.tick(now):
                    self.log.append(record)
                if now >= next_path:
                    next_path = now + 1.0
                    for record in self.monitor.paths(self.state["baseline_paths"], telemetry.path_states(), now):
                        self.log.append(record)
                self._collect_side_readings()
                if now >= next_telemetry and "telemetry" not in self._pending:
                    next_telemetry = now + self.config.sample_s
                    self._pending["telemetry"] = self._side.submit(self._telemetry, now)
                if now >= next_health and "health" not in self._pending:
                    next_health = now + self.config.health_s
                    self._pending["health"] = self._side.submit(self._health)
                if now >= next_progress:
                    next_progress = now + min(60.0, max(1.0, self.config.planned_s / 100))
                    self._progress(started, last_ts)
                if now > deadline:
                    self.log.append({"type": "note", "t": stamp(now), "ts": now,
                                     "detail": f"fio still running {now - started - runtime:.0f} s after its "
                                               "runtime: stopped"})
                    break
        finally:
            selector.close()
        for text in stream.skipped:
            self.log.append({"type": "note", "t": stamp(time.time()), "ts": time.time(),
                             "detail": f"not JSON on fio's stdout: {text}"})
        return first_ts, last_ts

    # -- side readings ----------------------------------------------------------
    def _collect_side_readings(self) -> None:
        for key, future in list(self._pending.items()):
            if future.done():
                del self._pending[key]
                record = future.result()
                if record:
                    self.log.append(record)

    def _telemetry(self, now: float) -> dict:
        return {"type": "telemetry", "t": stamp(now), "ts": now, "host": telemetry.host_counters(),
                "nvme_temp_c": telemetry.nvme_temperatures(), "paths": telemetry.path_states(),
                "md": telemetry.md_states()}

    def _health(self) -> dict | None:
        """``nvme smart-log`` of the live controllers (in a worker thread: a slow controller
        must not hold up stall and path detection)."""
        live = [name for name, path in telemetry.path_states().items() if path["state"] == "live"]
        if not live or telemetry.probe_nvme_cli(self.runner):
            return None
        smart = telemetry.smart_logs(self.runner, controllers=live)
        now = time.time()
        return {"type": "health", "t": stamp(now), "ts": now, "smart": smart}

    def _progress(self, started: float, last_ts: float | None) -> None:
        elapsed = self.covered_before + ((last_ts - started) if last_ts else 0.0)
        bw = self.monitor.last_bw
        self.progress(f"soak: elapsed {hms(elapsed)}, remaining {hms(self.config.planned_s - elapsed)}, "
                      f"{(bw or 0) / 1e6:,.1f} MB/s, interruptions so far {self.monitor.count}")

    def _save_state(self) -> None:
        write_json(self.run.path / STATE, self.state)
