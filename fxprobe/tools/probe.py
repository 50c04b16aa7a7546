"""Can a wrapped tool or facility be used on a host? Each answer is None (yes) or the reason (no).

The adapters' ``probe_*`` functions are one line each over these two helpers, so every probe
records its command in the run directory, runs even under --dry-run, and words a missing tool,
a failing command and an unrecognised version the same way.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from fxprobe.core.errors import NotRunnable, ParseError
from fxprobe.core.hosts import LOCAL, Host
from fxprobe.core.runner import Runner

PROBE_TIMEOUT_S = 15


def parse_major_minor(output: str, source: str, pattern: str, expected: str) -> tuple[int, int]:
    """(major, minor) from the first match of ``pattern`` (groups ``major`` and ``minor``) in a tool's version
    output; a ParseError saying ``expected`` was not there otherwise."""
    match = re.search(pattern, output if isinstance(output, str) else "")
    if not match:
        raise ParseError(source, "version", f"no {expected!r} in {str(output).strip()[:60]!r}")
    return int(match.group("major")), int(match.group("minor"))


def probe_version(runner: Runner, argv: Sequence[str], parse: Callable[[str], Any], *, host: Host = LOCAL,
                  label: str) -> tuple[Any, str | None]:
    """(parsed version, None) when ``argv`` runs on host and prints what ``parse`` reads (stdout, then
    stderr); else (None, the reason): the tool is missing, the command failed, or the version is unknown."""
    try:
        result = runner.run(list(argv), timeout=PROBE_TIMEOUT_S, host=host, always=True, label=label)
    except NotRunnable as exc:
        return None, str(exc)
    try:
        return parse(result.stdout + "\n" + result.stderr), None
    except ParseError as exc:
        return None, result.failure(" ".join(argv)) if not result.ok else str(exc)


def probe_command(runner: Runner, argv: Sequence[str], missing: str, *, host: Host = LOCAL,
                  label: str, needs_output: bool = False) -> str | None:
    """None when ``argv`` succeeds on host (and prints something, with ``needs_output``); else
    ``missing`` with " on HOST" filled in for a remote host."""
    try:
        result = runner.run(list(argv), timeout=PROBE_TIMEOUT_S, host=host, always=True, label=label)
    except NotRunnable as exc:
        return str(exc)
    if result.ok and (result.stdout.split() or not needs_output):
        return None
    return missing.format(where=f" on {host.name}" if host.name != "local" else "")
