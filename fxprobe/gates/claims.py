"""Recompute a report's headline claims from its own raw table, and say by which rule each holds.

A claims file (TOML, schema :class:`ClaimsFileModel`; unknown keys are refused) holds the raw figures and
the headlines::

    [report]
    name = "R2 ..."
    key = "concurrency"              # the column that names a row

    [[rows]]                         # the raw table, one row per level (missing cells omitted)
    concurrency = 8
    array_ttft_s = 7.53

    [figures]                        # single raw figures
    model_gb = 65.6

    [[claims]]
    id = "ttft-reduction"
    text = "TTFT reduction >= 25 % at every concurrency"
    kind = "at_least"                # value | at_least | at_most | range | unverifiable
    claimed = 25                     # a number, [low, high] for range, or an expression
    exprs = ["(local_ttft_s - array_ttft_s) / local_ttft_s * 100"]
    each = true                      # evaluate per row (bare names are that row's cells)
    unit = "%"
    tolerance = 0.05                 # optional: the rounding allowed (default: the precision stated)

Expressions: numbers, + - * / ** and parentheses, ``name`` (a figure, or with ``each`` a cell of the current
row), ``column[key]`` (the cell of the row whose key is ``key``), and the functions ``min``, ``max``, ``abs``,
``utilization(switches_per_hour, switch_s)`` (:func:`fxprobe.gates.calc.utilization`, a fraction). They are
evaluated in decimal arithmetic by a bounded evaluator: at most 400 characters and 200 operations, exponents
within +-64, no names beyond the table's, no attribute access; anything else is refused with one line.

How a claim is judged, every figure in decimal (the table's numbers as written):

* the rule is printed with the claim: the exact comparison, and the rounding allowed - ``tolerance`` from the
  file, or by default half a unit of the last digit the claimed figure was written with (29 -> 0.5,
  46.7 -> 0.05: "holds at the precision it was stated"; ``tolerance = 0`` allows none);
* value: the recomputed value equals the claimed one; at_least / at_most: every recomputed value is >= / <= the
  claimed one; range: the smallest and largest recomputed values equal ``low`` and ``high``;
* each comparison is "holds" when exact, "holds only with rounding" when only the rounding allowance makes it
  hold, else "does not hold"; the claim takes the worst of its comparisons; "cannot check" says why (no raw
  figures, or no row has every figure the claim needs). With ``each = true`` every row is listed with its value.
"""

from __future__ import annotations

import ast
import decimal
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, WithJsonSchema, model_validator

from fxprobe.core.errors import BadInput
from fxprobe.core.schema import InputModel, NonEmptyStr, NonNegativeFloat, Number, finite_number, validate
from fxprobe.core.tomlfile import parse_toml, read_text
from fxprobe.core.verdict import decide, deciding_places, format_fixed
from fxprobe.gates.calc import utilization

HOLDS = "holds"
HOLDS_WITH_ROUNDING = "holds only with rounding"
DOES_NOT_HOLD = "does not hold"
CANNOT_CHECK = "cannot check"
OUTCOMES = (HOLDS, HOLDS_WITH_ROUNDING, DOES_NOT_HOLD, CANNOT_CHECK)
Kind = Literal["value", "at_least", "at_most", "range", "unverifiable"]
KINDS = ("value", "at_least", "at_most", "range", "unverifiable")

MAX_EXPR_CHARS = 400
MAX_EXPR_NODES = 200
MAX_EXPONENT = 64
_CONTEXT = decimal.Context(prec=28, Emax=10**6, Emin=-10**6,
                           traps=[decimal.Overflow, decimal.DivisionByZero, decimal.InvalidOperation])


# --------------------------------------------------------------------------- the file's schema
def _claimed_value(value: Any) -> Any:
    """A number, an expression (text), or [low, high] of those (None: not given)."""
    if value is None:
        return value
    items = value if isinstance(value, list) else [value]
    if isinstance(value, list) and len(value) != 2:
        raise ValueError(f"a list here is [low, high] (got {len(value)} items)")
    for item in items:
        if isinstance(item, str):
            if not item.strip():
                raise ValueError("an expression must not be empty")
        else:
            finite_number(item)
    return value


Claimed = Annotated[Any, BeforeValidator(_claimed_value),
                    WithJsonSchema({"description": "a number, an expression, or [low, high] for a range",
                                    "anyOf": [{"type": "number"}, {"type": "string"},
                                              {"type": "array", "minItems": 2, "maxItems": 2,
                                               "items": {"type": ["number", "string"]}}]})]


class ReportTable(InputModel):
    name: NonEmptyStr | None = None
    key: NonEmptyStr = "key"
    model: NonEmptyStr | None = None                # the model the figures were measured with (G2 compares only it)
    units: dict[NonEmptyStr, NonEmptyStr] = {}      # column -> unit ("s", "output tok/s"): G2 compares only that unit


class ClaimEntry(InputModel):
    id: NonEmptyStr
    text: NonEmptyStr
    kind: Kind
    claimed: Claimed = None
    exprs: list[NonEmptyStr] = []
    expr: NonEmptyStr | None = None
    each: bool = False
    unit: str = ""
    tolerance: NonNegativeFloat | None = None
    note: str = ""

    @model_validator(mode="after")
    def _complete(self):
        if self.expr is not None and self.exprs:
            raise ValueError("give 'expr' or 'exprs', not both")
        if self.kind == "unverifiable":
            return self
        if self.expr is None and not self.exprs:
            raise ValueError("'exprs' is missing (how to recompute the claim from the table)")
        if self.claimed is None:
            raise ValueError("'claimed' is missing (the figure the report states)")
        if (self.kind == "range") != isinstance(self.claimed, list):
            raise ValueError("a range claim needs claimed = [low, high]" if self.kind == "range" else
                             f"a {self.kind} claim needs one claimed figure, not a list")
        return self


class TableFile(InputModel):
    """A report's raw table (a reference for G2, e.g. examples/claims/reference-r2.toml); headlines optional."""

    report: ReportTable = ReportTable()
    rows: list[dict[str, Number]] = []
    figures: dict[str, Number] = {}
    claims: list[ClaimEntry] = []

    @model_validator(mode="after")
    def _units_name_columns(self) -> "TableFile":
        columns = {column for row in self.rows for column in row}
        stray = [column for column in self.report.units if column not in columns]
        if stray:
            raise ValueError(f"report.units.{stray[0]}: not a column of any row (columns: {', '.join(sorted(columns))})")
        return self


class ClaimsFileModel(TableFile):
    """A claims file: a report's raw table and its headlines (at least one)."""

    claims: Annotated[list[ClaimEntry], Field(min_length=1)]


# --------------------------------------------------------------------------- the bounded evaluator
class _Missing(Exception):
    """A name the current row does not have (the row is listed as not judged)."""


def _dec(value: Any) -> Decimal:
    """A table number as written (7.53 is Decimal('7.53'), not the binary float nearest to it)."""
    return value if isinstance(value, Decimal) else Decimal(repr(value)) if isinstance(value, float) \
        else Decimal(value)


@dataclass(frozen=True)
class Table:
    key: str
    rows: tuple[dict, ...]
    figures: dict

    def cell(self, column: str, key_value: Any) -> Decimal:
        for row in self.rows:
            if row.get(self.key) == key_value:
                if column not in row:
                    raise _Missing(f"{column}[{key_value}]")
                return _dec(row[column])
        raise _Missing(f"{column}[{key_value}]")


def _power(base: Decimal, exponent: Decimal) -> Decimal:
    if abs(exponent) > MAX_EXPONENT:
        raise ValueError(f"exponent {exponent} is beyond +-{MAX_EXPONENT}")
    return _CONTEXT.power(base, exponent)


_BINARY = {ast.Add: _CONTEXT.add, ast.Sub: _CONTEXT.subtract, ast.Mult: _CONTEXT.multiply,
           ast.Div: _CONTEXT.divide, ast.Pow: _power}


def _utilization(switches: Decimal, seconds: Decimal) -> Decimal:
    return _dec(utilization(float(switches), float(seconds)))


_FUNCTIONS = {"min": min, "max": max, "abs": abs, "utilization": _utilization}


class _Evaluator:
    """Walks an expression's syntax tree allowing only arithmetic on the table's numbers."""

    def __init__(self, table: Table, row: dict | None, expr: str, source: str):
        self.table, self.row, self.expr, self.source = table, row, expr, source

    def refuse(self, problem: str, hint: str | None = None) -> BadInput:
        return BadInput(f"{self.source}: expression {self.expr!r}: {problem}", hint=hint)

    def name(self, name: str) -> Decimal:
        table, row = self.table, self.row
        if row is not None and name in row:
            return _dec(row[name])
        if name in table.figures:
            return _dec(table.figures[name])
        if row is not None and any(name in r for r in table.rows):
            raise _Missing(name)
        raise self.refuse(f"unknown name {name!r}", hint="use a column of [[rows]] or a key of [figures]")

    def walk(self, node: ast.AST) -> Decimal:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            if isinstance(node.value, float) and not Decimal(repr(node.value)).is_finite():
                raise self.refuse(f"{ast.unparse(node)} is not a finite number")
            return _dec(node.value)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](self.walk(node.left), self.walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = self.walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and isinstance(node.slice, ast.Constant):
            if not any(node.value.id in r for r in self.table.rows):
                raise self.refuse(f"unknown column {node.value.id!r}")
            return self.table.cell(node.value.id, node.slice.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS \
                and not node.keywords and node.args:
            return _FUNCTIONS[node.func.id](*[self.walk(a) for a in node.args])
        raise self.refuse(f"{ast.unparse(node)!r} is not allowed",
                          hint="numbers, names, column[key], + - * / **, min, max, abs, utilization")


def _parse(expr: str, refuse) -> ast.AST:
    if len(expr) > MAX_EXPR_CHARS:
        raise refuse(f"longer than {MAX_EXPR_CHARS} characters")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise refuse(f"not valid ({exc.msg})") from None
    except (RecursionError, MemoryError, ValueError):
        raise refuse("nested too deeply") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_EXPR_NODES:
        raise refuse(f"more than {MAX_EXPR_NODES} operations")
    return tree.body


def evaluate(expr: str, table: Table, row: dict | None = None, source: str = "claim") -> Decimal:
    """The value of a claim expression, in decimal; BadInput for anything but bounded arithmetic."""
    evaluator = _Evaluator(table, row, expr, source)
    tree = _parse(expr, evaluator.refuse)
    try:
        return evaluator.walk(tree)
    except decimal.DivisionByZero:
        raise evaluator.refuse("division by zero") from None
    except decimal.Overflow:
        raise evaluator.refuse("the result is too large") from None
    except decimal.InvalidOperation:
        raise evaluator.refuse("not a number (e.g. a negative number to a fractional power)") from None
    except ValueError as exc:
        raise evaluator.refuse(str(exc)) from None
    except RecursionError:
        raise evaluator.refuse("nested too deeply") from None
    except TypeError:
        raise evaluator.refuse("a function got the wrong number of arguments") from None


# --------------------------------------------------------------------------- judging
class Claim(ClaimEntry):
    """A claim as its file wrote it (ClaimEntry) and where it stands there."""

    source: str = ""          # the claims file
    index: int = 0            # its place in [[claims]]

    @property
    def expressions(self) -> tuple[str, ...]:
        return tuple(self.exprs) if self.exprs else (self.expr,) if self.expr else ()

    @property
    def expr_key(self) -> str:
        """How the file wrote the expressions: exprs = [...] or expr = "..."."""
        return "expr" if self.expr is not None else "exprs"

    @property
    def where(self) -> str:
        return f"{self.source}: claim {self.id}" if self.source else f"claim {self.id}"

    def field(self, key: str, item: int | None = None) -> str:
        """Where an expression of this claim is written: "file: field 'claims[3].exprs[0]' (claim x)"."""
        at = "" if item is None or (key == "exprs" and self.expr_key == "expr") else f"[{item}]"
        name = self.expr_key if key == "exprs" else key
        head = f"{self.source}: " if self.source else ""
        return f"{head}field 'claims[{self.index}].{name}{at}' (claim {self.id})"


@dataclass(frozen=True)
class Check:
    """One recomputed value beside what it is compared with, and what came of it."""

    label: str
    value: Decimal | None
    comparator: str = ""
    claimed: Decimal | None = None
    tolerance: Decimal = Decimal(0)
    outcome: str = CANNOT_CHECK
    reason: str = ""


def stated_tolerance(value: Any) -> Decimal:
    """Half a unit of the last digit written: 46.7 -> 0.05, 20 -> 0.5, 8.6 -> 0.05."""
    exponent = _dec(value).normalize().as_tuple().exponent if isinstance(value, float) else 0
    return Decimal(5).scaleb(min(0, int(exponent)) - 1)


def _judge_value(label: str, value: Decimal, comparator: str, claimed: Decimal, tolerance: Decimal) -> Check:
    """Exact first (core.verdict.decide, the one comparison rule), then within the rounding allowed."""
    if decide(value, comparator, claimed):
        outcome = HOLDS
    else:
        allowed = {">=": decide(value, ">=", claimed - tolerance), "<=": decide(value, "<=", claimed + tolerance),
                   "==": decide(abs(value - claimed), "<=", tolerance)}[comparator]
        outcome = HOLDS_WITH_ROUNDING if allowed and tolerance else DOES_NOT_HOLD
    return Check(label, value, comparator, claimed, tolerance, outcome)


def decisive(value: Decimal, *bounds: Decimal, unit: str = "") -> str:
    """``value`` with the digits that keep its side of every bound visible, as gates print theirs
    (core.verdict.deciding_places for each bound: 28.998 % never prints as 29.0 %)."""
    places = max(deciding_places(value, ">=", bound, unit) for bound in bounds or (value,))
    return format_fixed(value, places)


def _figure(value: Decimal | None, unit: str, *bounds: Decimal) -> str:
    if value is None:
        return "-"
    text = decisive(value, *bounds, unit=unit)
    return f"{text} {unit}" if unit else text


def _stated(value: Decimal) -> str:
    return f"{value.normalize():f}"


def _shown_claimed(written: Any, value: Decimal) -> str:
    """The claimed figure as written; an expression with its value."""
    return f"{written} = {decisive(value)}" if isinstance(written, str) else _stated(value)


def _claimed_number(claim: Claim, value: Any, table: Table) -> Decimal:
    if isinstance(value, str):
        item = claim.claimed.index(value) if isinstance(claim.claimed, list) else None
        return evaluate(value, table, source=claim.field("claimed", item))
    return _dec(value)


def _tolerance(claim: Claim, written: Any) -> tuple[Decimal, str]:
    if claim.tolerance is not None:
        tolerance = _dec(float(claim.tolerance))
        return tolerance, (f"rounding allowed +-{_stated(tolerance)} (tolerance from the claims file)"
                           if tolerance else "no rounding allowed (tolerance = 0)")
    tolerance = stated_tolerance(written) if not isinstance(written, str) else Decimal(0)
    if not tolerance:
        return tolerance, "no rounding allowed (the claimed figure is an expression)"
    return tolerance, (f"rounding allowed +-{_stated(tolerance)} (half a unit of the last digit of "
                       f"{_stated(_dec(written))} as written; set tolerance = 0 for none)")


def recompute(claim: Claim, table: Table) -> list[tuple[str, Decimal | None, str]]:
    """(label, value, why not) per expression, per row with ``each``; a row lacking a cell has value None."""
    values = []
    for item, expr in enumerate(claim.expressions):
        where = claim.field("exprs", item)
        if not claim.each:
            try:
                values.append((expr, evaluate(expr, table, None, where), ""))
            except _Missing as missing:
                raise BadInput(f"{claim.where}: the table has no cell {missing}") from None
            continue
        for row in table.rows:
            label = f"{table.key} {row.get(table.key)}"
            try:
                values.append((label, evaluate(expr, table, row, where), ""))
            except _Missing as missing:
                values.append((label, None, f"this row has no {missing}"))
    return values


_WORST = {HOLDS: 0, HOLDS_WITH_ROUNDING: 1, DOES_NOT_HOLD: 2}
_RULES = {"value": ("==", "equals"), "at_least": (">=", "at least"), "at_most": ("<=", "at most")}


def _checks(claim: Claim, table: Table, values: list) -> tuple[list[Check], str]:
    """Every comparison the claim makes, and the rule (printed) they follow."""
    present = [(label, v) for label, v, _ in values if v is not None]
    if claim.kind == "range":
        (low, high), written = [_claimed_number(claim, v, table) for v in claim.claimed], claim.claimed
        (tol_low, rule_low), (tol_high, rule_high) = _tolerance(claim, written[0]), _tolerance(claim, written[1])
        low_label, low_value = min(present, key=lambda p: p[1])
        high_label, high_value = max(present, key=lambda p: p[1])
        checks = [_judge_value(f"low end ({low_label})", low_value, "==", low, tol_low),
                  _judge_value(f"high end ({high_label})", high_value, "==", high, tol_high)]
        rule = (f"the smallest value equals {_shown_claimed(written[0], low)} and the largest "
                f"{_shown_claimed(written[1], high)}, compared exactly in decimal; "
                + (f"both ends: {rule_low}" if rule_low == rule_high else f"low end: {rule_low}; high end: {rule_high}"))
        return checks, rule
    comparator, words = _RULES[claim.kind]
    claimed = _claimed_number(claim, claim.claimed, table)
    tolerance, rounding = _tolerance(claim, claim.claimed)
    if claim.kind == "value" and len(present) != 1:
        raise BadInput(f"{claim.where}: a value claim needs exactly one recomputed value, got {len(present)}",
                       hint="drop 'each' or use at_least / at_most")
    scope = " in every row" if claim.each else ""
    return ([_judge_value(label, v, comparator, claimed, tolerance) for label, v in present],
            f"{words} {_shown_claimed(claim.claimed, claimed)}{' ' + claim.unit if claim.unit else ''}{scope}, "
            f"compared exactly in decimal; {rounding}")


@dataclass(frozen=True)
class ClaimResult:
    id: str
    text: str
    kind: str
    outcome: str
    claimed: Any
    recomputed: tuple[tuple[str, float], ...] = ()
    difference: str = ""
    note: str = ""
    unit: str = ""
    rule: str = ""
    rows: tuple[dict, ...] = ()

    def lines(self) -> list[str]:
        out = [f"{self.outcome.upper()}: {self.id}: \"{self.text}\""]
        if self.rule:
            out.append(f"  rule: {self.rule}")
        out += [f"  {row['label']}: {row['shown']} - {row['outcome']}" + (f" ({row['why']})" if row["why"] else "")
                for row in self.rows]
        if self.note:
            out.append(f"  note: {self.note}")
        return out

    def line(self) -> str:
        text = f"{self.outcome.upper()}: {self.id}: \"{self.text}\""
        return text + (f" - {self.difference}" if self.difference else f" ({self.note})" if self.note else "")

    def to_dict(self) -> dict:
        return {"id": self.id, "text": self.text, "kind": self.kind, "outcome": self.outcome,
                "claimed": self.claimed, "recomputed": [{"label": l, "value": v} for l, v in self.recomputed],
                "difference": self.difference, "note": self.note, "unit": self.unit, "rule": self.rule,
                "rows": list(self.rows)}


def _row(check: Check, unit: str) -> dict:
    bounds = [b for b in (check.claimed, check.claimed - check.tolerance, check.claimed + check.tolerance)
              if b is not None] if check.claimed is not None else []
    why = ""
    if check.outcome == HOLDS_WITH_ROUNDING:
        why = f"not exactly {_stated(check.claimed)}; within the +-{_stated(check.tolerance)} allowed"
    elif check.outcome == DOES_NOT_HOLD:
        why = f"off by {decisive(check.value - check.claimed, check.tolerance, -check.tolerance, unit=unit)}" \
              + (f" {unit}" if unit and unit != "%" else " percentage points" if unit == "%" else "") \
              + (f", more than the +-{_stated(check.tolerance)} allowed" if check.tolerance else "")
    elif check.outcome == CANNOT_CHECK:
        why = check.reason
    return {"label": check.label, "value": None if check.value is None else float(check.value),
            "shown": _figure(check.value, unit, *bounds), "outcome": check.outcome, "why": why}


def judge(claim: Claim, table: Table) -> ClaimResult:
    if claim.kind == "unverifiable":
        return ClaimResult(claim.id, claim.text, claim.kind, CANNOT_CHECK, claim.claimed,
                           note=claim.note or "the report gives no raw figures for it", unit=claim.unit,
                           difference="cannot check: the report gives no raw figures for it")
    values = recompute(claim, table)
    recomputed = tuple((label, float(v)) for label, v, _ in values if v is not None)
    if not recomputed:
        return ClaimResult(claim.id, claim.text, claim.kind, CANNOT_CHECK, claim.claimed, note=claim.note,
                           unit=claim.unit, difference="cannot check: no row of the table has every figure "
                                                       "the claim needs")
    checks, rule = _checks(claim, table, values)
    skipped = [Check(label, None, reason=why) for label, v, why in values if v is None]
    outcome = max((c.outcome for c in checks), key=_WORST.__getitem__)
    rows = tuple(_row(c, claim.unit) for c in checks + skipped)
    counts = ", ".join(f"{n} {o}" for o in OUTCOMES if (n := sum(1 for r in rows if r["outcome"] == o)))
    difference = f"{outcome}: {counts} ({rule})"
    claimed = [float(_claimed_number(claim, v, table)) for v in claim.claimed] if claim.kind == "range" \
        else float(_claimed_number(claim, claim.claimed, table))
    return ClaimResult(claim.id, claim.text, claim.kind, outcome, claimed, recomputed, difference,
                       claim.note, claim.unit, rule, rows)


@dataclass(frozen=True)
class ClaimsFile:
    name: str
    table: Table
    claims: tuple[Claim, ...] = field(default_factory=tuple)


def parse_claims(text: str, source: str) -> ClaimsFile:
    data = validate(ClaimsFileModel, parse_toml(text, source), source)
    claims = tuple(Claim.model_construct(**dict(c), source=source, index=index) for index, c in enumerate(data.claims))
    table = Table(data.report.key, tuple(data.rows), dict(data.figures))
    for claim in claims:          # every expression is checked before any is judged
        written = claim.claimed if isinstance(claim.claimed, list) else [claim.claimed]
        for where, expr in [(claim.field("exprs", i), e) for i, e in enumerate(claim.expressions)] + \
                [(claim.field("claimed", i if isinstance(claim.claimed, list) else None), v)
                 for i, v in enumerate(written) if isinstance(v, str)]:
            _parse(expr, _Evaluator(table, None, expr, where).refuse)
    return ClaimsFile(data.report.name or Path(source).stem, table, claims)


def load_claims(path: Path) -> ClaimsFile:
    return parse_claims(read_text(path, "claims file"), str(path))


def check_claims(claims_file: ClaimsFile) -> list[ClaimResult]:
    return [judge(claim, claims_file.table) for claim in claims_file.claims]


def summary(results: list[ClaimResult]) -> str:
    counts = {o: sum(1 for r in results if r.outcome == o) for o in OUTCOMES}
    return ", ".join(f"{n} {o}" for o, n in counts.items() if n or o in (HOLDS, DOES_NOT_HOLD))
