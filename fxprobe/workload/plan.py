"""Everything decided before fio runs: the profile's derivation, the target checked on every node, and the job
files (``fxprobe run --dry-run`` prints it; ``run_profile`` and the soak run it).

Planning touches no load and no log: it imports none of the log analysis (polars, pandas), so a node that only
plans and starts fio - a soak in a lab guest, where every import runs under emulation - starts in seconds.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Sequence

from fxprobe.core.errors import BadInput
from fxprobe.core.hosts import LOCAL, LocalHost
from fxprobe.core.runner import Runner
from fxprobe.host.safety import TargetCheck, check_target
from fxprobe.tools.blockdev import RemoteSystemView, SystemView
from fxprobe.tools.fio import Node
from fxprobe.workload.jobfile import Target, job_text, region_bytes
from fxprobe.workload.profiles import Derivation, Profile, derive, human_bytes, load_profile


def resolve_target(d: Derivation, target: str, *, nodes: Sequence[Node], allow: tuple[str, ...],
                   view: SystemView | None, runner: Runner | None = None,
                   strict: bool = True, layout: bool = True) -> tuple[Target, TargetCheck, tuple[dict, ...]]:
    """Check the target on every node before anything touches it (a remote node answers the
    same sysfs/mountinfo questions over its host); BadInput/UnsafeTarget when it cannot be used.
    A read profile on a block device with layout=False writes nothing, so the device needs no
    allow-listing (a namespace other users share). Returns the first node's check, and what array each node's
    target is (``array_seen``: the node, the target and its NVMe subsystem, as the gates read it)."""
    is_block = target.startswith("/dev/")
    if not layout and not is_block:
        raise BadInput(f"--no-layout applies to a block device; {target} is a directory whose files "
                       "must be laid out first")
    if d.block_target and not is_block:
        raise BadInput(f"profile {d.profile} uses the raw-block backend: --target must be a block device "
                       f"under /dev, not {target}")
    def look(node: Node) -> TargetCheck:
        local = isinstance(node.host, LocalHost)
        node_view = (view or SystemView()) if local else RemoteSystemView(runner or Runner(None), node.host)
        return check_target(target, destructive=d.writes or (is_block and layout), allow=allow, view=node_view)

    with ThreadPoolExecutor(max_workers=max(1, min(len(nodes), 8))) as pool:   # nodes answer side by side
        looked = [pool.submit(look, node) for node in nodes]
    checks = []
    for node, future in zip(nodes, looked):        # judged in node order: the first refusal is the one raised
        local = isinstance(node.host, LocalHost)
        check = future.result()
        if not check.safe and not local:
            check = replace(check, path=f"{node.name}:{target}")
        if strict or check.safe:
            check.require_safe()
        else:
            return Target(target, is_block), check, _seen(nodes, checks + [check], target)   # dry run: the refusal
        checks.append(check)
        if is_block:
            need = region_bytes(d)
            if check.size_bytes is not None and need > check.size_bytes:
                raise BadInput(f"target {target}{'' if local else ' on ' + node.name}: the working set "
                               f"({human_bytes(need)}) does not fit on the device ({human_bytes(check.size_bytes)})",
                               hint="use --scale or --size")
    if not is_block and all(isinstance(n.host, LocalHost) for n in nodes):
        free = shutil.disk_usage(target).free
        if d.total_bytes * len(nodes) > free:
            raise BadInput(f"target {target}: the working set ({human_bytes(d.total_bytes * len(nodes))}) "
                           f"does not fit in {human_bytes(free)} free", hint="use --scale or --size")
    return Target(target, is_block), checks[0], _seen(nodes, checks, target)


def _seen(nodes: Sequence[Node], checks: Sequence[TargetCheck], target: str) -> tuple[dict, ...]:
    return tuple({"node": node.name, "target": target, **check.subsystem} for node, check in zip(nodes, checks))


@dataclass(frozen=True)
class Plan:
    """Everything decided before fio runs: shown by --dry-run, used by run_profile."""

    derivation: Derivation
    target: Target
    check: TargetCheck
    nodes: tuple[Node, ...]
    layout_job: str | None   # None: read what is on the device, write nothing
    measure_job: str
    array_seen: tuple[dict, ...] = ()   # per node: the target's NVMe subsystem (resolve_target)

    def lines(self) -> list[str]:
        return (list(self.derivation.lines) + self.check.lines()
                + [f"nodes: {', '.join(n.name for n in self.nodes)}", ""]
                + (["layout job (not timed):"] + self.layout_job.splitlines()[-20:] if self.layout_job
                   else ["layout: none (reads the data already on the device; nothing is written)"])
                + ["", "measured job:"] + self.measure_job.splitlines())

    def to_dict(self) -> dict:
        return {"derivation": self.derivation.to_dict(), "target": self.target.to_dict(),
                "target_check": self.check.to_dict(), "nodes": [n.to_dict() for n in self.nodes],
                "layout_job": self.layout_job, "measure_job": self.measure_job, "array_seen": list(self.array_seen)}


def plan_run(profile: Profile | str, target: str, *, nodes: Sequence[Node] | None = None,
             repeats: int | None = None, scale: float = 1.0, max_bytes: int | None = None,
             runtime: float | None = None, ramp: float | None = None, overrides: dict | None = None,
             allow: tuple[str, ...] = (), view: SystemView | None = None,
             runner: Runner | None = None, strict: bool = True, layout: bool = True) -> Plan:
    """Derive the job and check the target; nothing is written anywhere. With strict=False a
    refused target is returned in the plan (for --dry-run) instead of raising."""
    if isinstance(profile, str):
        profile = load_profile(profile)
    d = derive(profile, scale=scale, max_bytes=max_bytes, runtime=runtime, ramp=ramp,
               repeats=repeats, overrides=overrides)
    node_list = tuple(nodes) if nodes else (Node(LOCAL, "local"),)
    the_target, check, seen = resolve_target(d, target, nodes=node_list, allow=allow, view=view, runner=runner,
                                             strict=strict, layout=layout)
    return Plan(d, the_target, check, node_list,
                job_text(d, the_target, mode="layout") if layout and not d.writes else None,
                job_text(d, the_target), seen)
