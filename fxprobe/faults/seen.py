"""Whether the fault happened: the effect a drive pull or a link cut must have, observed in the fault window.

A method that returned without error has only said it did something (a target-control hook that changes nothing
exits 0; a netlink cut of an interface the load does not use goes through). After the run the fault is judged
seen only on evidence recorded between the inject request and ``GRACE_S`` after the restore:

- drive pull: an md array of the node holding the drive degraded or rebuilding (clean in the last sample before),
  a block or nvme ``remove`` uevent on that node, or the target-control hook's own status showing the drive absent;
- link kinds: a path of the load's subsystem that was live before leaving ``live`` (or vanishing) in a sample, a
  netlink ``DOWN`` of an interface that carried one of the load's live paths on the load's node, or the hook's
  status showing the port down.

Nothing of that: the run's "fault seen" criterion is an ERROR, "the fault was not seen: ..." (the run's outcome
is error, G4 shows it). Pure functions over the run's samples and events (faults.timeline)."""

from __future__ import annotations

from dataclasses import dataclass

from fxprobe.core.data import AsDict
from fxprobe.core.verdict import Criterion, Outcome
from fxprobe.faults.scenario import LINK_KINDS
from fxprobe.faults.timeline import md_state

NAME = "fault seen (its effect observed in the fault window)"
GRACE_S = 1.0          # after the restore: the last sample of the window may land just after it
JUDGED_KINDS = ("drive-pull", *LINK_KINDS)


@dataclass(frozen=True)
class Seen(AsDict):
    seen: bool
    evidence: tuple[str, ...]      # what was observed (the first few), or nothing
    looked_for: str                # what would have shown the fault
    window_s: tuple[float, float]  # the window, seconds after the inject request: (-clock uncertainty, restore + GRACE_S)

    def criterion(self) -> Criterion:
        if self.seen:
            return Criterion(NAME, Outcome.PASS, "yes", "yes", "==", "", "; ".join(self.evidence), "timeline")
        early = f"{-self.window_s[0]:.3f} s before the inject request (the nodes' clock uncertainty)" \
            if self.window_s[0] < 0 else "the inject request"
        return Criterion(NAME, Outcome.ERROR, "no", "yes", "==", "",
                         f"the fault was not seen: no {self.looked_for} between {early} and "
                         f"{self.window_s[1]:.1f} s after it (the restore + {GRACE_S:g} s); its figures do not show "
                         "a fault", "timeline")


def _before(samples: list, start: float):
    earlier = [s for s in samples if s.t < start and not s.error]
    return earlier[-1] if earlier else None


def _in(samples: list, start: float, end: float) -> list:
    return [s for s in samples if start <= s.t <= end and not s.error]


def md_degraded(samples: list, start: float, end: float) -> list[str]:
    """md arrays degraded or rebuilding in the window that were clean (or absent) in the sample before it."""
    before = _before(samples, start)
    was = {name: md_state(text) for name, text in (before.md if before else {}).items()}
    out = []
    for sample in _in(samples, start, end):
        for name, text in sample.md.items():
            state, earlier = md_state(text), was.get(name)
            if state and state.phase != "clean" and (earlier is None or earlier.phase == "clean"):
                out.append(f"{name} {text} at +{sample.t - start:.1f} s")
                was[name] = state
    return out


def paths_lost(samples: list, start: float, end: float) -> list[str]:
    """Paths live in the sample before the window that left ``live`` (or vanished) in it."""
    before = _before(samples, start)
    live = {name for name, state in (before.paths if before else {}).items() if state == "live"}
    out, told = [], set()
    for sample in _in(samples, start, end):
        for name in sorted(live - told):
            state = sample.paths.get(name, "gone")
            if state != "live":
                out.append(f"load path {name} {state} at +{sample.t - start:.1f} s")
                told.add(name)
    return out


def events_seen(events: list[dict], start: float, end: float, node: str, kind: str, nics: set[str]) -> list[str]:
    """A drive's remove uevent on ``node``; for a link, a netlink DOWN on ``node`` of one of ``nics``."""
    out = []
    for e in events:
        if not start <= e.get("t", -1) <= end or e.get("node") != node:
            continue
        if kind == "drive-pull" and e.get("source") == "uevent" and e.get("action") == "remove" \
                and e.get("subsystem") in ("block", "nvme"):
            out.append(f"{e.get('subsystem')} {e.get('device')} removed on {node} at +{e['t'] - start:.1f} s")
        elif kind != "drive-pull" and e.get("source") == "netlink" and e.get("operstate") == "DOWN" \
                and e.get("device") in nics:
            out.append(f"{e.get('device')} down on {node} at +{e['t'] - start:.1f} s (it carried a load path)")
    return out


def observe(kind: str, start: float, restore: float, samples: list, events: list[dict], drive_node: str,
            load_node: str, nics: set[str], hook: list[str], early_s: float = 0.0) -> Seen | None:
    """The fault's effect in [start, restore + GRACE_S] (None: a kind G4 does not judge, e.g. corrupt). A node's
    kernel event counts from ``early_s`` before the inject request: its stamp is on that node's clock, put on ours
    with an uncertainty (a QMP link cut's netlink DOWN was stamped 4 ms before the request, uncertainty 43 ms)."""
    if kind not in JUDGED_KINDS:
        return None
    end, early = restore + GRACE_S, max(0.0, early_s)
    if kind == "drive-pull":
        found = md_degraded(samples, start, end) + events_seen(events, start - early, end, drive_node, kind, nics)
        looked = (f"md array degraded, drive removal (uevent on {drive_node}) or the hook's status showing the "
                  "drive absent")
    else:
        found = paths_lost(samples, start, end) + events_seen(events, start - early, end, load_node, kind, nics)
        looked = (f"load path leaving live, link down (netlink on {load_node}) of an interface carrying a load path "
                  f"({', '.join(sorted(nics)) or 'none found'}) or the hook's status showing the port down")
    found += hook
    return Seen(bool(found), tuple(found[:5]), looked, (-round(early, 3), round(end - start, 3)))
