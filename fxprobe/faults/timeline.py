"""What happened around the fault: NVMe path states and md state sampled through the run,
and kernel uevents / netlink link changes as they came.

``Sampler`` polls a snapshot function every few seconds in a thread. The events come from the
listener ``python -m fxprobe.tools.kernel_events --seconds N`` on the node that sees them; its JSON
lines are read back here with ``parse_event_lines``.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable

from fxprobe.core.data import AsDict
from fxprobe.core.errors import FxprobeError


@dataclass(frozen=True)
class Sample(AsDict):
    t: float                    # epoch s (local clock of the machine running fxprobe)
    paths: dict                 # controller -> state (e.g. live, connecting)
    md: dict                    # md name -> "health action progress"
    error: str = ""


def merge_node_samples(host: list[tuple[float, list]], array: list[tuple[float, dict]], nqn: str | None,
                       host_offset: float, array_offset: float) -> list[Sample]:
    """Samples (local clock) from in-guest sampling loops, one per block of either loop from the load host's
    first on: the path states the host and the md state the array had printed by then. An array block between
    two host blocks (or after the last) is a sample of its own: md clean again a moment after the host's last
    block is seen (a rebuild that ended just before the load was stopped)."""
    points = sorted([(t - host_offset, 0, {p["controller"]: p["state"] for sub in subsystems
                                           if nqn is None or sub["nqn"] == nqn for p in sub["paths"]})
                     for t, subsystems in host] +
                    [(t - array_offset, 1, {m["name"]: md_text(m) for m in view["md"]}) for t, view in array],
                    key=lambda point: (point[0], point[1]))
    out, paths, md = [], None, {}
    for local, source, state in points:
        if source == 0:
            paths = state
        else:
            md = state
        if paths is not None:
            out.append(Sample(local, paths, md))
    return out


def local_snapshot(nqn: str | None) -> Callable[[], tuple[dict, dict]]:
    def snap() -> tuple[dict, dict]:
        from fxprobe.tools import nvme_sysfs
        from fxprobe.faults.methods import local_md_arrays
        paths = {c.name: c.state for c in nvme_sysfs.controllers() if nqn is None or c.subsysnqn == nqn}
        return paths, {m["name"]: md_text(m) for m in local_md_arrays()}
    return snap


def md_text(md: dict) -> str:
    if not md.get("level") or md.get("raid_disks") is None:
        return f"{md.get('level') or ''} {md.get('state')}".strip()
    text = f"{md.get('level')} [{md.get('raid_disks')}/{md.get('working_disks')}] [{md.get('health')}]"
    if md.get("action"):
        text += f" {md['action']} {md.get('progress')}%"
        if md.get("sync_total_kib"):
            text += f" ({md.get('sync_done_kib')}/{md['sync_total_kib']} KiB"
            text += f" at {md['speed_kib_s']} KiB/s)" if md.get("speed_kib_s") is not None else ")"
    return text


_MD_TEXT = re.compile(r"\[(\d+)/(\d+)\] \[([U_]+)\](?: (\w+) ([\d.]+)%(?: \((\d+)/(\d+) KiB(?: at (\d+) KiB/s)?\))?)?")


@dataclass(frozen=True)
class MdState:
    """One md array's state as a sample holds it (``md_text``, read back)."""
    phase: str                     # "clean", "degraded" (a member missing, nothing rebuilding), "rebuilding"
    action: str | None = None      # recovery / resync / check ...
    progress: float | None = None
    done_kib: int | None = None
    total_kib: int | None = None
    speed_kib_s: int | None = None


def md_state(text: str) -> MdState | None:
    """The state in a sample's md text; None for an array without redundancy fields (raid0, inactive)."""
    match = _MD_TEXT.search(text)
    if match is None:
        return None
    health, action = match.group(3), match.group(4)
    number = lambda i: int(match.group(i)) if match.group(i) else None
    phase = "rebuilding" if action in ("recovery", "resync") else ("degraded" if "_" in health else "clean")
    return MdState(phase, action, float(match.group(5)) if match.group(5) else None, number(6), number(7), number(8))


class Sampler:
    """Calls ``snapshot`` every ``interval`` s in a thread until stopped."""

    def __init__(self, snapshot: Callable[[], tuple[dict, dict]], interval: float = 2.0):
        self.snapshot = snapshot
        self.interval = interval
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fault-sampler", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.time()
            try:
                paths, md = self.snapshot()
                self.samples.append(Sample(started, paths, md))
            except (FxprobeError, OSError, KeyError, ValueError) as exc:
                self.samples.append(Sample(started, {}, {}, str(exc)[:200]))
            self._stop.wait(max(0.1, self.interval - (time.time() - started)))

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._stop.set()
        self._thread.join(timeout=60)
        return self.samples


def changes(samples: list[Sample]) -> list[dict]:
    """Only the samples where a path or md state differs from the one before."""
    out, last = [], None
    for sample in samples:
        key = (sample.paths, sample.md)
        if key != last and not sample.error:
            out.append({"t": sample.t, "paths": sample.paths, "md": sample.md})
            last = key
    return out


def parse_event_lines(text: str, offset_s: float = 0.0) -> list[dict]:
    """Event lines printed by ``events``; ``offset_s`` (node clock - local clock) is taken off."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict) and isinstance(event.get("t"), (int, float)):
            event["t"] = event["t"] - offset_s
            out.append(event)
    return out
