"""G3's multi-node figure is what the nodes moved while ALL of them ran (fxprobe/workload/common_span.py), not the
sum of each node's own rate over its own runtime, which credits nodes run one after another as if they had shared
the array at once.

- over the captured lab runs (tests/fixtures/hosts8: 8 hosts; tests/fixtures/report/rehearsal: 2 hosts, the
  producer's own results.json and raw bw logs), the recorded common-span aggregate equals tests/spanref.py's
  independent recomputation from the raw logs, and G3 judges it;
- planted logs: staggered nodes have no common span (G3: FAIL naming who and when), a silent node too, the edge
  windows count whole; a run folder written before the record is ERROR, never judged the old way;
- a twin with real fio (two local fio servers through fio's client): one node started with fio's startdelay after
  the other finished has a sum of the nodes' own rates that would pass the ceiling, and FAILs G3; the same run
  without the delay passes the same ceiling.
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Outcome
from fxprobe.gates import GATES, Evidence, load_config
from fxprobe.gates.config import LAB_FILE, parse_config
from fxprobe.gates.readback import ceiling_figure
from fxprobe.workload.common_span import Concurrent
from fxprobe.workload import common_span, fleet
from fxprobe.workload.run import FioServers
from gate_helpers import fake_run, fxprobe, produced_multi_node, runs_of
from spanref import independent_span

ROOT = Path(__file__).parent.parent
HOSTS8 = Path(__file__).parent / "fixtures" / "hosts8"
REHEARSAL = Path(__file__).parent / "fixtures" / "report" / "rehearsal" / "03-multi-node-read-back"
CEILING = "multi-node read-back vs NIC ceiling"


def g3_ceiling(folder: Path, config=None):
    verdict = GATES["g3"].evaluate(Evidence.from_paths([folder]), load_config(config or ROOT / "gates.toml"))
    return next(c for c in verdict.criteria if c.name == CEILING)


def labels(workload: dict) -> dict[str, str]:
    """fio's client names a node's logs after the address it dialed: the lab dials the N-th of --nodes at
    127.0.1.N (fxprobe.lab.forward.guest_address)."""
    return {f"127.0.1.{i}": node for i, node in enumerate(workload["nodes"], 1)}


def check_against_raw_logs(workload: dict, logs: list[Path]) -> dict:
    """Every repeat's recorded common span (each node's first and last window, the span, its bytes and aggregate,
    or none) equals an independent recomputation from the raw bw logs; so does the run's figure."""
    record = common_span.Concurrent.from_dict(workload["concurrent"])
    assert record.nodes == len(workload["nodes"]) and len(record.spans) == len(workload["repeats"])
    assert record.sum_of_rates_bps == workload["bandwidth_bytes"]["mean"]                 # beside it, not judged
    for index, (span, repeat) in enumerate(zip(record.spans, workload["repeats"]), start=1):
        own = [p for p in logs if f".r{index}_bw." in p.name]
        reference = independent_span(fleet.by_node(own, labels(workload)), span.log_msec)
        assert span.ran_ms == reference["ran_ms"] and sorted(span.ran_ms) == sorted(workload["nodes"])
        assert (span.windows, span.start_ms, span.end_ms, span.span_s, span.whole_s) == tuple(
            reference[k] for k in ("windows", "start_ms", "end_ms", "span_s", "whole_s"))
        assert span.bytes == pytest.approx(reference["bytes"], rel=1e-12)
        assert span.io_bytes == repeat["io_bytes"] and 0 < span.logged_bytes <= span.io_bytes   # since 43ff093
        if reference["aggregate_bps"] is None:
            assert span.aggregate_bps is None and "never all ran at once" in span.reason
        else:
            assert span.aggregate_bps == pytest.approx(reference["aggregate_bps"], rel=1e-12)
    aggregates = [s.aggregate_bps for s in record.spans]
    if None in aggregates:
        assert record.aggregate_bps is None and workload["fraction_of_ceiling"] is None
    else:
        mean = sum(aggregates) / len(aggregates)
        assert record.aggregate_bps == pytest.approx(mean, rel=1e-12)
        assert workload["fraction_of_ceiling"] == record.fraction_of_ceiling == pytest.approx(
            mean * 8 / workload["ceiling_bps"], rel=1e-12)
    return {"sum_MBps": record.sum_of_rates_bps / 1e6,
            "aggregate_MBps": record.aggregate_bps and record.aggregate_bps / 1e6,
            "spans_s": [s.span_s for s in record.spans], "whole_s": [s.whole_s for s in record.spans]}


def test_eight_lab_hosts_common_span_equals_an_independent_recomputation_from_their_bw_logs(tmp_path):
    """The captured 8-host rehearsal: fio's client started host1's job 6.1 s after host3's (the straggler view from
    the hist logs and fio's runtimes says so too), and each ran 6 s: the nodes never all ran at once. The nodes'
    own rates add up to 41.1 MB/s; G3 has no aggregate to judge and FAILs, under both gate files."""
    workload = json.loads((HOSTS8 / "results.json").read_text())["workload"]
    logs = []
    for packed in sorted(HOSTS8.glob("*_bw.*.gz")):
        logs.append(tmp_path / packed.name[:-3])
        with gzip.open(packed, "rb") as source, open(logs[-1], "wb") as target:
            shutil.copyfileobj(source, target)
    assert {p.name.split(".log.")[1] for p in logs} == set(labels(workload))           # every node's bw logs
    figures = check_against_raw_logs(workload, logs)
    assert figures["aggregate_MBps"] is None and figures["spans_s"] == [0.0]
    reason = workload["concurrent"]["reason"]
    assert reason == ("repeat 1: the nodes never all ran at once: host1's first window starts 6.25 s in, after "
                      "host2's last window ended (3.50 s in)")
    view = {s["node"]: s for s in workload["repeats"][0]["stragglers"]["spans"]}     # fio's runtimes say so too
    assert view["host1"]["started_ms"] > min(s["finished_ms"] for s in view.values())
    run = tmp_path / "03-multi-node-read-back"
    run.mkdir()
    shutil.copy(HOSTS8 / "results.json", run / "results.json")
    RunDir(run).finalize()                  # its manifest, as the run wrote one
    for config in (None, LAB_FILE):
        criterion = g3_ceiling(run, config)
        assert criterion.outcome is Outcome.FAIL and criterion.measured is None
        assert reason in criterion.detail and "the sum of the nodes' own rates, 0.33 Gb/s, is not judged" in \
            criterion.detail
    captured = json.loads((HOSTS8 / "g3-gates.json").read_text())       # as the rehearsal itself judged it
    assert [c["outcome"] for row in captured.values() for c in row["criteria"] if c["name"] == CEILING] == \
        ["fail", "fail"]


def test_the_rehearsal_s_two_hosts_common_span_equals_an_independent_recomputation():
    workload = json.loads((REHEARSAL / "results.json").read_text())["workload"]
    figures = check_against_raw_logs(workload, sorted((REHEARSAL / "raw").glob("*_bw.*.log.*")))
    assert figures["aggregate_MBps"] > 0 and 0 < figures["spans_s"][0] < figures["whole_s"][0]


# -- planted logs ------------------------------------------------------------------------------------------
def bw_log(folder: Path, name: str, samples: list[tuple[int, int]]) -> Path:
    """A fio bw log (epoch ms, KiB/s, read, bs, 0) as fio's client names it: PREFIX_bw.N.log.ADDRESS."""
    path = folder / name
    path.write_text("".join(f"{t}, {v}, 0, 4194304, 0\n" for t, v in samples))
    return path


def test_edge_windows_count_whole_and_an_idle_window_inside_counts_zero(tmp_path):
    t0 = 1_796_000_000_000
    a = bw_log(tmp_path, "p.r1_bw.1.log.10.0.0.1", [(t0 + 250 * k, 1000) for k in range(1, 9)])    # windows 0-7
    b = bw_log(tmp_path, "p.r1_bw.1.log.10.0.0.2", [(t0 + 250 * k + 30, 3000) for k in (3, 4, 6, 9, 10)])
    span = common_span.common_span({"a": [a], "b": [b]}, ["a", "b"], 250, "read")
    # the grid starts at a's first stamp (window 0); b's first stamp (t0 + 780) is in window 2, a's last in 7: the
    # span is windows 2..7, both edges whole; b logged nothing in windows 4, 6 and 7 (0 bytes there), so the
    # 6 windows hold a's 6 x 1000 and b's 3 x 3000 KiB/s
    assert (span.windows, span.span_s, span.whole_s, span.latest_start, span.earliest_end) == (6, 1.5, 2.5, "b", "a")
    assert span.start_ms == t0 + 500 and span.end_ms == t0 + 2000 and span.offset_s == 0.5
    assert span.bytes == (6 * 1000 + 3 * 3000) * 1024 * 0.25
    assert span.aggregate_bps == span.bytes / 1.5
    assert span.ran_ms == {"a": [t0, t0 + 2000], "b": [t0 + 500, t0 + 2500]}
    assert span == independent_span_record({"a": [a], "b": [b]}, span)
    assert "edge windows counted whole" in span.line()


def independent_span_record(logs, span):
    reference = independent_span(logs, 250)
    assert (span.windows, span.start_ms, span.end_ms) == (reference["windows"], reference["start_ms"], reference["end_ms"])
    assert span.bytes == reference["bytes"]
    return span


def test_staggered_nodes_have_no_common_span_and_g3_fails_naming_who_and_when(tmp_path):
    t0 = 1_796_000_000_000
    a = bw_log(tmp_path, "p.r1_bw.1.log.10.0.0.1", [(t0 + 250 * k, 16384) for k in range(1, 9)])
    b = bw_log(tmp_path, "p.r1_bw.1.log.10.0.0.2", [(t0 + 2250 + 250 * k, 16384) for k in range(1, 9)])
    span = common_span.common_span({"host1": [a], "host2": [b]}, ["host1", "host2"], 250, "read")
    assert span.aggregate_bps is None and span.windows == 0 and span.whole_s == 4.25
    assert span.reason == ("the nodes never all ran at once: host2's first window starts 2.25 s in, after host1's "
                           "last window ended (2.00 s in)")
    assert independent_span({"host1": [a], "host2": [b]}, 250)["aggregate_bps"] is None
    own_rates = 2 * 16384 * 1024                  # each node alone at 16 MiB/s: fio's total says 32 MiB/s
    together = common_span.concurrent([span], own_rates, 0.25e9)
    assert together.fraction_of_ceiling is None and "repeat 1: the nodes never all ran at once" in together.reason
    folder = fake_run(tmp_path, "run", {"workload": {"profile": "p", "direction": "read", "nodes": ["host1", "host2"],
                                                     "ceiling_bps": 0.25e9, "concurrent": together.to_dict()}})
    criterion = g3_ceiling(folder)
    assert criterion.outcome is Outcome.FAIL and criterion.measured is None
    assert "host2's first window starts 2.25 s in, after host1's last window ended" in criterion.detail
    assert "the sum of the nodes' own rates, 0.27 Gb/s, is not judged" in criterion.detail   # 107 % of 0.25 Gb/s
    # a node that logged no window at all: no span either
    silent = common_span.common_span({"host1": [a], "host2": []}, ["host1", "host2"], 250, "read")
    assert silent.aggregate_bps is None and silent.reason.startswith("host2 logged no read bandwidth window")


def test_a_run_folder_without_the_record_is_error_never_judged_as_the_sum(tmp_path):
    data = produced_multi_node(2, 0.95)
    assert g3_ceiling(fake_run(tmp_path, "run", data)).outcome is Outcome.PASS
    del data["workload"]["concurrent"]            # as an fxprobe before the common span wrote it
    criterion = g3_ceiling(fake_run(tmp_path, "run", data))
    assert criterion.outcome is Outcome.ERROR and "has no 'workload.concurrent'" in criterion.detail
    assert "judged the sum of the nodes' own rates" in criterion.detail
    data = produced_multi_node(2, 0.95)
    data["workload"]["concurrent"]["spans"][0].pop("ran_ms")
    criterion = g3_ceiling(fake_run(tmp_path, "run", data))
    assert criterion.outcome is Outcome.ERROR and "malformed" in criterion.detail and "ran_ms" in criterion.detail


def test_the_judged_figure_is_the_common_span_s_not_the_sum(tmp_path):
    data = produced_multi_node(8, 0.5, sum_of_rates_pct=120.0)      # the nodes' own rates add up to 120 %
    criterion = g3_ceiling(fake_run(tmp_path, "run", data))
    assert criterion.outcome is Outcome.FAIL and criterion.measured == 50.0
    assert criterion.detail.startswith("aggregate 50 Gb/s over the 4.75 s all 8 "
                                       "nodes ran at once (of 7.25 s; log windows from the latest node's first")
    assert "edge windows counted whole" in criterion.detail
    assert "the sum of the nodes' own rates, 120 Gb/s, is not judged" in criterion.detail


# -- the twin with real fio ----------------------------------------------------------------------------------
def _free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def read_back(tmp_path: Path, name: str, ceiling_gbps: str) -> Path:
    (tmp_path / name / "pool").mkdir(parents=True)
    code = fxprobe(tmp_path / name, "run", "qwen3-coder-480b-tp8-readback", "--target",
                   str(tmp_path / name / "pool"), "--nodes", "local:127.0.0.1,local:127.0.0.2", "--fio-port",
                   str(_free_port()), "--repeats", "1", "--runtime", "4.5", "--ramp", "0.5", "--size", "24M",
                   "--set", "threads=2", "--ceiling", ceiling_gbps)
    assert code in (0, 1)                   # 1: a one-repeat run of 4.5 s may not reach its own steady state
    (folder,) = runs_of(tmp_path / name, "run")
    return folder


def test_twin_real_fio_a_node_started_after_the_other_finished_fails_the_ceiling_the_concurrent_twin_passes(
        tmp_path, monkeypatch, capsys):
    ceiling_gbps = "0.4"                              # 90 % of it: 45 MB/s, far below two local fio readers
    together = read_back(tmp_path, "together", ceiling_gbps)
    original = FioServers.client_args

    def second_node_starts_late(self, job_path: str) -> list[str]:
        """The planted fault: the second node's measured job waits 8 s (fio's startdelay), 3 s past the first
        node's 0.5 s ramp + 4.5 s runtime. Room both ways for a server that starts its job late on a loaded machine
        (a CI-like run saw the two local servers' jobs start 2 s apart with nothing planted: a 1.5 s runtime left
        the 'together' twin without a common span)."""
        args = original(self, job_path)
        if re.search(r"\.r\d+\.fio$", job_path):
            late = Path(job_path).with_suffix(".late.fio")
            late.write_text(Path(job_path).read_text().replace("[global]\n", "[global]\nstartdelay=8\n", 1))
            args[-1] = str(late)
        return args
    monkeypatch.setattr(FioServers, "client_args", second_node_starts_late)
    staggered = read_back(tmp_path, "staggered", ceiling_gbps)
    monkeypatch.undo()
    figures = {}
    for name, folder in (("together", together), ("staggered", staggered)):
        workload = json.loads((folder / "results.json").read_text())["workload"]
        record = workload["concurrent"]
        own_rates_pct = record["sum_of_rates_bps"] * 8 / float(ceiling_gbps) / 1e9 * 100
        criterion = g3_ceiling(folder)
        if name == "together":     # two fio servers on this machine over a directory: not nodes sharing an array
            assert workload["node_kinds"] == {"127.0.0.1": "local", "127.0.0.2": "local"}
            assert criterion.outcome is Outcome.NOT_RUN, criterion.line()
            assert "nodes 127.0.0.1, 127.0.0.2 are this machine" in criterion.detail and "not a block device" in \
                criterion.detail
            criterion = ceiling_figure(criterion.name, Evidence.from_paths([folder]).runs[0], Concurrent.from_dict(
                json.loads((folder / "results.json").read_text())["workload"]["concurrent"]), 0.01,
                parse_config("[g3]\nnic_ceiling_gbps = 1000\n", "twin.toml"))   # the figure alone, < 100 % of it
        figures[name] = {"sum_of_rates_MBps": round(record["sum_of_rates_bps"] / 1e6, 1),
                         "sum_of_rates_pct": round(own_rates_pct, 1), "outcome": criterion.outcome.value,
                         "aggregate_MBps": record["aggregate_bps"] and round(record["aggregate_bps"] / 1e6, 1),
                         "span_s": record["spans"][0]["span_s"], "whole_s": record["spans"][0]["whole_s"]}
        assert own_rates_pct >= 90, figures          # the sum of the nodes' own rates would pass either way
        if name == "together":
            assert criterion.outcome is Outcome.PASS and "all 2 nodes ran at once" in criterion.detail, criterion.line()
            logs = sorted((folder / "raw").glob("*.r1_bw.*.log.*"))
            reference = independent_span(fleet.by_node(logs, {}), record["spans"][0]["log_msec"])
            assert record["aggregate_bps"] == pytest.approx(reference["aggregate_bps"], rel=1e-12)
        else:
            assert criterion.outcome is Outcome.FAIL and criterion.measured is None, criterion.line()
            assert "the nodes never all ran at once" in criterion.detail and "is not judged" in criterion.detail
            assert workload["fraction_of_ceiling"] is None
            first, second = sorted(record["spans"][0]["ran_ms"].values())
            assert second[0] >= first[1]                                       # one after the other
    with capsys.disabled():
        print(f"\ntwin (ceiling {ceiling_gbps} Gb/s): {json.dumps(figures)}")
