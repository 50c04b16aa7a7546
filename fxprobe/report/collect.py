"""Read run directories into what a report shows: verdicts, claims, commands.

What a report reads from each run's ``results.json`` (all optional):
``verdict`` (one Verdict.to_dict()), ``gates`` (a list of them), ``thresholds`` (of a gate run),
``claims`` (claim results), ``g3.comparisons`` (the G3 bar chart), ``advice``/``impact``/``plan``/``timeline``
(a fault run's notes). Besides: ``commands.jsonl`` (every subprocess), ``environment.json`` (the
reproducibility log), a soak run's ``soak.jsonl`` records (:mod:`fxprobe.report.soakview`) and any PNG a
run saved itself (a fault run's ``timeline.png``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fxprobe.core.rundir import RunDir, RunResults, altered_criterion
from fxprobe.core.verdict import Verdict
from fxprobe.report.commands import Command, CommandGroup, collapse, fold


@dataclass(frozen=True)
class RunView(RunResults):
    """A run as the report shows it: its verdicts, gate verdicts and folded commands beside its results."""

    unrecorded = "?"          # a report prints "?" for a command or outcome the run did not record
    verdicts: tuple[Verdict, ...]
    command_records: tuple[Command, ...] = ()   # every subprocess the run started (commands.jsonl), folded
    gates: tuple[Verdict, ...] = ()    # the verdicts of a `gate ...` run (`gate g3`: one, `gate all`: four)
    origins: tuple[str, ...] = ()      # where a bundled copy was copied from (evidence paths name those)
    problems: tuple[str, ...] = ()     # how the folder differs from its manifest (then it feeds no criterion)
    manifest: str | None = None        # SHA-256 of its manifest.json (a gate run records its evidence's)

    @property
    def command_groups(self) -> list[CommandGroup]:
        return collapse(list(self.command_records))


def recorded_evidence(gate_run: RunView, runs: list[RunView]) -> list[RunView | None] | None:
    """Per folder the gate run recorded reading (``evidence_runs``), the run of ``runs`` that is that folder, intact
    (same manifest SHA-256), or None; None when the gate run recorded no list."""
    recorded = gate_run.results.get("evidence_runs")
    if not isinstance(recorded, list):
        return None
    present = {run.manifest: run for run in runs if not run.problems and run.manifest}
    return [present.get(entry.get("manifest_sha256")) if isinstance(entry, dict) else None for entry in recorded]


verdict_from_dict = Verdict.from_dict     # one (de)serialization of criteria: fxprobe.core.verdict


def sub_run_folders(path: Path, results: dict) -> list[Path]:
    """A fleet run's sub-runs: the ``nodes`` entries' ``run_dir`` folders inside it that hold a results.json."""
    nodes = results.get("nodes") if isinstance(results.get("nodes"), list) else []
    folders = [path / n["run_dir"] for n in nodes if isinstance(n, dict) and isinstance(n.get("run_dir"), str)]
    return [folder for folder in folders if folder.resolve() != path.resolve()
            and path.resolve() in folder.resolve().parents and (folder / "results.json").is_file()]


def sub_run_problems(path: Path, results: dict) -> tuple[str, ...]:
    """Each sub-run of a fleet run checked against its own manifest, as the gates check them: "nodes/a:
    results.json: changed ..."."""
    return tuple(f"{folder.relative_to(path).as_posix()}: {problem}" for folder in sub_run_folders(path, results)
                 for problem in RunDir(folder).integrity())


def read_run(path: Path) -> RunView:
    """A run as the report shows it; a folder unlike its manifest (RunDir.integrity) shows one ERROR criterion
    naming the files in place of its verdicts (a gate run's too: it decides nothing)."""
    run = RunDir.open(path)
    results = run.results()
    problems = tuple(run.integrity()) + sub_run_problems(run.path, results)
    if problems:
        altered = Verdict(f"evidence {run.path.name} intact", (altered_criterion(run.path, list(problems)),))
        commands = tuple(c for c in (fold(r) for r in run.commands() if isinstance(r, dict)) if c is not None)
        gate = str(results.get("command", "")).split(" ")[0] == "gate"
        return RunView(run.path, results, (altered,), commands, (altered,) if gate else (), problems=problems,
                       manifest=run.manifest_sha256())
    verdicts = []
    if isinstance(results.get("verdict"), dict):
        verdicts.append(verdict_from_dict(results["verdict"]))
    verdicts += [verdict_from_dict(item) for item in results.get("gates") or [] if isinstance(item, dict)]
    gates = tuple(verdicts) if str(results.get("command", "")).split(" ")[0] == "gate" else ()
    if not verdicts and isinstance(results.get("criteria"), list):   # e.g. a fault run: "verdict" is a word
        plan = results.get("plan") if isinstance(results.get("plan"), dict) else {}
        name = " ".join(str(x) for x in (results.get("command", run.path.name), plan.get("scenario")) if x)
        verdicts.append(verdict_from_dict({"name": name, "criteria": results["criteria"]}))
    commands = tuple(c for c in (fold(r) for r in run.commands() if isinstance(r, dict)) if c is not None)
    return RunView(run.path, results, tuple(verdicts), tuple(commands), gates, manifest=run.manifest_sha256())
