"""The fleet views of a multi-node run (workload/fleet.py) on logs written here: which node a log is,
the straggler view's arithmetic, per-node figures from bins."""

from __future__ import annotations

from pathlib import Path

import pytest

from fxprobe.tools import fio
from fxprobe.workload import fleet

T0 = 1_764_000_000_000


def bw_log(path: Path, start_ms: int, kib_per_s: list[int], log_msec: int = 250) -> Path:
    path.write_text("".join(f"{start_ms + (i + 1) * log_msec}, {v}, 0, 4194304, 0\n" for i, v in enumerate(kib_per_s)))
    return path


def test_a_log_belongs_to_the_node_whose_address_fio_appended(tmp_path):
    labels = {"127.0.1.1": "host1", "127.0.1.2": "host2"}
    logs = [tmp_path / "p.r1_bw.1.log.127.0.1.2", tmp_path / "p.r1_bw.2.log.127.0.1.1", tmp_path / "p.r1_bw.1.log"]
    assert fleet.by_node(logs, labels) == {"host1": [logs[1]], "host2": [logs[0]], "local": [logs[2]]}
    assert fleet.node_of(tmp_path / "x_bw.1.log.10.0.0.9", labels) == "10.0.0.9"


def test_the_straggler_view_is_the_aggregate_until_the_first_and_the_last_node_finished(tmp_path):
    # host1: 4 windows of 250 ms from T0 (1000 KiB/s each, two jobs); host2 starts 500 ms later, runs 8 windows
    logs = {"host1": [bw_log(tmp_path / "a_bw.1.log.A", T0, [1000] * 4), bw_log(tmp_path / "a_bw.2.log.A", T0, [1000] * 4)],
            "host2": [bw_log(tmp_path / "a_bw.1.log.B", T0 + 500, [2000] * 8)]}
    view = fleet.stragglers(logs, 250)
    assert view.start_skew_s == 0.5 and (view.first_node, view.last_node) == ("host1", "host2")
    assert (view.first_finished_s, view.last_finished_s) == (1.0, 2.5)
    window = 1024 * 0.25
    # until host1 finished (1.0 s): host1 8 windows x 1000 KiB/s, host2 its first 2 windows x 2000 KiB/s
    assert view.first_aggregate_bps == pytest.approx((8 * 1000 + 2 * 2000) * window / 1.0)
    assert view.last_aggregate_bps == pytest.approx((8 * 1000 + 8 * 2000) * window / 2.5)
    spans = {s.node: s for s in view.spans}
    assert spans["host2"].started_ms == T0 + 500 and spans["host2"].finished_ms == T0 + 2500
    assert "first node finished: host1 at 1.00 s" in view.line()


def test_one_node_or_nodes_without_samples_give_no_straggler_view(tmp_path):
    empty = tmp_path / "e_bw.1.log.B"
    empty.write_text("")
    assert fleet.stragglers({"host1": [bw_log(tmp_path / "a_bw.1.log.A", T0, [5])], "host2": [empty]}, 250) is None


def test_node_figures_merge_each_node_s_bins_over_repeats():
    fast, slow = {100_000: 90, 200_000: 10}, {1_000_000: 50, 4_000_000: 50}
    figures = fleet.node_figures({"a": [10.0, 20.0], "b": [4.0, 6.0]}, {"a": [1.0, 3.0], "b": [2.0, 2.0]},
                                 {"a": [fast, fast], "b": [slow, {}]})
    assert figures["a"].bw_bytes == 15.0 and figures["a"].iops == 2.0 and figures["a"].samples == 200
    assert figures["a"].p50_ns == fio.percentile_from_bins(fast, 50) and figures["a"].p99_ns == 200_000
    assert (figures["b"].p50_ns, figures["b"].p99_ns, figures["b"].samples) == (1_000_000, 4_000_000, 100)
