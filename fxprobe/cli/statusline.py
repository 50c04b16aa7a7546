"""The renderers of the live status (fxprobe.core.status) the CLI chooses between: the rich line on a
terminal, one plain line per interval off one, nothing under -q. Both write to stderr only."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from fxprobe.core.status import Event, PlainSink, Snapshot, Status, parts


class RichSink:
    """A status line redrawn in place (rich.live) on a terminal; faults and interruptions printed above
    it as they happen, progress lines of the command too (stderr is redirected through the line)."""

    def __init__(self, refresh_per_second: float = 4.0):
        from rich.console import Console
        from rich.live import Live
        self.console = Console(file=sys.stderr, highlight=False)
        self.snapshot: Snapshot | None = None
        self.live = Live(get_renderable=self._render, console=self.console, refresh_per_second=refresh_per_second,
                         transient=False, redirect_stdout=False, redirect_stderr=True)
        self.started = False

    def _render(self):
        from rich.text import Text
        if self.snapshot is None:
            return Text("")
        words = parts(self.snapshot, time.time())
        text = Text()
        for i, word in enumerate(words):
            if i:
                text.append(" | ", style="dim")
            style = "bold" if i == 0 else ("bold red" if word.startswith(("faults", "now:")) else "")
            text.append(word, style=style)
        return text

    def update(self, snapshot: Snapshot, event: Event | None) -> None:
        self.snapshot = snapshot
        if not self.started:
            self.live.start()
            self.started = True
        if event is not None and event.category in ("fault", "interruption"):
            when = time.strftime("%H:%M:%S", time.gmtime(event.ts))
            where = f" on {event.node}" if event.node else ""
            self.live.console.print(f"{when} {event.category} {event.kind}{where}: {event.detail}",
                                    style="red", markup=False, highlight=False)
        self.live.refresh()

    def close(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        if self.started:
            self.live.refresh()
            self.live.stop()


def status_for(app, command: str, interval_s: float, metrics=None) -> Status:
    """The command's Status with the sinks this invocation wants: the rich line on a terminal, one
    plain line per ``interval_s`` off one (under --json too: stderr only), none under -q; the metrics
    exporter when --metrics-port/--metrics-file asked for it."""
    sinks = []
    if app.verbosity >= 0:
        if sys.stderr.isatty():
            sinks.append(RichSink())
        elif not app.json_output:
            sinks.append(PlainSink(lambda text: click.echo(text, err=True), interval_s))
    if metrics is not None:
        sinks.append(metrics)
    return Status(command, sinks)


def metrics_options(command):
    """--metrics-port and --metrics-file on a command (soak, run, sweep, fault run)."""
    command = click.option("--metrics-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                           help="Write the live metrics to this file (node_exporter textfile format, *.prom), "
                                "rewritten atomically every second.")(command)
    return click.option("--metrics-port", default=None, metavar="[ADDR:]PORT",
                        help="Serve the live metrics for Prometheus on this port (all addresses unless "
                             "ADDR:PORT names one) while the command runs.")(command)


def metrics_sink(port, path):
    """The exporter --metrics-port/--metrics-file ask for, or None."""
    if port is None and path is None:
        return None
    from fxprobe.core.metrics import MetricsSink, parse_listen
    return MetricsSink(parse_listen(port) if port is not None else None, path)
