"""A small declarative gate engine that reads only run directories.

A gate is a list of :class:`Check` declarations. Each check names the run it needs
(:class:`Requirement`: which ``results.json`` ``command`` produced it, or which field it
holds), the dotted field to read from that run's ``results.json``, a comparator and the
threshold key in :class:`~fxprobe.gates.config.GateConfig`. The engine turns every
check into a :class:`~fxprobe.core.verdict.Criterion`:

* no matching run among the evidence -> ``not run``, naming the missing run and the
  command that makes it (:func:`absent`, the one place that sentence is written);
* the run ended in error (its envelope's outcome ``error``: a failed, crashed or killed command)
  -> ``error`` with the run's reason and exit code, whatever figures it left; an errored run
  counts for every requirement its command could have fed (a field it did not get to write
  does not exclude it);
* the run exists but did not run (its own outcome ``not run``) -> ``not run`` + its reason;
* the run lacks the field, or the value is not a number -> ``error``;
* otherwise ``pass``/``fail`` with measured, threshold, margin and the evidence file.

A folder given as evidence without a ``results.json`` (a command killed before it began) is
an ``error`` criterion in every gate: nobody can say which criteria it would have fed.

A check applies to *every* matching run (G1: every array must pass its self-test).

Each unit a gate judges (a Check, an OutcomeCheck, a :class:`Judge`) names the thresholds it reads (``keys``).
With a lab-scaled config, a unit whose every key the file lists in ``[scale.not_judged]`` is not evaluated: the
verdict carries a NotJudged entry with the file's reason instead (never counted, never a pass), and every
criterion judged with a scaled threshold says ``SCALED gate.key = value (the buyer's value): why`` in its detail.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Iterable

from fxprobe.gates.config import GateConfig
from fxprobe.core.rundir import RESULTS, RunDir, RunResults, altered_criterion
from fxprobe.core.verdict import Criterion, NotJudged, Outcome, Verdict, counts_text, exact, format_number

MISSING = object()  # lookup() result for a field that is not there


def lookup(data: Any, dotted: str, default: Any = MISSING) -> Any:
    """Follow a dotted path; a missing step returns ``default``.

    ``a.b`` (mapping keys), ``a.0`` (list index), ``criteria.name=drives recognized``
    (the first list item whose ``name`` equals the text), and ``x|y`` (the first of
    several paths that exists).
    """
    if "|" in dotted:
        for alternative in dotted.split("|"):
            found = lookup(data, alternative, MISSING)
            if found is not MISSING:
                return found
        return default
    node = data
    for part in dotted.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, list) and "=" in part:
            key, _, text = part.partition("=")
            node = next((item for item in node if isinstance(item, dict) and str(item.get(key)) == text), MISSING)
            if node is MISSING:
                return default
        else:
            return default
    return node


@dataclass(frozen=True)
class RunRecord(RunResults):
    """One run directory's results.json, as the gates see it."""

    node: str | None = None          # the node a fleet run ran this sub-run on (its --nodes name)

    @property
    def array(self) -> str | None:
        """Which node (array) the run is about: its fleet node name, else the host name it recorded."""
        node = self.node or self.results.get("node")
        return node if isinstance(node, str) and node else None

    @property
    def label(self) -> str:
        """How a criterion names the run when several match: the node of a fleet sub-run, else its folder."""
        return self.node or self.path.name

    @property
    def evidence(self) -> str:
        return str(self.path / RESULTS)

    @property
    def errored(self) -> bool:
        return self.outcome == Outcome.ERROR.value

    def error_reason(self) -> str:
        """Why the run ended in error, as its envelope says (reason, exit code)."""
        reason = self.results.get("reason")
        reason = reason if isinstance(reason, str) and reason else "the run's outcome is error"
        code = self.results.get("exit_code")
        return f"{self.path.name}: {reason}" + (f" (exit {code})" if isinstance(code, int) else "")

    def get(self, dotted: str, default: Any = MISSING) -> Any:
        return lookup(self.results, dotted, default)


def fleet_runs(path: Path, results: dict, altered: list | None = None) -> list[RunRecord] | None:
    """A fleet run (``--nodes``: a ``nodes`` list) stands for its sub-runs ``nodes/<node>/``, one per node; a
    node that left no sub-run (unreachable, fxprobe failed there) is an errored run with the fleet's reason. A
    sub-run that does not match its own manifest feeds nothing: it goes to ``altered`` (folder, problems)."""
    nodes = results.get("nodes")
    if not isinstance(nodes, list) or not nodes or not all(isinstance(n, dict) and n.get("node") for n in nodes):
        return None
    runs = []
    for entry in nodes:
        node = str(entry["node"])
        folder = path / entry["run_dir"] if isinstance(entry.get("run_dir"), str) else None
        if folder is not None and (folder / RESULTS).is_file() and path.resolve() in folder.resolve().parents:
            sub = RunDir.open(folder)
            results_of_node, problems = sub.results(), sub.integrity()
            if problems:
                (altered if altered is not None else []).append((folder, tuple(problems)))
                continue
            runs.append(RunRecord(folder, results_of_node, node))
        else:
            runs.append(RunRecord(path / "nodes" / node, {
                "command": results.get("command"), "outcome": Outcome.ERROR.value, "node": node,
                "reason": str(entry.get("reason") or "the node left no sub-run")}, node))
    return runs


@dataclass(frozen=True)
class Evidence:
    runs: tuple[RunRecord, ...] = ()
    unfinished: tuple[Path, ...] = ()      # run folders without results.json: began nothing we can read
    altered: tuple[tuple[Path, tuple[str, ...]], ...] = ()   # folders unlike their manifest: (folder, problems)

    @classmethod
    def from_paths(cls, paths: Iterable[Path]) -> "Evidence":
        """Every folder is checked against its manifest first (RunDir.integrity): one that differs feeds no
        criterion and is an ERROR criterion of its own, naming the files."""
        runs, unfinished, altered = [], [], []
        for path in paths:
            run = RunDir.open(Path(path))
            if not (run.path / RESULTS).exists():
                unfinished.append(run.path)
                continue
            results = run.results()          # a damaged results.json is bad input (exit 2) before anything else
            problems = run.integrity()
            if problems:
                altered.append((run.path, tuple(problems)))
                continue
            runs += fleet_runs(run.path, results, altered) or [RunRecord(run.path, results)]
        return cls(tuple(runs), tuple(unfinished), tuple(altered))

    @classmethod
    def from_checked(cls, folders: Iterable[tuple[Path, dict]]) -> "Evidence":
        """The evidence of folders already checked against their manifests (path, results): a report's bundled
        runs, hashed once when read (report.collect.read_run), not again here; a fleet run's sub-runs are
        checked as from_paths checks them."""
        runs, altered = [], []
        for path, results in folders:
            runs += fleet_runs(Path(path), results, altered) or [RunRecord(Path(path), results)]
        return cls(tuple(runs), (), tuple(altered))

    def with_runs(self, runs: Iterable[RunRecord]) -> "Evidence":
        """The same evidence with other runs (a gate's own comparison in place of earlier ones); its unreadable
        and altered folders stay."""
        return replace(self, runs=tuple(runs))

    def unfinished_criteria(self) -> list[Criterion]:
        """An ERROR criterion per folder that fed nothing: no results.json, or unlike its manifest."""
        return [Criterion(f"evidence {path.name} readable", Outcome.ERROR, detail=f"{path}: no {RESULTS} (the "
                          "command was killed before it began); it may have fed any criterion: run it again",
                          evidence=str(path)) for path in self.unfinished] + \
            [altered_criterion(path, list(problems)) for path, problems in self.altered]

    def matching(self, requirement: "Requirement") -> list[RunRecord]:
        return [run for run in self.runs if requirement.matches(run)]

    @staticmethod
    def record(paths: Iterable[Path]) -> list[dict]:
        """What a gate run records of each folder it read (results ``evidence_runs``): path, name and the SHA-256
        of its manifest.json (None: it has none), by which a report finds each one bundled, intact."""
        return [{"path": str(path), "name": Path(path).name, "manifest_sha256": RunDir(Path(path)).manifest_sha256()}
                for path in paths]

    def names(self) -> list[str]:
        return [f"{run.path.name} ({run.command or '?'})" for run in self.runs]


@dataclass(frozen=True)
class Requirement:
    """Which run a check reads: by ``results.json`` command, and/or by a field it holds.

    ``where`` narrows further: ``(("plan.kind", "drive-pull"),)`` keeps runs whose field equals
    the value (or is one of the values, when it is a tuple); ``unless`` drops runs whose field
    equals the value (``(("dry_run", True),)``); ``at_least`` keeps runs whose field (a number,
    or a list's length) is at least n (``(("workload.nodes", 2),)``: multi-node runs only).
    """

    name: str                          # "selftest run" - used in "not run" reasons
    produce: str                       # how to make it: "fxprobe selftest"
    commands: tuple[str, ...] = ()
    has_field: str = ""
    where: tuple[tuple[str, Any], ...] = ()
    unless: tuple[tuple[str, Any], ...] = ()
    at_least: tuple[tuple[str, int], ...] = ()

    def matches(self, run: RunRecord) -> bool:
        by_command = bool(self.commands) and any(
            run.command == c or run.command.startswith(c + " ") for c in self.commands)
        by_field = bool(self.has_field) and run.get(self.has_field) is not MISSING
        if not (by_command or by_field):
            return False
        if any(run.get(key) == value for key, value in self.unless):
            return False
        unknown = run.errored       # an errored run that never wrote a narrowing field may have fed this check
        for key, least in self.at_least:
            value = run.get(key, None)
            if value is None and unknown:
                continue
            size = len(value) if isinstance(value, (list, tuple)) else value
            if not isinstance(size, (int, float)) or isinstance(size, bool) or size < least:
                return False
        return all((unknown and run.get(key) is MISSING)
                   or (run.get(key) in value if isinstance(value, tuple) else run.get(key) == value)
                   for key, value in self.where)

    def absent(self, name: str, threshold: Any = None, comparator: str = "", unit: str = "") -> Criterion:
        """The one "not run" criterion for a check whose run is not among the evidence."""
        return Criterion(name, Outcome.NOT_RUN, None, threshold, comparator, unit,
                         f"{self.missing()}; run `{self.produce}` and pass its run directory with --evidence",
                         missing=self.missing())

    def missing(self) -> str:
        return f"no {self.name} among the evidence"


def missing_reason(criteria: Iterable[Criterion]) -> str:
    """A gate's reason: every distinct missing run, once ("no soak run among the evidence; ...")."""
    return "; ".join(sorted({c.missing for c in criteria if c.missing and c.outcome is Outcome.NOT_RUN}))


def errored(name: str, run: RunRecord, threshold: Any = None, comparator: str = "", unit: str = "") -> Criterion:
    """The criterion of a check whose run ended in error: ERROR with the run's own reason."""
    return Criterion(name, Outcome.ERROR, None, threshold, comparator, unit, run.error_reason(), run.evidence)


def did_not_run(name: str, run: RunRecord, threshold: Any = None, comparator: str = "", unit: str = "") -> Criterion:
    """The criterion of a check whose run did not run (its own outcome ``not run``): NOT RUN with its reason."""
    reason = run.results.get("reason") or lookup(run.results, "verdict.reason")
    reason = reason if isinstance(reason, str) and reason else f"the run's outcome is {run.outcome}"
    return Criterion(name, Outcome.NOT_RUN, None, threshold, comparator, unit, f"{run.path.name}: {reason}",
                     run.evidence)


def per_run(requirement: Requirement, name: str, evidence: Evidence, judge: Callable[[str, RunRecord], Criterion],
            threshold: Any = None, comparator: str = "", unit: str = "", not_run: bool = False) -> list[Criterion]:
    """One criterion per run the requirement matches (named ``name [run]`` when several do): NOT RUN when none
    is among the evidence, ERROR for a run that ended in error, with ``not_run`` NOT RUN for a run that did not run
    (its own reason), else ``judge(name, run)``."""
    runs = evidence.matching(requirement)
    if not runs:
        return [requirement.absent(name, threshold, comparator, unit)]
    criteria = []
    for run in runs:
        label = name if len(runs) == 1 else f"{name} [{run.label}]"
        if run.errored:
            criteria.append(errored(label, run, threshold, comparator, unit))
        elif not_run and run.outcome == Outcome.NOT_RUN.value:
            criteria.append(did_not_run(label, run, threshold, comparator, unit))
        else:
            criteria.append(judge(label, run))
    return criteria


@dataclass(frozen=True)
class Check:
    """A declared criterion: ``measured = field (/ per) * scale`` compared to a threshold.

    ``count``: the figure is a count: a list is its length (e.g. a list of interruptions), a number must be
    a whole number >= 0 (a negative or fractional count is an ERROR, never compared).
    """

    name: str
    requirement: Requirement
    field: str
    comparator: str
    threshold: str                     # key in the gate's config section
    unit: str = ""
    scale: int | Fraction = 1          # exact: 100 for a fraction shown in %, Fraction(1, 3600) for s -> h
    per: str = ""                      # optional denominator field (a ratio)
    count: bool = False
    context: tuple[tuple, ...] = ()    # (label, field[, scale]) shown in the detail
    unmeasured: str = ""               # the field is there but null: NOT RUN with this reason (absent: ERROR)

    @property
    def title(self) -> str:
        return self.name

    @property
    def keys(self) -> tuple[str, ...]:
        return (self.threshold,)

    def evaluate(self, gate: str, evidence: Evidence, config: GateConfig) -> list[Criterion]:
        threshold = config.get(gate, self.threshold)
        return per_run(self.requirement, self.name, evidence, lambda name, run: self._one(name, run, threshold),
                       threshold, self.comparator, self.unit)

    def _value(self, run: RunRecord, dotted: str) -> tuple[Fraction | None, str]:
        """The recorded figure, exact (see fxprobe.core.verdict.exact); NaN/inf/non-numbers are problems."""
        value = run.get(dotted)
        if value is MISSING or value is None:
            return None, f"{run.evidence} has no field {dotted!r}"
        if self.count and isinstance(value, (list, tuple)):
            return Fraction(len(value)), ""
        try:
            number = exact(value)
        except ValueError:
            return None, f"{run.evidence}: field {dotted!r} is not a number ({value!r}: a finite number is needed)"
        if self.count and (number < 0 or number.denominator != 1):
            return None, f"{run.evidence}: field {dotted!r} is {value!r}: a count is a whole number >= 0"
        return number, ""

    def _context(self, run: RunRecord) -> list[str]:
        parts = []
        for label, dotted, *scale in self.context:
            value = run.get(dotted, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                value = format_number(value * (scale[0] if scale else 1))
            if value is not None:
                parts.append(f"{label} {value}")
        return parts

    def _one(self, name: str, run: RunRecord, threshold: float) -> Criterion:
        if self.unmeasured and run.get(self.field) is None and run.outcome != Outcome.NOT_RUN.value:
            return Criterion(name, Outcome.NOT_RUN, None, threshold, self.comparator, self.unit,
                             ", ".join([self.unmeasured, *self._context(run)]), run.evidence)
        value, problem = self._value(run, self.field)
        if value is not None and self.per:
            denominator, problem = self._value(run, self.per)
            if denominator is not None:
                if denominator == 0:
                    value, problem = None, f"{run.evidence}: field {self.per!r} is 0"
                else:
                    value = value / denominator
            else:
                value = None
        if value is None:
            if run.outcome == Outcome.NOT_RUN.value:
                return did_not_run(name, run, threshold, self.comparator, self.unit)
            return Criterion(name, Outcome.ERROR, None, threshold, self.comparator, self.unit,
                             problem, run.evidence)
        measured = value * Fraction(self.scale)       # exact: a declared scale is an int or a Fraction
        detail = ", ".join(self._context(run))
        return Criterion.compare(name, measured, self.comparator, threshold, unit=self.unit,
                                 detail=detail, evidence=run.evidence)


@dataclass(frozen=True)
class OutcomeCheck:
    """A criterion per matching run: that run's own outcome (its verdict) must be pass."""

    name: str
    requirement: Requirement
    context: tuple[tuple, ...] = ()

    keys: tuple[str, ...] = ()         # judged against no threshold: never left out

    @property
    def title(self) -> str:
        return self.name

    def _context(self, run: RunRecord) -> list[str]:
        return [f"{label} {run.get(dotted)}" for label, dotted, *_ in self.context
                if run.get(dotted, None) is not None]

    def evaluate(self, gate: str, evidence: Evidence, config: GateConfig) -> list[Criterion]:
        return per_run(self.requirement, self.name, evidence, self._own, "pass", "==")

    def _own(self, name: str, run: RunRecord) -> Criterion:
        try:
            outcome = Outcome(run.outcome)
        except ValueError:
            return Criterion(name, Outcome.ERROR, run.outcome or None, "pass", "==", "",
                             "results.json has no valid 'outcome'", run.evidence)
        reason = run.results.get("reason") or lookup(run.results, "verdict.reason", "")
        detail = ", ".join(filter(None, [reason if isinstance(reason, str) else ""] + self._context(run)))
        return Criterion(name, outcome, outcome.value, "pass", "==", "", detail, run.evidence)


Extra = Callable[[Evidence, GateConfig], list[Criterion]]


@dataclass(frozen=True)
class Judge:
    """Criteria a Check cannot express: ``judge(evidence, config)``, judged against the thresholds ``keys`` of
    the gate's section (a lab-scaled file leaves them out only by naming every one in [scale.not_judged])."""

    title: str                          # what it judges, as a criterion left out is named
    keys: tuple[str, ...]
    judge: Extra

    def evaluate(self, gate: str, evidence: Evidence, config: GateConfig) -> list[Criterion]:
        return self.judge(evidence, config)


def with_scaled(criterion: Criterion, scaled: list[str]) -> Criterion:
    """The criterion with every scaled threshold it was judged with said in its detail (SCALED ... : why)."""
    return replace(criterion, detail="; ".join(filter(None, [criterion.detail, *scaled]))) if scaled else criterion


@dataclass(frozen=True)
class Gate:
    """A gate: declared checks plus evaluators for criteria a Check cannot express (a bare function is judged
    against no threshold of its own, a :class:`Judge` names the thresholds it reads)."""

    key: str                            # "g1" - also the config section
    title: str
    checks: tuple[Check | OutcomeCheck | Judge, ...] = ()     # judged in this order, before the extras
    extras: tuple[Extra | Judge, ...] = field(default_factory=tuple)
    notes: tuple[Callable[[Evidence, GateConfig], list[str]], ...] = ()   # information lines, never judged

    def units(self) -> list[Check | OutcomeCheck | Judge]:
        """Everything the gate judges, each with the thresholds it reads (``keys``) and its ``title``."""
        return [*self.checks, *(e if isinstance(e, Judge) else Judge(e.__name__, (), e) for e in self.extras)]

    def evaluate(self, evidence: Evidence, config: GateConfig) -> Verdict:
        """Every unit's criteria, each with the SCALED thresholds it was judged with; a unit a lab-scaled file
        leaves out is a NotJudged entry with its reason, never a criterion (and never a pass)."""
        criteria: list[Criterion] = []
        left_out: list[NotJudged] = []
        for unit in self.units():
            reason = config.not_judged(self.key, unit.keys)
            if reason is not None:
                left_out.append(NotJudged(unit.title, tuple(f"{self.key}.{k}" for k in unit.keys), reason))
                continue
            scaled = config.scaled(self.key, unit.keys)
            criteria += [with_scaled(c, scaled) for c in unit.evaluate(self.key, evidence, config)]
        criteria += evidence.unfinished_criteria()
        scale = f" ({config.label})" if config.label else ""
        notes = tuple(line for note in self.notes for line in note(evidence, config))
        return Verdict(f"{self.key.upper()} {self.title}{scale}", tuple(criteria), missing_reason(criteria), notes,
                       tuple(left_out))


# -- presentation -------------------------------------------------------------------------
def criterion_line(criterion: Criterion) -> str:
    """Criterion.line() plus the evidence file it was read from."""
    text = criterion.line()
    if criterion.evidence:
        text += f" [evidence: {criterion.evidence}]"
    return text


def verdict_lines(verdict: Verdict) -> list[str]:
    head = f"{verdict.name}: {verdict.outcome.value.upper()}"
    if verdict.reason:
        head += f" - {verdict.reason}"
    lines = ["  " + criterion_line(c) for c in verdict.criteria] + ["  " + n.line() for n in verdict.not_judged]
    return [head] + lines + [f"  INFO    {n}" for n in verdict.notes]


def summary_row(verdict: Verdict) -> str:
    return f"{verdict.name:40} {verdict.outcome.value.upper():8} {counts_text(verdict) or 'no criteria'}"
