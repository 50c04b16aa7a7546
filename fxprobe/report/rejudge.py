"""A gate run judged again from the evidence in the report: its criteria must be what the gates give over the run
folders it read (the copies bundled beside it, intact) with the thresholds it recorded.

Manifests are hashes, not signatures: whoever rewrites a gate run's criteria (a FAIL made a PASS with a matching
number) and its manifest.json gets a gate run that is intact and self-consistent. Judging again closes that: the
line efficiency run beside it still says 70.5 %, so the gates give FAIL again, and the report names the criterion
whose record differs ("recorded PASS 84.0, judged again FAIL 70.5") and is never ACCEPTED.

A gate run that read inputs which are not run folders (``gate g2 --measured``, ``gate g3 --candidate/--baseline``:
benchmark files) cannot be judged again here; ``gate all`` reads those runs as evidence and is judged again.
"""

from __future__ import annotations

from fxprobe.core.verdict import Criterion
from fxprobe.gates.catalog import evaluate_all
from fxprobe.gates.config import DEFAULTS, NO_SCALE, ArrayTable, GateConfig
from fxprobe.gates.engine import Evidence
from fxprobe.report.collect import recorded_evidence

FILE_INPUTS = ("--measured", "--candidate", "--baseline", "--reference")


def recorded_config(results: dict) -> GateConfig | None:
    """The thresholds a gate run recorded (GateConfig.to_dict), as a config; None when it recorded none. A threshold
    added after the run (g3.readback_working_set_min_gib) takes its default, so the run is judged again by today's
    rules, and a criterion that changes is named."""
    recorded = results.get("thresholds")
    if not isinstance(recorded, dict) or not isinstance(recorded.get("thresholds"), dict):
        return None
    array = recorded.get("array") if isinstance(recorded.get("array"), dict) else {}
    return GateConfig({gate: {**DEFAULTS.get(gate, {}), **values} for gate, values in recorded["thresholds"].items()},
                      str(recorded.get("source", "?")), dict(recorded.get("scale") or NO_SCALE),
                      ArrayTable.model_validate(array, strict=False))


def _value(value) -> object:
    """A figure as compared: numbers by value (JSON gives 50.0 where the gates computed 50), anything else as is."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


def _key(criterion: Criterion) -> tuple:
    return criterion.name, criterion.outcome.value, _value(criterion.measured), _value(criterion.threshold)


def _shown(criterion: Criterion) -> str:
    return f"{criterion.outcome.value.upper()} {criterion.measured_text()}".rstrip()


def differences(gate_run, runs) -> tuple[str, ...]:
    """One line per criterion of ``gate_run`` (a RunView) that its evidence in ``runs``, judged again with its
    recorded thresholds, does not give (and per criterion the evidence gives that it lacks). Nothing when it cannot
    be judged again here: a folder it read is not in the report intact (``untied`` says so), or it read files."""
    argv = gate_run.results.get("argv") if isinstance(gate_run.results.get("argv"), list) else []
    matched = recorded_evidence(gate_run, runs)
    config = recorded_config(gate_run.results)
    if gate_run.problems or config is None or matched is None or any(a in FILE_INPUTS for a in argv):
        return ()
    if None in matched:
        return ()
    evidence = Evidence.from_checked((run.path, run.results) for run in matched)   # hashed once
    again = {v.name: v for v in evaluate_all(evidence, config)}
    out = []
    for stored in gate_run.gates:
        judged = again.get(stored.name)
        if judged is None:
            out.append(f"{stored.name}: the gates give no such gate over its evidence")
            continue
        theirs = {_key(c): c for c in judged.criteria}
        ours = {_key(c): c for c in stored.criteria}
        for key, criterion in ours.items():
            if key not in theirs:
                fresh = next((c for c in judged.criteria if c.name == criterion.name), None)
                out.append(f"{stored.name}: {criterion.name}: recorded {_shown(criterion)}, judged again from its "
                           f"evidence {_shown(fresh) if fresh else 'no such criterion'}")
        out += [f"{stored.name}: {c.name}: judged again from its evidence {_shown(c)}, not in the gate run"
                for key, c in theirs.items() if key not in ours and c.name not in {x.name for x in stored.criteria}]
    return tuple(out)
