"""Exact stalls and throughput from fio's per-I/O completion log (log_avg_msec=0, epoch ms)."""

import json

import numpy as np
import pytest

from fxprobe.faults import analysis
from fxprobe.faults.completions import Completions, first_effect, longest_gap
from fxprobe.tools.fio import parse_fio_log

T0 = 1_796_232_000_000


def per_io_log(times, clat_ns=200_000, bs=4096) -> str:
    return "".join(f"{t}, {clat_ns}, 0, {bs}, 0\n" for t in times)


def steady(start, end, every_ms=2):
    return list(range(start, end, every_ms))


def impact_of(times, inject, restore, runtime_ms=None, errors=0):
    done = Completions.from_logs([parse_fio_log(per_io_log(times))])
    iops, bw = done.windows(500)
    fio_json = json.dumps({"jobs": [{"total_err": errors, "error": 0,
                                     "read": {"runtime": runtime_ms or (times[-1] - times[0])}}]})
    return analysis.analyse(iops=iops, bw=bw, hist=None, fio_json=fio_json, log_msec=500,
                            load_start_ms=done.first_issue_ms, settle_s=2, inject_ms=inject,
                            restore_ms=restore, min_throughput_pct=50, completions=done)


def test_stall_is_the_longest_gap_between_completions_to_the_millisecond():
    times = steady(T0, T0 + 10_000) + steady(T0 + 11_737, T0 + 20_000)   # 1.737 s without a completion
    impact = impact_of(times, T0 + 9_000, T0 + 15_000)
    assert impact.longest_stall_s == pytest.approx(1.739)     # last before it at T0+9998, next at T0+11737
    assert impact.stall_start_ms == T0 + 9_998
    assert impact.resolution_ms == 1
    assert impact.first_affected_ms == T0 + 9_998
    items = analysis.criteria(impact, {"max_errors": 0, "max_stall_s": 2, "min_throughput_pct": 50,
                                       "max_p99_ratio": 10})
    stall = next(c for c in items if c.name.startswith("longest stall"))
    assert stall.outcome.value == "pass" and "exact to 1 ms" in stall.detail


def test_a_gap_across_the_injection_counts_from_the_injection_and_the_end_of_the_load_counts():
    times = steady(T0, T0 + 5_000)
    assert longest_gap(np.array(times), T0 + 4_000, T0 + 5_000 + 3_000) == (3_002, T0 + 4_998)
    assert longest_gap(np.array([T0, T0 + 100]), T0 + 50, T0 + 60) == (10, T0 + 50)
    # a load that never recovers: the stall runs to the end of the load (fio's runtime)
    impact = impact_of(steady(T0, T0 + 8_000), T0 + 6_000, T0 + 9_000, runtime_ms=12_000)
    assert impact.longest_stall_s == pytest.approx((T0 + 12_000 - (T0 + 7_998)) / 1000, abs=0.001)


def test_throughput_counts_successful_completions_in_the_window():
    before = steady(T0, T0 + 10_000, 2)            # 500/s
    during = steady(T0 + 10_000, T0 + 14_000, 5)   # 200/s
    after = steady(T0 + 14_000, T0 + 20_000, 2)
    times = before + during + after
    impact = impact_of(times, T0 + 10_000, T0 + 14_000, errors=1234)
    # steady state from load start + 2 s (settle) to the injection; windows are (start, end]
    assert impact.baseline_ios == len([t for t in times if T0 + 2_000 < t <= T0 + 10_000]) == 4000
    assert impact.window_ios == len([t for t in times if T0 + 10_000 < t <= T0 + 14_000]) == 800
    assert impact.throughput_pct == pytest.approx(100 * (impact.window_ios / 4) / (impact.baseline_ios / 8))
    assert impact.errors == 1234      # errored I/O is counted apart (fio never logs it as completed)


def test_first_effect_is_the_first_gap_longer_than_any_of_the_steady_state():
    t = np.array([0, 3, 5, 8, 10, 13, 20, 22, 60, 62])
    assert first_effect(t, 0, 12, 62) == 13      # steady gaps <= 3 ms; 13 -> 20 is the first longer one
    assert first_effect(np.array(steady(0, 100, 2)), 0, 50, 100) is None


def test_windows_are_exact_counts():
    done = Completions.from_logs([parse_fio_log(per_io_log([T0 + 1, T0 + 500, T0 + 501, T0 + 999]))])
    iops, bw = done.windows(500)
    assert iops.to_dict() == {T0 + 500: 4.0, T0 + 1000: 4.0}
    assert bw.to_dict() == {T0 + 500: 16.0, T0 + 1000: 16.0}
    assert done.first_issue_ms == T0 + 1


def test_errored_io_shows_in_time_from_fio_status_reports():
    reports = "".join(json.dumps({"timestamp_ms": T0 + i * 1000, "jobs": [{"total_err": e}, {"total_err": 1}]})
                      for i, e in enumerate([0, 0, 40, 95]))
    assert analysis.error_series("fio: warning\n" + reports) == [(T0, 1), (T0 + 1000, 1), (T0 + 2000, 41),
                                                                  (T0 + 3000, 96)]


def test_the_timeline_draws_errored_io(tmp_path):
    from fxprobe.faults import plot
    done = Completions.from_logs([parse_fio_log(per_io_log(steady(T0, T0 + 10_000, 5)))])
    iops, _ = done.windows(500)
    path = plot.plot_timeline(tmp_path / "t.png", title="t", iops=iops, hist=None, start_ms=T0,
                              inject_ms=T0 + 4000, restore_ms=T0 + 6000,
                              errors=[(T0 + 4000, 0), (T0 + 5000, 300), (T0 + 6000, 310)])
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_a_load_that_stopped_early_stalled_until_its_planned_end():
    times = steady(T0, T0 + 8_000)
    done = Completions.from_logs([parse_fio_log(per_io_log(times))])
    iops, bw = done.windows(500)
    impact = analysis.analyse(iops=iops, bw=bw, hist=None, fio_json=None, log_msec=500, load_start_ms=T0,
                              settle_s=1, inject_ms=T0 + 5_000, restore_ms=T0 + 7_000, min_throughput_pct=50,
                              completions=done, planned_s=20)
    assert impact.load_end_ms == T0 + 20_000 and impact.longest_stall_s == pytest.approx(12.002)


# -- a real run's raw per-I/O log, recomputed here by hand ----------------------------------------------
def _real_run():
    import gzip
    from pathlib import Path
    folder = Path(__file__).parent / "fixtures" / "fault-exact"
    text = gzip.decompress((folder / "host-veth-cut.load_clat.1.log.gz").read_bytes()).decode()
    return text, json.loads((folder / "host-veth-cut.json").read_text())


def test_stall_and_throughput_of_a_real_run_equal_an_independent_count_of_its_raw_log():
    text, run = _real_run()
    inject, restore = run["instants"]["inject_ms"], run["instants"]["restore_ms"]
    done = Completions.from_logs([parse_fio_log(text, "load_clat.1.log")])
    iops, bw = done.windows(run["log_msec"])
    impact = analysis.analyse(iops=iops, bw=bw, hist=None, fio_json=json.dumps(run["fio_final"]),
                              log_msec=run["log_msec"], load_start_ms=done.first_issue_ms,
                              settle_s=run["timing"]["settle_s"], inject_ms=inject, restore_ms=restore,
                              min_throughput_pct=run["criteria"]["min_throughput_pct"], completions=done)
    assert impact.longest_stall_s == run["reported"]["longest_stall_s"]        # what the run itself reported
    # by hand: completion instants, the gaps after the injection up to the end of the load
    stamps = sorted(int(line.split(",")[0]) for line in text.splitlines() if line.strip())
    end = impact.load_end_ms
    edges = [inject] + [t for t in stamps if inject < t < end] + [end]
    gap = max(b - a for a, b in zip(edges, edges[1:]))
    assert abs(impact.longest_stall_s * 1000 - gap) <= 1
    start = run["instants"]["load_start_ms"] + run["timing"]["settle_s"] * 1000
    before = sum(1 for t in stamps if start < t <= inject)
    during = sum(1 for t in stamps if inject < t <= restore)
    assert (impact.baseline_ios, impact.window_ios) == (before, during) == (run["reported"]["baseline_ios"],
                                                                          run["reported"]["window_ios"])
    assert impact.throughput_pct == pytest.approx(100 * (during / (restore - inject)) / (before / (inject - start)))


def test_recovery_is_the_first_instant_the_trailing_window_is_back_at_the_share_of_the_steady_rate():
    from fxprobe.faults.completions import recovered_at
    t = np.array(steady(0, 1000, 2) + steady(3000, 5000, 2))     # 500/s, nothing 1..3 s, 500/s again
    # half the steady rate over a 500 ms trailing window = 125 completions: the 125th after 3000 ms
    assert recovered_at(t, 2000, 500, 125) == 3000 + 124 * 2
    assert recovered_at(t, 2000, 500, 10_000) is None
    times = steady(T0, T0 + 10_000) + steady(T0 + 11_737, T0 + 20_000)
    impact = impact_of(times, T0 + 9_000, T0 + 10_500)
    assert impact.recover_s == pytest.approx((T0 + 11_737 + 124 * 2 - (T0 + 10_500)) / 1000)
