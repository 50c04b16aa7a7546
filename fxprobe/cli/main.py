"""``fxprobe``: the top-level group, global options, and the one map from errors to exit codes."""

from __future__ import annotations

import importlib
import sys
import traceback
from pathlib import Path

import click

from fxprobe import __version__
from fxprobe.cli import conventions
from fxprobe.cli.app import App
from fxprobe.core.errors import EXIT_ERROR, EXIT_USAGE, FxprobeError
from fxprobe.core.rundir import EXIT_INTERRUPTED

# Each entry: command name -> (module, attribute). Commands register here and nowhere else;
# a module is imported only when its command runs (or for --help), so a node starts fast.
COMMANDS = {
    "doctor": ("fxprobe.cli.doctor", "doctor"),
    "lab": ("fxprobe.cli.lab", "lab"),
    "discover": ("fxprobe.cli.fabrics", "discover"),
    "connect": ("fxprobe.cli.fabrics", "connect"),
    "disconnect": ("fxprobe.cli.fabrics", "disconnect"),
    "inventory": ("fxprobe.cli.inventory", "inventory"),
    "selftest": ("fxprobe.cli.selftest", "selftest"),
    "preflight": ("fxprobe.cli.preflight", "preflight"),
    "netcheck": ("fxprobe.cli.netcheck", "netcheck"),
    "line-efficiency": ("fxprobe.cli.line_efficiency", "line_efficiency"),
    "profile": ("fxprobe.cli.profile", "profile"),
    "run": ("fxprobe.cli.run", "run"),
    "sweep": ("fxprobe.cli.run", "sweep"),
    "pattern": ("fxprobe.cli.pattern", "pattern"),
    "benchmark": ("fxprobe.cli.benchmark", "benchmark"),
    "fault": ("fxprobe.cli.fault", "fault"),
    "soak": ("fxprobe.cli.soak", "soak"),
    "gate": ("fxprobe.cli.gate", "gate"),
    "report": ("fxprobe.cli.report", "report"),
    "claims": ("fxprobe.cli.claims", "claims"),
    "model-switch": ("fxprobe.cli.calc", "model_switch"),
    "cost": ("fxprobe.cli.calc", "cost"),
    "rehearse": ("fxprobe.cli.rehearse", "rehearse"),
    "ledger": ("fxprobe.cli.ledger", "ledger"),
}


class LazyGroup(click.Group):
    """Imports a command's module only when that command is asked for."""

    def list_commands(self, ctx):
        return [name for name in COMMANDS if self.get_command(ctx, name) is not None]

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        module_name, attribute = COMMANDS[name]
        module = importlib.import_module(module_name)
        command = getattr(module, attribute, None)
        return conventions.adopt(command, name) if command is not None else None

    def resolve_command(self, ctx, args):
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            rest = conventions.rewrite(self, ctx, name, rest)
            if isinstance(ctx.obj, App):
                ctx.obj.command_args = list(rest)    # as given: --nodes runs the same on each node
        return name, command, rest


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="fxprobe")
@click.option("--run-dir", type=click.Path(path_type=Path), default=None,
              help="Write evidence to this folder instead of runs/<UTC time>-<command>/.")
@click.option("--runs", "runs_base", type=click.Path(path_type=Path), default=None,
              envvar="FXPROBE_RUNS", help="Base folder for run directories (default ./runs).")
@click.option("--json", "json_output", is_flag=True,
              help="Print the machine-readable result on stdout (also accepted after the command, as -o json).")
@click.option("-o", "--output-format", "output_format", type=click.Choice(conventions.OUTPUT_FORMATS), default=None,
              metavar="FORMAT", help="normal or json (as nvme-cli's -o json); same as --json.")
@click.option("-v", "--verbose", count=True, help="More detail; -v also shows tracebacks.")
@click.option("-q", "--quiet", count=True, help="Less output.")
@click.pass_context
def cli(ctx: click.Context, run_dir, runs_base, json_output, output_format, verbose, quiet):
    """Characterize an NVMe-oF array for LLM KV cache and judge acceptance gates G1-G4."""
    app = ctx.obj if isinstance(ctx.obj, App) else App()   # main() passes one holding the real command line
    json_output = output_format == "json" if output_format else json_output
    app.json_output, app.verbosity, app.run_dir = json_output, verbose - quiet, run_dir
    if runs_base is not None:
        app.runs_base = runs_base
    app.runs_given = runs_base is not None or run_dir is not None or app.runs_given
    ctx.obj = app


conventions.adopt(cli, "")


def _failed(app: App, reason: str, code: int, suffix: str = "") -> int:
    """One line for the person; the same reason and exit code recorded as the error outcome of the runs begun."""
    failed = app.fail_open_runs(reason, code)
    where = f" [evidence, outcome error: {', '.join(str(run.path) for run in failed)}]" if failed else ""
    click.echo(f"fxprobe: {reason}{suffix}{where}", err=True)
    return code


def _one_line(exc: click.ClickException) -> str:
    """A usage error as one line naming the command and the option: bad input is one line, like every error."""
    ctx = getattr(exc, "ctx", None)
    where = ctx.command_path if ctx is not None else "fxprobe"
    text = " ".join(exc.format_message().split())
    return f"{where}: {text}" + (f" (see '{where} --help')" if isinstance(exc, click.UsageError) else "")


def main(argv: list[str] | None = None) -> int:
    """Entry point: every error becomes one line and an exit code (0-4)."""
    args = sys.argv[1:] if argv is None else argv
    verbose = any(a in ("-v", "--verbose") or (a.startswith("-v") and set(a[1:]) == {"v"}) for a in args)
    app = App(argv=["fxprobe", *conventions.redact_argv(args)])
    try:
        code = cli.main(args=args, prog_name="fxprobe", standalone_mode=False, obj=app)
    except (click.exceptions.Abort, KeyboardInterrupt):
        code = _failed(app, "interrupted", EXIT_INTERRUPTED)
    except click.ClickException as exc:
        click.echo(_one_line(exc), err=True)
        code = EXIT_USAGE if exc.exit_code == 2 else exc.exit_code
        app.fail_open_runs(exc.format_message(), code)
    except FxprobeError as exc:
        if verbose:
            traceback.print_exc()
        code = _failed(app, str(exc), exc.exit_code)
    except Exception as exc:  # the last line of defence: still no traceback unless -v
        if verbose:
            traceback.print_exc()
        code = _failed(app, f"internal error: {type(exc).__name__}: {exc}", EXIT_ERROR,
                       " (run with -v for the traceback)")
    if code is None:
        code = 0
    if argv is None:
        sys.exit(code)
    return code


if __name__ == "__main__":
    main()
