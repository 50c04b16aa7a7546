"""report.md and report.html from the Jinja2 templates in fxprobe/report/templates/ (edit those to rebrand).

The HTML is one self-contained file: its style is inlined and every plot is embedded as PNG data (and linked
to its file under plots/), so it reads and prints without the bundle; its evidence links point into the
unpacked bundle beside it.
"""

from __future__ import annotations

import base64
from urllib.parse import quote

import jinja2

from fxprobe.report.collect import RunView
from fxprobe.report.model import Report, gate_table  # noqa: F401  (gate_table: the rehearsal prints it)
from fxprobe.core.verdict import Verdict

__all__ = ["markdown", "html_page", "gate_verdicts", "gate_table"]

LONG_TABLE = 15          # criteria tables longer than this start collapsed in the HTML


def _cell(value) -> str:
    """A Markdown table cell: pipes escaped, newlines as spaces."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def _data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _url(path: str) -> str:
    return quote(str(path), safe="/#:")


def _css(word: str) -> str:
    """The HTML class of an outcome or decision word: "NOT RUN" -> "not-run" (report.css styles them)."""
    return str(word).lower().replace(" ", "-")


def _environment(html: bool) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("fxprobe.report", "templates"), autoescape=html,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=not html, lstrip_blocks=not html)
    env.filters.update(cell=_cell, css=_css, data_uri=_data_uri, url=_url)
    env.globals["long_table"] = LONG_TABLE
    return env


def markdown(report: Report) -> str:
    return _environment(False).get_template("report.md.j2").render(r=report)


def html_page(report: Report) -> str:
    return _environment(True).get_template("report.html.j2").render(r=report)


def gate_verdicts(runs: list[RunView]) -> list[Verdict]:
    """The gate table: the verdicts of `gate` runs only (a run's own verdict, e.g. a selftest's, stays with
    the run), so the table is the one `fxprobe gate` printed."""
    return [v for run in runs for v in run.gates]
