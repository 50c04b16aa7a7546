"""The impact of a fault on the load, from fio's epoch-stamped logs and its JSON.

Times are epoch milliseconds on the load host's clock (the caller converts the injection and
restore instants with the measured clock offset). With fio's per-I/O completion log
(:mod:`fxprobe.faults.completions`) the stall, the throughput and the first effect are exact to the
millisecond and count successful I/O only; from averaged logs a sample stamped ``t`` covers the window
``(t - L, t]`` (L = log_avg_msec) and those durations have a resolution of one window.

- errors: ``total_err`` of every fio job (fio counts them under ``continue_on_error``);
- longest stall: the longest run of windows with no completed I/O (zero IOPS, or no sample at all)
  from the injection to the end of the load;
- throughput in the fault window (injection .. restore) as % of the pre-fault steady state
  (settle .. injection);
- p99 latency in the window / pre-fault p99, from fio histogram logs (exact bins, not averages);
- time to recover: restore to the first window back at ``min_throughput_pct`` of the steady state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from fxprobe.core.data import AsDict
from fxprobe.faults.completions import Completions, first_effect, longest_gap, recovered_at
from fxprobe.tools.fio import FioHistLog, percentile_from_bins
from fxprobe.tools.fio_status import errored_ios, job_rows, json_documents, last_json
from fxprobe.core.verdict import Criterion, Outcome, combine as worst_outcome

AFFECTED_FRACTION = 0.5   # a window below half the steady-state IOPS is "affected" (for the timeline)


@dataclass(frozen=True)
class Impact(AsDict):
    log_msec: int
    inject_ms: int
    restore_ms: int
    end_ms: int | None
    errors: int | None
    first_error: str
    baseline_iops: float | None
    window_iops: float | None
    baseline_bw_kib: float | None
    window_bw_kib: float | None
    throughput_pct: float | None
    longest_stall_s: float | None
    stall_start_ms: int | None
    baseline_p99_ns: int | None
    window_p99_ns: int | None
    p99_ratio: float | None
    recover_s: float | None
    first_affected_ms: int | None
    resolution_ms: int | None = None      # 1: per-I/O completion log; else the log window
    source: str = "fio iops log"
    load_end_ms: int | None = None
    baseline_ios: int | None = None       # successful completions counted (exact source)
    window_ios: int | None = None


def combine(frames: Sequence[pd.DataFrame], log_msec: int) -> pd.Series:
    """Sum per-job, per-direction samples into one series indexed by window end (ms, on the grid)."""
    if not frames:
        return pd.Series(dtype=float)
    data = pd.concat([f[["time_ms", "value"]] for f in frames], ignore_index=True)
    grid = ((data["time_ms"] + log_msec // 2) // log_msec) * log_msec
    return data.groupby(grid)["value"].sum().sort_index().astype(float)


def dense(series: pd.Series, log_msec: int, start_ms: int | None = None, end_ms: int | None = None) -> pd.Series:
    """Fill missing windows with 0 (no sample = nothing completed) between start and end."""
    if series.empty:
        return series
    first = int(series.index.min()) if start_ms is None else (start_ms // log_msec) * log_msec
    last = int(series.index.max()) if end_ms is None else (end_ms // log_msec) * log_msec
    index = np.arange(first, last + log_msec, log_msec, dtype=np.int64)
    return series.reindex(index, fill_value=0.0)


def mean_between(series: pd.Series, start_ms: float, end_ms: float) -> float | None:
    """Mean over windows entirely inside [start, end]."""
    part = series[(series.index - _step(series) >= start_ms) & (series.index <= end_ms)]
    return float(part.mean()) if len(part) else None


def _step(series: pd.Series) -> int:
    return int(series.attrs.get("log_msec", 0))


def longest_stall(iops: pd.Series, log_msec: int, start_ms: int, end_ms: int) -> tuple[float, int | None]:
    """(seconds, start ms) of the longest run of zero-IOPS windows whose end lies in (start, end]."""
    part = iops[(iops.index > start_ms) & (iops.index <= end_ms + log_msec)]
    best, best_start, run, run_start = 0, None, 0, None
    for stamp, value in part.items():
        if value <= 0:
            if run == 0:
                run_start = int(stamp) - log_msec
            run += 1
            if run > best:
                best, best_start = run, run_start
        else:
            run = 0
    return best * log_msec / 1000.0, best_start


def p99_between(hist: FioHistLog | None, start_ms: float, end_ms: float, percent: float = 99.0) -> int | None:
    if hist is None or len(hist.time_ms) == 0:
        return None
    rows = (hist.time_ms > start_ms) & (hist.time_ms <= end_ms)
    if not rows.any():
        return None
    sums = hist.counts[rows].sum(axis=0)
    bins = {v: int(c) for v, c in zip(hist.bin_values_ns(), sums) if c}
    return percentile_from_bins(bins, percent) if bins else None


def fio_errors(fio_json: str | None) -> tuple[int | None, str]:
    """(I/O errors counted by fio, first error text) from fio's (last) JSON output; None without JSON."""
    data = last_json(fio_json or "")
    if data is None:
        return None, ""
    total, first = 0, ""
    for job in job_rows(data):
        total += errored_ios(job)
        if not first and job.get("first_error"):
            first = f"{job.get('first_error')} (errno)"
        if not first and job.get("error"):
            first = f"errno {job['error']}"
    return total, first


def error_series(fio_json: str | None) -> list[tuple[int, int]]:
    """(epoch ms, cumulative errored I/O of every job) from each of fio's status reports (--status-interval):
    errored I/O has no line in the per-I/O log, so this is where it shows in time (1 s resolution)."""
    out = []
    for document in json_documents(fio_json or ""):
        stamp = document.get("timestamp_ms")
        if isinstance(stamp, int):
            out.append((stamp, sum(errored_ios(job) for job in job_rows(document))))
    return out


def load_runtime_ms(fio_json: str | None) -> int | None:
    """The longest job runtime (ms) in fio's final JSON."""
    data = last_json(fio_json or "")
    if data is None:
        return None
    runtimes = [int(job.get(d, {}).get("runtime", 0) or 0) for job in data.get("jobs", []) for d in ("read", "write")]
    return max(runtimes) if runtimes and max(runtimes) > 0 else None


def uncovered_windows(load_end_s: float, inject_s: float, restore_s: float, recover_s: float,
                      planned_inject_s: float) -> str | None:
    """Why the load did not cover the fault and recovery windows (None when it did). Times in seconds from the
    load's start; ``load_end_s``: the end of its time-based runtime. A fault that takes longer to inject than
    planned pushes the restore past where the load was planned to run; judged there, the empty time after the
    load's end would count as a stall and lost throughput (a false VISIBLE), and a stall still running at its
    end would be cut short (a false INVISIBLE)."""
    needed = restore_s + recover_s
    if needed <= load_end_s:
        return None
    return (f"the load ran {load_end_s:.1f} s, {needed - load_end_s:.1f} s short of the end of the recovery window "
            f"(restore at {restore_s:.1f} s + recover_s {recover_s:g} s): the fault was injected at {inject_s:.1f} s "
            f"(planned {planned_inject_s:g} s) and restored {restore_s - inject_s:.1f} s later; "
            f"the fault and recovery windows were not covered by the load, so no verdict")


def analyse(*, iops: pd.Series, bw: pd.Series, hist: FioHistLog | None, fio_json: str | None,
            log_msec: int, load_start_ms: int, settle_s: float, inject_ms: int, restore_ms: int,
            min_throughput_pct: float, completions: Completions | None = None,
            planned_s: float | None = None, judged_end_ms: int | None = None) -> Impact:
    """``completions`` (per-I/O log): stall, throughput and first effect exact; else from the windows.
    ``planned_s``: how long the load was meant to run; a load that stopped early stalled until then.
    ``judged_end_ms``: the stall is judged up to here (the end of the recovery window; a drive pull's load runs on
    through md's rebuild, which is information: faults.rebuild), else to the load's end."""
    if completions is not None and len(completions):
        return _analyse_exact(iops=iops, bw=bw, hist=hist, fio_json=fio_json, log_msec=log_msec,
                              load_start_ms=load_start_ms, settle_s=settle_s, inject_ms=inject_ms,
                              restore_ms=restore_ms, min_throughput_pct=min_throughput_pct, done=completions,
                              planned_s=planned_s, judged_end_ms=judged_end_ms)
    end_ms = int(iops.index.max()) if len(iops) else None
    iops = dense(iops, log_msec, load_start_ms, end_ms)
    bw = dense(bw, log_msec, load_start_ms, end_ms)
    iops.attrs["log_msec"] = bw.attrs["log_msec"] = log_msec
    base_start = load_start_ms + settle_s * 1000
    baseline_iops = mean_between(iops, base_start, inject_ms)
    window_iops = mean_between(iops, inject_ms, restore_ms)
    if window_iops is None and len(iops):   # fault shorter than a window: the windows it touches
        part = iops[(iops.index > inject_ms) & (iops.index - log_msec < restore_ms)]
        window_iops = float(part.mean()) if len(part) else None
    baseline_bw = mean_between(bw, base_start, inject_ms)
    window_bw = mean_between(bw, inject_ms, restore_ms)
    pct = 100.0 * window_iops / baseline_iops if baseline_iops and window_iops is not None else None
    stall_s, stall_start = (longest_stall(iops, log_msec, inject_ms, min(end_ms, judged_end_ms or end_ms))
                            if end_ms else (None, None))
    base_p99 = p99_between(hist, base_start, inject_ms)
    win_p99 = p99_between(hist, inject_ms, restore_ms + log_msec)
    ratio = win_p99 / base_p99 if base_p99 and win_p99 is not None else None
    recover_s = first_affected = None
    if baseline_iops:
        after = iops[iops.index > restore_ms]
        back = after[after >= baseline_iops * min_throughput_pct / 100.0]
        recover_s = max(0.0, (int(back.index[0]) - restore_ms) / 1000.0) if len(back) else None
        low = iops[(iops.index > inject_ms) & (iops < baseline_iops * AFFECTED_FRACTION)]
        first_affected = int(low.index[0]) if len(low) else None
    errors, first_error = fio_errors(fio_json)
    return Impact(log_msec, int(inject_ms), int(restore_ms), end_ms, errors, first_error, baseline_iops,
                  window_iops, baseline_bw, window_bw, pct, stall_s, stall_start, base_p99, win_p99, ratio,
                  recover_s, first_affected, resolution_ms=log_msec)


def _analyse_exact(*, iops, bw, hist, fio_json, log_msec, load_start_ms, settle_s, inject_ms, restore_ms,
                   min_throughput_pct, done: Completions, planned_s: float | None = None,
                   judged_end_ms: int | None = None) -> Impact:
    """Stall, throughput and first effect from the successful completions themselves. The load ends at
    the later of its last completion and its start plus fio's runtime (or the planned one, if longer)."""
    runtime = max(load_runtime_ms(fio_json) or 0, int((planned_s or 0) * 1000))
    last = int(done.t_ms[-1])
    end_ms = max(last, load_start_ms + runtime) if runtime else last
    base_start = int(load_start_ms + settle_s * 1000)
    base_ios, window_ios = done.count_between(base_start, inject_ms), done.count_between(inject_ms, restore_ms)
    base_s, window_s = (inject_ms - base_start) / 1000.0, (restore_ms - inject_ms) / 1000.0
    baseline_iops = base_ios / base_s if base_s > 0 else None
    window_iops = window_ios / window_s if window_s > 0 else None
    baseline_bw = done.bytes_between(base_start, inject_ms) / 1024 / base_s if base_s > 0 else None
    window_bw = done.bytes_between(inject_ms, restore_ms) / 1024 / window_s if window_s > 0 else None
    pct = 100.0 * window_iops / baseline_iops if baseline_iops and window_iops is not None else None
    gap_ms, stall_start = longest_gap(done.t_ms, int(inject_ms), min(end_ms, judged_end_ms or end_ms))
    base_p99 = p99_between(hist, base_start, inject_ms)
    win_p99 = p99_between(hist, inject_ms, restore_ms + log_msec)
    ratio = win_p99 / base_p99 if base_p99 and win_p99 is not None else None
    recover_s = first_affected = None
    if baseline_iops:
        dense_iops = dense(iops, log_msec, load_start_ms, end_ms)
        back = recovered_at(done.t_ms, int(restore_ms), log_msec,
                            baseline_iops * min_throughput_pct / 100.0 * log_msec / 1000.0)
        recover_s = (back - restore_ms) / 1000.0 if back is not None else None
        first_affected = first_effect(done.t_ms, base_start, int(inject_ms), end_ms)
        if first_affected is None:   # no pause, but fewer successful I/O: the first window below half
            low = dense_iops[(dense_iops.index > inject_ms) & (dense_iops < baseline_iops * AFFECTED_FRACTION)]
            first_affected = int(low.index[0]) - log_msec if len(low) else None
    errors, first_error = fio_errors(fio_json)
    return Impact(log_msec, int(inject_ms), int(restore_ms), end_ms, errors, first_error, baseline_iops,
                  window_iops, baseline_bw, window_bw, pct, gap_ms / 1000.0, stall_start, base_p99, win_p99, ratio,
                  recover_s, first_affected, resolution_ms=1, source="fio per-I/O completion log",
                  load_end_ms=end_ms, baseline_ios=base_ios, window_ios=window_ios)


def criteria(impact: Impact, limits: dict) -> list[Criterion]:
    """The invisibility criteria, each with its threshold beside the measurement."""
    out = [
        Criterion.compare("I/O errors", impact.errors, "<=", limits["max_errors"],
                          detail=impact.first_error or "", evidence="fio JSON total_err"),
        Criterion.compare("longest stall (no completed I/O)", impact.longest_stall_s, "<=", limits["max_stall_s"],
                          unit="s", detail=_stall_detail(impact), evidence=impact.source),
        Criterion.compare("throughput in fault window vs pre-fault", impact.throughput_pct, ">=",
                          limits["min_throughput_pct"], unit="%", detail=_throughput_detail(impact),
                          evidence=impact.source),
        Criterion.compare("p99 latency in fault window / pre-fault p99", impact.p99_ratio, "<=",
                          limits["max_p99_ratio"], unit="x",
                          detail=_p99_detail(impact), evidence="fio clat histogram log"),
    ]
    return out


def _stall_detail(impact: Impact) -> str:
    resolution = impact.resolution_ms or impact.log_msec
    if resolution == 1:
        return "successful completions only, exact to 1 ms"
    return f"resolution {resolution / 1000:g} s"


def _throughput_detail(impact: Impact) -> str:
    if impact.window_ios is None:
        return ""
    return (f"successful I/O only: {impact.window_ios} in the fault window, {impact.baseline_ios} in the "
            f"steady state before it")


def _p99_detail(impact: Impact) -> str:
    if impact.p99_ratio is not None:
        return f"{impact.window_p99_ns / 1e6:.3f} ms vs {impact.baseline_p99_ns / 1e6:.3f} ms"
    if impact.window_p99_ns is None and impact.window_iops == 0:
        return "no I/O completed in the fault window (see the stall)"
    return "no latency histogram for the window"


# the fault verdict's words are a view of the outcome, never a second type: this is the one place that maps them
WORD_OF_OUTCOME = {Outcome.PASS: "invisible", Outcome.FAIL: "visible", Outcome.NOT_RUN: "unknown",
                   Outcome.ERROR: "error"}
OUTCOME_OF_VERDICT = {word: outcome for outcome, word in WORD_OF_OUTCOME.items()}


def verdict_word(items: list[Criterion]) -> str:
    """The criteria's outcome (core.verdict.combine) in the fault verdict's words: ``error`` when a criterion could
    not be judged (a read-back that failed, a fault not seen), else ``visible`` when one failed, ``unknown`` when
    one was not run (or there are none), ``invisible`` when every criterion passed."""
    return WORD_OF_OUTCOME[worst_outcome([c.outcome for c in items])]
