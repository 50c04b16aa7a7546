"""Interruptions: turns status points, path states and clock ticks into records (pure: no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from fxprobe.core.data import AsDict
from fxprobe.soak.common import CLOCK_STEP_S, STARTUP_GRACE_S, stamp
from fxprobe.soak.stream import StatusPoint


@dataclass(frozen=True)
class Interruption(AsDict):
    kind: str
    start: str
    end: str | None
    seconds: float | None
    detail: str
    id: int = 0

    def line(self) -> str:
        length = f"{self.seconds:.1f} s" if self.seconds is not None else "not ended"
        return f"{self.kind} from {self.start} to {self.end or '-'} ({length}): {self.detail}"


class Monitor:
    """Turns status points, path states and clock ticks into records (pure: no I/O).

    The soak gives each receipt both clocks: the wall clock (``received``, ``now``: the records' stamps) and the
    monotonic clock (``mono``): silences are timed on the monotonic clock, each sample records it (the summary
    counts covered time on it), and the wall clock moving more than ``CLOCK_STEP_S`` away from it between two
    receipts is a ``clock`` interruption. Without ``mono`` (records replayed in tests) the wall clock stands in."""

    def __init__(self, stall_s: float, next_id: int = 1, verifying: bool = False):
        self.stall_s = stall_s
        self.verifying = verifying             # samples carry the bytes verified and the verify failures
        self.next_id = next_id
        self.open: dict[str, dict] = {}        # key -> the opening record
        self.segment = 0
        self.previous: StatusPoint | None = None
        self.segment_start = 0.0
        self.last_progress: float | None = None
        self.last_report = 0.0                 # when the last status document arrived (monotonic, else wall)
        self.last_wall: float | None = None    # the last receipt on both clocks: a step between two is a "clock"
        self.last_mono: float | None = None
        self.last_bw: float | None = None
        self.count = 0
        self.mono_start: float | None = None

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

    def new_segment(self, segment: int, ts: float, mono: float | None = None) -> list[dict]:
        self.segment, self.segment_start, self.previous, self.last_progress = segment, ts, None, None
        self.last_report = ts if mono is None else mono
        self.last_wall, self.last_mono = (ts, mono) if mono is not None else (None, None)
        self.mono_start = mono
        return [self.closed("fio", ts, f"load restarted (segment {segment})")] if "fio" in self.open else []

    def clock(self, wall: float, mono: float | None) -> list[dict]:
        """A ``clock`` interruption when the wall clock moved away from the monotonic one since the last receipt."""
        if mono is None:
            return []
        last_wall, last_mono, self.last_wall, self.last_mono = self.last_wall, self.last_mono, wall, mono
        if last_wall is None or last_mono is None:
            return []
        step = (wall - last_wall) - (mono - last_mono)
        if abs(step) <= CLOCK_STEP_S:
            return []
        return [self.instant("clock", last_wall, wall,
                             f"the wall clock stepped {step:+.1f} s in {mono - last_mono:.1f} s of monotonic time "
                             f"(more than {CLOCK_STEP_S:g} s: date -s or an NTP step); covered time is counted on "
                             "the monotonic clock")]

    def observe(self, point: StatusPoint, received: float | None = None, mismatches: int = 0,
                mono: float | None = None) -> list[dict]:
        """One status document. A stall opens when fio's own report shows no new completed
        I/O for more than ``stall_s`` since the last progress, and closes at the next progress.
        ``mismatches``: the verify failures fio printed so far in this segment (read after the document, so
        at least those it counts): fio counts them in total_err, they are not I/O errors."""
        received = received if received is not None else point.ts
        point = replace(point, errors=max(0, point.errors - mismatches))
        at = received if mono is None else mono
        silent, self.last_report = at - self.last_report, at
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
        if mono is not None:
            out[0]["mono"] = round(mono, 3)
        if self.verifying:
            out[0].update(verified=point.read_bytes, mismatches=mismatches)
        out += self.clock(received, mono)
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

    def tick(self, now: float, mono: float | None = None) -> list[dict]:
        clock = self.clock(now, mono)
        if "stall" in self.open or "fio" in self.open:
            return clock
        return clock + self._silent(now if mono is None else mono,
                                    self.segment_start if mono is None else self.mono_start)

    def _silent(self, at: float, segment_start: float) -> list[dict]:
        """A stall opened when fio completed nothing since its segment began, or reported nothing for too long."""
        if self.last_progress is None:
            if at - segment_start > max(STARTUP_GRACE_S, self.stall_s):
                return [self.opened("stall", "stall", self.segment_start,
                                    f"fio completed no I/O in the first {max(STARTUP_GRACE_S, self.stall_s):g} s "
                                    f"of segment {self.segment}")]
            return []
        if at - self.last_report > self.silence_limit:
            return [self.opened("stall", "stall", self.last_progress,
                                f"fio reported nothing for {at - self.last_report:.0f} s; no completed I/O "
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
