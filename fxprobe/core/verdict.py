"""Verdicts with four outcomes, and criteria that print measured beside threshold."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, asdict, replace
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from typing import Any, Union

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
MAX_EXTRA_PLACES = 24

Number = Union[int, float, Fraction, Decimal]
CRITERION_TEXT = ("comparator", "unit", "detail", "evidence", "missing")   # a criterion's text fields ("" if none)


def exact(value: Any) -> Fraction:
    """A recorded figure as an exact rational: an int as is, a float as the decimal it is written as in
    results.json (its shortest repr: 7.53 is 753/100, not the binary double next to it). ValueError for
    bool, NaN, inf and non-numbers: they are never compared."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, Decimal)):
        raise ValueError(f"not a number: {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"not a finite number: {value}")
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    return Fraction(value)


def decide(measured: Number, comparator: str, threshold: Number) -> bool:
    """THE comparison rule: exact arithmetic on the recorded figures; >= and <= include the threshold."""
    return _COMPARATORS[comparator](exact(measured), exact(threshold))


def decimals_of(value: Fraction) -> int | None:
    """How many digits after the point write ``value`` exactly; None when no finite number does."""
    for places in range(0, 40):
        if (value * 10 ** places).denominator == 1:
            return places
    return None


def _natural_places(value: Fraction, unit: str) -> int:
    """The places format_number would show: 1 for percent and for values >= 1000, 3 significant digits
    below 0.001, else up to 4 with trailing zeros dropped."""
    size = abs(value)
    if unit == "%" or size >= 1000:
        return 1 if value.denominator != 1 or unit == "%" else 0
    if value.denominator == 1:
        return 0
    if size < Fraction(1, 1000):
        return max(0, 2 - math.floor(math.log10(size)))
    text = f"{Decimal(value.numerator) / Decimal(value.denominator):.4f}".rstrip("0")
    return len(text.split(".")[1]) if "." in text else 0


def rounded(value: Fraction, places: int) -> Decimal:
    """``value`` to ``places`` digits after the point, half to even (the digits printed)."""
    with localcontext() as context:
        context.prec = 120
        context.rounding = ROUND_HALF_EVEN
        whole, rest = divmod(value.numerator, value.denominator)
        fraction = Decimal(rest) / Decimal(value.denominator)      # < 1: 120 digits are exact enough to round
        return (Decimal(whole) + fraction).quantize(Decimal(1).scaleb(-places))


def deciding_places(measured: Number, comparator: str, threshold: Number, unit: str = "") -> int:
    """The fewest places (at least the usual ones, at least the threshold's own) at which the PRINTED
    measured value, compared with the printed threshold, gives the same outcome as the exact value, and
    prints equal to the threshold only when it is equal: "28.998 %" never shows as "29.0 %"."""
    m, t = exact(measured), exact(threshold)
    start = max(_natural_places(m, unit), decimals_of(t) or 0, _natural_places(t, unit))
    truth = _COMPARATORS[comparator](m, t)
    for places in range(start, start + MAX_EXTRA_PLACES):
        shown = Fraction(rounded(m, places))
        if _COMPARATORS[comparator](shown, t) == truth and (shown != t or m == t):
            return places
    return start + MAX_EXTRA_PLACES


def format_fixed(value: Number, places: int, unit: str = "") -> str:
    """``value`` with exactly ``places`` digits after the point (thousands grouped from 10,000 on)."""
    shown = rounded(exact(value), places)
    if shown == 0:
        shown = abs(shown)             # never "-0.0"
    text = f"{shown:,.{places}f}" if abs(shown) >= 10000 else f"{shown:.{places}f}"
    return f"{text} {unit}" if unit else text


def format_number(value: Any, unit: str = "", places: int | None = None) -> str:
    """Enough digits that a borderline value shows (28.9 % is not 29 %); ``places`` fixes the digits."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction, Decimal)):
        text = str(value)
    elif isinstance(value, float) and not math.isfinite(value):
        text = str(value)
    elif places is not None:
        return format_fixed(value, places, unit)
    elif isinstance(value, int):
        text = f"{value:,}" if abs(value) >= 10000 else str(value)
    elif not isinstance(value, float):
        return format_fixed(value, _natural_places(exact(value), unit), unit)
    elif unit == "%":
        text = f"{value:.1f}"
    elif abs(value) >= 1000:
        text = f"{value:,.1f}"
    elif value != 0 and abs(value) < 0.001:
        text = f"{value:.3g}"
    else:
        text = f"{value:.4f}".rstrip("0").rstrip(".")
    return f"{text} {unit}" if unit else text


def _recorded(value: Number) -> int | float:
    """What goes into results.json: an int stays an int, anything else the nearest float."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, Fraction) and value.denominator == 1:
        return int(value)
    return float(value)


@dataclass(frozen=True)
class Criterion:
    """One measurable condition: name, measured value, comparator, threshold.

    ``places``: the digits after the point measured, threshold and margin are printed with, chosen by
    :func:`deciding_places` so that the printed numbers alone decide the outcome."""

    name: str
    outcome: Outcome
    measured: Any = None
    threshold: Any = None
    comparator: str = ""
    unit: str = ""
    detail: str = ""
    evidence: str = ""
    missing: str = ""        # not run because this run is not among the evidence ("no soak run among the evidence")
    places: int | None = None

    @classmethod
    def compare(cls, name: str, measured: Number | None, comparator: str,
                threshold: Number, *, unit: str = "", detail: str = "",
                evidence: str = "") -> "Criterion":
        """Judged by :func:`decide` (exact, inclusive); NaN/inf/non-numbers are an error, never judged."""
        if measured is None:
            return cls(name, Outcome.NOT_RUN, None, _recorded_or(threshold), comparator, unit,
                       detail or "no measurement", evidence)
        try:
            ok = decide(measured, comparator, threshold)
            places = deciding_places(measured, comparator, threshold, unit)
        except ValueError as exc:
            return cls(name, Outcome.ERROR, measured if isinstance(measured, (int, float, str)) else str(measured),
                       _recorded_or(threshold), comparator, unit,
                       "; ".join(filter(None, [f"cannot compare ({exc})", detail])), evidence)
        return cls(name, Outcome.PASS if ok else Outcome.FAIL, _recorded(measured), _recorded_or(threshold),
                   comparator, unit, detail, evidence, places=places)

    def _numeric(self) -> bool:
        return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (self.measured, self.threshold)) \
            and all(math.isfinite(v) for v in (self.measured, self.threshold))

    def _margin_exact(self) -> Fraction | None:
        """Printed measured minus printed threshold (signed so that >= 0 is on the passing side)."""
        if not self._numeric() or self.comparator not in (">=", ">", "<=", "<"):
            return None
        sign = 1 if self.comparator.startswith(">") else -1
        measured = exact(self.measured)
        if self.places is not None:
            measured = Fraction(rounded(measured, self.places))
        return sign * (measured - exact(self.threshold))

    @property
    def margin(self) -> float | None:
        margin = self._margin_exact()
        return None if margin is None else float(margin)

    def measured_text(self) -> str:
        return format_number(self.measured, self.unit, self.places if self._numeric() else None)

    def threshold_text(self) -> str:
        if not self._numeric():
            return format_number(self.threshold, self.unit)
        threshold = exact(self.threshold)       # every digit it has, never rounded ("28.95 %" stays)
        return format_fixed(threshold, max(_natural_places(threshold, self.unit), decimals_of(threshold) or 0), self.unit)

    def margin_text(self) -> str:
        margin = self._margin_exact()
        if margin is None:
            return ""
        return format_number(margin if self.places is not None else float(margin), self.unit, self.places)

    def line(self) -> str:
        text = f"{self.outcome.value.upper():7} {self.name}: {self.measured_text()}"
        if self.comparator:
            text += f" (need {self.comparator} {self.threshold_text()}"
            if self.margin_text():
                text += f", margin {self.margin_text()}"
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
        outcome reads as error, derived keys (margin) are recomputed, not trusted, and so is the outcome: a
        pass or fail whose own measured value, comparator and threshold (numbers) say otherwise is refused
        (ERROR, saying so)."""
        try:
            outcome = Outcome(data.get("outcome", "error"))
        except ValueError:
            outcome = Outcome.ERROR
        text = {key: data.get(key) if isinstance(data.get(key), str) else "" for key in CRITERION_TEXT}
        places = data.get("places")
        places = places if isinstance(places, int) and not isinstance(places, bool) and 0 <= places <= 60 else None
        read = cls(str(data.get("name", "?")), outcome, data.get("measured"), data.get("threshold"), **text,
                   places=places)
        refused = read.contradiction()
        return replace(read, outcome=Outcome.ERROR, detail="; ".join(filter(None, [refused, read.detail]))) \
            if refused else read

    def contradiction(self) -> str:
        """Why the recorded outcome cannot be this criterion's own (its figures re-judged by :func:`decide`), or
        "": only a pass or fail with a numeric measured value and threshold and a comparator is re-judged. A
        figure within float rounding of its threshold (recorded as the nearest float) is not second-guessed."""
        if self.outcome not in (Outcome.PASS, Outcome.FAIL) or self.comparator not in _COMPARATORS:
            return ""
        try:
            measured, threshold = exact(self.measured), exact(self.threshold)
        except ValueError:
            return ""
        judged = Outcome.PASS if _COMPARATORS[self.comparator](measured, threshold) else Outcome.FAIL
        if judged is self.outcome or abs(measured - threshold) <= Fraction(1, 10 ** 12) * max(abs(measured),
                                                                                                abs(threshold)):
            return ""
        return (f"REFUSED: recorded as {self.outcome.value.upper()}, but its own figures "
                f"{format_number(self.measured, self.unit)} {self.comparator} {self.threshold_text()} give "
                f"{judged.value.upper()}: the outcome does not follow from its own figures and is not trusted")


def _recorded_or(value: Any) -> Any:
    """A threshold as recorded: numbers as :func:`_recorded`, anything else (``"pass"``) unchanged."""
    if isinstance(value, (int, float, Fraction, Decimal)) and not isinstance(value, bool):
        try:
            return _recorded(value)
        except (ValueError, OverflowError):
            return value
    return value


def combine(outcomes: list[Outcome]) -> Outcome:
    """Error beats fail beats not-run beats pass; no criteria at all is not run."""
    if not outcomes:
        return Outcome.NOT_RUN
    for worst in (Outcome.ERROR, Outcome.FAIL, Outcome.NOT_RUN):
        if worst in outcomes:
            return worst
    return Outcome.PASS


@dataclass(frozen=True)
class NotJudged:
    """A criterion a lab-scaled thresholds file declares it does not judge (gates-lab.toml ``[scale] not_judged``),
    with its reason: printed beside the gate's criteria, never counted in the gate's outcome."""

    name: str                     # the criterion left out ("baseline within reference")
    keys: tuple[str, ...]         # the thresholds it would have been judged with ("g2.baseline_tolerance_pct")
    reason: str

    WORD = "NOT JUDGED"

    def line(self) -> str:
        return f"{self.WORD:7} {self.name} ({', '.join(self.keys)}): not judged at lab scale: {self.reason}"

    def to_dict(self) -> dict:
        return {"name": self.name, "keys": list(self.keys), "reason": self.reason}

    @classmethod
    def from_dict(cls, data: dict) -> "NotJudged":
        keys = data.get("keys") if isinstance(data.get("keys"), list) else []
        return cls(str(data.get("name", "?")), tuple(str(k) for k in keys), str(data.get("reason", "")))


@dataclass(frozen=True)
class Verdict:
    name: str
    criteria: tuple[Criterion, ...] = field(default_factory=tuple)
    reason: str = ""
    notes: tuple[str, ...] = ()      # information beside the criteria, never judged (e.g. G4: a drive pull's rebuild)
    not_judged: tuple[NotJudged, ...] = ()     # left out by a lab-scaled thresholds file, each with its reason

    @property
    def outcome(self) -> Outcome:
        """From the criteria judged only: what was not judged never passes a gate (nothing judged: not run)."""
        return combine([c.outcome for c in self.criteria])

    def lines(self) -> list[str]:
        head = f"{self.name}: {self.outcome.value.upper()}"
        if self.reason:
            head += f" - {self.reason}"
        lines = ["  " + c.line() for c in self.criteria] + ["  " + n.line() for n in self.not_judged]
        return [head] + lines + [f"  INFO    {note}" for note in self.notes]

    def to_dict(self) -> dict:
        data = {"name": self.name, "outcome": self.outcome.value, "reason": self.reason,
                "criteria": [c.to_dict() for c in self.criteria]}
        if self.notes:
            data["notes"] = list(self.notes)
        if self.not_judged:
            data["not_judged"] = [n.to_dict() for n in self.not_judged]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Verdict":
        """The inverse of :meth:`to_dict`; the outcome is recomputed from the criteria read back."""
        criteria = data.get("criteria") if isinstance(data.get("criteria"), list) else []
        reason = data.get("reason") if isinstance(data.get("reason"), str) else ""
        notes = data.get("notes") if isinstance(data.get("notes"), list) else []
        left_out = data.get("not_judged") if isinstance(data.get("not_judged"), list) else []
        return cls(str(data.get("name", "?")),
                   tuple(Criterion.from_dict(c) for c in criteria if isinstance(c, dict)), reason,
                   tuple(n for n in notes if isinstance(n, str)),
                   tuple(NotJudged.from_dict(n) for n in left_out if isinstance(n, dict)))


def counts_text(verdict: Verdict) -> str:
    """"3 pass, 1 not run, 1 not judged at lab scale": the criteria by outcome, then what was left out."""
    counts = {o: sum(1 for c in verdict.criteria if c.outcome is o) for o in Outcome}
    parts = [f"{n} {o.value}" for o, n in counts.items() if n]
    parts += [f"{len(verdict.not_judged)} not judged at lab scale"] if verdict.not_judged else []
    return ", ".join(parts)
