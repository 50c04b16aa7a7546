"""``fxprobe line-efficiency``: RDMA READ bandwidth against the nominal line rate (G2's 83 %)."""

from __future__ import annotations

import click

from fxprobe.network import line_efficiency as le
from fxprobe.cli import nodes
from fxprobe.cli.app import App, finish_verdict, pass_app
from fxprobe.cli.options import INT_LIST, PORT, POSITIVE_INT, duration, lab_option, number, rate
from fxprobe.core.errors import BadInput


@click.command("line-efficiency")
@click.option("--peer", required=True, help="Address (or lab guest name) of the node serving ib_read_bw.")
@click.option("--server-node", default=None, help="Where to start the server: [user@]host[:port], or a lab guest with --lab (default with --lab: the peer).")
@click.option("--server-running", is_flag=True, help="The server already runs on the peer; do not start one.")
@click.option("--client-node", default=None, help="Where the client runs (default: here).")
@lab_option
@click.option("--transport", type=click.Choice(["rdma", "tcp"]), default="rdma", show_default=True,
              help="rdma: ib_read_bw; tcp: iperf3 with parallel streams (labelled TCP everywhere).")
@click.option("--sizes", "--size", "sizes", type=INT_LIST, default="1M", show_default=True,
              help="Message size(s) in bytes; several (comma-separated) make a sweep.")
@click.option("--qps", type=INT_LIST, default="4", show_default=True, help="Queue pairs; several make a sweep.")
@click.option("--duration", type=duration(kind=int, ge=1), default=le.DEFAULT_DURATION, show_default=True, help="Time per measurement (-D, whole seconds).")
@click.option("--repeat", type=POSITIVE_INT, default=1, show_default=True, help="Repeat each point N times.")
@click.option("--line-rate", type=rate(gt=0), default=None, help="Nominal link rate (default: the interface's speed).")
@click.option("--threshold", type=number(gt=0, le=1, name="fraction 0 < f <= 1"), default=0.83, show_default=True, help="Pass at this line efficiency or above.")
@click.option("--port", type=PORT, default=le.DEFAULT_PORT, show_default=True, help="TCP port of the test's control connection.")
@click.option("--device", default=None, help="RDMA device on the client (default: chosen by rdma_cm from the address).")
@click.option("--outs", "outstanding", type=POSITIVE_INT, default=None,
              help="Outstanding RDMA READs per QP (default: the device maximum); lower it on a lossy emulated link.")
@click.option("--streams", type=POSITIVE_INT, default=8, show_default=True, help="Parallel TCP streams (--transport tcp).")
@pass_app
def line_efficiency(app: App, peer, server_node, server_running, client_node, lab, transport, sizes, qps, duration,
                    repeat, line_rate, threshold, port, device, outstanding, streams) -> int:
    """Measure RDMA READ goodput to PEER and report line and protocol efficiency against --threshold."""
    if server_node and server_running:
        raise BadInput("--server-node and --server-running exclude each other")
    if not server_node and not server_running:
        if lab is None:
            raise BadInput("say where the server runs: --server-node NODE, or --server-running if it already runs")
        server_node = peer
    settings = le.Settings(peer=peer, transport=transport, size=sizes[0], qps=qps[0], duration=duration,
                           repeats=repeat, threshold=threshold,
                           line_rate_bps=line_rate * 1e9 if line_rate else None, port=port, device=device,
                           streams=streams, outstanding=outstanding).validate()
    client = nodes.resolve(client_node, lab)
    server = None if server_running else nodes.resolve(server_node, lab)
    run = app.new_run("line-efficiency")
    app.progress(f"measuring {le.label(transport)} to {peer} for {duration} s x {len(sizes) * len(qps) * repeat}")
    outcome = le.run(app.runner(run), settings, client=client, server_host=server,
                     sizes=sizes if len(sizes) > 1 else None, qps_list=qps if len(qps) > 1 else None)
    return finish_verdict(app, run, "line-efficiency", outcome.verdict, outcome.to_dict(), le.lines(outcome))
