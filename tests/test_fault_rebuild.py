"""The md rebuild in a drive pull's timeline (faults/rebuild.py): the degraded and rebuilding bands from the
array's md samples, the load's figures in each band, information unless the scenario asks for a criterion."""

from __future__ import annotations

import numpy as np

from fxprobe.core.verdict import Outcome
from fxprobe.faults import rebuild, timeline
from fxprobe.faults.command import rebuild_lines
from fxprobe.faults.completions import Completions
from fxprobe.tools.mdadm import parse_mdstat

RECOVERING = """md127 : active raid6 nvme0n1[20] nvme1n1[1] nvme2n1[2]
      4681728 blocks super 1.2 level 6, 512k chunk, algorithm 2 [3/2] [_UU]
      [=>...................]  recovery =  8.5% (22016/261632) finish=0.1min speed=1024K/sec
"""


def test_mdstat_recovery_line_gives_progress_done_total_and_md_s_own_rate():
    (md,) = parse_mdstat(RECOVERING)
    assert (md.action, md.progress, md.sync_done_kib, md.sync_total_kib, md.speed_kib_s) == \
        ("recovery", 8.5, 22016, 261632, 1024)
    text = timeline.md_text(md.to_dict())
    assert text == "raid6 [3/2] [_UU] recovery 8.5% (22016/261632 KiB at 1024 KiB/s)"
    state = timeline.md_state(text)
    assert state.phase == "rebuilding" and state.speed_kib_s == 1024 and state.total_kib == 261632
    assert timeline.md_state("raid6 [3/2] [_UU]").phase == "degraded"
    assert timeline.md_state("raid6 [3/3] [UUU]").phase == "clean"
    assert timeline.md_state("raid0 active") is None        # nothing to rebuild
    assert rebuild.unclean({"md127": "raid6 [3/3] [UUU]", "md126": "raid0 active"}) == set()
    assert rebuild.unclean({"md127": text, "md126": "raid0 active"}) == {"md127"}


def _samples() -> list[dict]:
    """Every second from 0 to 60 s: clean, degraded 10..22 s, rebuilding 23..40 s, clean from 41 s."""
    out = []
    for t in range(0, 61):
        if 10 <= t <= 22:
            text = "raid6 [3/2] [_UU]"
        elif 23 <= t <= 40:
            text = f"raid6 [3/2] [_UU] recovery {(t - 23) * 5.0}% ({(t - 23) * 1000}/20000 KiB at 2000 KiB/s)"
        else:
            text = "raid6 [3/3] [UUU]"
        out.append({"t_ms": t * 1000, "md": {"md127": text, "md126": "raid0 active"}})
    return out


def _measure_from(done: Completions, base_iops: float):
    def measure(start: int, end: int):
        seconds = (end - start) / 1000.0
        count = done.count_between(start, end)
        return count, count / seconds, 100.0 * count / seconds / base_iops, done.bytes_between(start, end) / 1e6 / seconds, \
            None, None
    return measure


def _load(rates: list[tuple[int, int, int]]) -> Completions:
    """Completions at ``per_s`` a second over [start, end) s."""
    stamps = np.concatenate([np.arange(a * 1000, b * 1000, 1000 // per_s) for a, b, per_s in rates]).astype(np.int64)
    return Completions(stamps, np.full(len(stamps), 4096, dtype=np.int64), np.full(len(stamps), 10**6, dtype=np.int64))


def test_the_bands_and_their_figures_come_from_the_samples_and_the_completions():
    done = _load([(0, 10, 100), (10, 23, 50), (23, 41, 40), (41, 60, 100)])
    result = rebuild.observe(_samples(), inject_ms=9_500, restore_ms=20_000, load_end_ms=60_000, bound_s=300,
                             measure=_measure_from(done, 100.0), resolution_s=1.0)
    assert result.observed and result.arrays == ("md127",)       # the raid0 beside it has nothing to rebuild
    assert (result.degraded.start_ms, result.degraded.end_ms) == (9_500, 23_000)
    assert (result.rebuilding.start_ms, result.rebuilding.end_ms) == (23_000, 41_000)
    assert result.finished and result.rebuild_s == 18.0 and result.restore_to_clean_s == 21.0
    assert abs(result.rebuilding.throughput_pct - 40.0) < 0.1 and abs(result.degraded.iops - 51.85) < 0.1
    assert abs(result.rate_mb_s - 2000 * 1024 / 1e6) < 1e-9
    lines = rebuild_lines(result.to_dict(), {"max_rebuild_s": None, "min_rebuild_throughput_pct": None})
    assert "clean 21.0 s after the restore (rebuilt in 18.0 s" in lines[0] and "information, not judged" in lines[0]
    assert lines[1].strip().startswith("degraded 13.5 s: ") and "rebuilding 18.0 s: 40.0 %" in lines[2]
    assert rebuild.criteria(result, {}) == []                    # not judged unless asked
    assert [label for label, *_ in rebuild.plot_bands(result)] == ["md degraded 13.5 s, 52 % of pre-fault",
                                                                   "md rebuilding 18.0 s, 40 % of pre-fault"]
    again = rebuild.Rebuild.from_dict(result.to_dict())
    assert again == result


def test_a_rebuild_not_finished_within_the_bound_says_so_and_a_criterion_judges_only_when_asked():
    done = _load([(0, 30, 100)])
    result = rebuild.observe(_samples(), inject_ms=9_500, restore_ms=20_000, load_end_ms=30_000, bound_s=10,
                             measure=_measure_from(done, 100.0), resolution_s=1.0)
    assert not result.finished and result.rebuilding.end_ms == 30_000 and not result.rebuilding.ended
    assert result.progress_pct == 35.0 and result.rebuild_s is None
    assert "NOT finished within the bound, 10 s after the restore (35 % done" in result.lines()[0]
    short, = rebuild.criteria(result, {"max_rebuild_s": 5.0})
    assert short.outcome == Outcome.FAIL and short.measured == 10     # at least the bound: over 5 s
    long_, = rebuild.criteria(result, {"max_rebuild_s": 60.0})
    assert long_.outcome == Outcome.NOT_RUN and "raise the bound" in long_.detail
    pct, = rebuild.criteria(result, {"min_rebuild_throughput_pct": 90.0})
    assert pct.outcome == Outcome.PASS and abs(pct.measured - 100.0) < 0.5     # the load never slowed here


def test_an_array_already_rebuilding_before_the_fault_is_not_this_fault_s():
    samples = [{**s, "md": {**s["md"], "md125": "raid6 [3/2] [_UU] recovery 50.0%"}} for s in _samples()]
    result = rebuild.observe(samples, inject_ms=9_500, restore_ms=20_000, load_end_ms=60_000, bound_s=300,
                             measure=lambda a, b: (0, 0.0, None, 0.0, None, None))
    assert result.arrays == ("md127",) and result.finished and result.rebuild_s == 18.0


def test_no_degraded_md_is_no_rebuild_observed():
    samples = [{"t_ms": t * 1000, "md": {"md126": "raid0 active"}} for t in range(30)]
    result = rebuild.observe(samples, inject_ms=5_000, restore_ms=15_000, load_end_ms=30_000, bound_s=300,
                             measure=lambda a, b: (0, 0.0, None, 0.0, None, None))
    assert not result.observed and "no md array went degraded" in result.reason
    assert rebuild.plot_bands(result) == [] and rebuild.criteria(result, {"max_rebuild_s": 60.0})[0].outcome == \
        Outcome.NOT_RUN


def test_g4_shows_a_drive_pull_s_rebuild_as_information_never_judged(tmp_path):
    from gate_helpers import fake_run
    from fxprobe.gates import GATES, Evidence, load_config
    from fxprobe.gates.engine import verdict_lines
    from fxprobe.core.verdict import Verdict
    done = _load([(0, 10, 100), (10, 23, 50), (23, 41, 40), (41, 60, 100)])
    result = rebuild.observe(_samples(), inject_ms=9_500, restore_ms=20_000, load_end_ms=60_000, bound_s=300,
                             measure=_measure_from(done, 100.0), resolution_s=1.0)
    runs = [fake_run(tmp_path, "fault run", {"plan": {"kind": "drive-pull"}, "impact": {"errors": 0},
                                             "rebuild": result.to_dict()})]
    config = load_config(None)
    without = GATES["g4"].evaluate(Evidence.from_paths([fake_run(tmp_path / "without", "fault run", {
        "plan": {"kind": "drive-pull"}, "impact": {"errors": 0}})]), config)
    verdict = GATES["g4"].evaluate(Evidence.from_paths(runs), config)
    assert [c.name for c in verdict.criteria] == [c.name for c in without.criteria]    # no criterion added
    (note,) = verdict.notes
    assert note.startswith("drive pull: md rebuild (md127): clean 21.0 s after the restore (rebuilt in 18.0 s")
    assert "rebuilding 18.0 s: 40.0 % of pre-fault throughput" in note and "[evidence: " in note
    assert any(line.startswith("  INFO    drive pull: md rebuild") for line in verdict_lines(verdict))
    assert Verdict.from_dict(verdict.to_dict()) == verdict


def test_a_stall_while_md_rebuilds_is_the_rebuilding_band_s_not_the_stall_criterion_s():
    """The load runs on through the rebuild; the stall criterion still ends with the recovery window (restore +
    recover_s + 2 s), as it did when the load ended there; a later stall shows in the rebuilding band."""
    import pandas as pd
    from fxprobe.faults import analysis
    from fxprobe.faults.completions import longest_gap
    done = _load([(0, 30, 100), (35, 60, 100)])          # nothing completes 30..35 s: 5 s, during the rebuild
    iops, bw = done.windows(500)
    kwargs = dict(iops=iops, bw=bw, hist=None, fio_json=None, log_msec=500, load_start_ms=0, settle_s=2,
                  inject_ms=10_000, restore_ms=20_000, min_throughput_pct=50.0, completions=done, planned_s=60)
    assert analysis.analyse(**kwargs).longest_stall_s == 5.01                    # the whole load: 29.99 .. 35 s
    judged = analysis.analyse(**kwargs, judged_end_ms=20_000 + (6 + 2) * 1000)
    assert judged.longest_stall_s < 0.1
    measure = lambda a, b: (0, 0.0, None, 0.0, None, None, longest_gap(done.t_ms, a, b)[0] / 1000.0)
    result = rebuild.observe(_samples(), inject_ms=10_000, restore_ms=20_000, load_end_ms=60_000, bound_s=300,
                             measure=measure)
    assert result.rebuilding.longest_stall_s == 5.01 and "longest stall 5.010 s" in result.rebuilding.text()
    assert isinstance(iops, pd.Series)


def test_the_lab_site_reads_md_as_it_is_now_from_the_array_s_sampling_loop():
    """The rebuild wait asks the array's sampling loop (already running, no command of its own) for md now: the
    last complete block; a cut-off block at the end is not read."""
    from fxprobe.faults import engine

    class Loop:
        def __init__(self, text):
            self.text = text

        def output(self):
            return self.text, ""

    def block(t, md):
        return f"T {t}\n{md}\n--fxprobe--\nctrl nvme0 S0 nvme0n1\n"
    degraded = ("md127 : active raid6 nvme1n1[1] nvme2n1[2]\n      100 blocks super 1.2 level 6, 512k chunk, "
                "algorithm 2 [3/2] [_UU]\n")
    site = engine.LabSite.__new__(engine.LabSite)
    site._loops = {"array": Loop(block(1.0, degraded) + block(2.0, RECOVERING) + "T 3.0\nmd127 : act")}
    assert site.md_now() == {"md127": "raid6 [3/2] [_UU] recovery 8.5% (22016/261632 KiB at 1024 KiB/s)"}
    site._loops = {"array": Loop("T 1.0\nmd12")}
    assert site.md_now() is None
