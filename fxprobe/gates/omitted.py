"""The runs a gate was not given: every measuring run the ledger beside its evidence lists (:mod:`fxprobe.core.ledger`)
that is not among the folders it read, with its outcome - the four failed line-efficiency runs beside the one that
passed. Printed under the gate's verdicts and recorded in the gate run (``ledger``), where the report reads them; they
change no criterion: a run left out for a good reason (a cable reseated, a wrong option) is the witness's call.
A break in a ledger's chain (a line taken out or edited) is printed the same way, and so is evidence with no ledger
beside it (a runs folder fxprobe did not write, or one from before the ledger).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from fxprobe.core.ledger import LEDGER, read

# the commands whose runs the gates read (their Requirements), and the gate runs whose results they read
MEASURED = ("selftest", "line-efficiency", "run", "soak", "fault run", "report verify", "gate g2", "gate g3")


def review(paths: Iterable[Path]) -> dict:
    """{"omitted": [{ledger, run, command, outcome, at}], "problems": [...]} over the ledgers beside ``paths``."""
    paths = [Path(p).resolve() for p in paths]
    given = set(paths)
    omitted, problems = [], []
    for folder in dict.fromkeys(p.parent for p in paths):
        ledger = folder / LEDGER
        if not ledger.is_file():
            problems.append(f"no {LEDGER} in {folder}: runs made there and not given cannot be seen")
            continue
        records, broken = read(ledger)
        problems += [f"{ledger}: {text}" for text in broken]
        begun = {r["run"]: r for r in records if r["event"] == "begun"}
        finished = {r["run"]: r for r in records if r["event"] == "finished"}
        for name, start in begun.items():
            end = finished.get(name)
            if start.get("command") not in MEASURED or (folder / name) in given or (end or {}).get("dry_run"):
                continue
            omitted.append({"ledger": str(ledger), "run": name, "command": start["command"],
                            "outcome": (end or {}).get("outcome") or "", "at": (end or start)["at"]})
    return {"omitted": omitted, "problems": problems}


def lines(recorded: dict | None) -> list[str]:
    """What a person reads of a review (a gate run's recorded ``ledger``)."""
    recorded = recorded if isinstance(recorded, dict) else {}
    out = [f"NOT GIVEN AS EVIDENCE: {o.get('run')} ({o.get('command')}, "
           + (f"{str(o.get('outcome')).upper()}, finished {o.get('at')}" if o.get("outcome") else
              f"began {o.get('at')}, never finished") + f") - listed in {o.get('ledger')}"
           for o in recorded.get("omitted") or [] if isinstance(o, dict)]
    return out + [f"LEDGER: {text}" for text in recorded.get("problems") or []]
