"""An inference benchmark run under fxprobe's witness (``fxprobe benchmark``), and what a gate says of each
benchmark file it reads: written under a witness, or handed over.

A benchmark file handed to ``gate g2``/``gate g3`` says nothing of how it came about. Run instead through
``fxprobe benchmark --result FILE -- vllm bench serve ... --save-result --result-filename FILE``, the run folder
holds the command line, its exit code, its output and its timing (commands.jsonl, raw/), the file as the command
left it (``raw/<name>``, its SHA-256 in results.json and the manifest), and three checks:

- the command exited 0 and wrote FILE anew (it did not exist before the run: an old file is refused);
- the file's own ``duration`` fits in the command's lifetime, measured by fxprobe (a file claiming a longer
  benchmark than the process ran was not written by it);
- every figure the command printed in its summary (vLLM's ``Serving Benchmark Result``) equals the file's,
  formatted as vLLM prints it; a command that printed no such summary leaves this criterion not run.

Before it runs, the program is traced (``program`` in results.json): the pip distribution whose RECORD lists it,
every file of it compared with that RECORD (:mod:`fxprobe.tools.pip_record`), else the Debian package that installed
it (:mod:`fxprobe.tools.dpkg`). For a Python interpreter the program is the script it runs. A program traced to
neither, or changed since, keeps a report over the run from ACCEPTED, as any measuring tool does
(:mod:`fxprobe.report.provenance`), unless the buyer's gates file trusts its SHA-256.

``gate g2 --measured RUN`` and ``gate g3 --candidate RUN --baseline RUN`` take such folders; each file is then
printed as witnessed (with the command and the folder), every other file as handed over.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from fxprobe.core.data import AsDict
from fxprobe.core.errors import BadInput
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.core.verdict import Criterion, Outcome, Verdict
from fxprobe.tools import dpkg, pip_record, vllm_bench
from fxprobe.workload import benchmark_checks
from fxprobe.workload.benchmarks import BenchmarkResult, load_benchmark

COMMAND = "benchmark"
DEFAULT_TIMEOUT_S = 6 * 3600
WITNESSED = "witnessed:"
HANDED = "handed over:"


@dataclass(frozen=True)
class Witness(AsDict):
    """What fxprobe saw of one benchmark command and the file it wrote."""

    argv: tuple[str, ...]
    exit_code: int | None
    timed_out: bool
    wall_s: float             # the command's lifetime, fxprobe's clock
    result_file: str          # as given
    kept: str | None          # raw/<name>: the file as the command left it
    sha256: str | None
    file_duration_s: float | None
    printed: dict[str, str]   # the file's key -> what the command printed for it
    summary_differences: tuple[str, ...] = ()
    summary_agrees: tuple[str, ...] = ()
    program: dict | None = None   # ToolOrigin.to_dict() of the program, and its "name"


def check_arguments(argv: Sequence[str], result_file: Path) -> None:
    """Refused before a run begins: no command, or a result file that exists already."""
    if not argv:
        raise BadInput("give the benchmark command after --, e.g. -- vllm bench serve ... --save-result")
    if result_file.exists():
        raise BadInput(f"{result_file}: exists before the run; a witnessed run must write it anew",
                       hint="move the old file away or name another --result")


def run(runner: Runner, run: RunDir, argv: Sequence[str], result_file: Path,
        timeout: float = DEFAULT_TIMEOUT_S) -> tuple[Verdict, dict, BenchmarkResult | None]:
    """Run ``argv`` (it writes ``result_file``), keep the file, and judge what was witnessed."""
    check_arguments(argv, result_file)
    program = program_origin(runner, argv)
    started = time.monotonic()
    done = runner.run(list(argv), timeout=timeout, label="benchmark")
    wall = time.monotonic() - started
    kept = sha = data = None
    if result_file.is_file():          # it did not exist before: the command wrote it
        content = result_file.read_bytes()
        kept_path = run.write_raw(result_file.name, content)
        kept, sha = kept_path.relative_to(run.path).as_posix(), hashlib.sha256(content).hexdigest()
        data = _json_object(content)
    printed = vllm_bench.parse_summary(done.stdout)
    wrong, agree = vllm_bench.summary_differences(printed, data or {})
    witness = Witness(tuple(done.argv), done.returncode, done.timed_out, round(wall, 3), str(result_file), kept, sha,
                      vllm_bench.number(data or {}, "duration"), printed, tuple(wrong), tuple(agree), program)
    result = load_benchmark(run.path / kept) if kept and done.ok else None
    verdict = Verdict("benchmark witnessed", tuple(criteria(witness)))
    extra = {"witness": witness.to_dict(), "benchmark": _relative(result, run) if result else None}
    return verdict, extra, result


PYTHON = re.compile(r"python3?(\.\d+)?$")


def program_file(argv: Sequence[str]) -> tuple[str, Path | None, str]:
    """(name, file, why not) of the program that computes the figures: ``argv[0]`` as PATH finds it, or the script
    a Python interpreter runs (a module run with ``-m`` is not traced: run its console script)."""
    first = shutil.which(argv[0]) or argv[0]
    if PYTHON.match(os.path.basename(argv[0])) and len(argv) > 1:
        if argv[1] == "-m":
            return (argv[2] if len(argv) > 2 else "-m"), None, "a module run by python -m is not traced (run its " \
                "console script instead)"
        first = argv[1]
    path = Path(first)
    return path.name, (path.absolute() if path.is_file() else None), f"{first} is not a file"


def program_origin(runner: Runner, argv: Sequence[str]) -> dict:
    """The benchmark program's origin: pip's RECORD of the distribution that lists it, else dpkg's records."""
    name, path, why = program_file(argv)
    if path is None:
        origin = dpkg.ToolOrigin("", "", dpkg.UNCHECKED, detail=why)
    else:
        origin = pip_record.origin(path) or dpkg.tool_origins(runner, {name: str(path)})[name]
    return {"name": name, **origin.to_dict()}


def program_text(program: dict | None) -> str:
    """``name: path: state (package version); detail``, or why there is none (a run before programs were traced)."""
    if not isinstance(program, dict):
        return "program not traced (the run records no origin)"
    fields = {k: program.get(k, "") for k in ("path", "sha256", "state", "package", "version", "detail")}
    return f"{program.get('name')}: {dpkg.ToolOrigin(**fields).text()}"


def _json_object(content: bytes) -> dict | None:
    try:
        data = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _relative(result: BenchmarkResult, run: RunDir) -> dict:
    data = result.to_dict()
    data["source"] = Path(result.source).relative_to(run.path).as_posix()
    return data


def criteria(w: Witness) -> list[Criterion]:
    command = " ".join(w.argv)
    if w.exit_code != 0 or w.timed_out:
        how = f"timed out after {w.wall_s:.1f} s" if w.timed_out else f"exited {w.exit_code}"
        return [Criterion("benchmark command exit code", Outcome.ERROR, w.exit_code, 0, "==",
                          detail=f"`{command}` {how}: no figure of it counts")]
    if w.kept is None:
        return [Criterion("benchmark command exit code", Outcome.ERROR, 0, 0, "==",
                          detail=f"`{command}` exited 0 but did not write {w.result_file} during the run")]
    out = [Criterion.compare("benchmark command exit code", 0, "==", 0, detail=f"`{command}` wrote "
                             f"{w.result_file} (kept as {w.kept}, SHA-256 {w.sha256})")]
    out.append(Criterion.compare("file duration within the command's lifetime", w.file_duration_s, "<=", w.wall_s,
                                 unit="s", detail="the file's duration vs the command's run, fxprobe's clock"
                                 if w.file_duration_s is not None else "the file holds no duration"))
    if not w.printed:
        out.append(Criterion("printed figures unlike the saved file", Outcome.NOT_RUN,
                             detail="the command printed no vLLM 'Serving Benchmark Result' summary"))
    else:
        detail = "; ".join(w.summary_differences) or f"{', '.join(w.summary_agrees)} as vLLM prints them"
        out.append(Criterion.compare("printed figures unlike the saved file", len(w.summary_differences), "<=", 0,
                                     unit="figures", detail=f"{len(w.printed)} printed: {detail}"))
    return out


def lines(verdict: Verdict, extra: dict) -> list[str]:
    w = extra["witness"]
    return [f"benchmark: `{' '.join(w['argv'])}` ran {w['wall_s']:.1f} s, exit {w['exit_code']}",
            f"program: {program_text(w.get('program'))}"]


# --------------------------------------------------------------------------- what a gate says of a file
COMPARED = (("g2", "measured"), ("g3", "candidates"), ("g3", "baselines"))   # where gate g2/g3 record the files


def about_the_file(note: object) -> bool:
    """A benchmark result's note that gates and the report print: where the file came from (witnessed or handed
    over) and what its figures were checked against."""
    return isinstance(note, str) and (note.startswith((WITNESSED, HANDED)) or benchmark_checks.MARK in note)


def _entries(results: dict) -> list[dict]:
    """The benchmark file entries a gate g2/g3 run's results record."""
    out = []
    for gate, key in COMPARED:
        block = results.get(gate)
        entries = block.get(key) if isinstance(block, dict) else None
        out += [entry for entry in (entries if isinstance(entries, list) else []) if isinstance(entry, dict)]
    return out


def file_notes(results: dict) -> list[tuple[str, str, str | None]]:
    """(file, note, the file's SHA-256) for each benchmark file a gate g2/g3 run's results record, each note about
    the file."""
    return [(str(entry.get("source")), note, entry.get("sha256")) for entry in _entries(results)
            for note in entry.get("notes") or [] if about_the_file(note)]


def file_programs(results: dict) -> list[tuple[str, dict]]:
    """(file, the program that wrote it) for each witnessed benchmark file a gate g2/g3 run's results record."""
    return [(str(entry.get("source")), entry["program"]) for entry in _entries(results)
            if isinstance(entry.get("program"), dict)]


def origin(file: Path, digest: str) -> tuple[str, dict | None]:
    """One line: the file (``digest``: its SHA-256) was written under a passed ``fxprobe benchmark`` run (the
    folder holding it as ``raw/<name>`` with the SHA-256 its results.json records), or handed over; and the program
    that run witnessed writing it (None for a handed-over file)."""
    folder = file.parent.parent if file.parent.name == "raw" else None
    results = _results(folder) if folder else None
    witness = results.get("witness") if results and results.get("command") == COMMAND else None
    if not isinstance(witness, dict) or witness.get("kept") != f"raw/{file.name}":
        return f"{HANDED} no fxprobe benchmark run wrote it (run the benchmark through `fxprobe benchmark`)", None
    if digest != witness.get("sha256"):
        return (f"{HANDED} {folder.name} witnessed a file with SHA-256 {witness.get('sha256')}, this one is "
                f"{digest} (changed after the run)"), None
    if results.get("outcome") != "pass":
        return f"{HANDED} the benchmark run {folder.name} that wrote it ended {results.get('outcome')}, not pass", None
    program = witness.get("program")
    return (f"{WITNESSED} written by `{' '.join(witness.get('argv', []))}` (exit 0, {witness.get('wall_s')} s) "
            f"in run {folder.name}; {program_text(program)}"), program if isinstance(program, dict) else None


def _results(folder: Path) -> dict | None:
    try:
        return RunDir(folder).results()
    except BadInput:
        return None
