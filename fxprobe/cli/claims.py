"""``fxprobe claims check FILE.toml``: recompute a report's headlines from its own table."""

from __future__ import annotations

from pathlib import Path

import click

from fxprobe.gates.claims import DOES_NOT_HOLD, check_claims, load_claims, summary
from fxprobe.cli.app import finish, pass_app
from fxprobe.core.verdict import Outcome


@click.group()
def claims():
    """Check a report's headline claims against its raw table."""


@claims.command()
@click.argument("file", type=click.Path(path_type=Path))
@pass_app
def check(app, file):
    """Exit 0 if every checkable headline holds, 1 if any does not."""
    claims_file = load_claims(file)
    results = check_claims(claims_file)
    human = [f"{claims_file.name}: {summary(results)}"] + [line for r in results for line in r.lines()]
    run = app.new_run("claims check")
    run.write_raw("claims.toml", Path(file).read_bytes())
    outcome = Outcome.FAIL if any(r.outcome == DOES_NOT_HOLD for r in results) else Outcome.PASS
    return finish(app, run, "claims check", {"file": str(file), "claims": [r.to_dict() for r in results]},
                  human, outcome)
