"""The runs a gate was not given: every measuring run the ledgers list (:mod:`fxprobe.core.ledger`) that is not among
the folders it read, with its outcome - the four failed line-efficiency runs beside the one that passed, in the same
runs folder or in a fresh one. Printed under the gate's verdicts and recorded in the gate run (``ledger``), where the
report reads them; they change no criterion: a run left out for a good reason (a cable reseated, a wrong option) is
the witness's call.

Two ledgers are read: the one beside each given run (``.ledger.jsonl`` in its runs folder: every measuring run made
there), and the machine's ledger each given run recorded its place in (``ledger_place``), with the ledger of the
machine the gate runs on when it holds a given run: there, the runs of the same commands as the given ones, in
whatever folder (within the acceptance period, if ``[array]`` names one). A break in a ledger's chain (a line taken
out or edited), a ledger cut short before a given run's own line, a ledger that is gone or was begun again, and
evidence with no ledger or no place in one are printed the same way (``LEDGER: ...``).
"""

from __future__ import annotations

import json
import socket
from datetime import date
from pathlib import Path
from typing import Callable, Iterable

from fxprobe.core.ledger import LEDGER, first_line, machine_ledger, read

# the commands whose runs the gates read (their Requirements), and the gate runs whose results they read
MEASURED = ("selftest", "line-efficiency", "run", "soak", "fault run", "report verify", "gate g2", "gate g3")

Period = tuple[date | None, date | None]


def review(paths: Iterable[Path], period: Period = (None, None), checkpoints: Iterable = ()) -> dict:
    """{"omitted": [{ledger, run, command, outcome, at[, folder]}], "problems": [...], "machines": [...]} over the
    ledgers beside ``paths`` and the machines' ledgers they were written to; ``checkpoints`` (gates.toml
    ``[ledger]``: host, seq, sha256, noted) are looked for in the machines' ledgers read."""
    paths = [Path(p).resolve() for p in paths]
    given = set(paths)
    places = {path: _place(path) for path in paths}
    omitted, problems = [], []
    for folder in dict.fromkeys(p.parent for p in paths):
        ledger = folder / LEDGER
        lines_of = {p.name: places[p].get("folder_seq") for p in paths if p.parent == folder}
        if not ledger.is_file():
            told = "; ".join(f"{name} was its line {seq}" for name, seq in lines_of.items() if seq)
            problems.append(f"no {LEDGER} in {folder}: runs made there and not given cannot be seen"
                            + (f" ({told}: it was deleted)" if told else ""))
            continue
        records, broken = read(ledger)
        problems += [f"{ledger}: {text}" for text in broken]
        problems += _cut_short(ledger, records, {folder / name: seq for name, seq in lines_of.items() if seq},
                               lambda r: folder / r["run"])
        omitted += _not_given(ledger, records, given, lambda r: folder / r["run"], MEASURED)
    machines, ledgers = _machines(paths, places, given, period, omitted, problems)
    problems += _witnessed(list(checkpoints), ledgers, machines)
    return {"omitted": omitted, "problems": problems, "machines": machines}


def _machines(paths: list[Path], places: dict, given: set, period: Period, omitted: list,
              problems: list) -> tuple[list, dict]:
    """The machines' ledgers' part of :func:`review` (appends to ``omitted`` and ``problems``): what it printed of
    each ledger read, and {host: (path, its records or None where it is gone)}."""
    recorded: dict[str, dict] = {}
    for path in paths:
        machine = places[path].get("machine")
        if isinstance(machine, dict) and machine.get("first_sha256"):
            recorded.setdefault(machine["first_sha256"], {**machine, "runs": {}})["runs"][path] = machine.get("seq")
    unplaced = [p.name for p in paths if not isinstance(places[p].get("machine"), dict)]
    if unplaced:
        problems.append(f"{len(unplaced)} given run(s) record no place in a machine's ledger (made before fxprobe "
                        "kept one, or it could not be written): runs of the same commands in other folders cannot "
                        f"be seen for them: {', '.join(unplaced[:5])}{' ...' if len(unplaced) > 5 else ''}")
    here = first_line(machine_ledger())
    if here is not None and here.first_sha256 not in recorded:
        recorded[here.first_sha256] = {"path": str(machine_ledger().resolve()), "host": socket.gethostname(),
                                       "began": here.began, "runs": {}}
    listed = {Path(o.get("folder") or Path(o["ledger"]).parent) / o["run"] for o in omitted}
    machines, ledgers = [], {}
    for first_sha256, ledger in recorded.items():
        path, seqs = Path(ledger["path"]), sorted(s for s in ledger["runs"].values() if s)
        current = first_line(path)
        if current is None or current.first_sha256 != first_sha256:
            ledgers.setdefault(ledger.get("host") or "?", (path, None))
            instead = f": {path} is another ledger, begun {current.began}" if current else ""
            problems.append(f"the machine's ledger of {ledger.get('host') or '?'} that {len(ledger['runs'])} given "
                            f"run(s) were written to ({path}, begun {ledger.get('began') or '?'}) is not here{instead};"
                            f" the evidence holds its lines {', '.join(map(str, seqs))}, and the "
                            f"{max(seqs, default=0) - len(seqs)} lines before and between them (other runs' begun and "
                            "finished lines) cannot be seen: ask for that file")
            continue
        records, broken = read(path)
        ledgers[ledger.get("host") or "?"] = (path, records)
        where = lambda r: Path(r.get("folder") or "/") / r["run"]       # noqa: E731
        mine = [r for r in records if r["event"] == "begun" and where(r) in given]
        if not mine:
            continue
        problems += [f"{path}: {text}" for text in broken]
        problems += _cut_short(path, records, {p: s for p, s in ledger["runs"].items() if s}, where)
        commands = tuple({r.get("command") for r in mine} & set(MEASURED))
        found = [o for o in _not_given(path, records, given, where, commands) if where(o) not in listed]
        inside = [o for o in found if _within(o["began"], period)]
        omitted += inside
        machines.append({"path": str(path), "host": ledger.get("host") or "", "began": current.began,
                         "lines": len(records), "given": sorted(r["seq"] for r in mine),
                         "outside_period": len(found) - len(inside)})
    return machines, ledgers


def _witnessed(checkpoints: list, ledgers: dict, machines: list) -> list[str]:
    """Each line a witness noted (gates.toml [ledger]) looked for where it was: found, it is added to its ledger's
    entry in ``machines`` (``witnessed``); not there, or its ledger not read, it is a problem line."""
    problems = []
    for point in checkpoints:
        point = point if isinstance(point, dict) else point.model_dump()
        noted = f"line {point['seq']}, sha256 {point['sha256']}, noted: {point['noted']}"
        path, records = ledgers.get(point["host"], (None, None))
        if path is None:
            problems.append(f"the line the witness noted in {point['host']}'s ledger ({noted}) was not looked for: "
                            "no given run was written to that machine's ledger, and it is not this machine's")
            continue
        line = next((r for r in records or () if r["seq"] == point["seq"]), None)
        if line is None or line["sha256"] != point["sha256"]:
            problems.append(f"{path} on {point['host']} does not hold the line the witness noted ({noted}): "
                            + ("the ledger is not here" if records is None else
                               "that machine's ledger was begun again, cut short or rewritten since it was noted"))
            continue
        entry = next((m for m in machines if m["path"] == str(path)), None)
        if entry is None:           # this machine's ledger, which no given run was written to
            entry = {"path": str(path), "host": point["host"], "began": records[0]["at"], "lines": len(records),
                     "given": []}
            machines.append(entry)
        entry.setdefault("witnessed", []).append(f"line {point['seq']} ({point['noted']})")
    return problems


def _place(path: Path) -> dict:
    try:
        data = json.loads((path / "results.json").read_text())
    except (OSError, ValueError):
        return {}
    place = data.get("ledger_place") if isinstance(data, dict) else None
    return place if isinstance(place, dict) else {}


def _cut_short(ledger: Path, records: list[dict], expected: dict[Path, int], where: Callable) -> list[str]:
    """A given run's begun line that is not at the place its results.json recorded: the ledger was cut short
    before it, or rewritten."""
    by_seq = {r["seq"]: r for r in records}
    out = []
    for run, seq in expected.items():
        record = by_seq.get(seq)
        if record is None:
            out.append(f"{ledger}: {run.name} was its line {seq}, but it holds {len(records)} lines: it was cut short")
        elif record["event"] != "begun" or where(record) != run:
            out.append(f"{ledger}: {run.name} was its line {seq}, but that line is {record['event']} of "
                       f"{record['run']}: it was rewritten")
    return out


def _not_given(ledger: Path, records: list[dict], given: set, where: Callable, commands: tuple) -> list[dict]:
    finished = {where(r): r for r in records if r["event"] == "finished"}
    out = []
    for record in records:
        run = where(record)
        end = finished.get(run) or {}
        if record["event"] != "begun" or record.get("command") not in commands or run in given or end.get("dry_run"):
            continue
        out.append({"ledger": str(ledger), "run": record["run"], "command": record["command"],
                    "outcome": end.get("outcome") or "", "at": (end or record)["at"], "began": record["at"],
                    **({"folder": record["folder"]} if record.get("folder") else {})})
    return list({where(o): o for o in out}.values())         # a resumed soak: its last begun line


def _within(at: str, period: Period) -> bool:
    since, until = period
    day = str(at)[:10]
    return (since is None or day >= since.isoformat()) and (until is None or day <= until.isoformat())


def lines(recorded: dict | None) -> list[str]:
    """What a person reads of a review (a gate run's recorded ``ledger``)."""
    recorded = recorded if isinstance(recorded, dict) else {}
    out = [f"NOT GIVEN AS EVIDENCE: {str(Path(o['folder']) / str(o.get('run'))) if o.get('folder') else o.get('run')}"
           f" ({o.get('command')}, "
           + (f"{str(o.get('outcome')).upper()}, finished {o.get('at')}" if o.get("outcome") else
              f"began {o.get('at')}, never finished") + f") - listed in {o.get('ledger')}"
           for o in recorded.get("omitted") or [] if isinstance(o, dict)]
    out += [f"LEDGER: {text}" for text in recorded.get("problems") or []]
    return out + [f"MACHINE LEDGER: {m.get('path')} on {m.get('host') or '?'}, begun {m.get('began')}, "
                  f"{m.get('lines')} lines; "
                  + (f"the given runs are its lines {', '.join(map(str, m['given']))}" if m.get("given") else
                     "no given run was written to it")
                  + (f"; {m['outside_period']} run(s) of the same commands outside the acceptance period not listed"
                     if m.get("outside_period") else "")
                  + (f"; the witness's {', '.join(m['witnessed'])} found as noted" if m.get("witnessed") else "")
                  for m in recorded.get("machines") or [] if isinstance(m, dict)]
