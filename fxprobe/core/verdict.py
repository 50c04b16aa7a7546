"""Verdicts with four outcomes, and criteria that print measured beside threshold."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, asdict
from typing import Any

from fxprobe.core.errors import EXIT_ERROR, EXIT_FAIL, EXIT_NOT_RUN, EXIT_PASS


class Outcome(str, enum.Enum):
    PASS = "pass"
    FAIL = "fail"
    NOT_RUN = "not run"
    ERROR = "error"

    @property
    def exit_code(self) -> int:
        return {
            Outcome.PASS: EXIT_PASS,
            Outcome.FAIL: EXIT_FAIL,
            Outcome.NOT_RUN: EXIT_NOT_RUN,
            Outcome.ERROR: EXIT_ERROR,
        }[self]


_COMPARATORS = {
    ">=": lambda m, t: m >= t,
    ">": lambda m, t: m > t,
    "<=": lambda m, t: m <= t,
    "<": lambda m, t: m < t,
    "==": lambda m, t: m == t,
}


def format_number(value: Any, unit: str = "") -> str:
    """Enough digits that a borderline value shows (28.9 % is not 29 %)."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        text = str(value)
    elif isinstance(value, int):
        text = f"{value:,}" if abs(value) >= 10000 else str(value)
    elif not math.isfinite(value):
        text = str(value)
    elif unit == "%":
        text = f"{value:.1f}"
    elif abs(value) >= 1000:
        text = f"{value:,.1f}"
    elif value != 0 and abs(value) < 0.001:
        text = f"{value:.3g}"
    else:
        text = f"{value:.4f}".rstrip("0").rstrip(".")
    return f"{text} {unit}" if unit else text


@dataclass(frozen=True)
class Criterion:
    """One measurable condition: name, measured value, comparator, threshold."""

    name: str
    outcome: Outcome
    measured: Any = None
    threshold: Any = None
    comparator: str = ""
    unit: str = ""
    detail: str = ""
    evidence: str = ""
    missing: str = ""        # not run because this run is not among the evidence ("no soak run among the evidence")

    @classmethod
    def compare(cls, name: str, measured: float | int | None, comparator: str,
                threshold: float | int, *, unit: str = "", detail: str = "",
                evidence: str = "") -> "Criterion":
        if measured is None:
            return cls(name, Outcome.NOT_RUN, None, threshold, comparator, unit,
                       detail or "no measurement", evidence)
        ok = _COMPARATORS[comparator](measured, threshold)
        return cls(name, Outcome.PASS if ok else Outcome.FAIL, measured, threshold,
                   comparator, unit, detail, evidence)

    @property
    def margin(self) -> float | None:
        if isinstance(self.measured, (int, float)) and isinstance(self.threshold, (int, float)) \
                and not isinstance(self.measured, bool) and self.comparator in (">=", ">", "<=", "<"):
            sign = 1 if self.comparator.startswith(">") else -1
            return sign * (self.measured - self.threshold)
        return None

    def line(self) -> str:
        text = f"{self.outcome.value.upper():7} {self.name}: {format_number(self.measured, self.unit)}"
        if self.comparator:
            text += f" (need {self.comparator} {format_number(self.threshold, self.unit)}"
            if self.margin is not None:
                text += f", margin {format_number(self.margin, self.unit)}"
            text += ")"
        if self.detail:
            text += f" - {self.detail}"
        return text

    def to_dict(self) -> dict:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        data["margin"] = self.margin
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Criterion":
        """The inverse of :meth:`to_dict` (the one way a recorded criterion is read back); an unknown
        outcome reads as error, derived keys (margin) are recomputed, not trusted."""
        try:
            outcome = Outcome(data.get("outcome", "error"))
        except ValueError:
            outcome = Outcome.ERROR
        text = {key: data.get(key) if isinstance(data.get(key), str) else "" for key in
                ("comparator", "unit", "detail", "evidence", "missing")}
        return cls(str(data.get("name", "?")), outcome, data.get("measured"), data.get("threshold"), **text)


def combine(outcomes: list[Outcome]) -> Outcome:
    """Error beats fail beats not-run beats pass; no criteria at all is not run."""
    if not outcomes:
        return Outcome.NOT_RUN
    for worst in (Outcome.ERROR, Outcome.FAIL, Outcome.NOT_RUN):
        if worst in outcomes:
            return worst
    return Outcome.PASS


@dataclass(frozen=True)
class Verdict:
    name: str
    criteria: tuple[Criterion, ...] = field(default_factory=tuple)
    reason: str = ""

    @property
    def outcome(self) -> Outcome:
        return combine([c.outcome for c in self.criteria])

    def lines(self) -> list[str]:
        head = f"{self.name}: {self.outcome.value.upper()}"
        if self.reason:
            head += f" - {self.reason}"
        return [head] + ["  " + c.line() for c in self.criteria]

    def to_dict(self) -> dict:
        return {"name": self.name, "outcome": self.outcome.value, "reason": self.reason,
                "criteria": [c.to_dict() for c in self.criteria]}

    @classmethod
    def from_dict(cls, data: dict) -> "Verdict":
        """The inverse of :meth:`to_dict`; the outcome is recomputed from the criteria read back."""
        criteria = data.get("criteria") if isinstance(data.get("criteria"), list) else []
        reason = data.get("reason") if isinstance(data.get("reason"), str) else ""
        return cls(str(data.get("name", "?")),
                   tuple(Criterion.from_dict(c) for c in criteria if isinstance(c, dict)), reason)
