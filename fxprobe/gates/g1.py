"""G1's criteria beyond the count: each self-test re-judged against gates.toml ``[g1]``, not against the limits it
was run with, and refused when it did not read this machine's kernel.

What a selftest run records (fxprobe.host.selftest.results_of) and what G1 compares, per run (a fleet run: per node):

    sysfs_root                         "/" (FXPROBE_SYSROOT or a test's tree is not evidence about an array)
    drives[].smart.media_errors        worst drive            <= g1.media_errors_max (0)
    drives[].smart.percent_used        worst drive            <= g1.wear_max_pct (90 %)
    drives[].smart.avail_spare         worst drive            >= max(its spare_thresh, g1.spare_min_pct (10 %))
      a drive reporting 0 % with threshold 0 % (no spare accounting: emulated drives) is not judged there, but
      counted                          those drives           <= g1.spare_unaccounted_max (0; lab-scaled: 24)
    drives[].firmware                  distinct versions      <= g1.firmware_versions_max (1)

So ``selftest --max-media-errors 100000 --max-percent-used 255 --min-spare 0 --allow-mixed-firmware`` passes the
self-test it was asked for, and not the gate: the self-test's own limits are printed beside the gate's.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Callable

from fxprobe.core.verdict import Criterion, Outcome, exact
from fxprobe.gates.config import GateConfig
from fxprobe.gates.engine import Evidence, Judge, Requirement, RunRecord, per_run

SELFTEST = Requirement("selftest run", "fxprobe selftest", commands=("selftest",))
ROOT_NAME = "self-test read this machine's sysfs"


def root_criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
    def judge(name: str, run: RunRecord) -> Criterion:
        root = run.get("sysfs_root", None)
        if root == "/":
            return Criterion(name, Outcome.PASS, "/", "/", "==", "", "", run.evidence)
        if root is None:
            return Criterion(name, Outcome.NOT_RUN, None, "/", "==", "", f"{run.evidence} does not record which sysfs "
                             "root it read (a self-test older than that record): run selftest again", run.evidence)
        return Criterion(name, Outcome.ERROR, str(root), "/", "==", "",
                         f"the self-test read a redirected tree ({root}, FXPROBE_SYSROOT), not this machine's "
                         "kernel: no evidence about an array", run.evidence)
    return per_run(SELFTEST, ROOT_NAME, evidence, judge, "/", "==", not_run=True)


def _smart(run: RunRecord) -> tuple[list[dict], str]:
    """The run's drives that carry a SMART log, or why they cannot be re-judged."""
    drives = run.get("drives", None)
    if not isinstance(drives, list) or not drives or not all(isinstance(d, dict) for d in drives):
        return [], f"{run.evidence} records no drives[] to re-judge"
    unread = [str(d.get("serial")) for d in drives if not isinstance(d.get("smart"), dict)]
    if unread:
        return [], f"no SMART log recorded for {', '.join(unread)} (the self-test's own criterion says why)"
    return drives, ""


def _per_smart_run(name: str, evidence: Evidence, judge: Callable[[str, RunRecord, list[dict]], Criterion],
                   threshold, comparator: str, unit: str = "") -> list[Criterion]:
    """per_run over the self-tests, ``judge(label, run, drives)`` given the drives with their SMART logs; a run
    that recorded none (or not for every drive) is ERROR saying which."""
    def with_drives(label: str, run: RunRecord) -> Criterion:
        drives, problem = _smart(run)
        if not drives:
            return Criterion(label, Outcome.ERROR, None, threshold, comparator, unit, problem, run.evidence)
        return judge(label, run, drives)
    return per_run(SELFTEST, name, evidence, with_drives, threshold, comparator, unit, not_run=True)


def _figure(drive: dict, key: str) -> Fraction:
    return exact(int(drive["smart"][key]) if isinstance(drive["smart"].get(key), str) else drive["smart"].get(key) or 0)


def _own_limit(run: RunRecord, key: str, flag: str) -> str:
    value = run.get(f"limits.{key}", None)
    return f"the self-test ran with {flag} {value}" if value is not None else "the self-test's own limit not recorded"


def _worst(name: str, key: str, comparator: str, gate_key: str, flag: str, own: str, unit: str = ""):
    """A criterion per run: the worst drive's ``smart[key]`` against the gate's ``[g1] gate_key``."""
    def criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
        threshold = config.get("g1", gate_key)

        def judge(label: str, run: RunRecord, drives: list[dict]) -> Criterion:
            try:
                worst = max(drives, key=lambda d: _figure(d, key))
                measured = _figure(worst, key)
            except (TypeError, ValueError) as exc:
                return Criterion(label, Outcome.ERROR, None, threshold, comparator, unit,
                                 f"smart.{key} is not a count: {exc}", run.evidence)
            return Criterion.compare(label, measured, comparator, threshold, unit=unit, evidence=run.evidence,
                                     detail=f"worst drive {worst.get('serial')} ({worst.get('controller')}) of "
                                            f"{len(drives)}; {_own_limit(run, own, flag)}")
        return _per_smart_run(name, evidence, judge, threshold, comparator, unit)
    return Judge(name, (gate_key,), criteria)


def _unaccounted(drive: dict) -> bool:
    return not drive["smart"].get("avail_spare") and not drive["smart"].get("spare_thresh")


def spare_criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
    least = config.get("g1", "spare_min_pct")

    def judge(label: str, run: RunRecord, drives: list[dict]) -> Criterion:
        judged = [d for d in drives if not _unaccounted(d)]
        if not judged:      # nothing to compare: the drives are judged by their count (spare_unaccounted_max)
            most = config.get("g1", "spare_unaccounted_max")
            return Criterion(label, Outcome.PASS if len(drives) <= most else Outcome.FAIL, None, least, ">=", "%",
                             f"none of {len(drives)} drives accounts its spare (0 % with threshold 0 %): "
                             f"{'within' if len(drives) <= most else 'over'} g1.spare_unaccounted_max {most}, "
                             "see 'drives without spare accounting'", run.evidence)
        margin = min(judged, key=lambda d: _figure(d, "avail_spare") - max(_figure(d, "spare_thresh"), Fraction(least)))
        need = max(_figure(margin, "spare_thresh"), exact(least))
        return Criterion.compare(label, _figure(margin, "avail_spare"), ">=", need, unit="%", evidence=run.evidence,
                                 detail=f"closest drive {margin.get('serial')} ({margin.get('controller')}): threshold "
                                        f"{margin['smart'].get('spare_thresh')} %, gate minimum {least:g} %; "
                                        f"{_own_limit(run, 'min_spare_percent', '--min-spare')}")
    return _per_smart_run("available spare (re-judged)", evidence, judge, least, ">=", "%")


def unaccounted_criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
    most = config.get("g1", "spare_unaccounted_max")

    def judge(label: str, run: RunRecord, drives: list[dict]) -> Criterion:
        none = [d for d in drives if _unaccounted(d)]
        named = run.get("limits.emulated_model", None)
        return Criterion.compare(label, len(none), "<=", most, evidence=run.evidence, detail=(
            f"{len(none)} of {len(drives)} drives report 0 % spare with threshold 0 % (no spare left, or no "
            f"accounting, as emulated drives)" + (f"; the self-test named {named!r} emulated" if named else "")
            if none else ""))
    return _per_smart_run("drives without spare accounting", evidence, judge, most, "<=")


def firmware_criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
    most = config.get("g1", "firmware_versions_max")

    def judge(label: str, run: RunRecord) -> Criterion:
        drives = run.get("drives", None)
        if not isinstance(drives, list) or not drives:
            return Criterion(label, Outcome.ERROR, None, most, "<=", "", f"{run.evidence} records no drives[]",
                             run.evidence)
        versions: dict[str, list[str]] = {}
        for d in drives:
            versions.setdefault(str(d.get("firmware") or "?"), []).append(str(d.get("serial")))
        allowed = run.get("limits.allow_mixed_firmware", False)
        return Criterion.compare(label, len(versions), "<=", most, evidence=run.evidence, detail="; ".join(
            f"{fw} x{len(s)}" + (f" ({', '.join(s)})" if len(s) < 4 else "") for fw, s in sorted(versions.items()))
            + ("; the self-test ran with --allow-mixed-firmware" if allowed else ""))
    return per_run(SELFTEST, "firmware versions (re-judged)", evidence, judge, most, "<=", not_run=True)


UNITS = (
    Judge(ROOT_NAME, (), root_criteria),
    _worst("media errors (re-judged)", "media_errors", "<=", "media_errors_max", "--max-media-errors",
           "max_media_errors"),
    _worst("wear (re-judged)", "percent_used", "<=", "wear_max_pct", "--max-percent-used", "max_percent_used", "%"),
    Judge("available spare (re-judged)", ("spare_min_pct", "spare_unaccounted_max"), spare_criteria),
    Judge("drives without spare accounting", ("spare_unaccounted_max",), unaccounted_criteria),
    Judge("firmware versions (re-judged)", ("firmware_versions_max",), firmware_criteria),
)
