"""``--nodes`` for the per-node commands (selftest, inventory, preflight, netcheck): the same command on each
node at once, one sub-run per node in one run folder, a per-node table and one verdict (fxprobe.host.fleet)."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from fxprobe.cli.app import App, finish_verdict
from fxprobe.cli.options import PORT, duration, lab_option
from fxprobe.core.errors import BadInput
from fxprobe.core.hosts import SshHost
from fxprobe.host import fleet as fleet_lib

def fleet_options(function):
    options = [
        click.option("--nodes", default=None, metavar="NODE,...",
                     help="Run on these nodes at once: [user@]host[:port] over SSH, or with --lab its guests "
                          "(array,array2); one sub-run per node in this run folder, one verdict."),
        lab_option,
        click.option("--remote-fxprobe", default="fxprobe", show_default=True, metavar="CMD",
                     help="fxprobe on the SSH nodes (a path, or 'python3 -m fxprobe.cli.main'); lab guests use "
                          "this machine's."),
        click.option("--ssh-identity", type=click.Path(path_type=Path), default=None, help="SSH key for --nodes."),
        click.option("--ssh-port", type=PORT, default=None, help="SSH port for --nodes without :PORT (default 22)."),
        click.option("--node-timeout", type=duration(ge=1), default=900, show_default=True,
                     help="How long each node's command may take."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def single_node(nodes, lab=None, **_rest) -> bool:
    """True when the command runs here (no --nodes); --lab without --nodes is a usage error."""
    if nodes:
        return False
    if lab is not None:
        raise BadInput("--lab names the lab of --nodes: add --nodes GUEST,... (e.g. --nodes array)")
    return True


FLEET_OPTIONS = ("--nodes", "--lab", "--remote-fxprobe", "--ssh-identity", "--ssh-port", "--node-timeout")


def forwarded_args(given: list[str], drop: tuple[str, ...] = ()) -> list[str]:
    """The command's arguments as given, less the fleet's options (and ``drop``, options that take a value):
    what each node runs (rates and durations keep the units they were typed with)."""
    drop = FLEET_OPTIONS + drop
    args, skip = [], False
    for index, arg in enumerate(given):
        if skip:
            skip = False
            continue
        if arg == "--":
            args += given[index:]
            break
        if arg in drop:
            skip = True
            continue
        if any(arg.startswith(option + "=") for option in drop):
            continue
        args.append(arg)
    return args


def hosts(nodes: str, lab: str | None, identity: Path | None, port: int | None) -> tuple[list, list[tuple[str, ...]]]:
    """(hosts, fxprobe argv prefix per host) for ``--nodes``."""
    from fxprobe.cli import nodes as node_specs
    names = [n.strip() for n in nodes.split(",") if n.strip()]
    if not names:
        raise BadInput("--nodes: name at least one node")
    if lab is not None:
        from fxprobe.lab.vm import Lab
        handle = Lab.load(lab)
        found = [handle.guest(n) for n in names]
        return found, [tuple(handle.python("fxprobe.cli.main"))] * len(found)
    found = []
    for name in names:
        host = node_specs.resolve(name)
        if not isinstance(host, SshHost):
            raise BadInput(f"--nodes {name!r}: a fleet runs on remote nodes; run without --nodes here")
        if identity is not None or (port is not None and ":" not in name):
            host = SshHost(host.name, host.address, port if port is not None and ":" not in name else host.port,
                           host.user, identity=identity)
        found.append(host)
    return found, []


def run_fleet(app: App, ctx: click.Context, command: str, inputs=None, skip: tuple[str, ...] = ()) -> int:
    """Run ``command`` on every ``--nodes`` node; ``inputs(node) -> (args, stdin)`` adds per-node arguments."""
    params = ctx.params
    found, prefixes = hosts(params["nodes"], params.get("lab"), params.get("ssh_identity"), params.get("ssh_port"))
    remote = tuple(shlex.split(params.get("remote_fxprobe") or "fxprobe"))
    args = forwarded_args(app.command_args, skip)
    calls = []
    for index, host in enumerate(found):
        more, stdin = inputs(host.name) if inputs else ([], None)
        calls.append(fleet_lib.NodeCall(host, prefixes[index] if prefixes else remote, tuple(args + more), stdin))
    fleet_lib.check_names(calls)
    run = app.new_run(command)
    app.progress(f"{command} on {len(calls)} node(s) at once: {', '.join(h.name for h in found)}")
    results = fleet_lib.run_fleet(app.runner(run), run, calls, command, timeout=params.get("node_timeout") or 900)
    verdict = fleet_lib.verdict(command, results)
    extra = {"nodes": [r.to_dict() for r in results], "fleet": [h.name for h in found]}
    return finish_verdict(app, run, command, verdict, extra, fleet_lib.table(results))
