"""Recompute a report's headline claims from its own raw table.

A claims file (TOML) holds the raw figures and the headlines::

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
    tolerance = 0.05                 # optional

Expressions: numbers, + - * / ** and parentheses, ``name`` (a figure, or with ``each`` a
cell of the current row), ``column[key]`` (the cell of the row whose key is ``key``),
and the functions ``min``, ``max``, ``abs``, ``utilization(switches_per_hour, switch_s)``
(:func:`fxprobe.gates.calc.utilization`, a fraction).

How a claim is judged (``tolerance`` defaults to half a unit of the claimed figure's last
digit, i.e. "holds at the precision it was stated"):

* value: one recomputed value, ``|recomputed - claimed| <= tolerance``
* at_least / at_most: every recomputed value ``>= claimed - tolerance`` / ``<= claimed + tolerance``
* range: the smallest and largest recomputed values match ``low`` and ``high``
* unverifiable: the report gives no raw figures; the outcome says so.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from fxprobe.gates.calc import utilization
from fxprobe.core.errors import BadInput
from fxprobe.core.tomlfile import parse_toml, read_text
from fxprobe.core.verdict import format_number

HOLDS = "holds"
DOES_NOT_HOLD = "does not hold"
CANNOT_CHECK = "cannot check"
KINDS = ("value", "at_least", "at_most", "range", "unverifiable")

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow}
_FUNCTIONS = {"min": min, "max": max, "abs": abs, "utilization": utilization}


class _Missing(Exception):
    """A name the current row does not have (the row is skipped)."""


@dataclass(frozen=True)
class Table:
    key: str
    rows: tuple[dict, ...]
    figures: dict

    def cell(self, column: str, key_value: Any) -> float:
        for row in self.rows:
            if row.get(self.key) == key_value:
                if column not in row:
                    raise _Missing(f"{column}[{key_value}]")
                return row[column]
        raise _Missing(f"{column}[{key_value}]")


def evaluate(expr: str, table: Table, row: dict | None = None, source: str = "claim") -> float:
    """Evaluate a claim expression safely (no Python beyond arithmetic and the listed functions)."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as exc:
        raise BadInput(f"{source}: expression {expr!r} is not valid ({exc.msg})") from None

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.Name):
            if row is not None and node.id in row:
                return row[node.id]
            if node.id in table.figures:
                return table.figures[node.id]
            if row is not None and any(node.id in r for r in table.rows):
                raise _Missing(node.id)
            raise BadInput(f"{source}: unknown name {node.id!r} in {expr!r}",
                           hint="use a column of [[rows]] or a key of [figures]")
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and isinstance(node.slice, ast.Constant):
            if not any(node.value.id in r for r in table.rows):
                raise BadInput(f"{source}: unknown column {node.value.id!r} in {expr!r}")
            return table.cell(node.value.id, node.slice.value)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS \
                and not node.keywords:
            return _FUNCTIONS[node.func.id](*[walk(a) for a in node.args])
        raise BadInput(f"{source}: {ast.unparse(node)!r} is not allowed in a claim expression")

    try:
        return float(walk(tree))
    except ZeroDivisionError:
        raise BadInput(f"{source}: division by zero in {expr!r}") from None


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

    def line(self) -> str:
        values = ", ".join(f"{label}: {format_number(v, self.unit)}" for label, v in self.recomputed)
        text = f"{self.outcome.upper():13} {self.id}: \"{self.text}\""
        if values:
            text += f" - table gives {values}"
        if self.difference:
            text += f"; {self.difference}"
        if self.note:
            text += f" ({self.note})"
        return text

    def to_dict(self) -> dict:
        return {"id": self.id, "text": self.text, "kind": self.kind, "outcome": self.outcome,
                "claimed": self.claimed, "recomputed": [{"label": l, "value": v} for l, v in self.recomputed],
                "difference": self.difference, "note": self.note, "unit": self.unit}


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    kind: str
    claimed: Any = None
    exprs: tuple[str, ...] = ()
    each: bool = False
    unit: str = ""
    tolerance: float | None = None
    note: str = ""


def stated_tolerance(value: float) -> float:
    """Half a unit of the last digit written: 46.7 -> 0.05, 20 -> 0.5, 8.6 -> 0.05."""
    exponent = Decimal(repr(value)).normalize().as_tuple().exponent if isinstance(value, float) else 0
    return 0.5 * 10.0 ** min(0, int(exponent))


def _claimed_number(claim: Claim, value: Any, table: Table) -> float:
    if isinstance(value, str):
        return evaluate(value, table, source=f"claim {claim.id} (claimed)")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadInput(f"claim {claim.id}: 'claimed' must be a number, [low, high] or an expression")
    return value


def recompute(claim: Claim, table: Table) -> list[tuple[str, float]]:
    values = []
    for expr in claim.exprs:
        if claim.each:
            for row in table.rows:
                try:
                    values.append((f"{table.key} {row.get(table.key)}",
                                   evaluate(expr, table, row, f"claim {claim.id}")))
                except _Missing:
                    continue
        else:
            try:
                values.append((expr, evaluate(expr, table, None, f"claim {claim.id}")))
            except _Missing as missing:
                raise BadInput(f"claim {claim.id}: the table has no cell {missing}") from None
    return values


def _delta(diff: float, unit: str) -> str:
    """A difference; for percentages it is in percentage points, with more digits."""
    sign = "+" if diff >= 0 else ""
    if unit == "%":
        return f"{sign}{format_number(diff)} percentage points"
    return f"{sign}{format_number(diff, unit)}"


def _off(recomputed: float, claimed: float, unit: str) -> str:
    diff = recomputed - claimed
    rel = f", {diff / claimed * 100:+.1f} % of the claim" if claimed else ""
    return f"{format_number(recomputed, unit)} vs claimed {format_number(claimed, unit)}: off by " \
           f"{_delta(diff, unit)}{rel}"


def judge(claim: Claim, table: Table) -> ClaimResult:
    if claim.kind == "unverifiable":
        return ClaimResult(claim.id, claim.text, claim.kind, CANNOT_CHECK, claim.claimed,
                           note=claim.note or "the report gives no raw figures for it", unit=claim.unit)
    values = recompute(claim, table)
    if not values:
        return ClaimResult(claim.id, claim.text, claim.kind, CANNOT_CHECK, claim.claimed,
                           note="no row of the table has every figure the claim needs", unit=claim.unit)
    numbers = [v for _, v in values]
    if claim.kind == "range":
        if not isinstance(claim.claimed, list) or len(claim.claimed) != 2:
            raise BadInput(f"claim {claim.id}: a range claim needs claimed = [low, high]")
        low, high = (_claimed_number(claim, v, table) for v in claim.claimed)
        tol_low = claim.tolerance if claim.tolerance is not None else stated_tolerance(low)
        tol_high = claim.tolerance if claim.tolerance is not None else stated_tolerance(high)
        got_low, got_high = min(numbers), max(numbers)
        ok_low, ok_high = abs(got_low - low) <= tol_low, abs(got_high - high) <= tol_high
        parts = [("low end " if ok_low else "LOW END ") + _off(got_low, low, claim.unit),
                 ("high end " if ok_high else "HIGH END ") + _off(got_high, high, claim.unit)]
        outcome = HOLDS if ok_low and ok_high else DOES_NOT_HOLD
        return ClaimResult(claim.id, claim.text, claim.kind, outcome, [low, high], tuple(values),
                           "; ".join(parts), claim.note, claim.unit)
    claimed = _claimed_number(claim, claim.claimed, table)
    tol = claim.tolerance if claim.tolerance is not None else stated_tolerance(claimed)
    if claim.kind == "value":
        if len(numbers) != 1:
            raise BadInput(f"claim {claim.id}: a value claim needs exactly one recomputed value, got {len(numbers)}")
        ok = abs(numbers[0] - claimed) <= tol
        difference = _off(numbers[0], claimed, claim.unit)
    elif claim.kind == "at_least":
        worst = min(numbers)
        ok = worst >= claimed - tol
        difference = f"lowest {format_number(worst, claim.unit)}, margin " \
                     f"{_delta(worst - claimed, claim.unit)} over the claimed {format_number(claimed, claim.unit)}"
    else:
        worst = max(numbers)
        ok = worst <= claimed + tol
        difference = f"highest {format_number(worst, claim.unit)}, margin " \
                     f"{_delta(claimed - worst, claim.unit)} under the claimed {format_number(claimed, claim.unit)}"
    return ClaimResult(claim.id, claim.text, claim.kind, HOLDS if ok else DOES_NOT_HOLD, claimed,
                       tuple(values), difference, claim.note, claim.unit)


@dataclass(frozen=True)
class ClaimsFile:
    name: str
    table: Table
    claims: tuple[Claim, ...] = field(default_factory=tuple)


def _number_map(data: dict, where: str) -> dict:
    out = {}
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadInput(f"{where}: {key} must be a number, got {value!r}")
        out[key] = value
    return out


def parse_claims(text: str, source: str) -> ClaimsFile:
    data = parse_toml(text, source)
    report = data.get("report", {})
    key = report.get("key", "key")
    rows = tuple(_number_map(row, f"{source}: rows[{i}]") for i, row in enumerate(data.get("rows", [])))
    figures = _number_map(data.get("figures", {}), f"{source}: [figures]")
    claims = []
    for index, entry in enumerate(data.get("claims", [])):
        where = f"{source}: claims[{index}]"
        for required in ("id", "text", "kind"):
            if required not in entry:
                raise BadInput(f"{where}: field {required!r} is missing")
        if entry["kind"] not in KINDS:
            raise BadInput(f"{where}: kind {entry['kind']!r} is unknown", hint=f"use one of {', '.join(KINDS)}")
        exprs = entry.get("exprs", [entry["expr"]] if "expr" in entry else [])
        if entry["kind"] != "unverifiable" and not exprs:
            raise BadInput(f"{where}: field 'exprs' is missing (how to recompute the claim from the table)")
        if entry["kind"] != "unverifiable" and "claimed" not in entry:
            raise BadInput(f"{where}: field 'claimed' is missing")
        claims.append(Claim(entry["id"], entry["text"], entry["kind"], entry.get("claimed"), tuple(exprs),
                            bool(entry.get("each", False)), entry.get("unit", ""), entry.get("tolerance"),
                            entry.get("note", "")))
    if not claims:
        raise BadInput(f"{source}: no [[claims]]", hint="a claims file lists the headlines to check")
    return ClaimsFile(report.get("name", Path(source).stem), Table(key, rows, figures), tuple(claims))


def load_claims(path: Path) -> ClaimsFile:
    return parse_claims(read_text(path, "claims file"), str(path))


def check_claims(claims_file: ClaimsFile) -> list[ClaimResult]:
    return [judge(claim, claims_file.table) for claim in claims_file.claims]


def summary(results: list[ClaimResult]) -> str:
    counts = {o: sum(1 for r in results if r.outcome == o) for o in (HOLDS, DOES_NOT_HOLD, CANNOT_CHECK)}
    return ", ".join(f"{n} {o}" for o, n in counts.items())
