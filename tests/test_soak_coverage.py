"""A soak covers only monitored load time (issue 18 item 4): fio's start-up before its first I/O is
not load, and the time fxprobe was not running (kill -9 until --resume) is a gap, never covered."""

from fxprobe.soak.summary import summarize


def start():
    return {"type": "start", "t": "x", "ts": 0, "profile": "p", "target": "/dev/x", "planned_s": 180,
            "stall_s": 5, "sample_s": 10, "health_s": 300}


def sample(seg, ts, ios):
    return {"type": "sample", "seg": seg, "t": f"t{ts}", "ts": ts, "io_bytes": ios, "ios": ios, "errors": 0,
            "bw": 1.0, "iops": 1.0}


def test_fio_start_up_and_the_unmonitored_gap_are_not_covered():
    # as seen in the lab: fio's first report 6.9 s after it was started, with the first I/Os in it
    records = [start(), {"type": "segment", "seg": 1, "ts": 100.0},
               sample(1, 104.0, 10), sample(1, 160.0, 5000),            # 3 s of start-up, then 57 s of load
               {"type": "interruption", "id": 1, "kind": "gap", "start": "a", "start_ts": 160.0, "end": "b",
                "end_ts": 235.8, "seconds": 75.8, "detail": "fxprobe was not running"},
               {"type": "resume", "ts": 235.8}, {"type": "segment", "seg": 2, "ts": 236.0},
               sample(2, 239.0, 0), sample(2, 241.0, 10), sample(2, 363.0, 9000)]   # jobs not started at 239
    summary = summarize(records)
    assert summary.duration_s == 57 + 123
    assert summary.unmonitored_s == 75.8
    assert "75.8 s unmonitored (a gap, not covered)" in summary.lines()[0]


def test_a_quick_first_report_counts_from_the_segment_start():
    records = [start(), {"type": "segment", "seg": 1, "ts": 100.0}, sample(1, 100.5, 10), sample(1, 110.0, 99)]
    assert summarize(records).duration_s == 10
