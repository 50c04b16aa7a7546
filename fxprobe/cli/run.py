"""``fxprobe run NAME --target DEV|DIR`` and ``fxprobe sweep NAME --vary jobs=1,2,4``."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import click

from fxprobe.cli.app import App, finish, finish_verdict, pass_app
from fxprobe.cli.options import PORT, POSITIVE_INT, duration, lab_option, rate
from fxprobe.cli.profile import max_bytes_of, size_option
from fxprobe.cli.statusline import metrics_options, metrics_sink, status_for
from fxprobe.core.errors import BadInput
from fxprobe.core.hosts import LocalHost, SshHost
from fxprobe.core.verdict import Outcome

FIO_PORT = 8765   # fxprobe.tools.fio.FIO_PORT; the heavy modules (pandas) load only when a command runs
STATUS_INTERVAL_S = 5.0   # off a terminal: one status line per 5 s of a run or sweep


def parse_nodes(text: str | None, port: int, identity: str | None, ssh_port: int, user: str) -> list | None:
    """``local``, ``local:127.0.0.2`` or ``[user@]address`` items, comma separated."""
    from fxprobe.workload import run as workload
    if not text:
        return None
    nodes = []
    for item in [i.strip() for i in text.split(",") if i.strip()]:
        if item == "local" or item.startswith("local:"):
            address = item.partition(":")[2] or "127.0.0.1"
            nodes.append(workload.Node(LocalHost(f"local:{address}"), address, port))
        else:
            who, _, address = item.rpartition("@")
            host = SshHost(address, address, port=ssh_port, user=who or user,
                           identity=Path(identity) if identity else None)
            nodes.append(workload.Node(host, address, port))
    names = [n.name + f":{n.port}" for n in nodes]
    if len(set(names)) != len(names):
        raise BadInput(f"--nodes {text!r}: a node is listed twice")
    return nodes


@contextlib.contextmanager
def run_nodes(text: str | None, lab: str | None, port: int, identity: str | None, ssh_port: int,
              user: str) -> Iterator[list | None]:
    """The --nodes for a run. With --lab they are guests of that lab, reached through loopback
    ports QEMU forwards for the run (removed at the end, also on error)."""
    if lab is None:
        yield parse_nodes(text, port, identity, ssh_port, user)
        return
    if not text:
        raise BadInput("--lab needs --nodes naming its guests, e.g. --nodes host1,host2")
    from fxprobe.lab.forward import guest_nodes
    from fxprobe.lab.vm import Lab
    with guest_nodes(Lab.load(lab), [i.strip() for i in text.split(",") if i.strip()], port) as nodes:
        yield nodes


def common_options(function):
    options = [
        click.option("--target", required=True, help="Directory or block device (/dev/...) to run on."),
        click.option("--repeats", type=POSITIVE_INT, default=None, help="Repeats (default: the profile's, 3)."),
        click.option("--runtime", type=duration(ge=0.5), default=None, help="Measured time per repeat."),
        click.option("--ramp", type=duration(ge=0), default=None, help="Warm-up time discarded per repeat."),
        click.option("--nodes", default=None, help="Run from these nodes with fio client/server: local, local:ADDR or [user@]host, comma separated; with --lab, its guests (host1,host2)."),
        click.option("--fio-port", type=PORT, default=FIO_PORT, show_default=True,
                     help="fio --server port on each node (inside each guest with --lab)."),
        lab_option,
        click.option("--ssh-identity", default=None, help="SSH key for --nodes."),
        click.option("--ssh-port", type=PORT, default=22, show_default=True),
        click.option("--ssh-user", default="root", show_default=True),
        click.option("--allow-serial", "allow", multiple=True, help="Serial (or loop:<file>) of a device that may be written (repeatable)."),
        click.option("--ceiling", type=rate(gt=0), default=None, help="Array port ceiling: report the aggregate as a "
                     "fraction of it (information: G3 judges against gates.toml g3.nic_ceiling_gbps)."),
        click.option("--ceiling-from", "ceiling_from", type=click.Path(path_type=Path), default=None,
                     help="Take the ceiling from a `fxprobe netcheck` run folder (the port's line rate)."),
        click.option("--ceiling-iface", default=None, help="Which netcheck interface is the array port."),
    ]
    for option in reversed(options):
        function = option(function)
    return size_option(function)


@click.command()
@click.argument("name")
@common_options
@click.option("--dry-run", is_flag=True, help="Print the job and the target checks; run nothing.")
@click.option("--set", "sets", multiple=True, help="Override a profile key, e.g. --set threads=8 (repeatable).")
@click.option("--no-layout", is_flag=True,
              help="Read profile on a block device: read the data already there and write nothing "
                   "(a namespace other users share; no --allow-serial needed).")
@metrics_options
@pass_app
def run(app: App, name, target, repeats, runtime, ramp, nodes, fio_port, lab, ssh_identity, ssh_port, ssh_user,
        allow, ceiling, ceiling_from, ceiling_iface, scale, max_bytes, dry_run, sets, no_layout,
        metrics_port, metrics_file) -> int:
    """Run profile NAME on a target: layout, cold/warm cache, ramp, repeats, steady state, merged percentiles."""
    overrides = parse_sets(sets)
    ceiling_value = ceiling_bps(ceiling, ceiling_from, ceiling_iface)
    with run_nodes(nodes, lab, fio_port, ssh_identity, ssh_port, ssh_user) as node_list:
        args = dict(nodes=node_list, repeats=repeats, scale=scale, max_bytes=max_bytes_of(max_bytes),
                    runtime=runtime, ramp=ramp, overrides=overrides, allow=tuple(allow), layout=not no_layout)
        return _run(app, name, target, args, dry_run, ceiling_value, metrics_sink(metrics_port, metrics_file))


def _run(app: App, name: str, target: str, args: dict, dry_run: bool, ceiling_value: float | None,
         metrics=None) -> int:
    from fxprobe.workload import run as workload
    from fxprobe.workload.plan import plan_run
    if dry_run:
        plan = plan_run(name, target, strict=False, **args)
        app.emit(plan.to_dict(), plan.lines() + ["dry run: nothing was written or run"])
        plan.check.require_safe()   # a refused target still exits 2, after showing why
        return 0
    run_dir = app.new_run("run")
    run_dir.note(workload={"profile": name, "nodes": [n.name for n in args["nodes"]] if args["nodes"] else ["local"]})
    status = status_for(app, "run", STATUS_INTERVAL_S, metrics)
    try:
        result = workload.run_profile(name, target, runner=app.runner(run_dir), progress=app.progress,
                                      ceiling_bps=ceiling_value, status=status, **args)
    finally:
        status.close()
    verdict = workload.run_verdict(result)
    record, lines = result.to_dict(), result.lines()
    if args["nodes"]:       # G3 counts only nodes that are other machines than this one (workload.node_kinds)
        local = [name for name, kind in result.node_kinds.items() if kind == "local"]
        if len(args["nodes"]) > 1 and local:
            lines.append(f"NOTE: {', '.join(local)} run on this machine: G3 does not count them as nodes sharing "
                         "the array, and judges the read-back only of distinct nodes (gates g3.nic_ceiling_gbps)")
    return finish_verdict(app, run_dir, "run", verdict, {"workload": record, "array_seen": list(result.array_seen)},
                          lines)


def ceiling_bps(ceiling: float | None, ceiling_from: Path | None, iface: str | None) -> float | None:
    """--ceiling in Gb/s, or the line rate from a netcheck run folder."""
    if ceiling is not None and ceiling_from is not None:
        raise BadInput("give --ceiling or --ceiling-from, not both")
    if ceiling_from is not None:
        from fxprobe.workload import run as workload
        from fxprobe.core.rundir import RunDir
        bps, _ = workload.ceiling_from_netcheck(RunDir.open(ceiling_from).results(), iface, str(ceiling_from))
        return bps
    return ceiling * 1e9 if ceiling else None


def parse_sets(sets) -> dict:
    """``--set KEY=VALUE`` items, typed and range-checked by the profile schema (``abc`` is not an iodepth)."""
    from fxprobe.workload.profiles import check_overrides
    overrides = {}
    for item in sets:
        key, sep, value = item.partition("=")
        if not sep:
            raise BadInput(f"--set {item!r}: expected KEY=VALUE")
        overrides[key.strip()] = value.strip()
    return check_overrides(overrides)


@click.command()
@click.argument("name")
@common_options
@click.option("--vary", required=True, help="KEY=V1,V2,... with KEY jobs, threads, iodepth or concurrency.")
@click.option("--p99-limit", "p99_limit_ms", type=duration(bare="ms", gt=0), required=True,
              help="p99 latency limit for the knee.")
@metrics_options
@pass_app
def sweep(app: App, name, target, repeats, runtime, ramp, nodes, fio_port, lab, ssh_identity, ssh_port, ssh_user,
          allow, ceiling, ceiling_from, ceiling_iface, scale, max_bytes, vary, p99_limit_ms,
          metrics_port, metrics_file) -> int:
    """Bandwidth/latency curve of NAME over one knob, and its knee under a p99 limit."""
    from fxprobe.workload import sweep as sweep_lib
    key, values = sweep_lib.parse_vary(vary)
    ceiling_value = ceiling_bps(ceiling, ceiling_from, ceiling_iface)
    metrics = metrics_sink(metrics_port, metrics_file)
    with run_nodes(nodes, lab, fio_port, ssh_identity, ssh_port, ssh_user) as node_list:
        run_dir = app.new_run("sweep")
        status = status_for(app, "sweep", STATUS_INTERVAL_S, metrics)
        try:
            result = sweep_lib.run_sweep(
                name, target, key, values, p99_limit_ns=int(p99_limit_ms * 1e6), runner=app.runner(run_dir),
                progress=app.progress, nodes=node_list, status=status,
                repeats=repeats, scale=scale, max_bytes=max_bytes_of(max_bytes), runtime=runtime, ramp=ramp,
                allow=tuple(allow), ceiling_bps=ceiling_value)
        finally:
            status.close()
    outcome = Outcome.PASS if result.knee is not None else Outcome.FAIL
    return finish(app, run_dir, "sweep", {"sweep": result.to_dict()}, result.lines(), outcome)
