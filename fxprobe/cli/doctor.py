"""``fxprobe doctor``: one table of capabilities."""

from __future__ import annotations

import click

from fxprobe.host import doctor as doctor_lib
from fxprobe.cli.app import App, finish, pass_app
from fxprobe.core.verdict import Outcome


@click.command()
@pass_app
def doctor(app: App) -> int:
    """Show each wrapped tool and kernel facility: present (with version) or missing (with reason and fix)."""
    run = app.new_run("doctor")
    caps = doctor_lib.collect(app.runner(run))
    results = {"capabilities": [c.to_dict() for c in caps],
               "missing": [c.name for c in caps if not c.present]}
    return finish(app, run, "doctor", results, doctor_lib.table(caps), Outcome.PASS)
