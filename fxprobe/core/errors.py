"""The project's exceptions. Each carries the exit code the CLI maps it to.

Exit codes (mapped in one place, ``fxprobe.cli.main``):
0 pass, 1 verdict failed, 2 usage error, 3 not run (missing capability),
4 tool or environment error.
"""

from __future__ import annotations

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_USAGE = 2
EXIT_NOT_RUN = 3
EXIT_ERROR = 4


class FxprobeError(Exception):
    """Base class: a message meant for the user, one line, and an exit code."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class BadInput(FxprobeError):
    """The user gave something we cannot use (a file, a field, an option)."""

    exit_code = EXIT_USAGE


class NotRunnable(FxprobeError):
    """A capability is missing here: the step cannot run, and says why."""

    exit_code = EXIT_NOT_RUN


class ToolError(FxprobeError):
    """A wrapped tool failed, or the environment did not behave."""

    exit_code = EXIT_ERROR


class ParseError(ToolError):
    """Output of a tool could not be parsed. Names the source and the field."""

    def __init__(self, source: str, field: str, problem: str):
        super().__init__(f"{source}: field {field!r}: {problem}")
        self.source = source
        self.field = field
        self.problem = problem


class UnsafeTarget(FxprobeError):
    """A destructive step was refused because the target is not safe to touch."""

    exit_code = EXIT_USAGE
