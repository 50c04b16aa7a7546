"""Comparisons that cannot contradict their printout: exact arithmetic on the recorded figures, inclusive
thresholds pass at equality, and the printed digits alone decide (README: "How a criterion is judged")."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings, strategies as st

from fxprobe.core.verdict import Criterion, Outcome, decide
from fxprobe.gates import GATES, Evidence, load_config
from fxprobe.gates.config import parse_config
from gate_helpers import fake_run, fxprobe, results_of, runs_of


def bench(path, label, concurrency, ttft_ms, tok_s):
    path.write_text(json.dumps({"backend": "vllm", "label": label, "model_id": "m", "max_concurrency": concurrency,
                                "output_throughput": tok_s, "median_ttft_ms": ttft_ms, "p50_ttft_ms": ttft_ms}))
    return str(path)


def g3_criteria(tmp_path, candidate, baseline) -> dict:
    args = ["gate", "g3", "--candidate", bench(tmp_path / "cand.json", "array", 8, *candidate),
            "--baseline", bench(tmp_path / "base.json", "local", 8, *baseline)]
    fxprobe(tmp_path, *args)
    results = results_of(runs_of(tmp_path, "gate g3")[-1])
    return {c["name"]: Criterion.from_dict(c) for c in results["verdict"]["criteria"]}


def test_a_ttft_cut_of_exactly_25_percent_passes_and_prints_so(tmp_path):
    # 10.04 s -> 7.53 s is 25 % exactly (in floats 24.999999999999996, which FAILed as "25.0 % ... margin -0.0 %")
    criteria = g3_criteria(tmp_path, (7530.0, 61.46), (10040.0, 43.9))
    ttft = criteria["c8 TTFT p50 reduction"]
    assert ttft.outcome is Outcome.PASS, ttft.line()
    assert "25.0 % (need >= 25.0 %, margin 0.0 %)" in ttft.line()
    # +40.0 % exactly (43.9 -> 61.46 tok/s) is inside the band's top, inclusive
    high = criteria["c8 throughput gain (band high)"]
    assert high.outcome is Outcome.PASS and "40.0 % (need <= 40.0 %, margin 0.0 %)" in high.line(), high.line()


def test_a_value_just_below_the_threshold_prints_the_digits_that_fail_it(tmp_path):
    # +28.998 % (50 -> 64.499 tok/s) printed "29.0 %" and failed; it must print 28.998 % and fail
    criteria = g3_criteria(tmp_path, (5000.0, 64.499), (10000.0, 50.0))
    low = criteria["c8 throughput gain (band low)"]
    assert low.outcome is Outcome.FAIL and "28.998 % (need >= 29.0 %, margin -0.002 %)" in low.line(), low.line()
    out = (runs_of(tmp_path, "gate g3")[-1] / "results.json").read_text()
    assert '"places": 3' in out                 # the digits that decide are recorded, the report prints the same


def test_declared_scales_are_exact(tmp_path):
    """57 Gb/s of 100 Gb/s is 57 % (0.57 x 100 = 56.99999999999999 in floats, a FAIL); 259200 s is 72 h."""
    soak = fake_run(tmp_path, "soak", {"duration_s": 259200.0, "interruptions": []})
    line = fake_run(tmp_path, "line-efficiency", {"summary": {"line_efficiency": 0.57, "mean_bps": 57e9},
                                                  "port_speed_bps": 100e9})
    evidence = Evidence.from_paths([soak, line])
    config = parse_config("[g2]\nline_efficiency_min_pct = 57.0\n", "lab.toml")
    g2 = {c.name: c for c in GATES["g2"].evaluate(evidence, config).criteria}
    assert g2[LINE].outcome is Outcome.PASS, g2[LINE].line()
    assert "57.0 % (need >= 57.0 %, margin 0.0 %)" in g2[LINE].line()
    g4 = {c.name: c for c in GATES["g4"].evaluate(evidence, load_config(None)).criteria}
    assert g4["soak duration"].outcome is Outcome.PASS and "72 h (need >= 72 h, margin 0 h)" in g4["soak duration"].line()


LINE = "line efficiency vs the gate's line rate"
NUMBER = re.compile(r"-?[0-9][0-9,]*(?:\.[0-9]+)?")


def printed(line: str) -> tuple[Decimal, Decimal]:
    measured, threshold = NUMBER.findall(line.split(":", 1)[1])[:2]
    return Decimal(measured.replace(",", "")), Decimal(threshold.replace(",", ""))


decimals = st.decimals(min_value=Decimal("-1e6"), max_value=Decimal("1e6"), places=4, allow_nan=False,
                       allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(decimals, decimals, st.sampled_from([">=", ">", "<=", "<"]), st.booleans(), st.sampled_from(["%", "", "h"]))
def test_outcome_agrees_with_decimal_and_the_printout_decides(m, t, comparator, at_threshold, unit):
    m = t if at_threshold else m
    measured, threshold = float(m), float(t)
    criterion = Criterion.compare("x", measured, comparator, threshold, unit=unit)
    truth = {">=": m >= t, ">": m > t, "<=": m <= t, "<": m < t}[comparator]
    assert (criterion.outcome is Outcome.PASS) == truth == decide(measured, comparator, threshold)
    shown_m, shown_t = printed(criterion.line())
    assert shown_t == t                                            # a threshold is printed with every digit
    assert {">=": shown_m >= shown_t, ">": shown_m > shown_t, "<=": shown_m <= shown_t,
            "<": shown_m < shown_t}[comparator] == truth, criterion.line()
    assert Criterion.from_dict(json.loads(json.dumps(criterion.to_dict()))).line() == criterion.line()


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 10**6), st.integers(1, 10**6), st.integers(0, 100))
def test_ratios_that_do_not_terminate_still_decide_in_print(numerator, denominator, threshold):
    value = Fraction(numerator, denominator) * 100
    criterion = Criterion.compare("x", value, ">=", threshold, unit="%")
    shown, _ = printed(criterion.line())
    assert (shown >= threshold) == (value >= threshold) == (criterion.outcome is Outcome.PASS)


def test_nan_and_inf_are_never_judged():
    for bad in (float("nan"), float("inf"), -float("inf")):
        assert Criterion.compare("x", bad, ">=", 1.0).outcome is Outcome.ERROR
