"""``fxprobe preflight``: write the reproducibility log to environment.json."""

from __future__ import annotations

import click

from fxprobe.host import preflight as preflight_lib
from fxprobe.cli.fleet import fleet_options, run_fleet, single_node
from fxprobe.cli.app import App, finish, pass_app
from fxprobe.core.verdict import Outcome


@click.command()
@click.option("--iface", "interfaces", multiple=True, help="Data interface to record (repeatable).")
@click.option("--strict", is_flag=True, help="Fail (exit 1) when a hidden knob can bias results.")
@fleet_options
@pass_app
@click.pass_context
def preflight(ctx, app: App, interfaces, strict, nodes, **fleet) -> int:
    """Record kernel, CPU, memory, NICs, RDMA, NVMe, tools, caches, clock and sensors; warn on biasing knobs."""
    if not single_node(nodes, **fleet):
        return run_fleet(app, ctx, "preflight")
    run = app.new_run("preflight")
    pf = preflight_lib.collect(app.runner(run), list(interfaces) or None)
    run.write_environment(pf.to_dict())
    outcome = Outcome.FAIL if strict and pf.warnings else Outcome.PASS
    summary = {"recorded": sorted(pf.items), "missing": pf.to_dict()["missing"],
               "warnings": pf.to_dict()["warnings"]}
    return finish(app, run, "preflight", summary, preflight_lib.lines(pf), outcome)
