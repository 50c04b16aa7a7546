"""``fxprobe discover | connect | disconnect``: NVMe-oF paths through nvme-cli."""

from __future__ import annotations

import click

from fxprobe.host import fabrics as fab
from fxprobe.core import nodes
from fxprobe.cli.app import App, finish, pass_app
from fxprobe.cli.options import NON_NEGATIVE_INT, POSITIVE_INT, lab_option, number
from fxprobe.core.verdict import Outcome

node_option = click.option("--node", default=None, help="Run on this node ([user@]host[:port], or a lab guest with --lab); default here.")
transport_option = click.option("--transport", "-t", type=click.Choice(fab.TRANSPORTS), default="tcp", show_default=True)


@click.command()
@transport_option
@click.option("--traddr", "-a", required=True, help="Address of the discovery controller.")
@click.option("--trsvcid", "-s", default="4420", show_default=True, help="Port of the discovery controller.")
@node_option
@lab_option
@pass_app
def discover(app: App, transport, traddr, trsvcid, node, lab) -> int:
    """List the subsystems and ports a target offers (nvme discover)."""
    run = app.new_run("discover")
    log = fab.discover(app.runner(run), transport, traddr, trsvcid, nodes.resolve(node, lab))
    records = log.subsystems()
    human = [f"{r.subnqn}  {r.trtype}://{r.traddr}:{r.trsvcid} (port {r.portid})" for r in records] or \
        ["no subsystem offered"]
    return finish(app, run, "discover", {"discovery": log.to_dict()}, human, Outcome.PASS)


@click.command()
@transport_option
@click.option("--traddr", "-a", "traddrs", required=True, multiple=True,
              help="Discovery address (repeat once per link to connect every path).")
@click.option("--trsvcid", "-s", default="4420", show_default=True)
@click.option("--nqn", "-n", default=None, help="Subsystem NQN (default: every subsystem offered).")
@click.option("--nr-io-queues", type=POSITIVE_INT, default=None)
@click.option("--ctrl-loss-tmo", type=number(int, ge=-1), default=None, help="Seconds before a lost controller is given up.")
@click.option("--reconnect-delay", type=POSITIVE_INT, default=None, help="Seconds between reconnect attempts.")
@click.option("--fast-io-fail-tmo", type=number(int, ge=-1), default=None, help="Seconds before I/O fails over (written to sysfs).")
@click.option("--keep-alive-tmo", type=NON_NEGATIVE_INT, default=None, help="Keep-alive timeout in seconds.")
@click.option("--hostnqn", default=None)
@click.option("--hostid", default=None)
@node_option
@lab_option
@pass_app
def connect(app: App, transport, traddrs, trsvcid, nqn, nr_io_queues, ctrl_loss_tmo, reconnect_delay,
            fast_io_fail_tmo, keep_alive_tmo, hostnqn, hostid, node, lab) -> int:
    """Connect every discovered path of a subsystem (native multipath); undo all on failure."""
    options = fab.ConnectOptions(nr_io_queues, ctrl_loss_tmo, reconnect_delay, keep_alive_tmo, fast_io_fail_tmo,
                                 hostnqn, hostid)
    run = app.new_run("connect")
    paths = fab.connect_paths(app.runner(run), transport, [(a, trsvcid) for a in traddrs], nqn, options,
                              nodes.resolve(node, lab))
    human = [f"{p.controller or '?'}: {p.nqn} via {p.transport}://{p.traddr}:{p.trsvcid}"
             + (" (already connected)" if p.already else "") for p in paths]
    return finish(app, run, "connect", {"connected": [p.to_dict() for p in paths]}, human, Outcome.PASS)


@click.command()
@click.option("--nqn", "-n", default=None, help="Disconnect every controller of this subsystem.")
@click.option("--controller", "-d", default=None, help="Disconnect one controller (nvmeX).")
@node_option
@lab_option
@pass_app
def disconnect(app: App, nqn, controller, node, lab) -> int:
    """Disconnect a subsystem (all paths) or one controller."""
    run = app.new_run("disconnect")
    count = fab.disconnect(app.runner(run), nqn, controller, nodes.resolve(node, lab))
    return finish(app, run, "disconnect", {"disconnected": count}, [f"disconnected {count} controller(s)"],
                  Outcome.PASS)
