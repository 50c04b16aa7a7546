"""``fxprobe ledger``: this machine's ledger as the buyer's witness reads it, and the line to note."""

from __future__ import annotations

import click

from fxprobe.cli.app import App, finish, pass_app
from fxprobe.core import ledger as ledger_lib
from fxprobe.core.errors import ToolError
from fxprobe.core.verdict import Outcome


def _lines(summary: dict) -> list[str]:
    runs = ", ".join(f"{command} {count}" for command, count in sorted(summary["runs"].items()))
    out = [f"machine ledger: {summary['path']} on {summary['host']}",
           f"began: {summary['began']} (line 1)",
           f"lines: {summary['lines']}; runs begun: {sum(summary['runs'].values())} ({runs})"]
    out += [f"chain: BROKEN: {problem}" for problem in summary["problems"]] or ["chain: holds (every line follows "
                                                                              "the one before it, in time order)"]
    last = summary["last"]
    return out + ["", "its last line (this command's own), for the witness to note in gates.toml; a gate then finds it "
                  "again, or says the ledger was begun again or rewritten since:", "",
                  "[[ledger.checkpoints]]", f'host = "{summary["host"]}"', f"seq = {last['seq']}",
                  f'sha256 = "{last["sha256"]}"', f'noted = "<who>, {last["at"]}"']


@click.command()
@pass_app
def ledger(app: App) -> int:
    """Show this machine's ledger of runs: where it is, when it began, whether its chain holds, and its last line
    to note as a checkpoint (gates.toml [ledger]); FAIL when its chain is broken."""
    run = app.new_run("ledger")
    path = ledger_lib.machine_ledger()
    try:
        summary = ledger_lib.summary(path)
    except OSError as exc:
        raise ToolError(f"{path}: the machine's ledger cannot be read ({exc.strerror or exc})",
                        hint="set FXPROBE_MACHINE_LEDGER to a file this user can write, or XDG_STATE_HOME") from None
    if summary["last"] is None:
        raise ToolError(f"{path}: the machine's ledger holds no line (this run could not write its own)",
                        hint="set FXPROBE_MACHINE_LEDGER to a file this user can write, or XDG_STATE_HOME")
    outcome = Outcome.FAIL if summary["problems"] else Outcome.PASS
    return finish(app, run, "ledger", {"machine_ledger": summary}, _lines(summary), outcome,
                  reason="; ".join(summary["problems"][:3]))
