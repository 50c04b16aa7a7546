"""The application object every command receives, and the way results are shown."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click

from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.core.verdict import Outcome, Verdict
from fxprobe.host import environment


@dataclass
class App:
    runs_base: Path = Path(os.environ.get("FXPROBE_RUNS", "runs"))
    runs_given: bool = bool(os.environ.get("FXPROBE_RUNS"))   # --runs, --run-dir or FXPROBE_RUNS chose it
    run_dir: Path | None = None
    json_output: bool = False
    verbosity: int = 0
    argv: list[str] = field(default_factory=lambda: list(sys.argv))
    command_args: list[str] = field(default_factory=list)    # the subcommand's own arguments, as given
    open_runs: list[RunDir] = field(default_factory=list)   # begun, not yet finished: main() fails them on error

    def progress(self, text: str) -> None:
        """Progress for a person at a terminal; never inside --json output."""
        if self.verbosity < 0:
            return
        if self.json_output and sys.stdout.isatty() is False and not sys.stderr.isatty():
            return
        click.echo(text, err=True)

    def new_run(self, command: str, folder: str | None = None) -> RunDir:
        """The command's run directory, begun: from here on an error is recorded in it (see main())."""
        if self.run_dir is not None:
            run = RunDir.start(command, self.argv, path=self.run_dir)
        else:
            run = RunDir.start(command, self.argv, base=self.runs_base, folder=folder)
        environment.record(run)
        self.open_runs.append(run)
        return run

    def resume_run(self, run: RunDir, command: str) -> RunDir:
        """An existing run directory begun again (``soak --resume``)."""
        self.open_runs.append(run.begin(command, self.argv))
        return run

    def fail_open_runs(self, reason: str, exit_code: int) -> list[RunDir]:
        """Write the error envelope (reason, exit code) of every run this command began and did not finish."""
        failed = [run for run in self.open_runs if run.fail(reason, exit_code) is not None]
        self.open_runs.clear()
        return failed

    def runner(self, run: RunDir | None, dry_run: bool = False) -> Runner:
        return Runner(run, dry_run=dry_run)

    def emit(self, data: dict, human: list[str]) -> None:
        if self.json_output:
            click.echo(json.dumps(data, indent=2, default=str))
        elif self.verbosity >= 0:
            for line in human:
                click.echo(line)


def finish(app: App, run: RunDir, command: str, results: dict, human: list[str],
           outcome: Outcome, reason: str = "") -> int:
    """The library writes results.json (envelope + results) and the manifest; print; return the exit code."""
    written = run.finish(outcome, results, reason=reason, command=command)
    app.emit(written, human + [f"evidence: {run.path}"])
    return outcome.exit_code


def finish_verdict(app: App, run: RunDir, command: str, verdict: Verdict, extra: dict,
                   human: list[str]) -> int:
    return finish(app, run, command, {"verdict": verdict.to_dict(), **extra},
                  human + verdict.lines(), verdict.outcome, reason=verdict.reason)


pass_app = click.make_pass_decorator(App)
