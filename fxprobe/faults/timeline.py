"""What happened around the fault: NVMe path states and md state sampled through the run,
and kernel uevents / netlink link changes as they came.

``Sampler`` polls a snapshot function every few seconds in a thread. The event listener runs on
the node that sees the events (``python -m fxprobe.faults.timeline events --seconds N``): it
prints one JSON line per kernel uevent (block, nvme, net) and per rtnetlink link change, with
epoch seconds; it needs no udev daemon (kernel uevents come straight from netlink).
"""

from __future__ import annotations

import json
import select
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Callable

from fxprobe.core.errors import FxprobeError


@dataclass(frozen=True)
class Sample:
    t: float                    # epoch s (local clock of the machine running fxprobe)
    paths: dict                 # controller -> state (e.g. live, connecting)
    md: dict                    # md name -> "health action progress"
    error: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def lab_snapshot(lab, load_host: str, nqn: str | None) -> Callable[[], tuple[dict, dict]]:
    """Path states of ``nqn`` on the load host and md state on the array (quick shell views)."""
    from fxprobe.faults.labprep import array_view, host_view

    def snap() -> tuple[dict, dict]:
        paths = {p["controller"]: p["state"] for s in host_view(lab, load_host)
                 if nqn is None or s["nqn"] == nqn for p in s["paths"]}
        return paths, {m["name"]: md_text(m) for m in array_view(lab)["md"]}
    return snap


def merge_node_samples(host: list[tuple[float, list]], array: list[tuple[float, dict]], nqn: str | None,
                       host_offset: float, array_offset: float) -> list[Sample]:
    """Samples (local clock) from in-guest sampling loops: path states from the load host, each
    joined with the latest md state the array had printed by then."""
    md_by_time = sorted((t - array_offset, {m["name"]: md_text(m) for m in view["md"]}) for t, view in array)
    out = []
    for t, subsystems in sorted(host, key=lambda item: item[0]):
        local = t - host_offset
        paths = {p["controller"]: p["state"] for sub in subsystems if nqn is None or sub["nqn"] == nqn
                 for p in sub["paths"]}
        md = {}
        for when, state in md_by_time:
            if when <= local:
                md = state
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
    return text


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


# -- the listener (runs on the node) ---------------------------------------------------------------
def listen(seconds: float, out=sys.stdout) -> None:
    import pyudev
    from pyroute2 import IPRoute
    monitor = pyudev.Monitor.from_netlink(pyudev.Context(), source="kernel")
    for subsystem in ("block", "nvme", "net"):
        monitor.filter_by(subsystem)
    monitor.start()
    ipr = IPRoute()
    ipr.bind()
    end = time.monotonic() + seconds
    print(json.dumps({"t": time.time(), "source": "listener", "text": "started"}), file=out, flush=True)
    while time.monotonic() < end:
        ready, _, _ = select.select([monitor.fileno(), ipr.fileno()], [], [], max(0.05, end - time.monotonic()))
        now = time.time()
        if monitor.fileno() in ready:
            device = monitor.poll(timeout=0)
            while device is not None:
                print(json.dumps({"t": now, "source": "uevent", "action": device.action,
                                  "subsystem": device.subsystem, "device": device.sys_name}), file=out, flush=True)
                device = monitor.poll(timeout=0)
        if ipr.fileno() in ready:
            for message in ipr.get():
                if message.get("event") in ("RTM_NEWLINK", "RTM_DELLINK"):
                    print(json.dumps({"t": now, "source": "netlink", "action": message["event"],
                                      "device": message.get_attr("IFLA_IFNAME"),
                                      "operstate": message.get_attr("IFLA_OPERSTATE")}), file=out, flush=True)
    ipr.close()


def main(argv: list[str] | None = None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m fxprobe.faults.timeline")
    sub = parser.add_subparsers(dest="command", required=True)
    events = sub.add_parser("events")
    events.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    listen(args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
