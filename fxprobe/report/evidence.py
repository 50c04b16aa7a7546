"""Every criterion one click from its evidence inside the bundle: the results.json field, the raw log, the plot.

A report bundle holds each run folder under ``evidence/<run>/``. A criterion names its evidence by the path it
had on the machine that ran (``/srv/runs/…/04-soak/results.json``), by a path inside the run, or not at all
(a run's own criteria). :func:`locate` maps any of these to the bundled copy; links are relative to the
bundle's root, so they work from the unpacked bundle and from report.html beside it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fxprobe.core.rundir import RESULTS
from fxprobe.core.verdict import Criterion
from fxprobe.report.collect import RunView

MEASURING_TOOLS = ("fio", "ib_read_bw", "ib_write_bw", "ib_send_bw", "ib_read_lat", "ib_write_lat", "iperf3", "nvme")


@dataclass(frozen=True)
class Link:
    label: str      # "results.json: duration_s", "raw log", "plot"
    href: str       # relative to the bundle root: "evidence/04-soak/results.json"


def _roots(run: RunView) -> list[str]:
    """Every path the run folder had: where it was read from, and where it was written (a lab guest's share)."""
    roots = {str(run.path), str(run.path.resolve()), *run.origins}
    if isinstance(run.results.get("run_dir"), str):
        roots.add(run.results["run_dir"].rstrip("/"))
    return sorted(roots, key=len, reverse=True)


def locate(runs: list[RunView], text: str, owner: RunView | None = None) -> tuple[RunView, str] | None:
    """(bundled run, path inside it) of an evidence path, or None when no bundled run holds it. A relative
    path is inside ``owner``, the run whose verdict names it."""
    text = text.strip()
    if owner is not None and text and not text.startswith("/") and (owner.path / text).is_file():
        return owner, text
    for run in runs:
        for root in _roots(run):
            if text == root or text.startswith(root + "/"):
                rel = text[len(root) + 1:] or RESULTS
                if (run.path / rel).exists():
                    return run, rel
    parts = Path(text).parts
    for run in runs:                      # a copy made elsewhere: match the run folder's name in the path
        if run.name in parts:
            rel = "/".join(parts[parts.index(run.name) + 1:]) or RESULTS
            if (run.path / rel).exists():
                return run, rel
    return None


def run_folder(name: str) -> str:
    """Where the run folder ``name`` is in the bundle, relative to its root: ``evidence/<name>/``."""
    return f"evidence/{name}/"


def href(run: RunView, rel: str) -> str:
    return run_folder(run.name) + rel


def primary_raw(run: RunView) -> str | None:
    """The run's main raw log inside its folder: a soak's records, else the stdout of the last measuring tool
    (fio, perftest, iperf3, nvme-cli) it ran, else its largest raw file."""
    records = run.results.get("records")
    if isinstance(records, str) and (run.path / records).is_file():
        return records
    for command in reversed(run.command_records):
        if os.path.basename(command.words[0] if command.words else "") in MEASURING_TOOLS \
                or any(w in MEASURING_TOOLS for w in command.words[:6]):
            stdout = f"raw/{command.stdout}"
            if command.stdout and (run.path / stdout).is_file() and (run.path / stdout).stat().st_size:
                return stdout
    raw = [p for p in (run.path / "raw").rglob("*") if p.is_file()] if (run.path / "raw").is_dir() else []
    return max(raw, key=lambda p: p.stat().st_size).relative_to(run.path).as_posix() if raw else None


def criterion_links(c: Criterion, owner: RunView, runs: list[RunView], plots: dict[str, str]) -> tuple[Link, ...]:
    """results.json (with the field a gate read), the raw log and the plot of the run behind ``c``.

    ``owner`` is the run whose verdict holds ``c`` (its results.json is the fallback); ``plots`` maps a run's
    name to the bundled plot drawn from it. An evidence path may name the field it was read from after a
    ``#`` (``…/results.json#impact.errors``)."""
    links: list[Link] = []
    field = ""
    for piece in filter(None, (p.strip() for p in c.evidence.split(" vs "))):
        piece, _, field = piece.partition("#")
        found = locate(runs, piece, owner)
        if found is not None:
            run, rel = found
            label = f"{rel}: {field}" if field and rel == RESULTS else rel
            links.append(Link(label, href(run, rel)))
    behind = _run_of(links, runs) or owner
    if not links:
        links.append(Link(f"{RESULTS}: {field}" if field else RESULTS, href(owner, RESULTS)))
    raw = primary_raw(behind)
    if raw and all(link.href != href(behind, raw) for link in links):
        links.append(Link("raw log", href(behind, raw)))
    if behind.name in plots:
        links.append(Link("plot", plots[behind.name]))
    return tuple(links)


def _run_of(links: list[Link], runs: list[RunView]) -> RunView | None:
    for link in links:
        name = link.href.split("/")[1]
        for run in runs:
            if run.name == name:
                return run
    return None
