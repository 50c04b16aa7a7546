"""``fxprobe model-switch`` and ``fxprobe cost``: the buyer's calculators (formulas in fxprobe.gates.calc)."""

from __future__ import annotations

import click

from fxprobe.gates import calc
from fxprobe.cli.app import finish, pass_app
from fxprobe.core.errors import BadInput
from fxprobe.core.verdict import Criterion, Outcome, format_number
from fxprobe.cli.options import NON_NEGATIVE_FLOAT, PERCENT, POSITIVE_FLOAT, duration, number, rate


@click.command(name="model-switch")
@click.option("--switches", "switches_per_hour", type=NON_NEGATIVE_FLOAT, required=True, help="Model switches per hour.")
@click.option("--load-time", "load_times", type=duration(ge=0), multiple=True, help="Measured time per switch (repeat).")
@click.option("--model-gb", type=POSITIVE_FLOAT, default=None, help="Model size in GB (with --read-rate).")
@click.option("--read-rate", "read_gbps", type=rate(to="GB/s", gt=0), multiple=True,
              help="Read bandwidth, e.g. 12GB/s (bytes) or 100G (bits); repeat to compare.")
@click.option("--overhead", "overhead_s", type=duration(ge=0), default=0.0, show_default=True, help="Fixed time added to every switch.")
@click.option("--utilization", "target_pct", type=PERCENT, multiple=True,
              help="A stated utilization in % to invert into the switch time it implies (repeat).")
@pass_app
def model_switch(app, switches_per_hour, load_times, model_gb, read_gbps, overhead_s, target_pct):
    """Effective GPU utilization U = max(0, 1 - N*t/3600) under N switches/hour of t seconds each."""
    scenarios = [calc.scenario(f"load time {format_number(t, 's')}", switches_per_hour, t) for t in load_times]
    if read_gbps and model_gb is None:
        raise BadInput("model-switch: --read-rate needs --model-gb")
    for bw in read_gbps:
        t = calc.load_time(model_gb, bw, overhead_s)
        scenarios.append(calc.scenario(f"{format_number(model_gb, 'GB')} at {format_number(bw, 'GB/s')}",
                                       switches_per_hour, t))
    implied = [{"utilization_pct": u, "switch_time_s": calc.switch_time_for(u / 100.0, switches_per_hour)}
               for u in target_pct]
    if not scenarios and not implied:
        raise BadInput("model-switch: give --load-time, --model-gb with --read-rate, or --utilization")
    human = [f"formula: U = max(0, 1 - N * t / 3600), N = {format_number(switches_per_hour)} switches/hour"]
    human += [f"  {s.label}: t = {format_number(s.switch_time_s, 's')} -> utilization "
              f"{format_number(s.utilization_pct, '%')}" for s in scenarios]
    human += [f"  utilization {format_number(i['utilization_pct'], '%')} implies t = "
              f"{format_number(i['switch_time_s'], 's')} per switch" for i in implied]
    run = app.new_run("model-switch")
    return finish(app, run, "model-switch", {"scenarios": [s.to_dict() for s in scenarios], "implied": implied,
                                             "formula": "U = max(0, 1 - N*t/3600)"}, human, Outcome.PASS)


# sums of prices over nodes stay finite (1e300 x 1e22 nodes was inf, judged "nan %")
COUNT = number(int, ge=1, le=10**6, name="integer 1-1000000")
PRICE = number(ge=0, le=1e15, name="price 0-1e15")
PRICE_POSITIVE = number(gt=0, le=1e15, name="price > 0, up to 1e15")


@click.command()
@click.option("--nodes", type=COUNT, required=True, help="Inference nodes.")
@click.option("--node-price", type=PRICE_POSITIVE, required=True, help="Price of one GPU node.")
@click.option("--array-price", type=PRICE, required=True, help="Price of one storage array.")
@click.option("--nodes-per-array", type=COUNT, default=8, show_default=True)
@click.option("--per-node-storage-price", type=PRICE, default=0.0, show_default=True,
              help="Storage networking per node (NIC, cables, switch port).")
@click.option("--max-share", type=PERCENT, default=10.0, show_default=True,
              help="Budget rule to judge against: storage at most this % of the GPU spend.")
@pass_app
def cost(app, nodes, node_price, array_price, nodes_per_array, per_node_storage_price, max_share):
    """Storage spend as a share of the GPU budget: arrays*price + nodes*storage-per-node over nodes*node price."""
    share = calc.storage_cost_share(nodes, node_price, array_price, nodes_per_array, per_node_storage_price)
    criterion = Criterion.compare("storage share of GPU budget", share.share_pct, "<=", max_share, unit="%",
                                  detail=f"{share.arrays} arrays, storage {format_number(share.storage_cost)} vs "
                                         f"GPU {format_number(share.gpu_cost)}")
    run = app.new_run("cost")
    return finish(app, run, "cost", {"cost": share.to_dict(), "criterion": criterion.to_dict()},
                  [criterion.line()], criterion.outcome)
