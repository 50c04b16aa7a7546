"""``fxprobe discover | connect | disconnect``: NVMe-oF paths through nvme-cli."""

from __future__ import annotations

import click

from fxprobe.host import fabrics as fab
from fxprobe.cli import nodes
from fxprobe.cli.app import App, finish, pass_app
from fxprobe.cli.options import POSITIVE_INT, duration, lab_option, number
from fxprobe.core.verdict import Outcome

node_option = click.option("--node", default=None, help="Run on this node ([user@]host[:port], or a lab guest with --lab); default here.")
transport_option = click.option("--transport", "-t", type=click.Choice(fab.TRANSPORTS), default="tcp", show_default=True)


host_iface_option = click.option("--host-iface", "-f", "host_ifaces", multiple=True, metavar="IFACE",
                                 help="Local interface the path leaves from (NVMe/TCP; SO_BINDTODEVICE). Once for "
                                      "every path, or once per -a in the same order.")
host_traddr_option = click.option("--host-traddr", "-w", "host_traddrs", multiple=True, metavar="ADDR",
                                  help="Local address the path leaves from (RDMA, TCP). Once for every path, or once "
                                       "per -a in the same order.")


@click.command()
@transport_option
@click.option("--traddr", "-a", required=True, help="Address of the discovery controller.")
@click.option("--trsvcid", "-s", default="4420", show_default=True, help="Port of the discovery controller.")
@host_iface_option
@host_traddr_option
@node_option
@lab_option
@pass_app
def discover(app: App, transport, traddr, trsvcid, host_ifaces, host_traddrs, node, lab) -> int:
    """List the subsystems and ports a target offers (nvme discover)."""
    (path,) = fab.path_specs([traddr], trsvcid, host_ifaces[:1], host_traddrs[:1])
    run = app.new_run("discover")
    log = fab.discover(app.runner(run), transport, traddr, trsvcid, nodes.resolve(node, lab), binding=path.binding)
    records = log.subsystems()
    human = [f"{r.subnqn}  {r.trtype}://{r.traddr}:{r.trsvcid} (port {r.portid})" for r in records] or \
        ["no subsystem offered"]
    return finish(app, run, "discover", {"discovery": log.to_dict()}, human, Outcome.PASS)


SECRET_HELP = " (env {}; recorded only as <secret>)"


@click.command()
@transport_option
@click.option("--traddr", "-a", "traddrs", required=True, multiple=True,
              help="Discovery address (repeat once per link to connect every path).")
@click.option("--trsvcid", "-s", default="4420", show_default=True)
@click.option("--nqn", "-n", default=None, help="Subsystem NQN (default: every subsystem offered).")
@host_iface_option
@host_traddr_option
@click.option("--nr-io-queues", "-i", type=POSITIVE_INT, default=None, help="I/O queues (default: one per CPU).")
@click.option("--queue-size", "-Q", type=number(int, ge=16, le=1024, name="integer 16-1024"), default=None,
              help="Entries per I/O queue (default 128).")
@click.option("--ctrl-loss-tmo", "-l", type=duration(kind=int, ge=-1), default=None,
              help="Time before a lost controller is given up (-1: never).")
@click.option("--reconnect-delay", "-c", type=duration(kind=int, ge=1), default=None,
              help="Time between reconnect attempts.")
@click.option("--fast-io-fail-tmo", type=duration(kind=int, ge=-1), default=None,
              help="Time before I/O fails over (written to sysfs; -1: off).")
@click.option("--keep-alive-tmo", "-k", type=duration(kind=int, ge=0), default=None, help="Keep-alive timeout.")
@click.option("--hdr-digest", "-g", is_flag=True, help="CRC32C header digest on every PDU (NVMe/TCP).")
@click.option("--data-digest", "-G", is_flag=True, help="CRC32C data digest on every PDU (NVMe/TCP).")
@click.option("--dhchap-secret", "-S", default=None, envvar="FXPROBE_DHCHAP_SECRET", metavar="DHHC-1:..",
              help="DH-CHAP host key for in-band authentication" + SECRET_HELP.format("FXPROBE_DHCHAP_SECRET"))
@click.option("--dhchap-ctrl-secret", "-C", default=None, envvar="FXPROBE_DHCHAP_CTRL_SECRET", metavar="DHHC-1:..",
              help="DH-CHAP controller key: the target proves itself too"
                   + SECRET_HELP.format("FXPROBE_DHCHAP_CTRL_SECRET"))
@click.option("--hostnqn", "-q", default=None, help="Host NQN (default: /etc/nvme/hostnqn).")
@click.option("--hostid", "-I", default=None, help="Host ID, a UUID (default: /etc/nvme/hostid).")
@node_option
@lab_option
@pass_app
def connect(app: App, transport, traddrs, trsvcid, nqn, host_ifaces, host_traddrs, nr_io_queues, queue_size,
            ctrl_loss_tmo, reconnect_delay, fast_io_fail_tmo, keep_alive_tmo, hdr_digest, data_digest,
            dhchap_secret, dhchap_ctrl_secret, hostnqn, hostid, node, lab) -> int:
    """Connect every discovered path of a subsystem (native multipath), each path from its own interface
    with -f/-w; undo all on failure. Short flags are nvme-cli's."""
    options = fab.ConnectOptions(nr_io_queues, ctrl_loss_tmo, reconnect_delay, keep_alive_tmo, fast_io_fail_tmo,
                                 hostnqn, hostid, queue_size, hdr_digest, data_digest, dhchap_secret,
                                 dhchap_ctrl_secret)
    paths = fab.path_specs(list(traddrs), trsvcid, host_ifaces, host_traddrs)
    run = app.new_run("connect")
    connected = fab.connect_paths(app.runner(run), transport, paths, nqn, options, nodes.resolve(node, lab))
    human = [_path_line(p) for p in connected]
    return finish(app, run, "connect", {"connected": [p.to_dict() for p in connected if not p.skipped],
                                        "skipped": [p.to_dict() for p in connected if p.skipped],
                                        "options": options.to_dict()}, human, Outcome.PASS)


def _path_line(p: fab.Connected) -> str:
    if p.skipped:
        return f"skipped {p.nqn} via {p.transport}://{p.traddr}:{p.trsvcid}: {p.skipped}"
    via = f" from {', '.join(v for v in (p.host_iface, p.host_traddr) if v)}" if p.host_iface or p.host_traddr else ""
    return (f"{p.controller or '?'}: {p.nqn} via {p.transport}://{p.traddr}:{p.trsvcid}{via}"
            + (" (already connected)" if p.already else "") + (f" [{p.address}]" if p.address else ""))


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
