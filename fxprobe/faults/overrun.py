"""A load still running long after its planned end is a finding about the system, not a crash of fxprobe.

fio is time-based: it ends at its runtime unless I/O it has issued never completes (a path that
queues forever, a target that stopped answering). Past its planned end plus ``GRACE_S`` the load
is declared hung: what its processes wait on and the last kernel messages of each node are kept
as evidence, the load is stopped where it runs (TERM, then KILL: fio writes its report and logs
on TERM when its I/O can still complete), and the verdict gets a failed "load ended" criterion.
A hung load is the most visible fault effect there is; it must never read as an fxprobe error.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from fxprobe.core.data import AsDict
from fxprobe.core.verdict import Criterion, Outcome

GRACE_S = 120.0            # after the planned end (recovery included) before the load is declared hung
STOP_WAIT_S = 30.0         # for the load to end once stopped (fio reaps its in-flight I/O first)
KERNEL_LINES = 3           # kernel messages per node quoted in the criterion (all of them are evidence)


@dataclass(frozen=True)
class Overrun(AsDict):
    waited_s: float            # how long it ran past the planned end before it was stopped
    processes: str             # the load's processes when it was declared hung (pid, state, wait channel)
    kernel: dict               # node -> its last kernel messages then
    stopped: str               # what stopping it did
    ended: bool                # whether the load ended once stopped

    def criterion(self) -> Criterion:
        detail = f"processes: {self.processes or 'none listed'}; {self.stopped}"
        detail += "".join(f"; {node} kernel: {' | '.join(lines)}" for node, lines in self.kernel.items() if lines)
        return Criterion("load ended by its planned end + grace", Outcome.FAIL,
                         measured=f"no: still running {self.waited_s:.1f} s after its planned end "
                                  f"(grace {GRACE_S:g} s)", threshold=f"ended within {GRACE_S:g} s", detail=detail,
                         evidence="commands.jsonl: load-hung-ps, load-hung-dmesg-*")


def parse_ps(text: str) -> str:
    """``ps -o pid=,stat=,wchan:32=,comm= -C fio`` as one short line: "pid STAT wchan, ..."."""
    rows = [line.split(None, 3) for line in text.strip().splitlines() if line.strip()]
    return ", ".join(" ".join(row[:3]) for row in rows if len(row) >= 3)


STALL_WORDS = re.compile(r"timeout|timed out|reset|abort|I/O error|blocked for more than", re.IGNORECASE)


def last_kernel_lines(text: str, count: int = KERNEL_LINES) -> list[str]:
    """The last ``count`` kernel messages that name a stall (an I/O timeout, an abort, a reset, an I/O error,
    a blocked task): what a hung load waits on; none of those: the last ``count`` messages."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    stalls = [line for line in lines if STALL_WORDS.search(line)]
    return (stalls or lines)[-count:]


def hang_evidence(runner, load_node, nodes: dict, label: str = "load-hung") -> tuple[str, dict]:
    """What the load's processes wait on (``ps`` on ``load_node``) and each node's last kernel messages,
    every command kept as evidence under ``label``-ps / ``label``-dmesg-<node>."""
    ps = runner.run(["ps", "-o", "pid=,stat=,wchan:32=,comm=", "-C", "fio"], timeout=30, host=load_node,
                    label=f"{label}-ps")
    kernel = {}
    for name, node in nodes.items():
        dmesg = runner.run(["dmesg"], timeout=30, host=node, label=f"{label}-dmesg-{name}")
        kernel[name] = last_kernel_lines(dmesg.stdout) if dmesg.ok else [dmesg.failure("dmesg")]
    return parse_ps(ps.stdout), kernel


def silent_load_line(timeout: float, processes: str, kernel: dict) -> str:
    """The error of a load that never reported before the fault: no verdict, but what it waited on."""
    text = (f"the load did not report within {timeout:.0f} s, before any fault was injected (no verdict: "
            f"the system did not reach a steady state); processes: {processes or 'none listed'}")
    return text + "".join(f"; {node} kernel: {' | '.join(lines)}" for node, lines in kernel.items() if lines)


def wait_or_declare_hung(load, planned_end: float, runner, load_node, nodes: dict, stop, say=print) -> Overrun | None:
    """Wait for ``load`` (a Background) until ``planned_end`` (epoch s) + GRACE_S; None when it ended by then.
    Else keep the evidence, ``stop()`` it where it runs (returns one line), wait STOP_WAIT_S for it, say so.

    ``nodes``: name -> host whose kernel messages are kept (the load's node and the array's)."""
    if load.ended_within(max(0.0, planned_end - time.time()) + GRACE_S):
        return None
    waited = time.time() - planned_end
    say(f"the load is still running {waited:.0f} s after its planned end: keeping what it waits on, then stopping it")
    processes, kernel = hang_evidence(runner, load_node, nodes)
    started = time.monotonic()
    stopped = stop()
    ended = load.ended_within(STOP_WAIT_S)
    if not ended:
        load.stop(timeout=5)
        stopped += f"; its local end stopped after {time.monotonic() - started:.0f} s"
    say(f"load stopped: {stopped}")
    return Overrun(waited_s=waited, processes=processes, kernel=kernel,
                   stopped=stopped, ended=ended)
