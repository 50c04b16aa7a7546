"""The ledgers: every run begun and finished, in order, in the runs folder (``.ledger.jsonl``) and on the machine.

A gate reads only the folders it is given; one who ran line-efficiency five times can give it the best one. The
ledgers are how the other four stay visible: each run folder's start (command, argv) and end (outcome, the SHA-256 of
its manifest) is one line in ``<folder>/.ledger.jsonl`` and one in the machine's ledger (:func:`machine_ledger`,
with the runs folder's path), appended under a lock, each line carrying the SHA-256 of the line before it
(``prev``), so a line taken out of the middle or edited breaks the chain at the next one. The machine's ledger
keeps the runs of a fresh runs folder per attempt. Each run records its place in both (``ledger_place`` in its
results.json: its line numbers, and the machine ledger's path, host and first line), so a ledger deleted or cut
short after the run is seen from the evidence itself. A gate lists every measuring run the ledgers hold that it
was not given (:mod:`fxprobe.gates.omitted`).

It does not stop a root user who deletes the machine's ledger before the attempts: the next run begins a new one,
and the gate prints when the ledger began, for the witness to compare with the acceptance's first day.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import socket
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

LEDGER = ".ledger.jsonl"        # hidden: `--evidence runs/*` globs run folders only


def machine_ledger() -> Path:
    """This machine's ledger: $FXPROBE_MACHINE_LEDGER, else $XDG_STATE_HOME/fxprobe/ledger.jsonl, else
    ~/.local/state/fxprobe/ledger.jsonl."""
    named = os.environ.get("FXPROBE_MACHINE_LEDGER")
    if named:
        return Path(named)
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return Path(state) / "fxprobe" / "ledger.jsonl"


@dataclass(frozen=True)
class Place:
    """Where a line went: its ``seq``, and the ledger's first line (its SHA-256 names the ledger; ``began``)."""

    seq: int
    first_sha256: str
    began: str


def line_digest(line: str) -> str:
    return hashlib.sha256(line.rstrip("\n").encode()).hexdigest()


def append(folder: Path, record: dict, stamp: Callable[[], str] | None = None) -> Place:
    """One line in ``folder``'s ledger: ``seq`` and ``prev`` (the previous line's SHA-256) before ``record``."""
    return append_to(Path(folder) / LEDGER, record, stamp)


def append_to(path: Path, record: dict, stamp: Callable[[], str] | None = None) -> Place:
    """One line in the ledger at ``path`` (created with its folder): ``seq`` and ``prev`` before ``record``;
    ``at`` = ``stamp()`` taken under the lock, so that the lines of processes appending at once are in time order."""
    from fxprobe.core.evidence import LedgerRecord
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        lines = [line for line in handle.read().splitlines() if line.strip()]
        entry = LedgerRecord.model_validate({"seq": len(lines) + 1, "prev": line_digest(lines[-1]) if lines else "",
                                             **record, **({"at": stamp()} if stamp else {})})
        text = entry.model_dump_json(exclude_none=True)
        handle.seek(0, 2)
        handle.write(text + "\n")
        handle.flush()
    first = lines[0] if lines else text
    return Place(entry.seq, line_digest(first), _at(first))


def first_line(path: Path) -> Place | None:
    """The ledger's first line as a Place (which names the ledger), read alone: a machine's ledger grows by two
    lines a run. None if it has none or is no file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            line = next((line.rstrip("\n") for line in handle if line.strip()), None)
    except OSError:
        return None
    return Place(1, line_digest(line), _at(line)) if line is not None else None


def _at(line: str) -> str:
    try:
        return str(json.loads(line).get("at") or "")
    except (ValueError, AttributeError):
        return ""


CLOCK_STEP_S = 1.0      # a line stamped more than this before the line before it: the clock went back


def read(path: Path) -> tuple[list[dict], list[str]]:
    """The ledger's records (each with its line's ``sha256``) and what breaks its chain ("line 4: ..."), one problem
    a line; a line that is not a
    ledger record is a problem too (and read past), and so is a line stamped more than CLOCK_STEP_S before the
    line before it (the machine's clock was set back between them: runs dated into a period they were not made in)."""
    from fxprobe.core.evidence import LedgerRecord
    records, problems, previous, count, latest = [], [], None, 0, None
    for number, line in enumerate(Path(path).read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        count += 1
        try:
            record = LedgerRecord.model_validate(json.loads(line)).model_dump()
        except ValueError as exc:
            problems.append(f"line {number}: not a ledger record ({str(exc).splitlines()[0][:120]})")
        else:
            if record["prev"] != (line_digest(previous) if previous is not None else "") or record["seq"] != count:
                problems.append(f"line {number} (seq {record['seq']}) does not follow the line before it (its prev "
                                "is not that line's SHA-256, or its seq is not its place): a line was taken out or "
                                "edited")
            records.append({**record, "sha256": line_digest(line)})
            moment = _moment(record["at"])
            if moment is not None and latest is not None and (latest[0] - moment).total_seconds() > CLOCK_STEP_S:
                problems.append(f"line {number} (seq {record['seq']}) is stamped {record['at']}, "
                                f"{(latest[0] - moment).total_seconds():.3f} s before line {latest[1]} "
                                f"({latest[2]}): the machine's clock went back (more than the {CLOCK_STEP_S:g} s "
                                "allowed for an NTP step)")
            if moment is not None and (latest is None or moment > latest[0]):
                latest = (moment, number, record["at"])
        previous = line
    return records, problems


def _moment(stamp: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def summary(path: Path) -> dict:
    """The ledger at ``path`` as a witness reads it (``fxprobe ledger``): this machine's name, when it began, its
    lines and runs (by command), what breaks its chain, and its last line (seq, SHA-256, time), the one to note in
    gates.toml ``[ledger] checkpoints``. OSError when it cannot be read."""
    records, problems = read(path)
    runs = Counter(record.get("command") or "?" for record in records if record["event"] == "begun")
    last = records[-1] if records else None
    return {"path": str(Path(path).resolve()), "host": socket.gethostname(),
            "began": records[0]["at"] if records else "", "lines": len(records), "runs": dict(runs), "problems": problems,
            "last": {"seq": last["seq"], "sha256": last["sha256"], "at": last["at"]} if last else None}
