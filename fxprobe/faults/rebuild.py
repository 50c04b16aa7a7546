"""The md rebuild after a drive pull, in the timeline: how long md ran degraded and how long it rebuilt the
returned drive(s), and what the load saw meanwhile (throughput vs the pre-fault steady state, p99).

The md states come from the run's samples (the array's /proc/mdstat, about once a second, parsed by
tools.mdadm): a sample's md text reads back as ``timeline.md_state``. Two bands, on the load host's clock:

- degraded: from the drive gone (the fault's injection instant) until md starts rebuilding (or is clean);
- rebuilding: from the first sample that shows md recovering/resyncing until the first that shows it clean,
  or until the load ended (the scenario's bound, ``timing.rebuild_s`` after the restore).

Throughput and counts are exact (successful completions, faults.completions); the band edges have the
sampling's resolution (printed). These are information - criteria only when the scenario sets
``criteria.max_rebuild_s`` or ``criteria.min_rebuild_throughput_pct``.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass

from fxprobe.core.data import AsDict
from fxprobe.core.verdict import Criterion, Outcome, format_number
from fxprobe.faults.timeline import md_state

INFO = "information, not judged"


@dataclass(frozen=True)
class Band(AsDict):
    name: str                     # "degraded" or "rebuilding"
    start_ms: int
    end_ms: int
    ended: bool                   # its end was seen (else the load ended first)
    ios: int                      # successful completions in the band
    iops: float
    throughput_pct: float | None  # vs the pre-fault steady state
    mb_s: float
    p99_ns: int | None
    p99_ratio: float | None       # vs the pre-fault p99
    longest_stall_s: float | None = None   # the longest time in the band with no successful completion

    @property
    def seconds(self) -> float:
        return (self.end_ms - self.start_ms) / 1000.0

    def to_dict(self) -> dict:
        return {**super().to_dict(), "seconds": self.seconds}

    @classmethod
    def from_dict(cls, data: dict | None) -> "Band | None":
        if not isinstance(data, dict):
            return None
        names = [f.name for f in dataclasses.fields(cls)]
        return cls(**{k: data.get(k) for k in names})

    def text(self) -> str:
        p99 = f"p99 {self.p99_ns / 1e6:.3f} ms" if self.p99_ns is not None else "p99 -"
        if self.p99_ratio is not None:
            p99 += f" ({self.p99_ratio:.2f}x pre-fault)"
        pct = format_number(self.throughput_pct, "%") if self.throughput_pct is not None else "-"
        stall = f", longest stall {self.longest_stall_s:.3f} s" if self.longest_stall_s is not None else ""
        return (f"{self.name} {self.seconds:.1f} s{'' if self.ended else ' (still when the load ended)'}: "
                f"{pct} of pre-fault throughput ({self.iops:,.0f} IOPS, {self.mb_s:.2f} MB/s), {p99}{stall}")


@dataclass(frozen=True)
class Rebuild(AsDict):
    observed: bool
    bound_s: float                # the load ran on at most this long after the restore
    arrays: tuple[str, ...] = ()  # the md arrays that went degraded
    degraded: Band | None = None
    rebuilding: Band | None = None
    finished: bool = False        # md clean again before the load ended
    restore_to_clean_s: float | None = None
    rebuild_s: float | None = None        # rebuilding band, when finished
    progress_pct: float | None = None     # of the rebuild when the load ended (unfinished)
    rate_mb_s: float | None = None        # md's own rate while rebuilding (median of speed=)
    resolution_s: float | None = None     # the sampling interval (band edges)
    reason: str = ""                      # why not observed

    def to_dict(self) -> dict:
        data = super().to_dict()
        data["degraded"] = self.degraded.to_dict() if self.degraded else None
        data["rebuilding"] = self.rebuilding.to_dict() if self.rebuilding else None
        data["arrays"] = list(self.arrays)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Rebuild":
        """Read back what ``to_dict`` wrote (a run's results.json ``rebuild``)."""
        names = [f.name for f in dataclasses.fields(cls)]
        values = {k: data[k] for k in names if k in data}
        values["arrays"] = tuple(data.get("arrays") or ())
        values["degraded"], values["rebuilding"] = Band.from_dict(data.get("degraded")), Band.from_dict(data.get("rebuilding"))
        return cls(**{"observed": False, "bound_s": 0.0, **values})

    def lines(self) -> list[str]:
        """What a person reads (information unless the scenario judges it)."""
        if not self.observed:
            return [f"md rebuild not observed: {self.reason}"] if self.reason else []
        head = f"md rebuild ({', '.join(self.arrays)}): "
        if self.finished:
            head += (f"clean {self.restore_to_clean_s:.1f} s after the restore (rebuilt in {self.rebuild_s:.1f} s"
                     + (f", md's rate {self.rate_mb_s:.2f} MB/s" if self.rate_mb_s else "") + ")")
        else:
            head += (f"NOT finished within the bound, {self.bound_s:g} s after the restore"
                     + (f" ({self.progress_pct:g} % done" if self.progress_pct is not None else " (")
                     + (f", md's rate {self.rate_mb_s:.2f} MB/s)" if self.rate_mb_s else ")"))
        head += f" - band edges sampled every ~{self.resolution_s:.1f} s" if self.resolution_s else ""
        return [head] + [f"  {band.text()}" for band in (self.degraded, self.rebuilding) if band is not None]


def not_observed(bound_s: float, reason: str) -> Rebuild:
    return Rebuild(False, bound_s, reason=reason)


def unclean(md: dict) -> set[str]:
    """The arrays of ``{name: md text}`` that are degraded or rebuilding."""
    return {name for name, text in md.items() if (state := md_state(text)) is not None and state.phase != "clean"}


def phases(samples: list[dict], after_ms: int) -> tuple[tuple[str, ...], list[tuple[int, str, object]]]:
    """(arrays that went degraded after ``after_ms``, [(t_ms, phase of those arrays, states)]) from samples
    ``{"t_ms", "md": {name: text}}``; the phase is the worst of the watched arrays (rebuilding > degraded).
    An array already degraded or rebuilding before ``after_ms`` (an earlier fault's) is not this fault's."""
    before = [s for s in samples if s["t_ms"] < after_ms]
    earlier = unclean(before[-1]["md"]) if before else set()
    watched = sorted({name for s in samples if s["t_ms"] >= after_ms for name in unclean(s["md"])} - earlier)
    out = []
    for sample in samples:
        states = {name: md_state(sample["md"].get(name, "")) for name in watched}
        seen = [st.phase for st in states.values() if st is not None]
        if not seen:
            continue
        phase = "rebuilding" if "rebuilding" in seen else ("degraded" if "degraded" in seen else "clean")
        out.append((sample["t_ms"], phase, states))
    return tuple(watched), out


def first(timeline: list[tuple[int, str, object]], after_ms: int, wanted: tuple[str, ...]) -> int | None:
    return next((t for t, phase, _ in timeline if t >= after_ms and phase in wanted), None)


def band(name: str, start_ms: int, end_ms: int, ended: bool, measure) -> Band:
    """``measure(start, end)`` -> (ios, iops, pct, mb_s, p99_ns, p99_ratio[, longest_stall_s]) of the load in the
    band."""
    return Band(name, int(start_ms), int(end_ms), ended, *measure(int(start_ms), int(end_ms)))


def observe(samples: list[dict], *, inject_ms: int, restore_ms: int, load_end_ms: int, bound_s: float,
            measure, resolution_s: float | None = None) -> Rebuild:
    """The two bands and the rebuild figures from the samples (times in ms on the load host's clock)."""
    arrays, timeline = phases([s for s in samples if s["t_ms"] <= load_end_ms], inject_ms)
    if not arrays:
        return not_observed(bound_s, "no md array went degraded (no redundancy to rebuild, e.g. raid0, or md "
                                     "not visible from here)")
    start = first(timeline, restore_ms, ("rebuilding", "clean"))
    start = load_end_ms if start is None else min(start, load_end_ms)
    degraded = band("degraded", inject_ms, start, start < load_end_ms, measure)
    clean = first(timeline, start, ("clean",))
    finished = clean is not None and clean <= load_end_ms
    rebuilding = None
    if first(timeline, restore_ms, ("rebuilding",)) is not None or start < load_end_ms:
        end = clean if finished else load_end_ms
        rebuilding = band("rebuilding", start, end, finished, measure) if end > start else None
    rebuilding_states = [st for _, phase, states in timeline if phase == "rebuilding"
                         for st in states.values() if st is not None and st.phase == "rebuilding"]
    speeds = [st.speed_kib_s for st in rebuilding_states if st.speed_kib_s is not None]
    return Rebuild(True, bound_s, arrays, degraded, rebuilding, finished,
                   restore_to_clean_s=(clean - restore_ms) / 1000.0 if finished else None,
                   rebuild_s=rebuilding.seconds if finished and rebuilding else (0.0 if finished else None),
                   progress_pct=None if finished or not rebuilding_states else rebuilding_states[-1].progress,
                   rate_mb_s=statistics.median(speeds) * 1024 / 1e6 if speeds else None,
                   resolution_s=resolution_s)


def criteria(rebuild: Rebuild, limits: dict) -> list[Criterion]:
    """The rebuild judged only where the scenario asks (``max_rebuild_s``, ``min_rebuild_throughput_pct``)."""
    out = []
    if limits.get("max_rebuild_s") is not None:
        out.append(_time_criterion(rebuild, limits["max_rebuild_s"]))
    if limits.get("min_rebuild_throughput_pct") is not None:
        name = "throughput while md rebuilds vs pre-fault"
        band_ = rebuild.rebuilding
        measured = band_.throughput_pct if band_ is not None else None
        detail = band_.text() if band_ is not None else (rebuild.reason or "md was not seen rebuilding")
        out.append(Criterion.compare(name, measured, ">=", limits["min_rebuild_throughput_pct"], unit="%",
                                     detail=detail, evidence="fio per-I/O completion log, md samples"))
    return out


def _time_criterion(rebuild: Rebuild, limit: float) -> Criterion:
    name = "md rebuild time (restore to clean)"
    if rebuild.finished:
        return Criterion.compare(name, rebuild.restore_to_clean_s, "<=", limit, unit="s",
                                 detail=f"rebuilt in {rebuild.rebuild_s:.1f} s", evidence="md samples")
    if not rebuild.observed:
        return Criterion.compare(name, None, "<=", limit, unit="s", detail=rebuild.reason)
    if rebuild.bound_s > limit:      # still rebuilding past the limit: at least the bound
        return Criterion.compare(name, rebuild.bound_s, "<=", limit, unit="s", detail=(
            f"still rebuilding when the load ended, {rebuild.bound_s:g} s after the restore (a lower bound; "
            f"{rebuild.progress_pct if rebuild.progress_pct is not None else '?'} % done)"), evidence="md samples")
    return Criterion(name, Outcome.NOT_RUN, None, limit, "<=", "s",
                     f"not finished within the bound timing.rebuild_s = {rebuild.bound_s:g} s, shorter than the "
                     f"criterion: raise the bound", "md samples")


BAND_COLORS = {"degraded": "tab:orange", "rebuilding": "tab:cyan"}


def plot_bands(rebuild: Rebuild | None) -> list[tuple[str, int, int, str]]:
    """(label, start ms, end ms, colour) of each band for the timeline plot."""
    if rebuild is None or not rebuild.observed:
        return []
    out = []
    for band_ in (rebuild.degraded, rebuild.rebuilding):
        if band_ is not None and band_.end_ms > band_.start_ms:
            pct = f", {band_.throughput_pct:.0f} % of pre-fault" if band_.throughput_pct is not None else ""
            out.append((f"md {band_.name} {band_.seconds:.1f} s{pct}", band_.start_ms, band_.end_ms,
                        BAND_COLORS[band_.name]))
    return out
