"""The live state of a long command, and the sinks that show or export it.

One ``Status`` per command. The steps of run, sweep, soak, fault run and rehearse feed it events
(``phase``, ``progress``, ``interval``, ``event``, ``health``); it keeps a snapshot and hands every
change to its sinks: a line for a person (``PlainSink`` off a terminal, the rich line in
``fxprobe.cli.statusline`` on one), the metrics exporter (``fxprobe.core.metrics``). The CLI chooses
the sinks; the library only feeds events. A Status without sinks costs nothing.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable


@dataclass(frozen=True)
class Figures:
    """One node's figures over the last interval (fio's status documents)."""

    node: str
    ts: float
    bw: float | None                 # bytes/s
    iops: float | None
    p99_ns: float | None = None      # of the I/Os completed in the interval
    p50_ns: float | None = None
    p999_ns: float | None = None
    errors: int = 0                  # cumulative I/O errors
    ios: int = 0                     # cumulative completed I/Os
    lat_sum_ns: float = 0.0          # cumulative latency sum (for a summary's _sum)


@dataclass(frozen=True)
class Event:
    """Something that happened: an interruption (stall, path-lost, io-error, ...) or a fault."""

    category: str          # "interruption" | "fault" | "note"
    kind: str
    detail: str
    ts: float
    node: str = ""


@dataclass(frozen=True)
class Snapshot:
    command: str
    started: float
    phase: str = ""
    phase_started: float = 0.0
    planned_s: float | None = None       # of the whole command's timed part (for % and ETA)
    done_s: float = 0.0                  # of planned_s
    unit: str = "s"                      # "s": planned_s is time; "steps": a count of steps (ETA from their pace)
    nodes: dict = field(default_factory=dict)            # node -> Figures
    interruptions: dict = field(default_factory=dict)    # kind -> count
    faults: dict = field(default_factory=dict)           # kind -> count
    open_events: tuple = ()                              # kinds open now (a stall going on, a fault injected)
    last_event: Event | None = None
    paths: dict = field(default_factory=dict)            # path name -> state
    md: dict = field(default_factory=dict)               # md device -> {"state":..., "degraded": bool, ...}
    temps_c: dict = field(default_factory=dict)          # drive -> degrees C
    closed: bool = False
    outcome: str = ""

    @property
    def fraction(self) -> float | None:
        if not self.planned_s:
            return None
        return max(0.0, min(1.0, self.done_s / self.planned_s))

    def eta_s(self, now: float) -> float | None:
        """Time left: the planned time not yet covered (the load runs by the clock, not by bytes); for
        steps, the steps left at the pace of those done (unknown before the first one ends)."""
        if not self.planned_s:
            return None
        if self.unit == "steps":
            if self.done_s <= 0:
                return None
            return max(0.0, (now - self.started) / self.done_s * (self.planned_s - self.done_s))
        return max(0.0, self.planned_s - self.done_s)

    def totals(self) -> tuple[float | None, float | None, float | None]:
        """(bytes/s, IOPS, worst p99 ns) over every node's last interval."""
        figures = list(self.nodes.values())
        if not figures:
            return None, None, None
        bw = [f.bw for f in figures if f.bw is not None]
        iops = [f.iops for f in figures if f.iops is not None]
        p99 = [f.p99_ns for f in figures if f.p99_ns is not None]
        return (sum(bw) if bw else None, sum(iops) if iops else None, max(p99) if p99 else None)


class Status:
    """The one observer of a command's progress (thread-safe: feeds come from reader threads)."""

    def __init__(self, command: str, sinks: list | tuple = (), clock: Callable[[], float] = time.time):
        self.clock = clock
        self.sinks = list(sinks)
        self._lock = threading.RLock()
        now = clock()
        self._snap = Snapshot(command, now, phase_started=now)
        self._interruptions: Counter = Counter()
        self._faults: Counter = Counter()
        self._open: list[str] = []
        self.sink_errors: list[str] = []      # sinks dropped after an error (kept out of the load's way)
        self._generation = 0

    @property
    def active(self) -> bool:
        return bool(self.sinks)

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snap

    # -- feeds ---------------------------------------------------------------------
    def phase(self, name: str, planned_s: float | None = None, done_s: float | None = None,
              unit: str | None = None) -> None:
        """A new phase; ``planned_s`` (the command's timed total) gives % and ETA from here on."""
        changes = {"phase": name, "phase_started": self.clock()}
        with self._lock:
            self._generation += 1          # a timed phase before this one stops advancing
        if unit is not None:
            changes["unit"] = unit
        if planned_s is not None:
            changes["planned_s"] = planned_s
        if done_s is not None:
            changes["done_s"] = done_s
        self._change(changes, Event("note", "phase", name, self.clock()))

    def progress(self, done_s: float) -> None:
        self._change({"done_s": done_s}, None)

    def timed(self, name: str, done_s: float, seconds: float, every_s: float = 1.0) -> None:
        """A phase of known length (fio running for its runtime): the progress advances with the clock
        from ``done_s`` up to ``done_s + seconds`` until the next phase or the end."""
        self.phase(name, done_s=done_s)
        if not self.active:
            return
        with self._lock:
            self._generation += 1
            generation = self._generation
        started = self.clock()

        def tick():
            while True:
                time.sleep(every_s)
                with self._lock:
                    if generation != self._generation or self._snap.closed:
                        return
                self.progress(done_s + min(seconds, self.clock() - started))
        threading.Thread(target=tick, name="status-clock", daemon=True).start()

    def interval(self, figures: Figures) -> None:
        with self._lock:
            nodes = {**self._snap.nodes, figures.node: figures}
        self._change({"nodes": nodes}, None)

    def event(self, category: str, kind: str, detail: str = "", node: str = "", open_: bool = False) -> None:
        """An interruption or a fault as it happens; ``open_``: it goes on until ``ended(kind)``."""
        with self._lock:
            counter = self._faults if category == "fault" else self._interruptions
            if category in ("fault", "interruption"):
                counter[kind] += 1
            if open_:
                self._open.append(kind)
            changes = {"interruptions": dict(self._interruptions), "faults": dict(self._faults),
                       "open_events": tuple(self._open)}
        event = Event(category, kind, detail, self.clock(), node)
        self._change({**changes, "last_event": event}, event)

    def ended(self, kind: str, detail: str = "") -> None:
        with self._lock:
            if kind in self._open:
                self._open.remove(kind)
            changes = {"open_events": tuple(self._open)}
        self._change(changes, Event("note", f"{kind}-end", detail, self.clock()))

    def health(self, paths: dict | None = None, md: dict | None = None, temps_c: dict | None = None) -> None:
        changes = {}
        if paths is not None:
            changes["paths"] = dict(paths)
        if md is not None:
            changes["md"] = dict(md)
        if temps_c is not None:
            changes["temps_c"] = dict(temps_c)
        self._change(changes, None)

    def close(self, outcome: str = "") -> None:
        with self._lock:
            if self._snap.closed:
                return
            self._snap = replace(self._snap, closed=True, outcome=outcome)
            snap, sinks = self._snap, list(self.sinks)
        for sink in sinks:
            try:
                sink.close(snap)
            except Exception as exc:
                self._drop(sink, exc)

    def _change(self, changes: dict, event: Event | None) -> None:
        with self._lock:
            if self._snap.closed:
                return
            self._snap = replace(self._snap, **changes)
            snap, sinks = self._snap, list(self.sinks)
        for sink in sinks:
            try:
                sink.update(snap, event)
            except Exception as exc:     # a broken display or exporter never stops the load it shows
                self._drop(sink, exc)

    def _drop(self, sink, exc: Exception) -> None:
        with self._lock:
            if sink in self.sinks:
                self.sinks.remove(sink)
                self.sink_errors.append(f"{type(sink).__name__}: {type(exc).__name__}: {exc}")


# -- the words of a status line (shared by the plain and the rich renderer) ---------------

def hms(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _latency(ns: float | None) -> str:
    if ns is None:
        return "-"
    return f"{ns / 1e6:.2f} ms" if ns >= 1e6 else f"{ns / 1e3:.0f} us"


def _counts(counts: dict) -> str:
    return " ".join(f"{kind} {n}" for kind, n in sorted(counts.items()))


def parts(snap: Snapshot, now: float, per_node: bool = True) -> list[str]:
    """The status line as words: phase, %, ETA and finish time, MB/s, IOPS, p99, nodes, events."""
    out = [f"{snap.command}: {snap.phase or 'starting'}"]
    fraction = snap.fraction
    if fraction is not None:
        eta = snap.eta_s(now)
        steps = f"step {int(snap.done_s) + 1}/{int(snap.planned_s)} " if snap.unit == "steps" else ""
        if eta is None:
            out.append(f"{steps}{fraction * 100:.0f}% ETA -")
        else:
            finish = time.strftime("%H:%M:%S", time.gmtime(now + eta))
            out.append(f"{steps}{fraction * 100:.0f}% ETA {hms(eta)} (ends {finish} UTC)")
    bw, iops, p99 = snap.totals()
    if snap.nodes:
        out.append(f"{(bw or 0) / 1e6:,.1f} MB/s {(iops or 0):,.0f} IOPS p99 {_latency(p99)}")
    if per_node and len(snap.nodes) > 1:
        out.append("; ".join(f"{name} {(f.bw or 0) / 1e6:,.1f} MB/s p99 {_latency(f.p99_ns)}"
                             for name, f in sorted(snap.nodes.items())))
    if snap.faults:
        out.append(f"faults: {_counts(snap.faults)}")
    out.append(f"interruptions: {_counts(snap.interruptions) or 0}")
    if snap.open_events:
        out.append("now: " + ", ".join(snap.open_events))
    return out


def line(snap: Snapshot, now: float) -> str:
    return " | ".join(parts(snap, now))


class PlainSink:
    """Off a terminal (CI, nohup): one compact line per interval, never more; the last state when the
    command ends. Events between two lines are in the next line's counts."""

    def __init__(self, write: Callable[[str], None], interval_s: float, clock: Callable[[], float] = time.time):
        self.write, self.interval_s, self.clock = write, max(0.1, interval_s), clock
        self.last: float | None = None
        self.pending = False

    def update(self, snapshot: Snapshot, event: Event | None) -> None:
        now = self.clock()
        if self.last is not None and now - self.last < self.interval_s:
            self.pending = True
            return
        self.last, self.pending = now, False
        self.write(line(snapshot, now))

    def close(self, snapshot: Snapshot) -> None:
        if self.pending:
            now = self.clock()
            if self.last is None or now - self.last >= self.interval_s:
                self.write(line(snapshot, now))
