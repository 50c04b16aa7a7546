"""A soak's results and verdict, recomputed from its records."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from fxprobe.core.errors import ParseError
from fxprobe.soak.common import END_TOLERANCE_S, RECORDS, STATUS_INTERVAL_S, end_tolerance_s, hms
import fxprobe.soak.verify as soak_verify
from fxprobe.soak.monitor import Interruption
from fxprobe.soak.records import (RECORD_TYPES, EndRecord, HealthRecord, InterruptionEndRecord, InterruptionRecord,
                                  NoteRecord, ResumeRecord, SampleRecord, SegmentRecord, StartRecord,
                                  TelemetryRecord, VerifyRecord, as_records)
from fxprobe.core.verdict import Criterion, Outcome, Verdict


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
    unmonitored_s: float = 0.0      # fxprobe not running (crash, kill -9): never counted as covered
    verify: dict | None = None      # how the data was verified (soak.verify.SoakVerifyPlan); None: not recorded
    verified_bytes: int = 0         # read and checked against their verify headers (load and read-back pass)
    mismatches: int = 0             # verify failures (bad reads)
    bad_blocks: int = 0             # on this many blocks (at least)
    mismatches_shown: tuple[dict, ...] = ()   # the first bad blocks: offset, found and expected header
    verify_problems: tuple[str, ...] = ()
    unreadable: int = 0             # blocks the read-back pass could not read (I/O errors)
    readback_coverage: str = ""     # 'the read-back read X of Y MiB'
    coverage_clock: str = "monotonic"   # the clock covered time was counted on ("wall": records without monotonic)
    array_seen: tuple[dict, ...] | None = None   # what array the target is (its NVMe subsystem); None: not recorded

    MAX_NOTES = 20

    def to_dict(self) -> dict:
        data = asdict(self)
        data["interruptions"] = [i.to_dict() for i in self.interruptions]
        return data

    def verdict(self) -> Verdict:
        tolerance = end_tolerance_s(self.planned_s)
        kinds = ", ".join(f"{k} {n}" for k, n in _counts(self.interruptions).items()) or "none"
        return Verdict("soak", (
            Criterion.compare("interruptions", len(self.interruptions), "<=", 0,
                              detail=f"{kinds}; stall limit {self.stall_s:g} s"),
            Criterion.compare("load covered the planned time", round(self.duration_s, 1), ">=",
                              round(self.planned_s - tolerance, 1), unit="s",
                              detail=f"planned {self.planned_s:g} s, {tolerance:g} s end tolerance (the larger of "
                                     f"{END_TOLERANCE_S:g} s and 0.1 % of the planned time, at most half of it)"),
            self.verify_criterion(),
        ))

    def verify_criterion(self) -> Criterion:
        return soak_verify.criterion(self.verify, self.verified_bytes, self.mismatches, self.bad_blocks,
                                     list(self.mismatches_shown), list(self.verify_problems), self.unreadable,
                                     self.readback_coverage)

    def lines(self) -> list[str]:
        bw = self.bandwidth
        out = [f"soak {self.profile} on {self.target}: {hms(self.duration_s)} of load covered "
               f"(planned {hms(self.planned_s)}), {self.samples} samples, {self.segments} fio segment(s)"
               + (f", resumed {self.resumes}x" if self.resumes else "")
               + (f"; {self.unmonitored_s:.1f} s unmonitored (a gap, not covered)" if self.unmonitored_s else "")]
        if bw.get("mean_bytes") is not None:
            out.append(f"  bandwidth: mean {bw['mean_bytes'] / 1e6:,.2f} MB/s, p5 {bw['p5_bytes'] / 1e6:,.2f}, "
                       f"min {bw['min_bytes'] / 1e6:,.2f}, max {bw['max_bytes'] / 1e6:,.2f} MB/s; "
                       f"{bw['zero_intervals']} interval(s) with no I/O; IOPS mean {self.iops_mean:,.1f}")
        out.append(f"  I/O errors: {self.io_errors}; telemetry samples {self.telemetry_samples}, "
                   f"health reads {self.health_samples}")
        check = self.verify_criterion()
        out.append(f"  data verified: {check.detail}" if check.outcome is not Outcome.NOT_RUN
                   else f"  data NOT verified: {check.detail.removeprefix('not verified: ')}")
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


class _Tally:
    """What summarize counts, one method per record type (``_TALLY``), in the order the records came."""

    def __init__(self):
        self.start: StartRecord | None = None
        self.end: EndRecord | None = None
        self.segments: dict[int, dict] = {}
        self.opened: dict[int, InterruptionRecord] = {}
        self.ended: dict[int, InterruptionEndRecord] = {}
        self.bws: list[float] = []
        self.iopss: list[float] = []
        self.temps: dict[str, float] = {}
        self.errors_by_segment: dict[int, int] = {}
        self.samples = self.telemetry = self.health = self.resumes = 0
        self.first: str | None = None
        self.last: str | None = None
        self.notes: list[str] = []
        self.verified: dict[int, tuple[int, int]] = {}        # seg -> (verified, mismatches) of its last sample
        self.verify_records: dict[int | None, VerifyRecord] = {}   # seg (None: the read-back pass) -> its record

    def on_start(self, r: StartRecord) -> None:
        self.start = self.start or r

    def on_segment(self, r: SegmentRecord) -> None:
        # covered time is counted on the monotonic clock the soak recorded at receipt (a wall-clock step is not
        # load); records written without it count on the wall clock, and the summary says so
        self.segments[r.seg] = {"start": r.ts if r.mono is None else r.mono, "last": None, "mono": r.mono is not None}

    def on_sample(self, r: SampleRecord) -> None:
        self.samples += 1
        seg = self.segments.setdefault(r.seg, {"start": r.ts, "last": None, "mono": False})
        at = r.mono if seg["mono"] and r.mono is not None else r.ts
        if seg.get("first") is None:
            if not r.ios:
                seg["start"] = at            # fio runs but its jobs have not started: not load yet
            else:
                # the load began within one status interval before the first report that shows I/O,
                # not when fio was started (opening the jobs on a slow node takes seconds of no load)
                seg["first"] = at
                seg["start"] = max(seg["start"], at - STATUS_INTERVAL_S)
        seg["last"] = at
        self.first = self.first or r.t
        self.last = r.t
        if r.bw is not None:
            self.bws.append(r.bw)
            self.iopss.append(r.iops or 0.0)
        self.errors_by_segment[r.seg] = r.errors
        if r.verified is not None:
            self.verified[r.seg] = (r.verified, r.mismatches or 0)

    def on_interruption(self, r: InterruptionRecord) -> None:
        self.opened[r.id] = r

    def on_interruption_end(self, r: InterruptionEndRecord) -> None:
        self.ended[r.id] = r

    def on_telemetry(self, r: TelemetryRecord) -> None:
        self.telemetry += 1
        for ctrl, value in r.nvme_temp_c.items():
            self.temps[ctrl] = max(self.temps.get(ctrl, value), value)

    def on_health(self, r: HealthRecord) -> None:
        self.health += 1

    def on_resume(self, r: ResumeRecord) -> None:
        self.resumes += 1

    def on_end(self, r: EndRecord) -> None:
        self.end = r

    def on_verify(self, r: VerifyRecord) -> None:
        self.verify_records[r.seg] = r

    def on_note(self, r: NoteRecord) -> None:
        if len(self.notes) < SoakSummary.MAX_NOTES:
            self.notes.append(f"{r.t or ''} {r.detail}")

    def interruptions(self) -> tuple[Interruption, ...]:
        """Each opened interruption with its end (from the opening record when instant, else its end record)."""
        out = []
        for ident, r in sorted(self.opened.items()):
            close = self.ended.get(ident)
            end_text = r.end or (close.end if close else None)
            seconds = r.seconds if r.end is not None else (close.seconds if close else None)
            detail = r.detail + (f"; {close.detail}" if close and close.detail else "")
            out.append(Interruption(r.kind, r.start, end_text, seconds, detail, ident))
        return tuple(out)

    def unmonitored_s(self) -> float:
        """Seconds fxprobe was not running (``gap`` interruptions): never counted as covered."""
        return round(sum(r.seconds or 0 for r in self.opened.values() if r.kind == "gap"), 3)

    def verification(self) -> dict:
        """Bytes verified and verify failures: each segment's verify record (its last sample's figures when it
        has none: a soak that stopped and was not resumed), plus the read-back pass."""
        verified = mismatches = 0
        for seg in set(self.verified) | {s for s in self.verify_records if s is not None}:
            record = self.verify_records.get(seg)
            got = (record.verified_bytes, record.mismatches) if record else self.verified[seg]
            verified, mismatches = verified + got[0], mismatches + got[1]
        readback = self.verify_records.get(None)
        if readback is not None:
            verified, mismatches = verified + readback.verified_bytes, mismatches + readback.mismatches
        shown: dict = {}
        for record in self.verify_records.values():
            for block in record.shown:
                shown.setdefault((block.get("file"), block.get("offset")), block)
        blocks = max([len(shown)] + [r.bad_blocks for r in self.verify_records.values()])
        return {"verify": self.start.verify if self.start else None, "verified_bytes": verified,
                "mismatches": mismatches, "bad_blocks": blocks,
                "mismatches_shown": tuple(shown[k] for k in sorted(shown, key=lambda k: (str(k[0]), k[1] or 0))),
                "verify_problems": tuple(r.problem for r in self.verify_records.values() if r.problem)
                + self.missing_readback(), **self.readback(readback)}

    def missing_readback(self) -> tuple[str, ...]:
        """A finished soak whose plan reads the working set back and has no record of that pass: a problem."""
        plan = (self.start.verify if self.start else None) or {}
        if plan.get("method", "off") != "off" and plan.get("readback") and self.end is not None \
                and None not in self.verify_records:
            return ("the read-back pass after the load left no record",)
        return ()

    @staticmethod
    def readback(record: "VerifyRecord | None") -> dict:
        if record is None:
            return {}
        expected = record.expected_bytes
        read = f"the read-back read {record.verified_bytes / 2**20:g}" + (
            f" of {expected / 2**20:g} MiB" if expected is not None else " MiB (the working set not recorded)")
        return {"unreadable": record.unreadable, "readback_coverage": read}

    def bandwidth(self) -> dict:
        if not self.bws:
            return {"mean_bytes": None}
        ordered = sorted(self.bws)
        return {"mean_bytes": statistics.fmean(ordered), "min_bytes": ordered[0], "max_bytes": ordered[-1],
                "p5_bytes": ordered[int(0.05 * (len(ordered) - 1))], "p50_bytes": statistics.median(ordered),
                "zero_intervals": sum(1 for v in ordered if v == 0), "intervals": len(ordered)}


_TALLY = {kind: getattr(_Tally, "on_" + kind.replace("-", "_")) for kind in RECORD_TYPES}


def _array_seen(start: StartRecord) -> tuple[dict, ...] | None:
    """What array the soak loaded, from its start record's target check (the gates' ``array_seen``)."""
    if start.target_check is None or not isinstance(start.target_check.get("subsystem"), dict):
        return None
    return ({"node": "local", "target": start.target, **start.target_check["subsystem"]},)


def summarize(records: list) -> SoakSummary:
    """The soak's results, recomputed from its records (typed, or dicts checked against their types) -
    after a crash as after a clean end."""
    tally = _Tally()
    for record in as_records(records):
        _TALLY[record.type](tally, record)
    start = tally.start
    if start is None:
        raise ParseError(RECORDS, "start", "no start record: not a soak record file")
    covered = sum(s["last"] - s["start"] for s in tally.segments.values() if s["last"] is not None)
    wall = any(not s["mono"] for s in tally.segments.values())
    if wall and len(tally.notes) < SoakSummary.MAX_NOTES:
        tally.notes.append("covered time counted on the wall clock: these records carry no monotonic clock "
                           "(written by an fxprobe before it recorded one), so a clock step would count as load")
    return SoakSummary(
        profile=start.profile, target=start.target, planned_s=start.planned_s, duration_s=round(covered, 3),
        samples=tally.samples, segments=len(tally.segments), resumes=tally.resumes,
        interruptions=tally.interruptions(), bandwidth=tally.bandwidth(),
        iops_mean=statistics.fmean(tally.iopss) if tally.iopss else None,
        io_errors=sum(tally.errors_by_segment.values()), telemetry_samples=tally.telemetry,
        health_samples=tally.health, nvme_temp_max_c=tally.temps, stall_s=start.stall_s, sample_s=start.sample_s,
        completed=tally.end is not None, end_reason=tally.end.reason if tally.end else "",
        first_sample=tally.first, last_sample=tally.last, notes=tuple(tally.notes),
        unmonitored_s=tally.unmonitored_s(), coverage_clock="wall" if wall else "monotonic",
        array_seen=_array_seen(start), **tally.verification())
