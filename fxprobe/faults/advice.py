"""Timeout advice for a visible link fault: the NVMe timeouts in force beside the stall, and what to try.

How the Linux NVMe host reacts when a path's link dies (drivers/nvme/host, 6.x):
- the dead path is noticed by the keep-alive timer (``kato`` s; a keep-alive is sent every kato/2)
  or by an I/O timeout; only then does error recovery cancel the I/O in flight on that path and
  native multipath re-queue it on another live path. So with two paths the stall is about the
  keep-alive detection time, seconds with the default kato (5 s on fabrics), not zero;
- while no path is live, I/O is queued, until ``fast_io_fail_tmo`` (off by default: queued until
  ``ctrl_loss_tmo``, 600 s by default) fails it; the controller retries every ``reconnect_delay`` s;
- ``iopolicy`` numa sends all I/O of a CPU node down one path; round-robin spreads it.

Run as ``python -m fxprobe.faults.advice`` on a host to print its timeouts as JSON.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field

from fxprobe.core.data import AsDict
from fxprobe.core.kernel import NVME_CLASS, NVME_SUBSYSTEM_CLASS
from fxprobe.core.verdict import format_number

ADVISED = {"keep_alive_tmo": 2, "reconnect_delay": 1, "ctrl_loss_tmo": 60, "fast_io_fail_tmo": 5,
           "iopolicy": "round-robin"}


@dataclass(frozen=True)
class Advice(AsDict):
    stall_s: float | None
    live_paths: int
    in_force: dict                 # controller -> {kato, ctrl_loss_tmo, reconnect_delay, fast_io_fail_tmo, state}
    iopolicy: str | None
    lines: tuple[str, ...]
    try_next: dict = field(default_factory=dict)


def read_timeouts(nqn: str | None = None) -> dict:
    """Controllers (of ``nqn``) with their timeouts and state, and the subsystem iopolicy, from sysfs."""
    from fxprobe.tools import nvme_sysfs
    controllers = {c.name: {**c.timeouts, "state": c.state, "address": c.address}
                   for c in nvme_sysfs.controllers() if c.transport != "pcie" and (nqn is None or c.subsysnqn == nqn)}
    policies = [s.iopolicy for s in nvme_sysfs.subsystems() if nqn is None or s.nqn == nqn]
    return {"controllers": controllers, "iopolicy": policies[0] if policies else None}


def _num(value) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None   # "off" and missing values


def advise(timeouts: dict, stall_s: float | None, live_paths: int, kind: str = "link-down") -> Advice:
    controllers = timeouts.get("controllers", {})
    iopolicy = timeouts.get("iopolicy")
    lines = []
    for name, t in sorted(controllers.items()):
        lines.append(f"{name}: kato {t.get('kato', '?')} s, ctrl_loss_tmo {t.get('ctrl_loss_tmo', '?')} s, "
                     f"reconnect_delay {t.get('reconnect_delay', '?')} s, fast_io_fail_tmo "
                     f"{t.get('fast_io_fail_tmo', '?')}{' s' if _num(t.get('fast_io_fail_tmo')) is not None else ''}")
    lines.append(f"iopolicy {iopolicy or '?'}; live paths before the fault: {live_paths}")
    katos = [k for t in controllers.values() if (k := _num(t.get("kato"))) is not None]
    kato = max(katos) if katos else None
    stall = format_number(stall_s, "s") if stall_s is not None else "no measurement"
    try_next = {}
    if live_paths >= 2:
        if kato is not None:
            lines.append(f"stall {stall} with {live_paths} paths: failover waits for the dead path to be "
                         f"noticed (keep-alive timeout kato {format_number(kato)} s, up to about 2 x kato "
                         f"before error recovery re-queues the I/O on the other path)")
        if kato is None or kato > ADVISED["keep_alive_tmo"]:
            try_next["keep_alive_tmo"] = ADVISED["keep_alive_tmo"]
            lines.append(f"try: reconnect with --keep-alive-tmo={ADVISED['keep_alive_tmo']} (notices a dead path "
                         f"sooner; too low risks false resets on a busy target)")
        elif stall_s is not None and stall_s > 2 * kato:
            try_next["keep_alive_tmo"] = 1
            lines.append(f"the stall is longer than 2 x kato ({format_number(2 * kato)} s): the rest is error "
                         f"recovery (queue teardown, TCP timeouts); try --keep-alive-tmo=1 and watch for false "
                         f"resets; on real NICs a link-down is seen at once, a silent path only through kato")
        if iopolicy == "numa":
            try_next["iopolicy"] = ADVISED["iopolicy"]
            lines.append(f"try: echo round-robin > {NVME_SUBSYSTEM_CLASS}/<subsys>/iopolicy "
                         "(both paths carry I/O, so the loss of one is seen at once)")
        delays = [d for t in controllers.values() if (d := _num(t.get("reconnect_delay"))) is not None]
        if not delays or max(delays) > ADVISED["reconnect_delay"]:
            try_next["reconnect_delay"] = ADVISED["reconnect_delay"]
            lines.append(f"try: --reconnect-delay={ADVISED['reconnect_delay']} (the path comes back sooner "
                         f"after restore)")
    else:
        lines.append(f"stall {stall} with a single path: there is no other path to fail over to; I/O waits "
                     f"until the link returns, or fails after fast_io_fail_tmo / ctrl_loss_tmo")
        try_next["paths"] = 2
        lines.append("try: connect a second path (another port / NIC) so a link fault can be invisible")
        fast = [t.get("fast_io_fail_tmo") for t in controllers.values()]
        if any(_num(f) is None for f in fast):
            try_next["fast_io_fail_tmo"] = ADVISED["fast_io_fail_tmo"]
            lines.append(f"try: echo {ADVISED['fast_io_fail_tmo']} > {NVME_CLASS}/<ctrl>/fast_io_fail_tmo "
                         "(fails I/O instead of hanging it when no path is left: visible, but bounded)")
    return Advice(stall_s, live_paths, controllers, iopolicy, tuple(lines), try_next)


if __name__ == "__main__":
    json.dump(read_timeouts(sys.argv[1] if len(sys.argv) > 1 else None), sys.stdout)
    sys.stdout.write("\n")
