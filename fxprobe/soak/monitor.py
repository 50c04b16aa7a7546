"""Interruptions: turns status points, path states and clock ticks into records (pure: no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from fxprobe.core.data import AsDict
from fxprobe.soak.common import STARTUP_GRACE_S, stamp
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
    """Turns status points, path states and clock ticks into records (pure: no I/O)."""

    def __init__(self, stall_s: float, next_id: int = 1, verifying: bool = False):
        self.stall_s = stall_s
        self.verifying = verifying             # samples carry the bytes verified and the verify failures
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

    def observe(self, point: StatusPoint, received: float | None = None, mismatches: int = 0) -> list[dict]:
        """One status document. A stall opens when fio's own report shows no new completed
        I/O for more than ``stall_s`` since the last progress, and closes at the next progress.
        ``mismatches``: the verify failures fio printed so far in this segment (read after the document, so
        at least those it counts): fio counts them in total_err, they are not I/O errors."""
        received = received if received is not None else point.ts
        point = replace(point, errors=max(0, point.errors - mismatches))
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
        if self.verifying:
            out[0].update(verified=point.read_bytes, mismatches=mismatches)
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
