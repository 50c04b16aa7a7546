"""JUnit XML a CI can trust: one testcase per gate criterion, counts equal to the gate table.

* Gate runs (``gate g1..g4|all``) give one ``<testsuite>`` per gate verdict, named after the gate and the
  thresholds file that judged it (``G4 stability and sign-off (gates)``), with one ``<testcase>`` per
  criterion named ``G4 / link cut invisible to the workload``: the names never carry a verdict or a time, so
  CI history follows a criterion when its result flips.
* The runs' own verdicts (a selftest's, a soak's, a fault run's) go to one suite of their own, ``steps``,
  never mixed with the gates' counts.
* PASS is a plain testcase, FAIL a ``<failure>``, ERROR an ``<error>``, and NOT RUN a ``<failure>`` too (a
  gate that never ran is not green); ``not_run="skipped"`` makes it ``<skipped>`` for those who want that.
* A criterion a lab-scaled thresholds file leaves out (``[scale.not_judged]``) is a ``<skipped>`` testcase whose
  message says "not judged at lab scale" and why: deliberately not judged, in a suite named after the lab-scaled
  file, never counted as a pass; a criterion judged with a SCALED threshold says so in its message.
* Every suite has ``time`` (the run's duration from its envelope) and ``timestamp`` (its start, UTC).

The output validates against ``tests/fixtures/junit/junit.xsd`` (the Ant/Jenkins JUnit format).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, replace
from pathlib import Path
from xml.etree import ElementTree

from fxprobe.core.verdict import Criterion, NotJudged, Outcome, Verdict
from fxprobe.report.collect import RunView

NOT_RUN_AS = ("failure", "skipped")
STEPS = "steps"


@dataclass(frozen=True)
class Suite:
    name: str
    package: str
    cases: tuple[tuple[str, str, Criterion], ...]      # (classname, name, criterion)
    seconds: float
    started: str
    hostname: str
    left_out: tuple[tuple[str, str, NotJudged], ...] = ()   # (classname, name, why): skipped, at lab scale


def _stamp(text: object) -> dt.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _when(run: RunView) -> tuple[float, str]:
    """(seconds the run took, its start as the XSD's timestamp: UTC, no zone, no fraction)."""
    started, finished = _stamp(run.results.get("started")), _stamp(run.results.get("finished"))
    seconds = max(0.0, (finished - started).total_seconds()) if started and finished else 0.0
    moment = started or finished or dt.datetime.fromtimestamp(run.path.stat().st_mtime, dt.timezone.utc)
    return seconds, moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def _hostname(run: RunView) -> str:
    for key in ("hostname", "host"):
        value = run.results.get(key)
        if isinstance(value, str) and value:
            return value
    return "localhost"


def _label(run: RunView) -> str:
    """Which thresholds judged a gate run: the stem of its gates file (``gates``, ``gates-lab``)."""
    source = (run.results.get("thresholds") or {}).get("source") if isinstance(run.results.get("thresholds"), dict) \
        else None
    if not isinstance(source, str) or not source:
        return "gates"
    stem = "defaults" if source == "built-in defaults" else Path(source).stem
    return "lab-scaled" if run.results["thresholds"].get("lab_scaled") is True and stem in ("gates", "defaults") \
        else stem


def _key(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "x"


def gate_suites(runs: list[RunView]) -> list[Suite]:
    suites = []
    for run in runs:
        seconds, started = _when(run)
        label = _label(run)
        for verdict in run.gates:
            gate = verdict.name.split()[0]
            classname = f"fxprobe.{_key(label)}.{gate}"
            cases = tuple((classname, f"{gate} / {c.name}", c) for c in verdict.criteria)
            left_out = tuple((classname, f"{gate} / {n.name}", n) for n in verdict.not_judged)
            name = verdict.name if verdict.name.endswith(f"({label})") else f"{verdict.name} ({label})"
            suites.append(Suite(name, f"fxprobe.{_key(label)}", cases, seconds, started,
                                _hostname(run), left_out))
    return suites


def _step_name(run: RunView, verdict: Verdict) -> str:
    """A step's stable name: its command and what it was about (a fault's scenario), never its verdict."""
    plan = run.results.get("plan") if isinstance(run.results.get("plan"), dict) else {}
    scenario = plan.get("scenario") if isinstance(plan.get("scenario"), str) else ""
    command = str(run.results.get("command") or run.name)
    return f"{command} {scenario}".strip() if scenario else (verdict.name if verdict.name != "?" else command)


def step_suite(runs: list[RunView]) -> Suite | None:
    cases, seconds, first = [], 0.0, None
    for run in runs:
        if run.gates:
            continue
        took, started = _when(run)
        seconds, first = seconds + took, min(first or started, started)
        for verdict in run.verdicts:
            step = _step_name(run, verdict)
            cases += [(f"fxprobe.{STEPS}.{_key(step)}", f"{step} / {c.name}", c) for c in verdict.criteria]
    if not cases:
        return None
    return Suite(STEPS, f"fxprobe.{STEPS}", tuple(cases), seconds, first or "1970-01-01T00:00:00", "localhost")


def _unique(cases: tuple) -> list[tuple[str, str, Criterion]]:
    """Two criteria of one name in one suite (two runs behind one check) get #2, #3 in order."""
    seen: dict[str, int] = {}
    out = []
    for classname, name, criterion in cases:
        seen[name] = seen.get(name, 0) + 1
        out.append((classname, name if seen[name] == 1 else f"{name} #{seen[name]}", criterion))
    return out


def _tag(outcome: Outcome, not_run: str) -> str | None:
    return {Outcome.FAIL: "failure", Outcome.ERROR: "error", Outcome.NOT_RUN: not_run}.get(outcome)


def _suite_element(root, index: int, suite: Suite, not_run: str) -> dict:
    tags = [_tag(c.outcome, not_run) for _, _, c in suite.cases]
    counts = {"tests": len(tags) + len(suite.left_out), "failures": tags.count("failure"),
              "errors": tags.count("error"), "skipped": tags.count("skipped") + len(suite.left_out)}
    element = ElementTree.SubElement(root, "testsuite", name=suite.name, package=suite.package, id=str(index),
                                     timestamp=suite.started, hostname=suite.hostname, time=f"{suite.seconds:.3f}",
                                     **{k: str(v) for k, v in counts.items()})
    ElementTree.SubElement(element, "properties")
    for (classname, name, criterion), tag in zip(_unique(suite.cases), tags):
        case = ElementTree.SubElement(element, "testcase", name=name, classname=classname, time="0.000")
        if tag == "skipped":
            ElementTree.SubElement(case, "skipped", message=criterion.line())
        elif tag:
            ElementTree.SubElement(case, tag, message=criterion.line(),
                                   type=criterion.outcome.value).text = criterion.line()
        out = ElementTree.SubElement(case, "system-out")
        out.text = criterion.line() + (f"\nevidence: {criterion.evidence}" if criterion.evidence else "")
    for classname, name, left in suite.left_out:
        case = ElementTree.SubElement(element, "testcase", name=name, classname=classname, time="0.000")
        ElementTree.SubElement(case, "skipped", message=left.line())
        ElementTree.SubElement(case, "system-out").text = left.line()
    ElementTree.SubElement(element, "system-out")
    ElementTree.SubElement(element, "system-err")
    return counts


def junit_xml(runs: list[RunView], not_run: str = "failure") -> str:
    """The JUnit file of a report over ``runs`` (see the module doc); ``not_run``: "failure" or "skipped"."""
    if not_run not in NOT_RUN_AS:
        raise ValueError(f"not_run must be one of {NOT_RUN_AS}")
    suites = gate_suites(runs)
    seen: dict[str, int] = {}
    for index, suite in enumerate(suites):           # two gate runs with one thresholds file: #2, #3 in order
        seen[suite.name] = seen.get(suite.name, 0) + 1
        if seen[suite.name] > 1:
            suites[index] = replace(suite, name=f"{suite.name} #{seen[suite.name]}")
    steps = step_suite(runs)
    root = ElementTree.Element("testsuites", name="fxprobe")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for index, suite in enumerate(suites + ([steps] if steps else [])):
        for key, value in _suite_element(root, index, suite, not_run).items():
            totals[key] += value
    root.attrib.update({k: str(v) for k, v in totals.items() if k != "skipped"})
    root.set("time", f"{sum(s.seconds for s in suites) + (steps.seconds if steps else 0):.3f}")
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
