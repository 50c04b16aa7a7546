"""Which array the G2-G4 evidence measured, and when: each run that touched an array (line efficiency, the
multi-node read-back, the soak, the fault runs) must have measured the array under acceptance, inside the
acceptance period. Without this a vendor could bring G2's stress test from a golden unit and G4's soak from last
year's firmware, and every figure would still pass.

A producer records what it measured in ``array_seen``, one entry per node: a fio load the NVMe subsystem of its
target device as the node's kernel names it (``nqn``, ``serial``, ``transport``, path ``addresses``; {} fields for
a directory or a local disk), line efficiency the peer's address. gates.toml ``[array]`` names the array:

* NQNs and/or addresses named: every entry must show one of those NQNs and only those addresses (a line-efficiency
  peer needs ``addresses``); anything else is FAIL, naming the run, the node and what it measured;
* nothing named: the runs must agree on one array - every run joined to the others by a shared NQN or port (an
  array exports several subsystems on the same ports; a line-efficiency peer is one of them) - and the criterion
  prints the array found and says it was not named;
* in both, a load on a local PCIe drive or on no NVMe subsystem at all (a directory) is FAIL (not an NVMe-oF array),
  and a run that records no ``array_seen`` (an older fxprobe) is NOT RUN: run it again;
* ``period_from`` / ``period_until`` (UTC days): a run that started outside is FAIL, naming its day; without them
  the criterion prints the day each run started.
"""

from __future__ import annotations

from fxprobe.core.verdict import Criterion, Outcome
from fxprobe.gates.config import GateConfig
from fxprobe.gates.engine import Evidence, Judge, Requirement, RunRecord, per_run

NAME = "measured the array under acceptance"
SEEN = "array_seen"


def _entries(run: RunRecord) -> list[dict] | None:
    value = run.get(SEEN, None)
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        return None
    return value


def _shown(entry: dict) -> str:
    """'nqn.X (serial S, tcp) at 10.0.0.1, 10.0.0.2' / 'peer 10.0.0.1' / 'no NVMe subsystem (/mnt/x)'."""
    addresses = ", ".join(entry.get("addresses") or []) or "no address"
    if entry.get("nqn"):
        extra = ", ".join(filter(None, [f"serial {entry['serial']}" if entry.get("serial") else "",
                                        entry.get("transport") or ""]))
        return f"{entry['nqn']}" + (f" ({extra})" if extra else "") + f" at {addresses}"
    if entry.get("addresses") and not entry.get("target"):
        return f"peer {addresses}"
    return f"no NVMe subsystem ({entry.get('target') or 'target unknown'})"


def _keys(entry: dict) -> set[str]:
    return ({f"nqn {entry['nqn']}"} if entry.get("nqn") else set()) | {f"port {a}" for a in entry.get("addresses") or []}


def _found(evidence: Evidence) -> list[tuple[set[str], list[str]]]:
    """The arrays the evidence measured: every run that recorded what it measured (errored ones too: they touched
    it; local PCIe drives left out), grouped by what they share - one NQN or one port is one array (an array
    exports several subsystems on the same ports). Each array: its NQNs and ports ("nqn X", "port Y"), its runs."""
    groups: list[tuple[set[str], list[str]]] = []
    for run in evidence.runs:
        for entry in _entries(run) or []:
            keys = _keys(entry)
            if not keys or entry.get("transport") == "pcie":
                continue
            joined = [g for g in groups if g[0] & keys]
            merged = (keys.union(*(g[0] for g in joined)), [r for g in joined for r in g[1]])
            if run.label not in merged[1]:
                merged[1].append(run.label)
            groups = [g for g in groups if g not in joined] + [merged]
    return groups


def _array_text(keys: set[str]) -> str:
    nqns = sorted(k[4:] for k in keys if k.startswith("nqn "))
    ports = sorted(k[5:] for k in keys if k.startswith("port "))
    return ", ".join(nqns) + (" at " if nqns and ports else "") + (f"port {', '.join(ports)}" if ports else "")


def _declared(config: GateConfig) -> str:
    array = config.array
    parts = ([", ".join(array.nqns)] if array.nqns else []) + ([f"ports {', '.join(array.addresses)}"]
                                                               if array.addresses else [])
    return (f"{array.name}: " if array.name else "") + "; ".join(parts)


def _entry_problems(entry: dict, config: GateConfig, found: list[tuple[set[str], list[str]]]) -> list[str]:
    array, shown = config.array, _shown(entry)
    addresses = set(entry.get("addresses") or [])
    if not entry.get("nqn") and not (addresses and not entry.get("target")):
        return [f"measured {shown}: not an NVMe-oF array"]
    if entry.get("transport") == "pcie":
        return [f"measured {shown}: a local PCIe drive, not an NVMe-oF array"]
    problems = []
    if array.nqns or array.addresses:
        if entry.get("nqn") and array.nqns and entry["nqn"] not in array.nqns:
            problems.append(f"measured {shown}: not the array's NQN ({', '.join(array.nqns)})")
        stray = sorted(addresses - set(array.addresses)) if array.addresses else []
        if stray:
            problems.append(f"reached it at {', '.join(stray)}: not the array's ports ({', '.join(array.addresses)})")
        if not entry.get("nqn") and not array.addresses:
            problems.append(f"measured {shown}: a peer is tied to the array only by its address; name the array's "
                            "ports in [array] addresses")
        return problems
    if len(found) > 1:
        problems.append(f"the evidence measured {len(found)} arrays: " + "; ".join(
            f"{_array_text(keys)} ({', '.join(runs)})" for keys, runs in found))
    return problems


def _period_problem(run: RunRecord, config: GateConfig) -> tuple[str, str]:
    """(the day the run started, a problem when it lies outside the declared period or is unknown)."""
    started = run.results.get("started")
    day = started[:10] if isinstance(started, str) and len(started) >= 10 else ""
    since, until = config.array.period_from, config.array.period_until
    if since is None and until is None:
        return day, ""
    if not day:
        return day, "records no start time: the acceptance period cannot be checked"
    if (since and day < since.isoformat()) or (until and day > until.isoformat()):
        return day, (f"started {day} (UTC): outside the acceptance period {since or '...'} .. {until or '...'}")
    return day, ""


def _judge(config: GateConfig, found: list[tuple[set[str], list[str]]]):
    declared = _declared(config)
    if declared:
        wanted = f"the array named in [array] ({declared})"
    else:
        wanted = "one array across the evidence" + (f" ({_array_text(found[0][0])})" if len(found) == 1 else "")

    def judge(name: str, run: RunRecord) -> Criterion:
        entries = _entries(run)
        if entries is None or not entries:
            return Criterion(name, Outcome.NOT_RUN, None, wanted, "in", "",
                             f"{run.evidence} records no {SEEN} (what array it measured): made by an older fxprobe? "
                             "run it again", run.evidence)
        several = len(entries) > 1
        problems = [f"{e.get('node')}: {p}" if several and e.get("node") else p
                    for e in entries for p in _entry_problems(e, config, found)]
        day, late = _period_problem(run, config)
        problems += [late] if late else []
        measured = "; ".join(dict.fromkeys(_shown(e) for e in entries))
        period = (f"acceptance period {config.array.period_from or '...'} .. {config.array.period_until or '...'}"
                  if config.array.period_from or config.array.period_until else "no acceptance period named")
        context = [f"started {day or '?'} (UTC), {period}"]
        if not declared:
            context.append("the array is not named in gates.toml [array] (nqns, addresses): the runs agree with each "
                           "other only; name it to tie them to the array bought")
        return Criterion(name, Outcome.FAIL if problems else Outcome.PASS, measured, wanted, "in", "",
                         "; ".join(problems + context), run.evidence)
    return judge


def array_judge(*requirements: Requirement) -> Judge:
    """The criterion per run of ``requirements`` (one gate's array-touching runs; none among the evidence: no
    criterion, the gate's own criteria say NOT RUN); "one array" is found across every run of the evidence."""
    def criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
        judge = _judge(config, _found(evidence))
        out = []
        for requirement in requirements:
            if evidence.matching(requirement):
                out += per_run(requirement, f"{NAME} ({requirement.name})", evidence, judge)
        return out
    return Judge(NAME, (), criteria)
