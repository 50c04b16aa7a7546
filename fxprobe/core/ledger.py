"""The runs folder's ledger: every run begun and finished in a folder, in order, beside the runs (``ledger.jsonl``).

A gate reads only the folders it is given; one who ran line-efficiency five times can give it the best one. The
ledger is how the other four stay visible: each run folder's start (command, argv) and end (outcome, the SHA-256 of
its manifest) is one line in ``<folder>/ledger.jsonl``, appended under a lock, each line carrying the SHA-256 of the
line before it (``prev``), so a line taken out of the middle or edited breaks the chain at the next one. A gate
lists every finished run the ledger beside its evidence holds that it was not given (:mod:`fxprobe.gates.omitted`).

It does not stop a fresh runs folder per attempt, or a ledger deleted or cut short at its end: it makes leaving
runs out of the same folder visible, and the buyer's witness can ask for the folder's ledger.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from pathlib import Path

LEDGER = ".ledger.jsonl"        # hidden: `--evidence runs/*` globs run folders only


def line_digest(line: str) -> str:
    return hashlib.sha256(line.rstrip("\n").encode()).hexdigest()


def append(folder: Path, record: dict) -> None:
    """One line in ``folder``'s ledger: ``seq`` and ``prev`` (the previous line's SHA-256) before ``record``."""
    from fxprobe.core.evidence import LedgerRecord
    with open(Path(folder) / LEDGER, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        lines = [line for line in handle.read().splitlines() if line.strip()]
        entry = LedgerRecord.model_validate({"seq": len(lines) + 1, "prev": line_digest(lines[-1]) if lines else "",
                                             **record})
        handle.seek(0, 2)
        handle.write(entry.model_dump_json(exclude_none=True) + "\n")
        handle.flush()


def read(path: Path) -> tuple[list[dict], list[str]]:
    """The ledger's records and what breaks its chain ("line 4: ..."), one problem a line; a line that is not a
    ledger record is a problem too (and read past)."""
    from fxprobe.core.evidence import LedgerRecord
    records, problems, previous, count = [], [], None, 0
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
            records.append(record)
        previous = line
    return records, problems
