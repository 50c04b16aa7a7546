"""The measuring programs of a gate run's evidence that cannot be traced to a package (:mod:`fxprobe.tools.dpkg`).

A figure is only as good as the program that printed it. Each run says where its programs came from: its
environment.json for the programs on its own machine (``tool_origins``), its origins.jsonl for the measuring programs
it ran on other nodes (fio servers, the ib_read_bw client and server, a fault run's load in a lab guest: recorded by
:func:`fxprobe.tools.dpkg.witness` before they ran); a gate g2/g3 run's file entries for the program that wrote each
witnessed benchmark file (a pip distribution checked against its RECORD, or a Debian package, traced by the
``fxprobe benchmark`` run before it ran: :mod:`fxprobe.workload.witness`). A gate run that read a run which ran a
copy no package installed, a file changed since its package installed it, or one whose origin could not be checked
is never ACCEPTED (INCOMPLETE, naming the run, the program, the node and the file) - unless the buyer's gates file names
that file's SHA-256 in ``[provenance] trusted_builds``, which the report prints beside it. Only the programs a run
started count (its commands.jsonl); a measuring program another node ran with no origin recorded (a run older than
origins.jsonl) is printed, not judged. A fleet run's node sub-runs are read as runs of their own.

The inference figures of G2 and G3 come from benchmark files: each one the gate run (or a run it read) compared that
no ``fxprobe benchmark`` run witnessed (:mod:`fxprobe.workload.witness`) makes the decision INCOMPLETE too
(BENCHMARK FILE HANDED OVER, with the reason and its SHA-256), unless the buyer admits that SHA-256 in
``[provenance] admitted_files`` (printed beside its reason).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from fxprobe.core.errors import BadInput
from fxprobe.core.rundir import RunDir
from fxprobe.report.collect import RunView, read_run, recorded_evidence, sub_run_folders
from fxprobe.report.commands import Command
from fxprobe.report.machines import read_environment
from fxprobe.tools.dpkg import MEASURING, NOT_TRACEABLE
from fxprobe.workload import witness

TRUSTED = "TRUSTED BUILD (gates file [provenance])"
UNRECORDED = "ORIGIN NOT RECORDED"
ADMITTED = "HANDED-OVER FILE ADMITTED (gates file [provenance])"


@dataclass(frozen=True)
class Provenance:
    untraced: tuple[str, ...] = ()    # programs no package installed, changed since, or not checked: never ACCEPTED
    notes: tuple[str, ...] = ()       # builds the buyer trusts by SHA-256, programs with no origin recorded
    handed: tuple[str, ...] = ()      # benchmark files no benchmark run witnessed, not admitted: never ACCEPTED


def trusted_builds(gate_run: RunView) -> dict[str, str]:
    """{sha256: why} from the [provenance] the gate run recorded with its thresholds."""
    return trusted_from(gate_run.results.get("thresholds"))


def trusted_from(recorded, key: str = "trusted_builds") -> dict[str, str]:
    """{sha256: why} of a gates config as recorded (GateConfig.to_dict): its trusted builds, or ``admitted_files``."""
    table = recorded.get("provenance") if isinstance(recorded, dict) else None
    builds = table.get(key) if isinstance(table, dict) else None
    return {str(b.get("sha256")): str(b.get("why", "")) for b in builds or [] if isinstance(b, dict)}


def measuring_program(command: Command) -> str | None:
    """The measuring program a command ran on its node (``timeout 66 stdbuf -oL ib_read_bw ...``: ib_read_bw)."""
    return next((os.path.basename(w) for w in command.words if os.path.basename(w) in MEASURING), None)


def _judged(where: str, origin: dict, trusted: dict[str, str], untraced: list[str], notes: list[str]) -> None:
    line = f"{where} {origin.get('path') or '?'} {origin.get('state')} ({origin.get('detail')})"
    if origin.get("sha256") in trusted:
        notes.append(f"{TRUSTED}: {where} {origin.get('path')} sha256 {origin.get('sha256')}: "
                     f"{trusted[origin['sha256']]}")
    elif origin.get("state") in NOT_TRACEABLE:
        untraced.append(line)


def _local(run: RunView, trusted: dict[str, str], untraced: list[str], notes: list[str]) -> None:
    """The tools a run started on its own machine, against its environment.json."""
    origins = ((read_environment(run) or {}).get("items") or {}).get("tool_origins")
    if not isinstance(origins, dict):
        return
    local = [c for c in run.command_records if c.host == "local" and c.words]
    ran = {os.path.basename(c.words[0]) for c in local} | {p for p in map(measuring_program, local) if p}
    for name, origin in origins.items():
        if isinstance(origin, dict) and os.path.basename(str(origin.get("path"))) in ran:
            _judged(f"{run.name}: {name}", origin, trusted, untraced, notes)


def _remote(run: RunView, trusted: dict[str, str], untraced: list[str], notes: list[str]) -> None:
    """The measuring programs a run started on other nodes, against its origins.jsonl."""
    try:
        recorded = {(o["host"], o["program"]): o for o in RunDir(run.path).origins()}
    except BadInput as exc:
        untraced.append(f"{run.name}: origins.jsonl cannot be read ({exc})")
        return
    ran = dict.fromkeys((c.host, p) for c in run.command_records if c.host != "local"
                        for p in [measuring_program(c)] if p)
    for host, program in ran:
        origin = recorded.get((host, program))
        if origin is None:
            notes.append(f"{UNRECORDED}: {run.name}: {program} on {host} (the run has no origins.jsonl record of it: "
                         "an fxprobe before origins.jsonl; its figures are not traced)")
        else:
            _judged(f"{run.name}: {program} on {host}", origin, trusted, untraced, notes)


def review(runs: list[RunView], trusted: dict[str, str]) -> Provenance:
    """The programs ``runs`` and their node sub-runs started, against what each recorded of their origins."""
    untraced, notes = [], []
    pending = list(runs)
    while pending:
        run = pending.pop(0)
        _local(run, trusted, untraced, notes)
        _remote(run, trusted, untraced, notes)
        pending += [read_run(folder) for folder in sub_run_folders(run.path, run.results)]
    return Provenance(tuple(dict.fromkeys(untraced)), tuple(dict.fromkeys(notes)))


def provenance(gate_run: RunView, runs: list[RunView]) -> Provenance:
    """Every folder the gate run read that is in the report, intact, with the builds its gates file trusted; the
    program that wrote each witnessed benchmark file it or they compared; and every benchmark file no fxprobe
    benchmark run witnessed."""
    read = [run for run in recorded_evidence(gate_run, runs) or [] if run]
    trusted = trusted_builds(gate_run)
    traced = review(read, trusted)
    admitted = trusted_from(gate_run.results.get("thresholds"), "admitted_files")
    handed, notes, untraced = [], [], list(traced.untraced)
    for run in [gate_run, *read]:
        for source, program in witness.file_programs(run.results):
            _judged(f"{run.name}: {source}: benchmark program {program.get('name')}", program, trusted, untraced, notes)
        for source, note, sha in witness.file_notes(run.results):
            if not note.startswith(witness.HANDED):
                continue
            where = f"{run.name}: {source} (SHA-256 {sha})"
            if sha in admitted:
                notes.append(f"{ADMITTED}: {where}: {admitted[sha]}")
            else:
                handed.append(f"{where}: {note[len(witness.HANDED):].strip()}; a buyer who watched it being made "
                              "admits it by its SHA-256 in gates.toml [provenance] admitted_files")
    return Provenance(tuple(dict.fromkeys(untraced)), traced.notes + tuple(dict.fromkeys(notes)),
                      tuple(dict.fromkeys(handed)))


def review_folders(paths: list[Path], trusted: dict[str, str]) -> Provenance:
    """What a gate prints under its verdicts: the same review over the folders it was given (one it cannot read as a
    run is an ERROR in its criteria already)."""
    runs = []
    for path in paths:
        try:
            runs.append(read_run(Path(path)))
        except BadInput:
            continue
    return review(runs, trusted)
