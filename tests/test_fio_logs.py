"""Streamed fleet log analysis (tools/fio_logs.py) against independent merges on small sets."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fxprobe.core.errors import ParseError
from fxprobe.tools import fio, fio_logs
from fxprobe.workload import fleet
from histref import bandwidth_series, client_log_falls, independent_merge, numpy_percentile

FIXTURES = Path(__file__).parent / "fixtures" / "fio"
T0 = 1_764_000_000_000


def write_bw(path: Path, rng, seconds: int, offset_ms: int, width: int = 5, mixed: bool = False) -> Path:
    stamps = T0 + offset_ms + np.arange(seconds) * 1000
    values = rng.integers(0, 2_000_000, seconds)
    values[rng.integers(0, seconds, 3)] = 0
    extra = ", 0" * (width - 4)
    lines = [f"{t}, {v}, {(i % 2) if mixed else 0}, 1048576{extra}" for i, (t, v) in enumerate(zip(stamps, values))]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture()
def bw_logs(tmp_path):
    rng = np.random.default_rng(3)
    return [write_bw(tmp_path / f"host{h}_bw.1.log", rng, 300 + 17 * h, offset_ms=h * 3, mixed=h == 1,
                     width=5 + (h == 2))
            for h in range(4)]


@pytest.mark.parametrize("block_rows", [1 << 20, 50])
def test_fleet_series_equals_bandwidth_series_of_parsed_frames(bw_logs, block_rows):
    series = fio_logs.fleet_series(bw_logs, 1000, block_rows=block_rows)
    assert series.pairs() == bandwidth_series([fio.parse_fio_log(p) for p in bw_logs], 1000)
    assert series.lines == sum(len(p.read_text().splitlines()) for p in bw_logs)
    for host, path in zip(series.hosts, bw_logs):
        values = [int(line.split(",")[1]) for line in path.read_text().splitlines()]
        assert host.zero_windows == values.count(0) and host.windows == len(values)


def test_fleet_series_one_direction_and_iops_factor(bw_logs):
    mixed = bw_logs[1]
    reads = fio_logs.fleet_series([mixed], 1000, factor=1, ddir=0)
    rows = [line.split(", ") for line in mixed.read_text().splitlines()]
    assert reads.values.sum() == sum(int(r[1]) for r in rows if r[2] == "0")
    assert len(reads.values) == sum(r[2] == "0" for r in rows)


def test_fleet_series_skips_empty_logs_and_names_a_bad_one(tmp_path, bw_logs):
    empty = tmp_path / "empty_bw.1.log"
    empty.write_text("")
    assert fio_logs.fleet_series([empty], 1000).lines == 0
    assert fio_logs.fleet_series([empty, *bw_logs], 1000).pairs() == fio_logs.fleet_series(bw_logs, 1000).pairs()
    bad = tmp_path / "bad_bw.1.log"
    bad.write_text(bw_logs[0].read_text() + f"{T0}, x, 0, 4096, 0\n")
    with pytest.raises(ParseError, match="bad_bw.1.log.*could not parse ` x`"):
        fio_logs.fleet_series([bad], 1000, block_rows=50)
    short = tmp_path / "short_bw.1.log"
    short.write_text("1, 2, 3\n")
    with pytest.raises(ParseError, match="short_bw.1.log.*3 fields per line"):
        fio_logs.fleet_series([short], 1000)
    ragged = tmp_path / "ragged_bw.1.log"
    ragged.write_text("1, 2, 0, 4096, 0\n2, 3, 0\n")
    with pytest.raises(ParseError, match="ragged_bw.1.log.*fewer than 5 fields"):
        fio_logs.fleet_series([ragged], 1000)
    ragged.write_text("1, 2, 0, 4096, 0\n2, 3, 0, 4096, 0, 7\n")
    with pytest.raises(ParseError, match="ragged_bw.1.log.*not a comma-separated fio log"):
        fio_logs.fleet_series([ragged], 1000)
    blank = tmp_path / "blank_bw.1.log"
    blank.write_text("\n" + bw_logs[0].read_text().replace("\n", "\n\n", 3))
    assert fio_logs.fleet_series([blank], 1000).pairs() == fio_logs.fleet_series([bw_logs[0]], 1000).pairs()
    huge = tmp_path / "huge_bw.1.log"
    huge.write_text("1, 2, 0, 4096, 0\n2, 1e300, 0, 4096, 0\n")
    with pytest.raises(ParseError, match="huge_bw.1.log.*out of range"):
        fio_logs.fleet_series([huge], 1000)


def write_hist(path: Path, rng, windows: int, coarseness: int = 0, prio: bool = False, mixed: bool = False) -> Path:
    """Windows of latencies around 80 us (reads) and 300 us (writes), binned as fio bins them."""
    width = fio.PLAT_NR >> coarseness
    lines = []
    for w in range(windows):
        ddir = w % 2 if mixed else 0
        samples = rng.lognormal(np.log(80_000 if ddir == 0 else 300_000), 0.6, rng.integers(0, 200))
        counts = [0] * width
        for ns in samples.astype(np.int64):
            counts[fio.bin_index_ns(int(ns)) >> coarseness] += 1
        head = [T0 + w * 1000, ddir, 4096] + ([0] if prio else [])
        lines.append(", ".join(map(str, head + counts)))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("coarseness,prio", [(0, False), (2, True)])
def test_merged_hist_percentiles_equal_an_independent_merge(tmp_path, coarseness, prio):
    rng = np.random.default_rng(11 + coarseness)
    paths = [write_hist(tmp_path / f"host{h}_clat_hist.1.log", rng, 25, coarseness, prio, mixed=h == 0)
             for h in range(3)]
    merged = fio_logs.merge_hist_logs(paths, block_bytes=64 << 10)     # several blocks per file
    assert merged.coarseness == coarseness and merged.windows == 75 and len(merged.hosts) == 3
    values = fio.hist_bin_values_ns(fio.PLAT_NR >> coarseness, coarseness)
    references = independent_merge(paths, 4 if prio else 3, values)
    for ddir, reference in references.items():
        assert merged.bins(ddir) == {v: c for v, c in sorted(reference.items()) if c}
        for percent in (50, 99):
            assert merged.percentile(percent, ddir) == numpy_percentile(reference, percent), (ddir, percent)
    per_file = fio.merge_bins(*(fio.parse_fio_hist_log(p).merged_bins() for p in paths))
    assert merged.bins() == per_file


def test_real_fio_hist_log_fixture_merges_as_parse_fio_hist_log_does():
    path = FIXTURES / "local-randrw-epoch_clat_hist.1.log"
    single = fio.parse_fio_hist_log(path)
    merged = fio_logs.merge_hist_logs([path, path])
    for ddir in (0, 1):
        assert merged.bins(ddir) == {v: 2 * c for v, c in single.merged_bins(ddir).items()}
    assert merged.percentile(99, 0) == fio.percentile_from_bins(single.merged_bins(0), 99)


def test_hist_logs_of_different_coarseness_are_refused(tmp_path):
    rng = np.random.default_rng(5)
    fine = write_hist(tmp_path / "a_clat_hist.1.log", rng, 2, 0)
    coarse = write_hist(tmp_path / "b_clat_hist.1.log", rng, 2, 1)
    with pytest.raises(ParseError, match="b_clat_hist.1.log.*cannot merge bin by bin"):
        fio_logs.merge_hist_logs([fine, coarse])
    negative = tmp_path / "c_clat_hist.1.log"
    negative.write_text(", ".join(["1", "0", "4096", "-1"] + ["0"] * (fio.PLAT_NR - 1)) + "\n")
    with pytest.raises(ParseError, match="negative bin count"):
        fio_logs.merge_hist_logs([negative])
    odd = tmp_path / "d_clat_hist.1.log"
    odd.write_text("1, 0, 4096, 5, 6\n")
    with pytest.raises(ParseError, match="fit no fio histogram layout"):
        fio_logs.merge_hist_logs([odd])


def test_a_bad_hist_line_is_named_by_line_across_blocks(tmp_path):
    rng = np.random.default_rng(9)
    path = write_hist(tmp_path / "e_clat_hist.1.log", rng, 30)
    lines = path.read_text().splitlines()
    lines[27] = lines[27].replace(", 0, 4096, ", ", 0, 4096, x", 1)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ParseError, match=r"e_clat_hist.1.log.*' x0'.*at line 28\b"):
        fio_logs.merge_hist_logs([path], block_bytes=16 << 10)


def test_hist_logs_through_fio_s_client_are_undone_as_the_server_differenced_them():
    """A real fio 3.33 client/server run (randrw, 200/100 IOPS, 500 ms hist windows): the lines summed
    overcount; the last two lines per direction are the job's histogram, bin for bin within its json+."""
    path = FIXTURES / "client-randrw_clat_hist.1.log.127.0.0.1"
    text = (FIXTURES / "client-randrw-jsonplus-3.33.json").read_text()
    job = json.loads(text[text.index("\n{") + 1:])["client_stats"][0]
    plain = fio_logs.merge_hist_logs([path])
    merged = fio_logs.merge_hist_logs([path], fio_client=True, block_bytes=16 << 10)
    values = fio.hist_bin_values_ns(fio.PLAT_NR, 0)
    reference = independent_merge([path], 3, values, fio_client=True)
    for ddir, name in ((0, "read"), (1, "write")):
        json_bins = {int(k): v for k, v in job[name]["clat_ns"]["bins"].items()}
        assert plain.samples(ddir) > job[name]["total_ios"]              # the naive sum overcounts
        assert merged.bins(ddir) == dict(sorted(reference[ddir].items()))
        assert all(count <= json_bins.get(value, 0) for value, count in merged.bins(ddir).items())
        # 5 windows of 500 ms logged out of the 3 s measured: the last half second is in json+ only
        assert 0.8 * job[name]["total_ios"] <= merged.samples(ddir) <= job[name]["total_ios"]
        assert merged.percentile(99, ddir) == numpy_percentile(reference[ddir], 99)


def _planted(tmp_path: Path, line: int, count: int) -> Path:
    """The captured client-side log with one bin of one line replaced by ``count``."""
    lines = (FIXTURES / "client-randrw_clat_hist.1.log.127.0.0.1").read_text().splitlines()
    fields = lines[line - 1].split(", ")
    fields[3 + 700] = str(count)
    lines[line - 1] = ", ".join(fields)
    path = tmp_path / "planted_clat_hist.1.log.127.0.0.1"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_impossible_count_in_a_client_hist_log_is_refused_never_merged(tmp_path):
    """fio has written impossible bin counts (axboe/fio#827; CI saw 94,672,326,492,521 samples in a run whose
    json+ had 437). Inside the log, the job's histogram falls after it: the log is refused naming the line;
    on the last line it cannot fall, and the fleet view refuses the sum for exceeding json+."""
    path = FIXTURES / "client-randrw_clat_hist.1.log.127.0.0.1"
    assert client_log_falls([path], 3) == []
    ddirs = [int(line.split(",")[1]) for line in path.read_text().splitlines()]
    middle = [i + 1 for i, d in enumerate(ddirs) if d == 0][2]          # the third read line of five
    planted = _planted(tmp_path, middle, 94_672_326_492_521)
    assert client_log_falls([planted], 3) == [f"{planted.name}:0"]         # the independent check agrees
    with pytest.raises(ParseError, match=rf"lines {middle} and {middle + 4} \(read\): bin 700 holds "
                                         r"94,672,326,492,521 then 0, so the job's histogram falls from "
                                         r"94,672,326,492,521 to 0 samples"):
        fio_logs.merge_hist_logs([planted], fio_client=True)
    view = fleet.hist_logs([planted], {}, "read", 500)
    assert view.percentiles_ns == {} and "NOT USED" in view.line() and f"lines {middle} and" in view.line()
    last = [i + 1 for i, d in enumerate(ddirs) if d == 0][-1]
    view = fleet.hist_logs([_planted(tmp_path, last, 94_672_326_492_521)], {}, "read", 500)
    assert view.percentiles_ns == {} and "94,672,326,493,023 read samples" in view.problem and "json+ has 500" in view.problem
    text = (FIXTURES / "client-randrw-jsonplus-3.33.json").read_text()
    reads = json.loads(text[text.index("\n{") + 1:])["client_stats"][0]["read"]["total_ios"]
    healthy = fleet.hist_logs([path], {}, "read", reads)
    assert healthy.problem is None and healthy.percentiles_ns["p50"] is not None
