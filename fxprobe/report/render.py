"""Markdown, self-contained HTML (PNG plots inlined as data: URIs) and JUnit XML of the criteria."""

from __future__ import annotations

import base64
import html
import shlex

from fxprobe.report.collect import RunView
from fxprobe.core.verdict import Criterion, Outcome, Verdict, format_number


def _cells(c: Criterion) -> list[str]:
    threshold = f"{c.comparator} {c.threshold_text()}" if c.comparator else ""
    return [c.outcome.value.upper(), c.name, c.measured_text(), threshold, c.margin_text(), c.detail, c.evidence]


HEADER = ["outcome", "criterion", "measured", "threshold", "margin", "detail", "evidence"]


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(str(x).replace("|", "\\|").replace("\n", " ") for x in cells) + " |"


def gate_verdicts(runs: list[RunView]) -> list[Verdict]:
    """The gate table: the verdicts of `gate` runs only (a run's own verdict, e.g. a selftest's, stays with
    the run), so the table is the one `fxprobe gate` printed."""
    return [v for run in runs for v in run.gates]


def gate_table(verdicts: list[Verdict]) -> list[list[str]]:
    """Per gate: name, OUTCOME, criteria counted by outcome, and why it did not pass (reason, missed criteria)."""
    rows = []
    for v in verdicts:
        counts = {o: sum(1 for c in v.criteria if c.outcome is o) for o in Outcome}
        missed = [c.name for c in v.criteria if c.outcome in (Outcome.FAIL, Outcome.ERROR)]
        reason = "; ".join(filter(None, [v.reason, f"missed: {', '.join(missed)}" if missed else ""]))
        rows.append([v.name, v.outcome.value.upper(), ", ".join(f"{n} {o.value}" for o, n in counts.items() if n),
                     reason])
    return rows


MAX_COMMANDS = 30


def _command_lines(run: RunView) -> list[str]:
    argv = run.results.get("argv")
    lines = [shlex.join(str(a) for a in argv)] if isinstance(argv, list) and argv else []
    subprocesses = list(run.commands[:MAX_COMMANDS])
    if len(run.commands) > MAX_COMMANDS:
        subprocesses.append(f"... {len(run.commands) - MAX_COMMANDS} more in commands.jsonl")
    return lines + subprocesses


def _evidence_html(run: RunView, text: str) -> str:
    parts = []
    for piece in text.split(" vs "):
        target = run.bundle_path(piece)
        parts.append(f"<a href='{html.escape(target)}'>{html.escape(piece)}</a>" if target else html.escape(piece))
    return " vs ".join(parts)


def markdown(title: str, runs: list[RunView], plots: dict[str, bytes], created: str) -> str:
    verdicts = gate_verdicts(runs)
    lines = [f"# {title}", "", f"Created {created}. Evidence: `evidence/` (hashes in `manifest.json`).", ""]
    if verdicts:
        lines += ["## Gate table", "", _md_row(["gate", "outcome", "criteria", "reason"]), _md_row(["---"] * 4)]
        lines += [_md_row(row) for row in gate_table(verdicts)] + [""]
    for name in plots:
        lines += [f"![{name}](plots/{name}.png)", ""]
    for run in runs:
        lines += [f"## Run `{run.name}`", "", f"command `{run.command}`, outcome **{run.outcome}**, "
                  f"finished {run.results.get('finished', '?')}; files in `evidence/{run.name}/`", ""]
        commands = _command_lines(run)
        if commands:
            lines += ["Command line, then every subprocess it started:", "", "```"] + commands + ["```", ""]
        for v in run.verdicts:
            lines += [f"### {v.name}: {v.outcome.value.upper()}" + (f" - {v.reason}" if v.reason else ""), "",
                      _md_row(HEADER), _md_row(["---"] * len(HEADER))]
            lines += [_md_row(_cells(c)) for c in v.criteria] + [""]
        claims = run.results.get("claims")
        if isinstance(claims, list) and claims:
            lines += ["### Claims", "", _md_row(["outcome", "claim", "recomputed", "difference"]), _md_row(["---"] * 4)]
            for c in claims:
                values = ", ".join(f"{r['label']}: {format_number(r['value'], c.get('unit', ''))}"
                                   for r in c.get("recomputed", []))
                lines.append(_md_row([c.get("outcome", "").upper(), f"{c.get('id')}: {c.get('text')}", values,
                                      c.get("difference", "") or c.get("note", "")]))
            lines.append("")
    return "\n".join(lines) + "\n"


def _html_table(header: list[str], rows: list[list[str]], links: dict | None = None) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = ""
    links = links or {}
    for row in rows:
        cls = str(row[0]).lower().replace(" ", "-") if row else ""
        cells = "".join(f"<td>{links[i](str(x)) if i in links else html.escape(str(x))}</td>" for i, x in enumerate(row))
        body += f"<tr class='{html.escape(cls)}'>{cells}</tr>"
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


STYLE = """body{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 1em}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}
tr.pass td:first-child{color:#2e7d32}tr.fail td:first-child{color:#c62828;font-weight:bold}
tr.not-run td:first-child{color:#757575}tr.error td:first-child{color:#6a1b9a;font-weight:bold}
tr.does-not-hold td:first-child{color:#c62828;font-weight:bold}img{max-width:100%}"""


def html_page(title: str, runs: list[RunView], plots: dict[str, bytes], created: str) -> str:
    verdicts = gate_verdicts(runs)
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p>Created {html.escape(created)}. Evidence in <code>evidence/</code>, hashes in "
             "<code>manifest.json</code>, signature in <code>manifest.sig</code>.</p>"]
    if verdicts:
        rows = [[r[1], r[0], r[2], r[3]] for r in gate_table(verdicts)]
        parts += ["<h2>Gate table</h2>", _html_table(["outcome", "gate", "criteria", "reason"], rows)]
    for name, png in plots.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"<figure><img alt='{html.escape(name)}' src='data:image/png;base64,{data}'>"
                     f"<figcaption>{html.escape(name)}</figcaption></figure>")
    for run in runs:
        parts.append(f"<h2>Run {html.escape(run.name)}</h2><p>command <code>{html.escape(run.command)}</code>, "
                     f"outcome <b>{html.escape(run.outcome)}</b>; files in "
                     f"<a href='evidence/{html.escape(run.name)}/'>evidence/{html.escape(run.name)}/</a></p>")
        commands = _command_lines(run)
        if commands:
            parts.append("<details><summary>command line and subprocesses</summary><pre>"
                         + html.escape("\n".join(commands)) + "</pre></details>")
        for v in run.verdicts:
            parts.append(f"<h3>{html.escape(v.name)}: {v.outcome.value.upper()}</h3>")
            if v.reason:
                parts.append(f"<p>{html.escape(v.reason)}</p>")
            parts.append(_html_table(HEADER, [_cells(c) for c in v.criteria],
                                     links={len(HEADER) - 1: lambda text, run=run: _evidence_html(run, text)}))
        claims = run.results.get("claims")
        if isinstance(claims, list) and claims:
            rows = [[c.get("outcome", "").upper(), f"{c.get('id')}: {c.get('text')}",
                     c.get("difference", "") or c.get("note", "")] for c in claims]
            parts += ["<h3>Claims</h3>", _html_table(["outcome", "claim", "difference"], rows)]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
