"""The schema of a run folder handed back to fxprobe as evidence (``gate --evidence``, ``report``,
``--ceiling-from``, ``pattern compare``, ``soak --resume``): its results.json envelope and its
commands.jsonl records.

The envelope's keys are the ones :class:`fxprobe.core.rundir.RunDir` writes (``ENVELOPE_KEYS``); a command's
own results sit beside them (extra keys are kept, typed by the producer that writes them). What a reader
relies on is typed here: the outcome is one of the four, a verdict is a name, an outcome and a list of
criteria. A file that breaks this is one BadInput line naming the file and the field (exit 2): a folder is
evidence only if fxprobe could have written it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, create_model

from fxprobe.core.schema import InputModel, NonEmptyStr, NonNegativeFloat, PositiveInt
from fxprobe.core.verdict import CRITERION_TEXT

OutcomeText = Literal["pass", "fail", "not run", "error"]


class Record(InputModel):
    """A record fxprobe wrote: known keys typed, other keys kept (a newer producer may add some)."""

    model_config = ConfigDict(extra="allow")


CriterionRecord = create_model(
    "CriterionRecord", __base__=Record,
    __doc__="One criterion as :meth:`fxprobe.core.verdict.Criterion.to_dict` writes it: its text fields are the "
            "ones Criterion.from_dict reads back (CRITERION_TEXT); an absent outcome reads back as error.",
    name=(NonEmptyStr, ...), outcome=(OutcomeText | None, None), measured=(Any, None), threshold=(Any, None),
    **{key: (str, "") for key in CRITERION_TEXT})


class NotJudgedRecord(Record):
    """A criterion a lab-scaled thresholds file left out, as :meth:`fxprobe.core.verdict.NotJudged.to_dict` writes it."""

    name: NonEmptyStr
    keys: list[NonEmptyStr]
    reason: NonEmptyStr


class VerdictRecord(Record):
    """A verdict as :meth:`fxprobe.core.verdict.Verdict.to_dict` writes it."""

    name: NonEmptyStr
    outcome: OutcomeText | None = None      # recomputed from the criteria when read back (Verdict.from_dict)
    reason: str = ""
    criteria: list[CriterionRecord] = []
    notes: list[str] = []                   # information, never judged
    not_judged: list[NotJudgedRecord] = []   # never counted in the outcome


class MachineLedgerPlace(Record):
    """A run's begun line in the machine's ledger: the ledger (its path and host, the SHA-256 and time of its first
    line) and the line's number."""

    path: NonEmptyStr
    host: str = ""
    seq: PositiveInt
    first_sha256: str
    began: str = ""


class LedgerPlace(Record):
    """Where a run's begun line went (:mod:`fxprobe.core.ledger`): in its runs folder's ledger, and the machine's."""

    folder_seq: PositiveInt | None = None
    machine: MachineLedgerPlace | None = None


class ResultsEnvelope(Record):
    """results.json: the envelope every command writes, and its own results beside it."""

    schema_version: PositiveInt | None = None
    command: NonEmptyStr | None = None       # absent: the folder matches no gate requirement (not run)
    argv: list[str] = []
    started: str | None = None
    finished: str | None = None
    outcome: OutcomeText | None = None
    reason: str = ""
    exit_code: int | None = None
    run_dir: str | None = None
    verdict: VerdictRecord | str | None = None     # a fault run still writes its verdict word here
    gates: list[VerdictRecord] | None = None
    ledger_place: LedgerPlace | None = None      # written by every run since the machine's ledger


class CommandRecord(Record):
    """One line of commands.jsonl: a subprocess the runner started (or, in a dry run, would have)."""

    schema_version: PositiveInt | None = None
    name: str = ""
    argv: list[str]
    host: dict | str | None = None
    cwd: str = ""
    env: dict[str, str] = {}
    started: str | None = None
    ended: str | None = None
    seconds: NonNegativeFloat | None = None
    exit_code: int | None = None
    timed_out: bool = False
    dry_run: bool = False
    background: bool = False
    stdout: str | None = None
    stderr: str | None = None


class OriginRecord(Record):
    """One line of origins.jsonl: where a measuring program on another node came from (:func:`fxprobe.tools.dpkg.witness`;
    the fields of :class:`fxprobe.tools.dpkg.ToolOrigin` with the node and the program)."""

    host: NonEmptyStr
    program: NonEmptyStr
    path: str = ""
    sha256: str = ""
    state: NonEmptyStr
    package: str = ""
    version: str = ""
    detail: str = ""


class LedgerRecord(Record):
    """One line of a runs folder's .ledger.jsonl or of the machine's ledger (:mod:`fxprobe.core.ledger`): a run begun
    or finished."""

    seq: PositiveInt
    prev: str                    # the SHA-256 of the line before ("" for the first)
    event: Literal["begun", "finished"]
    run: NonEmptyStr             # the run folder's name
    at: NonEmptyStr              # UTC
    command: str | None = None
    argv: list[str] | None = None
    outcome: OutcomeText | None = None
    dry_run: bool | None = None
    manifest_sha256: str | None = None
    folder: str | None = None    # the machine's ledger: the runs folder (absolute) the run is in
