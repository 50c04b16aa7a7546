"""A soak's results and verdict, recomputed from its records."""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from fxprobe.core.errors import ParseError
from fxprobe.soak.common import END_TOLERANCE_S, RECORDS, STATUS_INTERVAL_S, hms
from fxprobe.soak.monitor import Interruption
from fxprobe.core.verdict import Criterion, Verdict


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
               + (f", resumed {self.resumes}x" if self.resumes else "")
               + (f"; {self.unmonitored_s:.1f} s unmonitored (a gap, not covered)" if self.unmonitored_s else "")]
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
            if seg.get("first") is None:
                if not r.get("ios"):
                    seg["start"] = r["ts"]          # fio runs but its jobs have not started: not load yet
                else:
                    # the load began within one status interval before the first report that shows I/O,
                    # not when fio was started (opening the jobs on a slow node takes seconds of no load)
                    seg["first"] = r["ts"]
                    seg["start"] = max(seg["start"], r["ts"] - STATUS_INTERVAL_S)
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
    unmonitored = sum(r.get("seconds") or 0 for r in opened.values() if r.get("kind") == "gap")
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
        notes=tuple(notes), unmonitored_s=round(unmonitored, 3))
