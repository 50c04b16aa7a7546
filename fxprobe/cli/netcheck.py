"""``fxprobe netcheck``: link, speed, MTU, RoCEv2 GID and path-MTU checks per data interface."""

from __future__ import annotations

import click

from fxprobe.network import netcheck as netcheck_lib
from fxprobe.cli.fleet import fleet_options, run_fleet, single_node
from fxprobe.cli.app import App, finish_verdict, pass_app
from fxprobe.cli.options import number, rate
from fxprobe.core.errors import BadInput
from fxprobe.core.verdict import Outcome


@click.command()
@click.option("--iface", "interfaces", multiple=True, help="Data interface to check (repeatable; default: all with a device or RDMA port).")
@click.option("--peer", "peers", multiple=True, help="Target address: its route and a don't-fragment probe at full MTU (repeatable, one per link).")
@click.option("--roce/--no-roce", default=None, help="Require (or skip) RoCE checks; default: where an RDMA device is bound.")
@click.option("--roce-mtu", type=click.Choice(["1024", "2048", "4096"]), default="4096", show_default=True,
              help="RoCE MTU the fabric should run; the netdev MTU must be at least this + 96.")
@click.option("--min-speed", "min_speed", type=rate(to="Mb/s", kind=int, ge=1, le=1_600_000), default=None,
              help="Minimum negotiated speed.")
@click.option("--peer-node", default=None, metavar="NODE",
              help="The node at the other end of --peer ([user@]host or, with --lab, a guest): netcheck runs there "
                   "too, the path-MTU probe goes both ways and both ends' MTU, RoCE active MTU and GID are compared.")
@click.option("--node", "near_node", default=None, metavar="NODE",
              help="With --peer-node: this end is that node instead of this machine (e.g. --lab L --node host1).")
@click.option("--probe-mtu", type=number(int, ge=68, le=65535, name="bytes 68-65535"), default=None,
              help="Send the don't-fragment probe at this size instead of the interface's MTU (the other end's MTU).")
@fleet_options
@pass_app
@click.pass_context
def netcheck(ctx, app: App, interfaces, peers, roce, roce_mtu, min_speed, peer_node, near_node, probe_mtu, nodes,
             **fleet) -> int:
    """Check that each data interface is ready for NVMe/RoCEv2 (link, speed, MTU, RDMA port, RoCE v2 GID, path MTU).

    Without --iface only the interfaces that carry data are judged (the routes to the --peer addresses, else
    those that report a speed or an RDMA port); a management NIC without speed is listed as information."""
    if peer_node or near_node:
        return both_ends(app, list(peers), peer_node, near_node, fleet)
    if not single_node(nodes, **fleet):
        return run_fleet(app, ctx, "netcheck")
    run = app.new_run("netcheck")
    result = netcheck_lib.check(app.runner(run), list(interfaces) or None, list(peers), roce, int(roce_mtu), min_speed,
                                probe_mtu)
    extra = result.to_dict()
    extra.pop("verdict")
    human = [f"not judged: {i.name} ({'no speed' if not i.speed_mbps else 'no route to a --peer'})"
             for i in result.not_judged]
    return finish_verdict(app, run, "netcheck", result.verdict, extra, human)


def both_ends(app: App, peers: list[str], peer_node: str | None, near_node: str | None, fleet: dict) -> int:
    """netcheck at this end (or --node) and at --peer-node, each a sub-run, compared (fxprobe.network.both_ends)."""
    import sys
    from fxprobe.cli.fleet import forwarded_args, hosts
    from fxprobe.core.hosts import LocalHost
    from fxprobe.core.verdict import Criterion, Verdict
    from fxprobe.host import fleet as fleet_lib
    from fxprobe.network.both_ends import compare, end
    if not peer_node:
        raise BadInput("--node goes with --peer-node (the node at the other end of --peer)")
    if len(peers) != 1:
        raise BadInput("--peer-node needs exactly one --peer: the address of that node on the data path")
    names = [n for n in (near_node, peer_node) if n]
    found, prefixes = hosts(",".join(names), fleet.get("lab"), fleet.get("ssh_identity"), fleet.get("ssh_port"))
    remote = fleet.get("remote_fxprobe") or "fxprobe"
    import shlex
    commands = prefixes or [tuple(shlex.split(remote))] * len(found)
    far_host, far_cmd = found[-1], commands[-1]
    near_host, near_cmd = (found[0], commands[0]) if near_node else \
        (LocalHost("local"), (sys.executable, "-m", "fxprobe.cli.main"))
    if near_host.name == far_host.name:
        raise BadInput(f"--node and --peer-node are both {far_host.name}")
    own = forwarded_args(app.command_args, ("--peer", "--peer-node", "--node", "--probe-mtu"))
    timeout = fleet.get("node_timeout") or 900
    run = app.new_run("netcheck")
    runner = app.runner(run)
    app.progress(f"netcheck from both ends: {near_host.name} -> {peers[0]} ({far_host.name})")
    near = fleet_lib.run_node(runner, run, fleet_lib.NodeCall(near_host, near_cmd, ("--peer", peers[0], *own)),
                              "netcheck", timeout)
    near_end = end(near.results, peers[0])
    criteria = [Criterion(f"{near.node}: {c.name}", c.outcome, c.measured, c.threshold, c.comparator, c.unit,
                          c.detail, f"{near.run_dir}/results.json") for c in _criteria(near)]
    nodes, far = [near], None
    if near_end["source"]:
        back = ["--peer", near_end["source"]] + (["--probe-mtu", str(near_end["mtu"])] if near_end["mtu"] else [])
        back += forwarded_args(app.command_args, ("--peer", "--peer-node", "--node", "--probe-mtu", "--iface"))
        far = fleet_lib.run_node(runner, run, fleet_lib.NodeCall(far_host, far_cmd, tuple(back)), "netcheck", timeout)
        nodes.append(far)
        criteria += [Criterion(f"{far.node}: {c.name}", c.outcome, c.measured, c.threshold, c.comparator, c.unit,
                               c.detail, f"{far.run_dir}/results.json") for c in _criteria(far)]
        criteria += compare(near.node, near.results, far.node, far.results, peers[0])
    else:
        criteria.append(Criterion(f"route to {peers[0]}", Outcome.FAIL, "no route",
                                  detail=f"{near.node} has no route to {peers[0]}: the other end was not checked"))
    verdict = Verdict(f"netcheck from both ends ({near_host.name} - {far_host.name})", tuple(criteria))
    extra = {"nodes": [n.to_dict() for n in nodes], "peer": peers[0], "peer_node": far_host.name,
             "near_node": near_host.name}
    return finish_verdict(app, run, "netcheck", verdict, extra, fleet_lib.table(nodes))


def _criteria(node) -> list:
    from fxprobe.core.verdict import Criterion
    verdict = node.results.get("verdict") if isinstance(node.results.get("verdict"), dict) else None
    if verdict is None:
        return [Criterion("netcheck", Outcome.ERROR, detail=node.reason or "no result")]
    return [Criterion.from_dict(c) for c in verdict.get("criteria") or []] or \
        [Criterion("netcheck", Outcome(node.outcome) if node.outcome in [o.value for o in Outcome] else Outcome.ERROR,
                   detail=node.reason or verdict.get("reason", ""))]
