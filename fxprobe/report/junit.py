"""JUnit XML of the criteria, for CI."""

from __future__ import annotations

from xml.etree import ElementTree

from fxprobe.report.collect import RunView
from fxprobe.core.verdict import Outcome


def junit_xml(runs: list[RunView]) -> str:
    """One <testsuite> per verdict, one <testcase> per criterion (fail/error/skipped = not run)."""
    root = ElementTree.Element("testsuites", name="fxprobe")
    for run in runs:
        for v in run.verdicts:
            counts = {o: sum(1 for c in v.criteria if c.outcome is o) for o in Outcome}
            suite = ElementTree.SubElement(root, "testsuite", name=v.name, tests=str(len(v.criteria)),
                                           failures=str(counts[Outcome.FAIL]), errors=str(counts[Outcome.ERROR]),
                                           skipped=str(counts[Outcome.NOT_RUN]))
            for c in v.criteria:
                case = ElementTree.SubElement(suite, "testcase", classname=f"{run.name}.{v.name}", name=c.name)
                tag = {Outcome.FAIL: "failure", Outcome.ERROR: "error", Outcome.NOT_RUN: "skipped"}.get(c.outcome)
                if tag:
                    ElementTree.SubElement(case, tag, message=c.line())
                out = ElementTree.SubElement(case, "system-out")
                out.text = c.line() + (f"\nevidence: {c.evidence}" if c.evidence else "")
    ElementTree.indent(root)
    return ElementTree.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
