"""``fxprobe inventory``: one view of the NVMe this host sees (nvme-cli and sysfs, cross-checked)."""

from __future__ import annotations

import click

from fxprobe.host import inventory as inventory_lib
from fxprobe.cli.fleet import fleet_options, run_fleet, single_node
from fxprobe.cli.app import App, finish, pass_app
from fxprobe.core.verdict import Outcome


@click.command()
@click.option("--no-smart", is_flag=True, help="Skip reading SMART health.")
@click.option("--strict", is_flag=True, help="Fail (exit 1) when nvme-cli and sysfs disagree.")
@fleet_options
@pass_app
@click.pass_context
def inventory(ctx, app: App, no_smart, strict, nodes, **fleet) -> int:
    """Subsystems, controllers, namespaces, multipath paths (ANA, iopolicy), block devices, SMART."""
    if not single_node(nodes, **fleet):
        return run_fleet(app, ctx, "inventory")
    run = app.new_run("inventory")
    inv = inventory_lib.collect(app.runner(run), smart=not no_smart)
    outcome = Outcome.FAIL if strict and inv.disagreements else Outcome.PASS
    return finish(app, run, "inventory", {"inventory": inv.to_dict()}, inventory_lib.lines(inv), outcome)
