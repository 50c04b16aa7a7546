"""The run directory: the evidence store every command writes and every gate reads.

Layout::

    runs/<UTC time>-<command>/
        commands.jsonl     one JSON record per subprocess (argv, host, cwd, env,
                           start/end UTC ms, exit code, stdout/stderr file names)
        raw/               stdout/stderr of each subprocess, tool outputs, logs
        results.json       the envelope (schema_version, command, argv, started, finished, outcome,
                           reason, exit_code, run_dir) and the command's own results beside it;
                           written "error / did not finish" when the command starts, so a run
                           killed or crashed half way is still evidence (see :meth:`RunDir.begin`)
        environment.json   what was known about the machine (preflight data)
        manifest.json      SHA-256 and size of every other file
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import socket
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Iterator

from fxprobe.core import ledger
from fxprobe.core.errors import EXIT_ERROR, BadInput, FxprobeError
from fxprobe.core.manifest import bundle_around
from fxprobe.core.manifest import compare as compare_manifest
from fxprobe.core.manifest import sha256_file  # noqa: F401  (re-exported: callers hash files through rundir)
from fxprobe.core.manifest import write as write_manifest
from fxprobe.core.paths import output_folder
from fxprobe.core.verdict import Criterion, Outcome

MANIFEST = "manifest.json"
COMMANDS = "commands.jsonl"
ORIGINS = "origins.jsonl"          # where each measuring program another node ran came from (tools.dpkg.witness)
RESULTS = "results.json"
ENVIRONMENT = "environment.json"

SCHEMA_VERSION = 1
ENVELOPE_KEYS = ("schema_version", "command", "argv", "started", "finished", "outcome", "reason", "exit_code",
                 "run_dir", "ledger_place")
DID_NOT_FINISH = "the command did not finish (killed, crashed or still running): no result was recorded"
EXIT_INTERRUPTED = 130


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def utc_stamp(moment: dt.datetime | None = None) -> str:
    """ISO-8601 UTC with milliseconds, e.g. 2026-12-02T17:19:14.123Z."""
    moment = moment or utc_now()
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:80] or "x"


def write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as handle:
        json.dump(data, handle, indent=2, sort_keys=False, default=str)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class RunDir:
    """One command's evidence folder."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.raw = self.path / "raw"
        self._lock = threading.Lock()
        self._seq = 0
        self._envelope: dict | None = None      # set by begin(); None: nothing recorded by this process
        self._known: dict = {}                   # fields known before the end (note()), kept in every envelope
        self.finished = False
        self.secrets: set[str] = set()          # values shown as <secret> in commands.jsonl (redact())

    @classmethod
    def create(cls, base: Path, command: str) -> "RunDir":
        base = Path(base)
        stamp = utc_now().strftime("%Y%m%dT%H%M%S.%fZ")
        path = base / f"{stamp}-{_safe_name(command)}"
        output_folder(base, "--runs")
        (path / "raw").mkdir(parents=True, exist_ok=False)
        run = cls(path)
        return run

    @classmethod
    def start(cls, command: str, argv: list[str], *, base: Path | None = None, path: Path | None = None,
              folder: str | None = None) -> "RunDir":
        """A new run directory (``base/<UTC time>-<folder or command>/``, or exactly ``path``) that has begun.

        Never inside a report bundle (``./runs`` of a command run in a bundle folder would change what was
        signed): BadInput naming the bundle."""
        where = path if path is not None else Path(base if base is not None else "runs")
        bundle = bundle_around(where)
        if bundle is not None:
            raise BadInput(f"{where}: inside the signed report {bundle}; evidence written there would change it",
                           hint="choose another place with --runs DIR (or --run-dir DIR)")
        if path is not None:
            path = output_folder(path, "--run-dir")
            (path / "raw").mkdir(parents=True, exist_ok=True)
            run = cls(path)
        else:
            run = cls.create(Path(base if base is not None else "runs"), folder or command)
        return run.begin(command, argv)

    @classmethod
    def open(cls, path: Path) -> "RunDir":
        path = Path(path)
        if not path.is_dir():
            raise BadInput(f"{path}: not a run directory (it does not exist)",
                           hint="pass a folder made by an fxprobe command")
        if not (path / COMMANDS).exists() and not (path / RESULTS).exists():
            raise BadInput(f"{path}: not a run directory (no {RESULTS} or {COMMANDS})",
                           hint="pass a folder made by an fxprobe command")
        run = cls(path)
        if (path / COMMANDS).is_file():     # counted, not parsed: a line cut short by a crash still counts
            with open(path / COMMANDS, "rb") as handle:
                run._seq = sum(1 for line in handle if line.strip())
        return run

    # -- the envelope: every results.json is written here ----------------------------
    def begin(self, command: str, argv: list[str]) -> "RunDir":
        """Record that ``command`` started: results.json says error / did not finish until finish() or fail().

        Begun again (``soak --resume``), the run keeps its first ``started`` and lists each restart in
        ``resumed``."""
        earlier = self._earlier_envelope()
        self._envelope = {"schema_version": SCHEMA_VERSION, "command": command, "argv": [str(a) for a in argv],
                          "started": earlier.get("started") or utc_stamp(), "run_dir": str(self.path)}
        if earlier:
            self._known["resumed"] = [*earlier.get("resumed", []), utc_stamp()]
        place = self._ledger(event="begun", command=command, argv=self._envelope["argv"])
        self._known["ledger_place"] = earlier.get("ledger_place") or place
        self._write_envelope(Outcome.ERROR, {}, DID_NOT_FINISH, None)
        return self

    def note(self, **fields: Any) -> None:
        """Fields known early (a fault's plan, a workload's nodes) that every envelope keeps, also an error's,
        so a gate can tell which criteria a failed run fed."""
        self._check_keys(fields)
        self._known.update(fields)
        if self._envelope is not None and not self.finished:
            self._write_envelope(Outcome.ERROR, {}, DID_NOT_FINISH, None)

    def finish(self, outcome: Outcome, results: dict, *, reason: str = "", command: str | None = None,
               exit_code: int | None = None) -> dict:
        """Write the final results.json (envelope + ``results``) and the manifest; returns what was written."""
        if self._envelope is None:
            raise RuntimeError(f"{self.path}: finish() before begin()")
        self._check_keys(results)
        if command is not None:
            self._envelope["command"] = command
        data = self._write_envelope(Outcome(outcome), results, reason,
                                    outcome.exit_code if exit_code is None else exit_code)
        self.finished = True
        self.finalize()
        self._ledger(event="finished", command=self._envelope["command"], outcome=Outcome(outcome).value,
                     dry_run=bool(self._known.get("dry_run") or results.get("dry_run")),
                     manifest_sha256=self.manifest_sha256())
        return data

    def _ledger(self, **record: Any) -> dict:
        """A line in the ledger of the folder this run is in and one in the machine's (fxprobe.core.ledger), and
        where they went (``ledger_place``); a ledger that cannot take one leaves the run as it is (the gate says
        the run has no finished line, or no place in that ledger)."""
        line, place = {"run": self.path.name, **record}, {}
        try:
            place["folder_seq"] = ledger.append(self.path.parent, line, utc_stamp).seq
        except OSError:
            pass
        machine = ledger.machine_ledger()
        try:
            written = ledger.append_to(machine, {**line, "folder": str(self.path.parent.resolve())}, utc_stamp)
        except OSError:
            return place
        place["machine"] = {"path": str(machine.resolve()), "host": socket.gethostname(), "seq": written.seq,
                            "first_sha256": written.first_sha256, "began": written.began}
        return place

    def fail(self, reason: str, exit_code: int = EXIT_ERROR) -> dict | None:
        """Record outcome "error" with the reason and exit code (no-op once finished, or before begin())."""
        if self._envelope is None or self.finished:
            return None
        return self.finish(Outcome.ERROR, {}, reason=reason or DID_NOT_FINISH, exit_code=exit_code)

    @contextmanager
    def recording(self) -> Iterator["RunDir"]:
        """Any exception inside becomes this run's error envelope (reason, exit code), then propagates."""
        try:
            yield self
        except FxprobeError as exc:
            self.fail(str(exc), exc.exit_code)
            raise
        except KeyboardInterrupt:
            self.fail("interrupted (Ctrl-C)", EXIT_INTERRUPTED)
            raise
        except Exception as exc:
            self.fail(f"internal error: {type(exc).__name__}: {exc}", EXIT_ERROR)
            raise

    def _earlier_envelope(self) -> dict:
        try:
            data = json.loads((self.path / RESULTS).read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) and isinstance(data.get("started"), str) else {}

    @staticmethod
    def _check_keys(fields: dict) -> None:
        clash = [key for key in fields if key in ENVELOPE_KEYS]
        if clash:
            raise ValueError(f"results may not set envelope keys {clash}")

    def _write_envelope(self, outcome: Outcome, results: dict, reason: str, exit_code: int | None) -> dict:
        data = {**self._envelope, "finished": utc_stamp() if exit_code is not None else None,
                "outcome": outcome.value, "reason": reason, "exit_code": exit_code, **self._known, **results}
        self.write_results(data)
        return data

    # -- writing ---------------------------------------------------------
    def next_name(self, label: str) -> str:
        with self._lock:
            self._seq += 1
            return f"{self._seq:04d}-{_safe_name(label)}"

    def raw_path(self, name: str) -> Path:
        self.raw.mkdir(parents=True, exist_ok=True)
        return self.raw / name

    def write_raw(self, name: str, data: str | bytes) -> Path:
        path = self.raw_path(name)
        mode = "wb" if isinstance(data, bytes) else "w"
        with open(path, mode) as handle:
            handle.write(data)
        return path

    def redact(self, *secrets: str) -> None:
        """Show these values (DH-CHAP keys) as <secret> in every command recorded from now on."""
        self.secrets.update(s for s in secrets if s)

    def record_command(self, record: dict) -> None:
        if self.secrets and "argv" in record:
            argv = []
            for arg in record["argv"]:
                for secret in self.secrets:
                    arg = str(arg).replace(secret, "<secret>")
                argv.append(arg)
            record = {**record, "argv": argv}
        line = json.dumps({"schema_version": SCHEMA_VERSION, **record}, default=str)
        with self._lock, open(self.path / COMMANDS, "a") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def record_origin(self, record: dict) -> None:
        from fxprobe.core.evidence import OriginRecord
        line = OriginRecord.model_validate(record).model_dump_json()
        with self._lock, open(self.path / ORIGINS, "a") as handle:
            handle.write(line + "\n")

    def origins(self) -> list[dict]:
        """origins.jsonl's records (none: no program measured on another node, or a run older than the file); a line
        that is not an origin record is BadInput naming file and line."""
        from fxprobe.core.evidence import OriginRecord
        from fxprobe.core.schema import read_jsonl, validate
        path = self.path / ORIGINS
        if not path.exists():
            return []
        return [validate(OriginRecord, record, f"{path}: line {number}").model_dump()
                for number, record in enumerate(read_jsonl(path, "tool origin file"), 1)]

    def write_results(self, results: dict) -> None:
        write_json(self.path / RESULTS, results)

    def write_environment(self, environment: dict) -> None:
        write_json(self.path / ENVIRONMENT, environment)

    def ensure_environment(self, snapshot) -> None:
        """environment.json from ``snapshot()`` (fxprobe.host.environment) unless the run already has one."""
        if not (self.path / ENVIRONMENT).exists():
            self.write_environment(snapshot())

    def finalize(self) -> dict:
        """Write manifest.json: SHA-256 and size of every file but itself (fxprobe.core.manifest)."""
        manifest, _ = write_manifest(self.path / MANIFEST, self.path, self._unlisted, utc_stamp())
        return manifest

    @staticmethod
    def _unlisted(rel: str) -> bool:
        return rel == MANIFEST or rel.endswith(".tmp") or rel.startswith("signature")

    # -- reading ---------------------------------------------------------
    def commands(self):
        """Each commands.jsonl record; a line that is not a JSON object is BadInput naming file and line."""
        from fxprobe.core.evidence import CommandRecord
        from fxprobe.core.schema import read_jsonl, validate
        path = self.path / COMMANDS
        if not path.exists():
            return
        for number, record in enumerate(read_jsonl(path, "commands record file"), 1):
            validate(CommandRecord, record, f"{path}: line {number}")
            yield record

    def results(self) -> dict:
        """results.json as a dict, checked against the envelope schema (core/evidence.py): missing, a folder,
        not UTF-8, not JSON, NaN, not an object or a field of the wrong kind: one BadInput naming file and field."""
        from fxprobe.core.evidence import ResultsEnvelope
        from fxprobe.core.schema import read_json, validate
        path = self.path / RESULTS
        if not path.exists():
            raise BadInput(f"{path}: missing", hint="the run did not finish; run the command again")
        data = read_json(path, "results file")
        validate(ResultsEnvelope, data, str(path))
        return data

    def integrity(self) -> list[str]:
        """What differs between the folder and its manifest.json, one line each ([]: intact). Read before a
        folder is evidence (gates, report): a finished run always wrote one, so a missing or unreadable manifest
        is a problem; only a run whose results.json still says it did not finish (killed before its end: it
        reads as an error whatever it holds) has none to check."""
        path = self.path / MANIFEST
        if not path.is_file():
            if self._unfinished_envelope():
                return []
            return [f"{MANIFEST}: missing (every finished fxprobe run writes one)"]
        try:
            listed = json.loads(path.read_bytes()).get("files")
            if not isinstance(listed, dict):
                raise ValueError("no 'files' table")
        except (ValueError, AttributeError) as exc:      # JSON and UTF-8 errors are ValueErrors
            return [f"{MANIFEST}: not a valid manifest ({exc})"]
        return compare_manifest(self.path, listed, self._unlisted)

    def manifest_sha256(self) -> str | None:
        """SHA-256 of manifest.json (which names every file's SHA-256): the run folder's fingerprint."""
        path = self.path / MANIFEST
        return sha256_file(path) if path.is_file() else None

    def _unfinished_envelope(self) -> bool:
        """results.json is the envelope begin() writes: outcome error, not finished, no exit code."""
        try:
            data = json.loads((self.path / RESULTS).read_bytes())
        except (OSError, ValueError):
            return False
        return isinstance(data, dict) and data.get("outcome") == Outcome.ERROR.value and \
            data.get("finished") is None and data.get("exit_code") is None


def altered_criterion(path: Path, problems: list[str], shown: int = 6) -> Criterion:
    """The ERROR criterion of a run folder that does not match its manifest: it feeds no other criterion."""
    listed = "; ".join(problems[:shown]) + (f"; and {len(problems) - shown} more" if len(problems) > shown else "")
    return Criterion(f"evidence {Path(path).name} intact", Outcome.ERROR, detail=(
        f"{path} does not match its {MANIFEST}: {listed}; it feeds no criterion (pass the folder as its command "
        "wrote it, or run the command again)"), evidence=str(path))


@dataclass(frozen=True)
class RunResults:
    """A run folder and its results.json as read back (``RunDir.results()``): what the gates and the report
    both read of a run."""

    path: Path
    results: dict
    unrecorded: ClassVar[str] = ""      # what ``command`` and ``outcome`` say when results.json lacks the field

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def command(self) -> str:
        return str(self.results.get("command", self.unrecorded))

    @property
    def outcome(self) -> str:
        return str(self.results.get("outcome", self.unrecorded))
