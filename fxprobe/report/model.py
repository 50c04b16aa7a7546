"""What a report says, as plain data the Markdown and HTML templates render (no formatting decisions in the
templates beyond layout): the headline, the gate table, every criterion with its links, the notes, the
machines, and per run its command line, its folded commands and its verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fxprobe.core.rundir import COMMANDS
from fxprobe.core.verdict import Criterion, NotJudged, Outcome, Verdict, counts_text, format_number
from fxprobe.gates.config import departures
from fxprobe.report.ceilings import artefact
from fxprobe.report.collect import RunView
from fxprobe.report.commands import CommandGroup, wrapped
from fxprobe.report.evidence import Link, criterion_links, href, run_folder
from fxprobe.report.headline import Headline, headline, untied
from fxprobe.report.rejudge import differences
from fxprobe.report.machines import Machine, machines
from fxprobe.report.notes import Note, notes
from fxprobe.report.provenance import provenance

COMMAND_WIDTH = 110      # a folded command line in report.md is cut here (whole in commands.jsonl)
MAX_GROUPS = 40          # command lines per run in report.md before "... N more"


@dataclass(frozen=True)
class Row:
    word: str                 # PASS, FAIL, NOT RUN, ERROR, ARTEFACT
    name: str
    measured: str
    threshold: str
    margin: str
    detail: str
    links: tuple[Link, ...]


@dataclass(frozen=True)
class Table:
    title: str
    word: str
    reason: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Figure:
    name: str                 # file stem under plots/
    caption: str

    @property
    def href(self) -> str:
        return f"plots/{self.name}.png"


@dataclass(frozen=True)
class RunSection:
    name: str
    command: str
    outcome: str
    finished: str
    argv: str
    groups: tuple[CommandGroup, ...]
    subprocesses: int
    tables: tuple[Table, ...]
    claims: tuple[tuple[str, str, str, str], ...]
    figures: tuple[Figure, ...]
    raw_files: frozenset[str] = frozenset()     # names under raw/ (a command's output links only when present)

    @property
    def folder(self) -> str:
        return run_folder(self.name)

    @property
    def commands_href(self) -> str:
        return self.folder + COMMANDS

    def command_lines(self) -> list[str]:
        lines = [g.line(COMMAND_WIDTH) for g in self.groups[:MAX_GROUPS]]
        if len(self.groups) > MAX_GROUPS:
            lines.append(f"... {len(self.groups) - MAX_GROUPS} more lines in {self.commands_href}")
        return lines


@dataclass(frozen=True)
class Report:
    title: str
    created: str
    headlines: tuple[Headline, ...]
    gate_table: tuple[tuple[str, str, str, str], ...]
    thresholds: tuple[tuple[str, tuple[str, ...]], ...]      # (key, value per gate run)
    threshold_sets: tuple[str, ...]                           # column heads: which thresholds
    gate_tables: tuple[Table, ...]
    figures: tuple[Figure, ...]
    notes: tuple[Note, ...]
    machines: tuple[Machine, ...]
    without_environment: tuple[str, ...]
    runs: tuple[RunSection, ...]
    plot_data: dict = field(default_factory=dict, compare=False)    # name -> PNG bytes (HTML inlines them)


def row(c: Criterion, owner: RunView, runs: list[RunView], plots: dict[str, str]) -> Row:
    flagged = artefact(c)
    threshold = f"{c.comparator} {c.threshold_text()}" if c.comparator else ""
    detail = "; ".join(filter(None, [flagged and f"{flagged} (recorded as {c.outcome.value.upper()})", c.detail]))
    return Row("ARTEFACT" if flagged else c.outcome.value.upper(), c.name, c.measured_text(),
               threshold, c.margin_text(), detail, criterion_links(c, owner, runs, plots))


def left_out_row(n: NotJudged, owner: RunView) -> Row:
    """A criterion a lab-scaled thresholds file did not judge: its name, the thresholds it reads, and why; linked
    to the gate run that recorded it (its results.json holds the thresholds file's reasons)."""
    return Row(NotJudged.WORD, n.name, "", "", "", f"not judged at lab scale ({', '.join(n.keys)}): {n.reason}",
               (Link(f"{owner.name}/results.json", href(owner, "results.json")),))


def table(v: Verdict, owner: RunView, runs: list[RunView], plots: dict[str, str]) -> Table:
    rows = tuple(row(c, owner, runs, plots) for c in v.criteria) + tuple(left_out_row(n, owner) for n in v.not_judged)
    word = v.outcome.value.upper()
    if word == "PASS" and any(r.word == "ARTEFACT" for r in rows):
        word = "ARTEFACT"
    return Table(v.name, word, v.reason, rows)


def claims_rows(run: RunView) -> tuple[tuple[str, str, str, str], ...]:
    claims = run.results.get("claims")
    if not isinstance(claims, list):
        return ()
    out = []
    for c in (c for c in claims if isinstance(c, dict)):
        values = ", ".join(f"{r.get('label')}: {format_number(r.get('value'), c.get('unit', ''))}"
                           for r in c.get("recomputed", []) if isinstance(r, dict))
        out.append((str(c.get("outcome", "")).upper(), f"{c.get('id')}: {c.get('text')}", values,
                    str(c.get("difference", "") or c.get("note", ""))))
    return tuple(out)


def run_section(run: RunView, runs: list[RunView], plots: dict[str, str], figures: list[Figure]) -> RunSection:
    argv = run.results.get("argv")
    line = wrapped([str(a) for a in argv], COMMAND_WIDTH) if isinstance(argv, list) and argv else run.command
    return RunSection(run.name, run.command, run.outcome, str(run.results.get("finished", "?")), line,
                      tuple(run.command_groups), len(run.command_records),
                      tuple(table(v, run, runs, plots) for v in run.verdicts if not run.gates),
                      claims_rows(run), tuple(figures),
                      frozenset(p.name for p in (run.path / "raw").iterdir()) if (run.path / "raw").is_dir() else frozenset())


def threshold_matrix(gate_runs: list[RunView]) -> tuple[tuple, tuple]:
    """Every threshold key (``g4.soak_hours_min``) against each gate run's value, side by side."""
    sets, columns = [], []
    for run in gate_runs:
        block = run.results.get("thresholds") if isinstance(run.results.get("thresholds"), dict) else {}
        values = block.get("thresholds") if isinstance(block.get("thresholds"), dict) else {}
        scale = block.get("scale") if block.get("lab_scaled") is True and isinstance(block.get("scale"), dict) else {}
        marks = {**{k: "SCALED" for k in scale.get("scaled") or {}}, **{k: "NOT JUDGED" for k in scale.get("not_judged") or {}}}
        marks.update({key: "CUSTOM" for key, _, _ in ([] if scale else departures(values))})
        flat = {f"{gate}.{key}": " ".join(filter(None, [format_number(value), marks.get(f"{gate}.{key}")]))
                for gate, section in values.items() if isinstance(section, dict) for key, value in section.items()}
        sets.append(flat)
        columns.append(f"{headline(run.name, run.results, ()).thresholds} ({block.get('source', '?')})")
    keys = list(dict.fromkeys(k for flat in sets for k in flat))
    return tuple((k, tuple(flat.get(k, "-") for flat in sets)) for k in keys), tuple(columns)


def gate_table(verdicts: list[Verdict]) -> list[list[str]]:
    """Per gate: name, OUTCOME, criteria counted by outcome, and why it did not pass (reason, missed criteria)."""
    rows = []
    for v in verdicts:
        missed = [c.name for c in v.criteria if c.outcome in (Outcome.FAIL, Outcome.ERROR)]
        left_out = [n.name for n in v.not_judged]
        reason = "; ".join(filter(None, [v.reason, f"missed: {', '.join(missed)}" if missed else "",
                                         f"not judged at lab scale: {', '.join(left_out)}" if left_out else ""]))
        rows.append([v.name, v.outcome.value.upper(), counts_text(v), reason])
    return rows


def gate_rows(gate_runs: list[RunView]) -> tuple[tuple[str, str, str, str], ...]:
    return tuple(tuple(r) for run in gate_runs for r in gate_table(list(run.gates)))


def build_model(title: str, created: str, runs: list[RunView], figures: dict[str, list[Figure]],
                plots: dict[str, str], top: list[Figure], plot_data: dict) -> Report:
    """The report over ``runs``: ``figures`` per run name, ``plots`` run name -> its plot's href, ``top`` the
    figures shown under the headline (the gate grid)."""
    gate_runs = [run for run in runs if run.gates]
    gate_runs.sort(key=lambda run: headline(run.name, run.results, ()).thresholds != "buyer's thresholds")
    heads = tuple(headline(run.name, run.results, run.gates, untied(run, runs), differences(run, runs),
                           provenance(run, runs))
                  for run in gate_runs)
    gate_tables = tuple(table(v, run, runs, plots) for run in gate_runs for v in run.gates)
    matrix, columns = threshold_matrix(gate_runs)
    found, without = machines(runs)
    return Report(title, created, heads, gate_rows(gate_runs), matrix, columns, gate_tables, tuple(top),
                  tuple(notes(runs, [run.results for run in gate_runs])), tuple(found), tuple(without),
                  tuple(run_section(run, runs, plots, figures.get(run.name, [])) for run in runs), plot_data)

