"""``fault run`` as the library runs it, for the CLI and the rehearsal alike: stop an earlier run's orphaned
load, execute the plan, and turn the engine's results into the outcome, its reason and the lines a person reads.

The fault verdict's words (invisible / visible / unknown / error) are a view of the outcome, never a second type:
``faults.analysis.WORD_OF_OUTCOME`` is the one place that maps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.core.verdict import Criterion, Outcome, format_number
from fxprobe.faults import engine
from fxprobe.faults.analysis import OUTCOME_OF_VERDICT
from fxprobe.faults.journal import Journal
from fxprobe.faults.orphans import stop_orphans
from fxprobe.tools import dmesg



@dataclass(frozen=True)
class FaultRunResult:
    outcome: Outcome
    results: dict
    human: list[str]
    reason: str = ""


def run_fault(plan: engine.Plan, run_dir: RunDir, options: engine.Options, runs_base: Path,
              journal: Journal | None = None) -> FaultRunResult:
    """Execute a checked plan (not a dry run) into ``run_dir``; ``runs_base`` is where the latest
    ``fault tune`` is looked up for the advice after a visible link cut."""
    journal = journal or Journal.default()
    orphaned = stop_orphans(journal, Runner(run_dir), options.progress)   # an earlier run's load, left running
    results = engine.execute(plan, run_dir, journal, options)
    results["orphans"] = orphaned
    human = [f"{plan.scenario.name}: {results['verdict'].upper()}"
             + (f" (failed: {', '.join(results['failed_criteria'])})" if results["failed_criteria"] else "")]
    human += ["  " + Criterion.from_dict(c).line() for c in results["criteria"]]
    human += [f"  before the run: {line}" for line in orphaned]
    human.append(recovery_line(results["impact"]["recover_s"], plan.scenario.criteria["min_throughput_pct"]))
    human += rebuild_lines(results.get("rebuild"), plan.scenario.criteria)
    stalled = dmesg.timeout_lines(results.get("lab_drive_timeouts") or [])
    human += [f"{dmesg.EMULATOR_STALLED}: {line}" for line in stalled]
    if results["advice"]:
        from fxprobe.faults.tune import tune_advice
        results["advice"]["measured"] = tune_advice(runs_base)
        advice = [*results["advice"]["lines"], *results["advice"]["measured"]]
        human += ["timeouts:"] + [f"  {line}" for line in advice]
    failed = results["restore_failed"]
    human += [f"restored: {line}" for line in results["restore_log"]] + [f"FAILED to undo {line}" for line in failed]
    human.append(f"timeline: {results['png']}")
    if failed:
        human.append("still broken (kept in the journal: fxprobe fault restore)")
    outcome, reason = outcome_of(results)
    return FaultRunResult(outcome, results, human, reason)


def outcome_of(results: dict) -> tuple[Outcome, str]:
    """The run's outcome and its reason: ERROR when an undo failed (the verdict stands, but the system was left
    broken: that is the outcome), else the verdict's outcome, with the criteria that could not be judged."""
    failed = results["restore_failed"]
    if failed:
        return Outcome.ERROR, f"{len(failed)} restore(s) failed: {failed[0]}"
    errors = [f"{c['name']}: {c['detail']}" for c in results["criteria"] if c["outcome"] == Outcome.ERROR.value]
    return OUTCOME_OF_VERDICT[results["verdict"]], "; ".join(errors)[:2000]


def rebuild_lines(rebuild: dict | None, limits: dict) -> list[str]:
    """The md rebuild after a drive pull: information unless the scenario judges it (its criteria above)."""
    if not rebuild:
        return []
    from fxprobe.faults.rebuild import INFO, Rebuild
    judged = limits.get("max_rebuild_s") is not None or limits.get("min_rebuild_throughput_pct") is not None
    lines = Rebuild.from_dict(rebuild).lines()
    return [f"  {lines[0]}{'' if judged else f' ({INFO})'}"] + [f"  {line}" for line in lines[1:]] if lines else []


def recovery_line(recover_s: float | None, min_throughput_pct: float) -> str:
    if recover_s is not None:
        return f"  time to recover after restore: {format_number(recover_s, 's')}"
    return (f"  did not recover to {format_number(min_throughput_pct, '%')} of the pre-fault throughput before "
            f"the load ended")
