"""fio adapter: real runs (local and client/server), json+ bins, logs, fixtures from 3.33 and older shapes."""

from __future__ import annotations

import json
import math
import socket
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fxprobe.core.errors import ParseError, ToolError
from fxprobe.core.runner import Runner
from fxprobe.tools import fio

FIXTURES = Path(__file__).parent / "fixtures" / "fio"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    """One real fio run (~1 s): two jobs, per-I/O clat logs, a hist log, epoch and relative time."""
    work = tmp_path_factory.mktemp("fio")
    common = ["--filename=" + str(work / "data"), "--size=8M", "--bs=4k", "--ioengine=psync",
              "--runtime=1", "--time_based", "--rw=randrw"]
    args = ["--name=epoch", *common, f"--write_lat_log={work}/epoch", f"--write_bw_log={work}/epoch",
            "--log_unix_epoch=1", f"--write_hist_log={work}/epoch", "--log_hist_msec=200",
            "--name=relative", *common, f"--write_lat_log={work}/relative",
            f"--write_iops_log={work}/relative", f"--write_hist_log={work}/relative",
            "--log_hist_msec=200", "--log_hist_coarseness=2"]
    result = fio.run_fio(Runner(), args, timeout=60)
    return result, work


def test_real_run_parses(real_run):
    result, _ = real_run
    assert result.version.startswith("fio-3")
    assert [j.jobname for j in result.jobs] == ["epoch", "relative"]
    assert not result.failed_jobs()
    read = result.jobs[0].direction("read")
    assert read.total_ios > 0 and read.bw_bytes > 0 and read.iops > 0
    assert sum(read.clat.bins.values()) == read.clat.samples


def test_percentiles_from_bins_equal_fio_own(real_run):
    result, _ = real_run
    for job in result.jobs:
        for name in ("read", "write"):
            clat = job.direction(name).clat
            for percent, value in clat.percentiles.items():
                assert fio.percentile_from_bins(clat.bins, percent) == value


def test_bin_value_matches_real_json_plus_keys(real_run):
    result, _ = real_run
    keys = [k for j in result.jobs for d in j.directions.values() for k in d.clat.bins]
    assert keys
    for key in keys:
        index = fio.bin_index_ns(key)
        assert fio.bin_value_ns(index) == key
        low, high = fio.bin_bounds_ns(index)
        assert low <= key < high


def test_merged_p99_equals_p99_of_union_of_raw_samples_within_one_bin(real_run):
    """Per-I/O clat logs of both jobs are the raw samples; json+ bins of both jobs, merged."""
    result, work = real_run
    samples = np.concatenate([
        fio.parse_fio_log(path).query("ddir == 0")["value"].to_numpy()
        for path in sorted(work.glob("*_clat.*.log"))])
    merged = result.merged_bins("read")
    assert sum(merged.values()) == len(samples)
    for percent in (50, 90, 99, 99.9):
        ordered = np.sort(samples)
        raw = int(ordered[math.ceil(percent / 100 * len(ordered)) - 1])
        from_bins = fio.percentile_from_bins(merged, percent)
        assert fio.bin_index_ns(raw) == fio.bin_index_ns(from_bins), (percent, raw, from_bins)


def test_real_logs_epoch_and_relative(real_run):
    _, work = real_run
    epoch = fio.parse_fio_log(next(work.glob("epoch_bw.*.log")))
    relative = fio.parse_fio_log(next(work.glob("relative_iops.*.log")))
    assert epoch.attrs["epoch"] and not relative.attrs["epoch"]
    assert list(epoch.columns[:4]) == ["time_ms", "value", "ddir", "bs"]
    assert abs(epoch["time_ms"].iloc[0] / 1000 - time.time()) < 600
    assert set(epoch["ddir"].unique()) <= {0, 1}


def test_real_hist_log_merges_to_json_plus(real_run):
    result, work = real_run
    hist = fio.parse_fio_hist_log(next(work.glob("epoch_clat_hist.*.log")))
    assert hist.coarseness == 0 and hist.counts.shape[1] == fio.PLAT_NR
    json_bins = result.jobs[0].direction("read").clat.bins
    logged = hist.merged_bins(ddir=0)
    assert set(logged) <= set(json_bins)
    assert sum(logged.values()) <= sum(json_bins.values())


def test_real_coarse_hist_log(real_run):
    result, work = real_run
    hist = fio.parse_fio_hist_log(next(work.glob("relative_clat_hist.*.log")))
    assert hist.coarseness == 2 and hist.counts.shape[1] == fio.PLAT_NR // 4
    assert hist.time_ms[0] < fio.EPOCH_MS_THRESHOLD
    values = hist.bin_values_ns()
    assert values == sorted(values)
    json_bins = result.jobs[1].direction("read").clat.bins
    for value, count in hist.merged_bins(ddir=0).items():   # each coarse bin covers 4 fio bins
        index = fio.bin_index_ns(value)
        group = range(index - index % 4, index - index % 4 + 4)
        assert count <= sum(json_bins.get(fio.bin_value_ns(i), 0) for i in group)


def test_real_client_server(tmp_path):
    """fio --server on 127.0.0.1 and a --client run: client_stats with hostname and port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    runner = Runner()
    server = runner.start(["fio", f"--server=ip:127.0.0.1,{port}"], label="fio-server")
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        job = tmp_path / "job.fio"
        job.write_text(f"[one]\nfilename={tmp_path}/d\nsize=4M\nrw=randread\nbs=4k\n"
                       "runtime=1\ntime_based\n")
        result = fio.run_fio(runner, [f"--client=ip:127.0.0.1,{port}", str(job)], timeout=60)
    finally:
        server.stop()
    assert result.client_server
    assert result.hosts == ("127.0.0.1",)
    assert [j.port for j in result.jobs] == [port]
    assert result.jobs[0].direction("read").total_ios > 0


def test_fixture_client_server_with_aggregate():
    result = fio.parse_fio_json(fixture("client-server-jsonplus-3.33.json"), "cs")
    assert [j.jobname for j in result.jobs] == ["a", "b"]
    assert result.aggregate is not None and result.aggregate.jobname == "All clients"
    merged = result.merged_bins("read")
    assert sum(merged.values()) == sum(j.direction("read").clat.samples for j in result.jobs)


def test_fixture_client_server_without_aggregate():
    """Several job sections on two hosts: fio prints no "All clients" row (fio issue #1881)."""
    result = fio.parse_fio_json(fixture("client-server-no-all-clients-built.json"), "old")
    assert result.aggregate is None
    assert result.hosts == ("node1", "node2")
    assert len(result.jobs) == 4
    assert result.total("read", "bw_bytes") == pytest.approx(
        2 * sum(j.direction("read").bw_bytes for j in result.jobs[:2]))
    # no bins in plain json: percentiles come from fio's list
    assert result.jobs[0].direction("read").clat.percentile(99) is not None


def test_fixture_job_error_after_warning_line():
    text = fixture("job-error-devfull-json-3.33.json")
    assert not text.startswith("{")
    result = fio.parse_fio_json(text, "devfull")
    assert result.failed_jobs()[0].error == 28


def test_fixture_steadystate():
    state = fio.parse_fio_json(fixture("steadystate-json-3.33.json"), "ss").jobs[0].steadystate
    assert state.attained and state.duration_s == 1 and state.criterion_spec.startswith("iops")


def test_real_job_error_is_a_result_not_an_exception():
    result = fio.run_fio(Runner(), ["--name=full", "--filename=/dev/full", "--size=64k",
                                    "--rw=write", "--bs=4k"], timeout=60, output_format="json")
    assert result.failed_jobs()[0].error == 28


def test_fio_without_json_is_a_tool_error():
    with pytest.raises(ToolError):
        fio.run_fio(Runner(), ["--no-such-option"], timeout=30)


def test_probe_fio_finds_fio_here():
    assert fio.probe_fio(Runner()) is None
    assert "older" in fio.probe_fio(Runner(), minimum=(99, 0))


def test_old_fio_bw_in_kib_only():
    text = '{"fio version":"fio-2.2","jobs":[{"jobname":"x","read":{"bw":1000,"io_kbytes":10}}]}'
    read = fio.parse_fio_json(text).jobs[0].direction("read")
    assert read.bw_bytes == 1024000 and read.io_bytes == 10240


@pytest.mark.parametrize("text, field", [
    ("", "json"), ("fio: no json here", "json"), ('{"jobs": 3}', "jobs"),
    ('{"jobs":[{"jobname":"x","read":{"bw_bytes":"fast"}}]}', "jobs[0].read.bw_bytes"),
    ('{"jobs":[{"groupid":0}]}', "jobs[0].jobname"),
])
def test_bad_json_names_the_field(text, field):
    with pytest.raises(ParseError) as info:
        fio.parse_fio_json(text, "bad.json")
    assert info.value.field == field and "bad.json" in str(info.value)


def test_log_field_counts_and_errors():
    assert list(fio.parse_fio_log("0, 10, 0, 4096, 0, 0\n").columns) == [
        "time_ms", "value", "ddir", "bs", "offset", "prio"]
    with pytest.raises(ParseError, match="field 'value'"):
        fio.parse_fio_log("1, 2, 0, 4096, 0\n2, x, 0, 4096, 0\n", "bw.log")
    with pytest.raises(ParseError, match="fields per line"):
        fio.parse_fio_log("1, 2, 3\n", "bw.log")


def test_log_parsing_is_fast(tmp_path):
    """72 h of 1 s samples on one host, two directions (518,400 lines): ~0.3 s on an idle 2-core machine."""
    n, base = 72 * 3600, 1_700_000_000_000
    path = tmp_path / "big_bw.1.log"
    path.write_text("".join(f"{base + i * 1000}, 123456, 0, 0, 0\n{base + i * 1000}, 654321, 1, 0, 0\n"
                            for i in range(n)))
    started = time.monotonic()
    frame = fio.parse_fio_log(path)
    assert time.monotonic() - started < 5
    assert len(frame) == 2 * n and frame.attrs["epoch"]
    assert frame.groupby("ddir")["value"].mean().to_dict() == {0: 123456, 1: 654321}


samples_strategy = st.lists(st.lists(st.integers(1, 10**10), min_size=1, max_size=300),
                            min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(groups=samples_strategy, percent=st.sampled_from([1, 50, 90, 99, 99.9, 99.99, 100]))
def test_merged_bins_percentile_is_within_one_bin_of_union(groups, percent):
    """Bin each group's samples as fio does, merge; the percentile lands in the bin of the union's."""
    bin_sets = []
    for group in groups:
        bins: dict[int, int] = {}
        for value in group:
            key = fio.bin_value_ns(fio.bin_index_ns(value))
            bins[key] = bins.get(key, 0) + 1
        bin_sets.append(bins)
    union = sorted(v for g in groups for v in g)
    raw = union[math.ceil(percent / 100 * len(union)) - 1]
    merged = fio.percentile_from_bins(fio.merge_bins(*bin_sets), percent)
    assert fio.bin_index_ns(merged) == fio.bin_index_ns(raw)


@given(st.integers(0, fio.PLAT_NR - 1))
def test_bin_index_and_value_round_trip(index):
    assert fio.bin_index_ns(fio.bin_value_ns(index)) == index
    low, high = fio.bin_bounds_ns(index)
    assert fio.bin_index_ns(low) == index and fio.bin_index_ns(high - 1) == index


def test_one_splitter_for_fio_output_whole_or_as_it_arrives():
    """tools.fio_status.JsonStream is the one reader of fio's concatenated JSON documents: the soak's pipe, the
    fault run's live line (chunks as the file grows) and the fault verdict's whole text give the same documents,
    warnings between them skipped; a document on one line is read at the stream's end."""
    from fxprobe.tools.fio_status import JsonStream, errored_ios, job_rows, json_documents, last_json
    text = "fio: a warning before the first report\n" + (FIXTURES / "status-interval-jsonplus-3.33.json").read_text()
    whole = json_documents(text)
    assert len(whole) > 2 and all("timestamp_ms" in d for d in whole) and last_json(text) == whole[-1]
    stream, pieces = JsonStream(), []
    data = text.encode()
    for start in range(0, len(data), 7):          # bytes, cut anywhere (inside a UTF-8 character too)
        pieces += stream.feed(data[start:start + 7])
    assert pieces + stream.close() == whole and stream.skipped == ["fio: a warning before the first report"]
    one_line = json.dumps({"jobs": [{"jobname": "a", "total_err": 3}, {"jobname": "All clients", "total_err": 3},
                                    {"jobname": "b", "error": 5}]})
    assert json_documents("x\n" + one_line) == [json.loads(one_line)]
    assert [errored_ios(r) for r in job_rows(json.loads(one_line))] == [3, 1]   # fio's aggregate row left out
