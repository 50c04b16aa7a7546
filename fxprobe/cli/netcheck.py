"""``fxprobe netcheck``: link, speed, MTU, RoCEv2 GID and path-MTU checks per data interface."""

from __future__ import annotations

import click

from fxprobe.network import netcheck as netcheck_lib
from fxprobe.cli.app import App, finish_verdict, pass_app
from fxprobe.cli.options import rate


@click.command()
@click.option("--iface", "interfaces", multiple=True, help="Data interface to check (repeatable; default: all with a device or RDMA port).")
@click.option("--peer", "peers", multiple=True, help="Target address: its route and a don't-fragment probe at full MTU (repeatable, one per link).")
@click.option("--roce/--no-roce", default=None, help="Require (or skip) RoCE checks; default: where an RDMA device is bound.")
@click.option("--roce-mtu", type=click.Choice(["1024", "2048", "4096"]), default="4096", show_default=True,
              help="RoCE MTU the fabric should run; the netdev MTU must be at least this + 96.")
@click.option("--min-speed", "min_speed", type=rate(to="Mb/s", kind=int, ge=1, le=1_600_000), default=None,
              help="Minimum negotiated speed.")
@pass_app
def netcheck(app: App, interfaces, peers, roce, roce_mtu, min_speed) -> int:
    """Check that each data interface is ready for NVMe/RoCEv2 (link, speed, MTU, RDMA port, RoCE v2 GID, path MTU)."""
    run = app.new_run("netcheck")
    result = netcheck_lib.check(app.runner(run), list(interfaces) or None, list(peers), roce, int(roce_mtu), min_speed)
    extra = result.to_dict()
    extra.pop("verdict")
    return finish_verdict(app, run, "netcheck", result.verdict, extra, [])
