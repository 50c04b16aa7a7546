"""``fxprobe report RUNDIR... --out DIR``, ``report verify DIR``, ``report keygen``."""

from __future__ import annotations

from pathlib import Path

import click

from fxprobe.core.paths import output_file, output_folder
from fxprobe.cli.app import finish, pass_app
from fxprobe.cli.options import SeveralValues
from fxprobe.report.build import build_report
from fxprobe.core.errors import BadInput
from fxprobe.core.manifest import bundle_around
from fxprobe.report.bundle import verify_bundle
from fxprobe.report.signing import generate_keypair
from fxprobe.core.verdict import Outcome

_paths = click.Path(path_type=Path)


class DefaultBuildGroup(click.Group):
    """``report RUNDIR...`` means ``report build RUNDIR...``; ``verify``/``keygen`` stay subcommands."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["build", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultBuildGroup)
def report():
    """Signed evidence reports: `report RUNDIR... --out DIR` (= build), `report verify DIR`, `report keygen`."""


@report.command()
@click.argument("run_dirs", nargs=-1, type=_paths)
@click.option("--evidence", "evidence", cls=SeveralValues, type=_paths, metavar="RUNDIR...",
              help="Run directories to report on (as RUN_DIRS, and as gate --evidence).")
@click.option("--out", required=True, type=_paths, help="New folder for the report bundle.")
@click.option("--key", "private_key", type=_paths, default=None, envvar="FXPROBE_SIGNING_KEY",
              help="Ed25519 private key (PEM) that signs the manifest (env FXPROBE_SIGNING_KEY).")
@click.option("--title", default="fxprobe acceptance report")
@click.option("--junit-not-run", type=click.Choice(["failure", "skipped"]), default="failure", show_default=True,
              help="How junit.xml reports a NOT RUN criterion: a failure (a gate that never ran is not green) or "
                   "skipped.")
@pass_app
def build(app, run_dirs, evidence, out, private_key, title, junit_not_run):
    """Markdown + HTML + JUnit XML over RUN_DIRS, with the evidence copied, hashed and signed."""
    if not run_dirs and not evidence:
        raise BadInput("report build: give the run directories (RUN_DIRS... or --evidence RUNDIR...)")
    built = build_report([*run_dirs, *evidence], output_folder(out, "--out"), private_key, title, junit_not_run)
    run = app.new_run("report")
    return finish(app, run, "report", {"report": built.to_dict()}, built.lines(), Outcome.PASS)


@report.command()
@click.argument("folder", type=_paths)
@click.option("--public-key", type=_paths, default=None,
              help="The signer's public key (PEM), pinned: without it the signer is not checked (NOT RUN).")
@pass_app
def verify(app, folder, public_key):
    """Check the signature, then re-hash every file of a report and name any changed one.

    Writes nothing inside FOLDER: its own record goes to --runs/--run-dir (or FXPROBE_RUNS) when one is
    given (G4 reads it from there), and is not written otherwise."""
    bundle = bundle_around(folder) or Path(folder).resolve()
    if app.runs_given and _inside(app.run_dir or app.runs_base, bundle):
        raise BadInput(f"{app.run_dir or app.runs_base}: inside the report {bundle} being verified",
                       hint="write the verification record elsewhere with --runs DIR")
    result = verify_bundle(folder, public_key)
    if not app.runs_given:
        app.emit({"verification": result.to_dict(), "outcome": result.outcome.value},
                 result.lines() + ["record not written (pass --runs DIR to keep it as G4 evidence)"])
        return result.outcome.exit_code
    run = app.new_run("report verify")
    return finish(app, run, "report verify", {"verification": result.to_dict()}, result.lines(),
                  result.outcome, reason=result.reason)


def _inside(path: Path, folder: Path) -> bool:
    resolved = Path(path).resolve()
    return resolved == folder or folder in resolved.parents


@report.command()
@click.option("--private", "private_path", type=_paths, default=Path("fxprobe-signing.pem"), show_default=True)
@click.option("--public", "public_path", type=_paths, default=Path("fxprobe-signing.pub"), show_default=True)
@pass_app
def keygen(app, private_path, public_path):
    """Make an Ed25519 key pair for signing reports (the private key is written 0600)."""
    fp = generate_keypair(output_file(private_path, "--private"), output_file(public_path, "--public"))
    if app.verbosity >= 0:
        click.echo(f"private key {private_path} (keep it secret), public key {public_path}, fingerprint {fp}")
    return 0
