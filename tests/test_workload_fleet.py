"""The fleet views of a multi-node run (workload/fleet.py) on logs written here: which node a log is,
the straggler view's arithmetic, per-node figures from bins."""

from __future__ import annotations

from pathlib import Path

import pytest

from fxprobe.tools import fio, fio_logs
from fxprobe.workload import fleet

T0 = 1_764_000_000_000


MIB = 1 << 20


def bw_log(path: Path, stamps: list[int]) -> Path:
    path.write_text("".join(f"{T0 + t}, 1000, 0, {MIB}, 0\n" for t in stamps))
    return path


def client_hist_log(path: Path, stamps: list[int], own: list[int]) -> Path:
    """A hist log as fio's client writes it for a server: D(i) = C(i) - D(i-1) of the cumulative counts C
    (one bin used: 1 ms)."""
    lines, cumulative, before = [], 0, 0
    column = fio.bin_index_ns(1_000_000)
    for t, count in zip(stamps, own):
        cumulative += count
        differenced = cumulative - before
        before = differenced
        bins = [0] * fio.PLAT_NR
        bins[column] = differenced
        lines.append(", ".join(map(str, [T0 + t, 0, MIB] + bins)))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_log_belongs_to_the_node_whose_address_fio_appended(tmp_path):
    labels = {"127.0.1.1": "host1", "127.0.1.2": "host2"}
    logs = [tmp_path / "p.r1_bw.1.log.127.0.1.2", tmp_path / "p.r1_bw.2.log.127.0.1.1", tmp_path / "p.r1_bw.1.log"]
    assert fleet.by_node(logs, labels) == {"host1": [logs[1]], "host2": [logs[0]], "local": [logs[2]]}
    assert fleet.node_of(tmp_path / "x_bw.1.log.10.0.0.9", labels) == "10.0.0.9"


def test_the_straggler_view_is_the_aggregate_until_the_first_and_the_last_node_finished(tmp_path):
    # host1: 4 windows of 2 I/Os (1 MiB each) to 1000 ms, one more I/O after its last window, runtime 1000 ms;
    # host2: 8 windows of 1 I/O from 750 to 2500 ms, runtime 2000 ms
    hist = {"host1": [client_hist_log(tmp_path / "a_clat_hist.1.log.A", [250, 500, 750, 1000], [2, 2, 2, 2])],
            "host2": [client_hist_log(tmp_path / "a_clat_hist.1.log.B", list(range(750, 2501, 250)), [1] * 8)]}
    bw = {"host1": [bw_log(tmp_path / "a_bw.1.log.A", [260, 1010])], "host2": [bw_log(tmp_path / "a_bw.1.log.B", [2500])]}
    io = {"host1": fleet.NodeIO(9 * MIB, 9, 1000), "host2": fleet.NodeIO(8 * MIB, 8, 2000)}
    view = fleet.stragglers(io, hist, bw)
    spans = {s.node: s for s in view.spans}
    assert (spans["host1"].started_ms, spans["host1"].finished_ms) == (T0 + 10, T0 + 1010)
    assert (spans["host1"].logged_ios, spans["host2"].logged_ios) == (8, 8)
    assert view.start_skew_s == 0.49 and (view.first_node, view.last_node) == ("host1", "host2")
    assert (view.first_finished_s, view.last_finished_s) == (1.0, 2.49)
    # until host1 finished: its 9 MiB (8 in windows, 1 after them) and host2's windows at 750 and 1000 ms
    assert view.first_aggregate_bps == pytest.approx(11 * MIB / 1.0)
    assert view.last_aggregate_bps == pytest.approx(17 * MIB / 2.49)
    assert "first node finished: host1 at 1.00 s" in view.line()


def test_a_node_whose_hist_log_holds_impossible_counts_is_spread_evenly_and_named(tmp_path):
    # host2's log as fio#827 left one: a window whose own count comes out negative (3 then -2), and another
    # log of its that counts 10**12 I/Os where fio's json has 8
    good = client_hist_log(tmp_path / "a_clat_hist.1.log.A", [250, 500, 750, 1000], [2, 2, 2, 2])
    falls = client_hist_log(tmp_path / "a_clat_hist.1.log.B", [500, 1000, 1500, 2000], [3, -2, 1, 1])
    huge = client_hist_log(tmp_path / "b_clat_hist.1.log.B", [500, 2000], [10**12, 1])
    io = {"host1": fleet.NodeIO(8 * MIB, 8, 1000), "host2": fleet.NodeIO(8 * MIB, 8, 2000)}
    for logs, why in (([falls], "fewer than 0 completions"), ([huge], "count 1,000,000,000,001 I/Os where fio's json has 8")):
        view = fleet.stragglers(io, {"host1": [good], "host2": logs}, {})
        spans = {s.node: s for s in view.spans}
        assert spans["host1"].impossible is None and spans["host1"].logged_ios == 8
        assert why in spans["host2"].impossible and "axboe/fio#827" in spans["host2"].impossible
        assert spans["host2"].logged_ios == 0 and spans["host2"].bytes == 8 * MIB
        assert "NOT USED for host2" in view.line()
        # host2 ran from 0 to 2000 ms (stamps 500..2000, runtime 2000): until host1 finished at 1000 ms
        # (started at 0), half of host2's bytes, evenly spread, and all of host1's
        assert (view.first_node, view.first_finished_s) == ("host1", 1.0)
        assert view.first_aggregate_bps == pytest.approx((8 + 4) * MIB / 1.0)
        assert view.last_aggregate_bps == pytest.approx(16 * MIB / 2.0)
    # a count fio printed as an unsigned 64-bit number (2**64 - 2**32 in a CI-like run, where it failed the whole
    # run): not a count; the node is placed by its bw log and its bytes spread evenly, named as above
    wrapped = client_hist_log(tmp_path / "c_clat_hist.1.log.B", [500, 2000], [2**64 - 2**32, 1])
    view = fleet.stragglers(io, {"host1": [good], "host2": [wrapped]},
                            {"host2": [bw_log(tmp_path / "c_bw.1.log.B", [2000])]})
    spans = {s.node: s for s in view.spans}
    assert "a hist log cannot be read as counts" in spans["host2"].impossible, spans["host2"]
    assert spans["host2"].logged_ios == 0 and spans["host2"].bytes == 8 * MIB and "NOT USED for host2" in view.line()
    assert view.first_aggregate_bps == pytest.approx((8 + 4) * MIB / 1.0)


def test_a_client_hist_log_counts_each_window_as_its_own(tmp_path):
    log = client_hist_log(tmp_path / "x_clat_hist.1.log.A", [250, 500, 750, 1000, 1250], [3, 1, 4, 1, 5])
    windows = fio_logs.hist_window_counts(log, fio_client=True, block_bytes=8 << 10)     # several blocks
    assert windows.completions.tolist() == [3, 1, 4, 1, 5]
    assert fio_logs.merge_hist_logs([log], fio_client=True).samples(0) == 14


def test_one_node_or_nodes_without_logs_give_no_straggler_view(tmp_path):
    io = {"host1": fleet.NodeIO(MIB, 1, 100), "host2": fleet.NodeIO(MIB, 1, 100)}
    only = {"host1": [bw_log(tmp_path / "a_bw.1.log.A", [100])]}
    assert fleet.stragglers(io, {}, only) is None
    assert fleet.stragglers({"host1": io["host1"]}, {}, only) is None


def test_node_figures_merge_each_node_s_bins_over_repeats():
    fast, slow = {100_000: 90, 200_000: 10}, {1_000_000: 50, 4_000_000: 50}
    figures = fleet.node_figures({"a": [10.0, 20.0], "b": [4.0, 6.0]}, {"a": [1.0, 3.0], "b": [2.0, 2.0]},
                                 {"a": [fast, fast], "b": [slow, {}]})
    assert figures["a"].bw_bytes == 15.0 and figures["a"].iops == 2.0 and figures["a"].samples == 200
    assert figures["a"].p50_ns == fio.percentile_from_bins(fast, 50) and figures["a"].p99_ns == 200_000
    assert (figures["b"].p50_ns, figures["b"].p99_ns, figures["b"].samples) == (1_000_000, 4_000_000, 100)
