"""Claim checks: the reference R2/R1 headlines recomputed from their own tables."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
import signal

import pytest

from fxprobe.gates.claims import CANNOT_CHECK, DOES_NOT_HOLD, HOLDS, HOLDS_WITH_ROUNDING, check_claims, evaluate, load_claims, parse_claims, stated_tolerance, Table
from fxprobe.core.errors import BadInput
from gate_helpers import fxprobe

EXAMPLES = Path(__file__).parent.parent / "examples" / "claims"


def outcomes(name):
    results = check_claims(load_claims(EXAMPLES / name))
    for r in results:
        print(r.line())
    return {r.id: r for r in results}


def values(result):
    return [round(v, 1) for _, v in result.recomputed]


def test_r2_headlines():
    r = outcomes("reference-r2.toml")
    assert r["ttft-reduction"].outcome == HOLDS                     # tolerance = 0: exact, 25.96 % >= 25 %
    assert values(r["ttft-reduction"]) == [26.0, 31.5, 26.3]
    assert r["throughput-gain"].outcome == DOES_NOT_HOLD           # 28.93 % is not 29 %, not even +-0.05
    assert values(r["throughput-gain"]) == [28.9, 39.7, 32.8]
    assert r["throughput-gain"].rows[0]["shown"] == "28.93 %"
    speed = r["recompute-speedup"]
    assert speed.outcome == DOES_NOT_HOLD and values(speed) == [12.6, 18.3]
    for name in ("recompute-ttft-c16", "recompute-throughput-c16", "origin-8.6x", "origin-20x"):
        assert r[name].outcome == HOLDS_WITH_ROUNDING, name       # 12.61 is 12.6 only as rounded
    assert r["storage-share"].outcome == CANNOT_CHECK


def test_r1_headlines():
    r = outcomes("reference-r1.toml")
    assert r["ttft-speedup"].outcome == HOLDS_WITH_ROUNDING and r["read-bandwidth-speedup"].outcome == HOLDS_WITH_ROUNDING
    assert r["ckpt-write-bw-before"].outcome == DOES_NOT_HOLD
    assert r["ckpt-write-bw-before"].recomputed[0][1] == pytest.approx(0.3685, abs=1e-4)
    assert r["ckpt-speedup-consistency"].outcome == DOES_NOT_HOLD
    assert "6.40 / 3.26 = 1.96" in r["ckpt-speedup-consistency"].rule
    assert r["model-switch-62.8-origin"].outcome == HOLDS_WITH_ROUNDING
    assert r["model-switch-after"].outcome == DOES_NOT_HOLD
    assert r["model-switch-after"].recomputed[0][1] == pytest.approx(93.03, abs=0.01)
    assert r["concurrent-load"].outcome == CANNOT_CHECK


def test_cli_fails_when_a_headline_does_not_hold(tmp_path, capsys):
    assert fxprobe(tmp_path, "claims", "check", str(EXAMPLES / "reference-r2.toml")) == 1
    out = capsys.readouterr().out
    assert "1 holds, 4 holds only with rounding, 2 does not hold, 2 cannot check" in out
    assert "DOES NOT HOLD: recompute-speedup" in out


R2_TABLE = (EXAMPLES / "reference-r2.toml").read_text().split("[[claims]]")[0]


def claim(body: str, table: str = R2_TABLE):
    return check_claims(parse_claims(table + "[[claims]]\n" + body, "c.toml"))[0]


def test_a_default_rounding_is_said_and_named_not_silently_applied():
    """Issue 13, "Claims apply rules silently": "+29 % at every concurrency" HELD on 28.93 % by a default
    tolerance of 0.5 that was never printed. Now it holds only with rounding, and the rule says so."""
    r = claim('id = "g"\ntext = "+29 % at every concurrency"\nkind = "at_least"\nclaimed = 29\neach = true\n'
              'exprs = ["(array_tok_s / local_tok_s - 1) * 100"]\nunit = "%"\n')
    assert r.outcome == HOLDS_WITH_ROUNDING
    assert "at least 29 % in every row, compared exactly in decimal" in r.rule
    assert "rounding allowed +-0.5 (half a unit of the last digit of 29 as written" in r.rule
    assert [(row["label"], row["shown"], row["outcome"]) for row in r.rows] == [
        ("concurrency 8", "28.9 %", HOLDS_WITH_ROUNDING), ("concurrency 16", "39.7 %", HOLDS),
        ("concurrency 32", "32.8 %", HOLDS)]
    exact = claim('id = "g"\ntext = "t"\nkind = "at_least"\nclaimed = 29\neach = true\ntolerance = 0\n'
                  'exprs = ["(array_tok_s / local_tok_s - 1) * 100"]\nunit = "%"\n')
    assert exact.outcome == DOES_NOT_HOLD and "no rounding allowed (tolerance = 0)" in exact.rule


def test_each_lists_every_row_also_those_it_cannot_judge():
    r = claim('id = "r"\ntext = "recompute is 10x slower"\nkind = "at_least"\nclaimed = 10\neach = true\n'
              'exprs = ["recompute_ttft_s / array_ttft_s"]\nunit = "x"\n')
    assert [row["label"] for row in r.rows] == ["concurrency 16", "concurrency 8", "concurrency 32"]
    assert r.rows[0]["shown"] == "12.6143 x" and r.rows[0]["outcome"] == HOLDS
    assert r.rows[1]["outcome"] == CANNOT_CHECK and r.rows[1]["why"] == "this row has no recompute_ttft_s"
    lines = r.lines()
    assert "  concurrency 8: - - cannot check (this row has no recompute_ttft_s)" in lines


def test_an_exact_figure_holds_and_the_printed_digits_decide():
    table = '[report]\nkey = "c"\n[[rows]]\nc = 1\nlocal = 10.04\narray = 7.53\n'
    r = claim('id = "t"\ntext = "TTFT cut >= 25 %"\nkind = "at_least"\nclaimed = 25\ntolerance = 0\neach = true\n'
              'exprs = ["(local - array) / local * 100"]\nunit = "%"\n', table)
    assert r.outcome == HOLDS and r.rows[0]["shown"] == "25.0 %"      # exactly 25 in decimal
    near = claim('id = "t"\ntext = "t"\nkind = "at_least"\nclaimed = 25\ntolerance = 0\neach = true\n'
                 'exprs = ["24.99999"]\nunit = "%"\n', table)
    assert near.outcome == DOES_NOT_HOLD and near.rows[0]["shown"] == "24.99999 %"


@pytest.mark.parametrize("expr, words", [
    ("__import__('os').system('true')", "not allowed"),
    ("a.b", "not allowed"),
    ("unknown_name * 2", "unknown name 'unknown_name'"),
    ("x / 0", "division by zero"),
    ("1 +", "not valid"),
    ("9 ** 9 ** 9", "exponent 387420489 is beyond +-64"),
    ("2 ** 64 ** 2", "beyond +-64"),
    ("(((10 ** 64) ** 64) ** 64) ** 64", "too large"),
    ("(-x) ** 0.5", "not a number"),
    ("x.real", "not allowed"),
    ("min()", "not allowed"),
    ("utilization(1)", "wrong number of arguments"),
    ("[x]", "not allowed"),
    ("x if x else y", "not allowed"),
    ("1e999", "not a finite number"),
    ("+".join(["x"] * 150), "more than 200 operations"),
    ("-" * 399 + "x", "more than 200 operations"),
    ("x" * 401, "longer than 400 characters"),
])
def test_expressions_are_arithmetic_only(expr, words):
    """A bounded evaluator: 9 ** 9 ** 9 used to hang the tool; now every expression is refused or done in 2 s."""
    def too_slow(*_):
        raise TimeoutError(f"{expr[:40]!r} still evaluating after 2 s")
    table = Table("k", ({"k": 1, "y": 2},), {"x": 3.0, "y": 1.0})
    previous = signal.signal(signal.SIGALRM, too_slow)
    signal.setitimer(signal.ITIMER_REAL, 2.0)
    try:
        with pytest.raises(BadInput) as info:
            evaluate(expr, table)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert words in str(info.value) and "\n" not in str(info.value)


CLAIM = '[[claims]]\nid = "a"\ntext = "t"\nkind = "value"\nclaimed = 3\nexpr = "x"\n'


@pytest.mark.parametrize("text, words", [
    ('[figures]\nx = 1\n[[claims]]\nid = "a"\ntext = "t"\nkind = "value"\nexpr = "x"\n',
     "field 'claims[0]': 'claimed' is missing"),
    ('[[claims]]\nid = "a"\ntext = "t"\nkind = "guess"\n', "field 'claims[0].kind': must be one of 'value'"),
    # unknown keys used to be ignored (issue 13, "Claims apply rules silently")
    ('[figures]\nx = 1\n' + CLAIM + 'tolerence = 0.1\n', "field 'claims[0].tolerence': unknown key; allowed here:"),
    ('[figures]\nx = 1\n[report]\nname = "r"\nkeys = "c"\n' + CLAIM, "field 'report.keys': unknown key"),
    ('[figures]\nx = 1\n[[row]]\nc = 1\n' + CLAIM, "field 'row': unknown key"),
    # wrong types that used to end in an internal error (exit 4)
    ('report = "x"\n[figures]\nx = 1\n' + CLAIM, "field 'report': expected a table (got 'x')"),
    ('rows = 3\n[figures]\nx = 1\n' + CLAIM, "field 'rows': expected a list (got 3)"),
    ('claims = "x"\n', "field 'claims': expected a list (got 'x')"),
    ('[figures]\nx = nan\n' + CLAIM, "field 'figures.x': must be a finite number (got nan)"),
    ('[figures]\nx = true\n' + CLAIM, "field 'figures.x': expected a number (got True)"),
    ('[figures]\nx = 1\n' + CLAIM.replace("claimed = 3", "claimed = [1, 2, 3]"), "[low, high] (got 3 items)"),
    ('[figures]\nx = 1\n' + CLAIM.replace("claimed = 3", "claimed = [1, 2]"), "needs one claimed figure"),
    ('[figures]\nx = 1\n' + CLAIM + "tolerance = -1\n", "field 'claims[0].tolerance': must be >= 0"),
    ('[figures]\nx = 1\n' + CLAIM.replace('expr = "x"', 'expr = "9 ** 9 ** 9"'), "beyond +-64"),
    ('[figures]\nx = 1\n', "field 'claims': missing"),
])
def test_bad_claims_file_names_the_field(text, words):
    with pytest.raises(BadInput) as info:
        check_claims(parse_claims(text, "c.toml"))
    assert str(info.value).startswith("c.toml") and words in str(info.value), str(info.value)


def test_cli_bad_claims_file_is_exit_2_one_line(tmp_path, capsys):
    bad = tmp_path / "c.toml"
    bad.write_text('report = "x"\n' + CLAIM)
    assert fxprobe(tmp_path, "claims", "check", str(bad)) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(bad) in err and "field 'report'" in err
