"""Sweep: --vary parsing, the knee rule, and the key a profile's kind maps it to."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from fxprobe.core.errors import BadInput
from fxprobe.workload.profiles import load_profile
from fxprobe.workload.sweep import SweepPoint, find_knee, override_key, parse_vary


def point(value, p99_ms, limit_ms=10):
    return SweepPoint(value, value * 100.0, value * 10.0, int(p99_ms * 1e6), 1.0, 3, 3, p99_ms < limit_ms)


def test_parse_vary():
    assert parse_vary("jobs=1,2,4,8,16,32") == ("jobs", [1, 2, 4, 8, 16, 32])
    assert parse_vary("iodepth=8,1,8") == ("iodepth", [1, 8])
    for bad in ("jobs", "speed=1,2", "jobs=a,b", "jobs=0,1", "jobs="):
        with pytest.raises(BadInput, match="--vary"):
            parse_vary(bad)


def test_knee_is_the_highest_load_under_the_limit():
    knee, text = find_knee([point(1, 2), point(2, 3), point(4, 6), point(8, 12), point(16, 30)])
    assert knee == 4 and "highest load" in text
    knee, text = find_knee([point(1, 2), point(2, 3)])
    assert knee == 2 and "sweep further" in text
    knee, text = find_knee([point(1, 20), point(2, 3)])
    assert knee is None and "lightest load" in text
    knee, text = find_knee([point(1, 2), point(2, 12), point(4, 3)])
    assert knee == 1 and "came back under" in text


@given(st.lists(st.floats(0.1, 50), min_size=1, max_size=12))
def test_knee_and_every_lighter_load_stay_under_the_limit(p99s):
    points = [point(2 ** i, p) for i, p in enumerate(p99s)]
    knee, _ = find_knee(points)
    if knee is not None:
        assert all(p.under_limit for p in points if p.value <= knee)
        heavier = [p for p in points if p.value > knee]
        assert not heavier or not heavier[0].under_limit


def test_jobs_means_threads_in_kv_profiles():
    assert override_key(load_profile("qwen25-32b-cold-restore"), "jobs") == "threads"
    assert override_key(load_profile("checkpoint-write"), "jobs") == "jobs"
    assert override_key(load_profile("checkpoint-write"), "threads") == "jobs"
    with pytest.raises(BadInput, match="concurrency applies to KV profiles"):
        override_key(load_profile("checkpoint-write"), "concurrency")
