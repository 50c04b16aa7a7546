from hypothesis import given, strategies as st

from fxprobe.core.verdict import Criterion, Outcome, Verdict, combine, format_number


def test_borderline_percent_shows_one_decimal():
    assert format_number(28.94, "%") == "28.9 %"
    c = Criterion.compare("throughput gain", 28.9, ">=", 29.0, unit="%")
    assert c.outcome is Outcome.FAIL
    assert "28.9 %" in c.line() and "29.0 %" in c.line() and "margin -0.1 %" in c.line()


def test_ratio_is_not_rounded_into_a_pass():
    c = Criterion.compare("line efficiency", 0.8299, ">=", 0.83)
    assert c.outcome is Outcome.FAIL and "0.8299" in c.line()


def test_missing_measurement_is_not_run():
    assert Criterion.compare("x", None, ">=", 1).outcome is Outcome.NOT_RUN


def test_combine_order():
    assert combine([]) is Outcome.NOT_RUN
    assert combine([Outcome.PASS, Outcome.NOT_RUN]) is Outcome.NOT_RUN
    assert combine([Outcome.NOT_RUN, Outcome.FAIL]) is Outcome.FAIL
    assert combine([Outcome.FAIL, Outcome.ERROR]) is Outcome.ERROR
    assert Verdict("g", (Criterion.compare("a", 1, ">=", 1),)).outcome is Outcome.PASS


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12))
def test_format_number_never_fails(value):
    assert format_number(value)
