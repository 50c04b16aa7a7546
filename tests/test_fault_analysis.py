"""Impact analysis over fio-format logs: stalls, window throughput, p99 from histogram logs, errors."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from fxprobe.faults import analysis
from fxprobe.core.verdict import Criterion, Outcome
from fxprobe.tools.fio import PLAT_NR, parse_fio_hist_log, parse_fio_log, bin_index_ns

T0 = 1_796_232_000_000
L = 500


def iops_log(values, start=T0, step=L) -> str:
    return "".join(f"{start + (i + 1) * step}, {v}, 0, 4096, 0\n" for i, v in enumerate(values))


def hist_log(latencies_ns, start=T0, step=L) -> str:
    """One histogram row per window; each window holds 100 I/Os of the given latency."""
    lines = []
    for i, lat in enumerate(latencies_ns):
        counts = [0] * PLAT_NR
        counts[bin_index_ns(lat)] = 100
        lines.append(f"{start + (i + 1) * step}, 0, 4096, " + ", ".join(map(str, counts)))
    return "\n".join(lines) + "\n"


def run(values, latencies=None, inject_at=20, restore_at=30, fio_json=None, settle_s=2.0):
    iops = analysis.combine([parse_fio_log(iops_log(values))], L)
    hist = parse_fio_hist_log(hist_log(latencies)) if latencies else None
    return analysis.analyse(iops=iops, bw=iops * 4, hist=hist, fio_json=fio_json, log_msec=L,
                            load_start_ms=T0, settle_s=settle_s, inject_ms=T0 + inject_at * L,
                            restore_ms=T0 + restore_at * L, min_throughput_pct=50.0)


def test_invisible_fault_passes_every_criterion():
    values = [100] * 40
    values[22:28] = [80] * 6
    impact = run(values, [1_000_000] * 40, fio_json=json.dumps({"jobs": [{"total_err": 0, "error": 0}]}))
    assert impact.errors == 0 and impact.longest_stall_s == 0
    assert impact.throughput_pct == pytest.approx(100 * (4 * 100 + 6 * 80) / 10 / 100)
    assert impact.p99_ratio == pytest.approx(1.0, rel=0.05)
    items = analysis.criteria(impact, {"max_errors": 0, "max_stall_s": 2, "min_throughput_pct": 50,
                                       "max_p99_ratio": 10})
    assert analysis.verdict_word(items) == "invisible"


def test_stall_of_zero_windows_and_missing_samples_is_measured_and_fails():
    values = [100] * 20 + [0] * 10 + [100] * 10       # 10 windows of 0.5 s with nothing completed
    impact = run(values)
    assert impact.longest_stall_s == pytest.approx(5.0)
    assert impact.stall_start_ms == T0 + 20 * L
    assert impact.first_affected_ms == T0 + 21 * L     # the first window ending after the injection
    assert impact.recover_s == pytest.approx(0.5)
    # the same stall written as a gap (fio writes no sample when nothing completed)
    text = iops_log([100] * 20) + iops_log([100] * 10, start=T0 + 30 * L)
    iops = analysis.combine([parse_fio_log(text)], L)
    gap = analysis.analyse(iops=iops, bw=iops, hist=None, fio_json=None, log_msec=L, load_start_ms=T0,
                           settle_s=2, inject_ms=T0 + 20 * L, restore_ms=T0 + 30 * L, min_throughput_pct=50)
    assert gap.longest_stall_s == pytest.approx(5.0)
    items = analysis.criteria(gap, {"max_errors": 0, "max_stall_s": 2, "min_throughput_pct": 50, "max_p99_ratio": 10})
    assert analysis.verdict_word(items) == "visible"
    assert [c.name for c in items if c.outcome.value == "fail"][0].startswith("longest stall")
    assert items[0].outcome.value == "not run"          # no fio JSON: errors unknown, said so


def test_p99_in_window_against_pre_fault_from_histograms():
    latencies = [1_000_000] * 20 + [40_000_000] * 10 + [1_000_000] * 10
    impact = run([100] * 40, latencies)
    assert impact.baseline_p99_ns == pytest.approx(1_000_000, rel=0.05)
    assert impact.window_p99_ns == pytest.approx(40_000_000, rel=0.05)
    assert impact.p99_ratio == pytest.approx(40, rel=0.1)


def test_errors_counted_from_fio_json_with_continue_on_error():
    text = "fio: some warning\n" + json.dumps({"jobs": [{"jobname": "a", "total_err": 434, "error": 0,
                                                         "first_error": 5}, {"jobname": "b", "error": 5}]})
    assert analysis.fio_errors(text) == (435, "5 (errno)")
    assert analysis.fio_errors("not json") == (None, "")
    assert analysis.fio_errors(None) == (None, "")


def test_threshold_printed_beside_measurement_with_enough_digits():
    impact = run([100] * 20 + [49] * 10 + [100] * 10)
    items = analysis.criteria(impact, {"max_errors": 0, "max_stall_s": 2, "min_throughput_pct": 49.5,
                                       "max_p99_ratio": 10})
    line = items[2].line()
    assert "49.0 %" in line and "need >= 49.5 %" in line and line.startswith("FAIL")


def test_combine_sums_jobs_on_the_window_grid():
    a = parse_fio_log(iops_log([10, 20], start=T0))
    b = parse_fio_log(iops_log([1, 2], start=T0 + 3))    # another job, stamps a few ms apart
    series = analysis.combine([a, b], L)
    assert list(series.values) == [11, 22]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=50), min_size=30, max_size=80))
def test_stall_never_exceeds_the_time_after_injection(values):
    impact = run(values, inject_at=10, restore_at=20)
    after = (len(values) - 10) * L / 1000
    assert 0 <= impact.longest_stall_s <= after + L / 1000
    zero_run = max((len(r) for r in "".join("0" if v == 0 else "1" for v in values[10:]).split("1")), default=0)
    assert impact.longest_stall_s == pytest.approx(zero_run * L / 1000)


def test_a_load_that_ended_before_the_recovery_window_ended_gives_no_verdict():
    """Two pulls that took 19 s to inject at load 10 pushed the restore past the load's time-based end: the
    empty time after it counted as a stall and 20.7 % throughput, a false VISIBLE. Covered exactly to the end of
    the recovery window is enough; a millisecond short is not."""
    # steady 5, fault 6, recover 6: the load runs 5 + 6 + 6 + 2 = 19 s
    assert analysis.uncovered_windows(19.0, 5.0, 11.0, 6.0, 5.0) is None
    assert analysis.uncovered_windows(19.0, 7.0, 13.0, 6.0, 5.0) is None               # 2 s late: exactly covered
    line = analysis.uncovered_windows(19.0, 5.0, 24.0, 6.0, 5.0)                        # the pulls took 19 s
    assert line.startswith("the load ran 19.0 s, 11.0 s short of the end of the recovery window (restore at 24.0 s")
    assert "injected at 5.0 s (planned 5 s) and restored 19.0 s later" in line and line.endswith("no verdict")
    assert analysis.uncovered_windows(19.0, 7.0, 13.001, 6.0, 5.0) is not None


@given(st.lists(st.sampled_from(list(Outcome)), max_size=6))
def test_the_verdict_word_is_a_view_of_the_criteria_outcome(outcomes):
    """One vocabulary: the fault verdict's word maps back to exactly the outcome a Verdict of the same criteria has
    (no criteria: unknown = not run), for every mix of the four outcomes."""
    from fxprobe.core.verdict import Verdict
    from fxprobe.faults.analysis import OUTCOME_OF_VERDICT, WORD_OF_OUTCOME
    items = [Criterion(f"c{i}", o) for i, o in enumerate(outcomes)]
    word = analysis.verdict_word(items)
    assert OUTCOME_OF_VERDICT[word] is Verdict("fault", tuple(items)).outcome
    assert sorted(WORD_OF_OUTCOME.values()) == ["error", "invisible", "unknown", "visible"]
