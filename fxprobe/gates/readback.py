"""G3's multi-node part: 8 nodes sharing one array read back, against the NIC ceiling.

A ``fxprobe run PROFILE --nodes ...`` result with two or more nodes and direction "read" is judged on
``workload.concurrent`` (:class:`~fxprobe.workload.common_span.Concurrent`, read through its own type): the bytes
all nodes moved while every one of them was running, per second, x 8 / the NIC ceiling of the GATES CONFIG
(``g3.nic_ceiling_gbps``: the array port's line rate) x 100 >= ``g3.nic_ceiling_min_pct``. The run's own
``--ceiling`` and the fraction it recorded are printed, never used: an operator's 10 Gb/s made 13.5 Gb/s "134.8 %".

What the figure stands for is checked first; a run that cannot stand for "nodes sharing one array" is NOT RUN,
each reason printed:

* the target is a block device (an NVMe-oF namespace) read direct: cold (page cache dropped, O_DIRECT) or a
  direct profile - not a directory, not ``cache=warm`` (the page cache is not the array);
* the nodes are distinct machines: none is this machine (``local``, ``local:ADDR``, a loopback address, or a node
  the run recorded as a local host) - eight loopback "nodes" are one host;
* the working set was not scaled down (``--size``/``--scale``: not a full-size run) and is at least
  ``g3.readback_working_set_min_gib`` (``workload.derivation.total_bytes``: a profile written small reads the array's
  DRAM cache, not its drives), and the run's own verdict is not FAIL (repeats disagree, no steady state) - with a
  lab-scaled gates file (``[scale] lab_scaled``) these three are printed beside the verdict instead ("accepted at
  lab scale"), since the QEMU lab's read-back is scaled down by design.

A fraction above 100 % of the ceiling is ERROR: more than the NIC can carry did not come through it. A repeat
whose nodes never all ran at once gives no aggregate: FAIL with the reason. ``nodes sharing one array`` counts the
distinct nodes that are not this machine (>= ``g3.nodes_sharing``).
"""

from __future__ import annotations

import ipaddress

from fxprobe.core.verdict import Criterion, Outcome, deciding_places, exact, format_fixed, format_number
from fxprobe.gates.config import GateConfig
from fxprobe.gates.engine import MISSING, Evidence, Requirement, RunRecord, did_not_run, per_run
from fxprobe.workload.common_span import Concurrent

MULTI_NODE = Requirement("multi-node read-back run", "fxprobe run PROFILE --nodes host1,...,host8 (a read profile)",
                         commands=("run",), where=(("workload.direction", "read"),),
                         at_least=(("workload.nodes", 2),))
CEILING = "multi-node read-back vs NIC ceiling"
NODES = "nodes sharing one array"
CONCURRENT = "workload.concurrent"
SCALED_NOTE = "working set scaled down"


def _is_local(name: str, kinds: dict) -> bool:
    """A node on the machine that ran fio: recorded as a local host, named local[:ADDR], or a loopback address."""
    if kinds.get(name) == "local" or name in ("local", "localhost") or name.startswith("local:"):
        return True
    try:
        return ipaddress.ip_address(name.rsplit(":", 1)[0] if name.count(":") == 1 else name).is_loopback
    except ValueError:
        return False


def node_split(run: RunRecord) -> tuple[list[str], list[str]]:
    """(distinct nodes that are other machines, nodes that are not: this machine or listed twice)."""
    names = run.get("workload.nodes", [])
    kinds = run.get("workload.node_kinds", {})
    kinds = kinds if isinstance(kinds, dict) else {}
    remote, left_out, seen = [], [], set()
    for name in (str(n) for n in (names if isinstance(names, list) else [])):
        if _is_local(name, kinds) or name.lower() in seen:
            left_out.append(name)
        else:
            remote.append(name)
        seen.add(name.lower())
    return remote, left_out


def _failed_own(run: RunRecord) -> str:
    failed = [c.get("name", "?") for c in run.get("verdict.criteria", []) or []
              if isinstance(c, dict) and c.get("outcome") in ("fail", "error")]
    return f"the run's own verdict is {run.outcome.upper()}" + (f" ({', '.join(map(str, failed))})" if failed else "")


def fitness(run: RunRecord, config: GateConfig) -> tuple[list[str], list[str]]:
    """(why the run cannot stand for 8 nodes sharing the array: NOT RUN; what a lab-scaled file accepts, printed)."""
    blocking, accepted = [], []
    kind = run.get("workload.target_check.kind", None)
    derivation = run.get("workload.derivation", {})
    derivation = derivation if isinstance(derivation, dict) else {}
    if kind != "block":
        blocking.append(f"target {run.get('workload.target', '?')} is a {kind or 'target the run did not record'}, "
                        "not a block device (the array's NVMe-oF namespace)")
    if not (derivation.get("cold") is True or derivation.get("direct") is True):
        blocking.append("reads not direct: cache=warm or a buffered profile (the page cache is not the array)"
                        if derivation else "the run records no derivation (cache, direct I/O)")
    _, left_out = node_split(run)
    if left_out:
        blocking.append(f"nodes {', '.join(left_out)} are this machine (local, loopback) or listed twice: not "
                        "distinct nodes sharing the array")
    scaled = derivation.get("scaled") is True or any(SCALED_NOTE in str(n) for n in run.get("workload.notes", []) or [])
    soft = ([f"{SCALED_NOTE} (--size/--scale): not a full-size run"] if scaled else []) + \
        ([_failed_own(run)] if run.outcome in (Outcome.FAIL.value, Outcome.NOT_RUN.value) else []) + \
        _small_working_set(derivation, config)
    if config.lab_scaled:
        accepted += [f"accepted at lab scale only ({config.source} is lab-scaled): {text}" for text in soft]
    else:
        blocking += soft
    return blocking, accepted


def _small_working_set(derivation: dict, config: GateConfig) -> list[str]:
    """Why the data read back is too little to stand for the array's drives: a working set an array's DRAM cache
    holds reads at the cache's speed (none: it is large enough)."""
    need = config.get("g3", "readback_working_set_min_gib")
    total = derivation.get("total_bytes")
    where = f"g3.readback_working_set_min_gib, {config.source}"
    if not isinstance(total, (int, float)) or isinstance(total, bool) or total < 0:
        return [f"the run records no working set (workload.derivation.total_bytes: {total!r}; need >= "
                f"{format_number(need)} GiB, {where})"]
    gib = exact(total) / 2 ** 30
    if gib >= exact(need):
        return []
    shown = format_fixed(gib, deciding_places(gib, ">=", exact(need)))
    return [f"working set {shown} GiB ({int(total):,} B) < {format_number(need)} GiB ({where}): an array's DRAM "
            "cache can hold it, so the read-back measures the cache, not the drives"]


def ceiling_criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
    """Every multi-node read-back run: what its nodes moved while all of them ran, against the configured ceiling."""
    threshold = config.get("g3", "nic_ceiling_min_pct")
    return per_run(MULTI_NODE, CEILING, evidence, lambda name, run: _ceiling_one(name, run, threshold, config),
                   threshold, ">=", "%")


def _ceiling_one(name: str, run: RunRecord, threshold: float, config: GateConfig) -> Criterion:
    def problem(outcome: Outcome, text: str) -> Criterion:
        return Criterion(name, outcome, None, threshold, ">=", "%", text, run.evidence)

    data = run.get(CONCURRENT)
    if data is MISSING or data is None:
        if run.outcome == Outcome.NOT_RUN.value:
            return did_not_run(name, run, threshold, ">=", "%")
        return problem(Outcome.ERROR, f"{run.evidence} has no {CONCURRENT!r}: written by an fxprobe that judged the "
                       "sum of the nodes' own rates (nodes run one after another count as if at once); run it again")
    try:
        record = Concurrent.from_dict(data)
    except (TypeError, ValueError) as exc:
        return problem(Outcome.ERROR, f"{run.evidence}: {CONCURRENT} is malformed ({exc})")
    blocking, accepted = fitness(run, config)
    unfit = "not a read-back of distinct nodes sharing the array: " + "; ".join(blocking)
    if record.aggregate_bps is None:       # the nodes never all ran at once: FAIL whatever else the run was
        return ceiling_figure(name, run, record, threshold, config, [unfit] if blocking else accepted)
    if blocking:
        return problem(Outcome.NOT_RUN, unfit)
    return ceiling_figure(name, run, record, threshold, config, accepted)


def ceiling_figure(name: str, run: RunRecord, record: Concurrent, threshold: float, config: GateConfig,
                   accepted: list[str] = ()) -> Criterion:
    """The aggregate x 8 / the configured ceiling, recomputed from the record (its recorded fraction not used)."""
    gbps_ceiling = config.get("g3", "nic_ceiling_gbps")
    against = f"the NIC ceiling {format_number(gbps_ceiling)} Gb/s (g3.nic_ceiling_gbps, {config.source})"
    own = (f"the run's own --ceiling {format_number(record.ceiling_bps / 1e9)} Gb/s is not used"
           if record.ceiling_bps else "the run was given no ceiling of its own")
    context = [f"profile {run.get('workload.profile', '?')}", *accepted]
    if record.aggregate_bps is None:
        return Criterion(name, Outcome.FAIL, None, threshold, ">=", "%", "; ".join([record.line(), *context]),
                         run.evidence)
    try:
        gbps = exact(record.aggregate_bps) * 8 / 10 ** 9
    except ValueError as exc:
        return Criterion(name, Outcome.ERROR, None, threshold, ">=", "%", f"{CONCURRENT}.aggregate_bps {exc}",
                         run.evidence)
    measured = gbps / exact(gbps_ceiling) * 100
    line = record.line(deciding_places(gbps, ">=", exact(threshold) * exact(gbps_ceiling) / 100))
    if measured > 100:
        shown = format_fixed(measured, deciding_places(measured, "<=", 100, "%"), "%")
        return Criterion(name, Outcome.ERROR, float(measured), threshold, ">=", "%",
                         f"{shown} of {against}: more than the NIC can carry did not come through it (page cache, a "
                         f"local target, or the wrong ceiling); {own}; {line}", run.evidence)
    return Criterion.compare(name, measured, ">=", threshold, unit="%", evidence=run.evidence,
                             detail="; ".join([line, f"against {against}", own, *context]))


def nodes_criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
    """The distinct nodes of each multi-node read-back that are other machines than the one that ran fio."""
    need = config.get("g3", "nodes_sharing")

    def judge(name: str, run: RunRecord) -> Criterion:
        remote, left_out = node_split(run)
        detail = (f"not counted: {', '.join(left_out)} (this machine, loopback, or listed twice)" if left_out else
                  f"distinct nodes: {', '.join(remote)}")
        return Criterion.compare(name, len(remote), ">=", need, detail=detail, evidence=run.evidence)
    return per_run(MULTI_NODE, NODES, evidence, judge, need, ">=")
