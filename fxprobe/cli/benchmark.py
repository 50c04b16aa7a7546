"""``fxprobe benchmark``: an inference benchmark (vllm bench serve) run under fxprobe's witness."""

from __future__ import annotations

from pathlib import Path

import click

from fxprobe.cli.app import App, finish_verdict, pass_app
from fxprobe.cli.options import duration
from fxprobe.workload import witness


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--result", "result_file", type=click.Path(path_type=Path), required=True,
              help="The file the command writes (vllm bench serve --save-result --result-filename FILE); it must "
                   "not exist yet.")
@click.option("--timeout", type=duration(gt=0), default=witness.DEFAULT_TIMEOUT_S, show_default=True,
              help="Stop the command after this long (an ERROR).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@pass_app
def benchmark(app: App, result_file, timeout, command) -> int:
    """Run COMMAND (after --), keep the file it writes, and check it against the command's own summary and
    lifetime; gate g2/g3 then print its files as witnessed."""
    witness.check_arguments(command, result_file)
    run = app.new_run(witness.COMMAND)
    app.progress(f"running {' '.join(command)}")
    verdict, extra, _ = witness.run(app.runner(run), run, command, result_file, timeout)
    return finish_verdict(app, run, witness.COMMAND, verdict, extra, witness.lines(verdict, extra))
