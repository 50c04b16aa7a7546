"""The live status (issue 16, Build 1 and 2 without the lab): the observer, its plain line, the figures
from fio's status documents and the Prometheus/textfile export."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("prometheus_client", reason="install the project again (pip install -e .): setup.cfg needs it")

from fxprobe.core.metrics import MetricsSink, families, parse_listen
from fxprobe.core.errors import BadInput
from fxprobe.core.status import Figures, PlainSink, Status, line
from fxprobe.soak.live import ObservedLog
from fxprobe.tools.fio_status import JsonStream
from fxprobe.tools import fio
from fxprobe.tools.fio_status import LiveFio, interval_figures, parse_status_totals

FIXTURES = Path(__file__).parent / "fixtures" / "fio"


class Clock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def status_docs() -> list[dict]:
    return JsonStream().feed((FIXTURES / "status-interval-jsonplus-3.33.json").read_bytes())


def test_status_line_shows_phase_percent_eta_finish_figures_and_events():
    clock = Clock()
    status = Status("soak", clock=clock)
    status.phase("load", planned_s=3600)
    clock.t += 900
    status.progress(900)
    status.interval(Figures("host1", clock.t, bw=1.5e9, iops=12000, p99_ns=2.5e6))
    status.interval(Figures("host2", clock.t, bw=0.5e9, iops=4000, p99_ns=800e3))
    status.event("fault", "link-down", "link 1 cut", open_=True)
    status.event("interruption", "stall", "no I/O for 6 s")
    text = line(status.snapshot(), clock.t)
    assert text.startswith("soak: load | 25% ETA 0:45:00 (ends ")
    assert "2,000.0 MB/s 16,000 IOPS p99 2.50 ms" in text          # totals; p99 is the worst node's
    assert "host1 1,500.0 MB/s p99 2.50 ms; host2 500.0 MB/s p99 800 us" in text
    assert "faults: link-down 1" in text and "interruptions: stall 1" in text and "now: link-down" in text
    status.ended("link-down")
    assert "now:" not in line(status.snapshot(), clock.t)


def test_plain_sink_prints_at_most_one_line_per_interval():
    clock, lines, times = Clock(), [], []
    write = lambda text: (lines.append(text), times.append(clock.t))
    status = Status("fault run", [PlainSink(write, 2.0, clock=clock)], clock=clock)
    for i in range(20):                           # 10 s of updates every 0.5 s, events among them
        status.interval(Figures("local", clock.t, 1e8, 100))
        if i == 7:
            status.event("fault", "drive-pull", "slot 3")
        clock.t += 0.5
    status.close()
    assert len(lines) == 6, lines                 # at 0, 2, 4, 6, 8 s and the last state at 10 s
    assert all(b - a >= 2.0 for a, b in zip(times, times[1:]))
    assert any("faults: drive-pull 1" in text for text in lines)


def test_a_failing_sink_is_dropped_and_the_load_goes_on():
    class Broken:
        def update(self, snapshot, event):
            raise RuntimeError("display gone")

        def close(self, snapshot):
            pass
    status = Status("soak", [Broken()])
    status.progress(1)
    status.progress(2)
    assert status.sinks == [] and status.sink_errors == ["Broken: RuntimeError: display gone"]


def test_interval_figures_from_real_fio_jsonplus_status_documents():
    docs = status_docs()
    totals = [parse_status_totals(doc)["local"] for doc in docs[:3]]
    assert totals[0].ios < totals[1].ios < totals[2].ios and totals[1].ts - totals[0].ts == pytest.approx(1, abs=0.2)
    figures = interval_figures(totals[0], totals[1])
    assert figures.bw == pytest.approx((totals[1].io_bytes - totals[0].io_bytes) / (totals[1].ts - totals[0].ts))
    assert figures.iops == pytest.approx(figures.bw / 4096)                 # bs=4k
    # the interval's histogram is the difference of the cumulative bins: exact, not an average
    diff = {k: v - totals[0].bins.get(k, 0) for k, v in totals[1].bins.items()}
    assert sum(diff.values()) == totals[1].ios - totals[0].ios
    assert figures.p99_ns == fio.percentile_from_bins({k: v for k, v in diff.items() if v}, 99.0)
    assert figures.p50_ns <= figures.p99_ns <= figures.p999_ns


def test_plain_json_gives_no_interval_percentiles_rather_than_cumulative_ones():
    doc = json.loads(json.dumps(status_docs()[1]))
    for job in doc["jobs"]:
        for direction in ("read", "write", "trim"):
            job[direction]["clat_ns"].pop("bins", None)
    before = parse_status_totals(status_docs()[0])["local"]
    figures = interval_figures(before, parse_status_totals(doc)["local"])
    assert figures.bw and figures.p99_ns is None


def test_client_server_rows_are_figures_per_node():
    doc = json.loads((FIXTURES / "client-server-no-all-clients-built.json").read_text())
    totals = parse_status_totals(doc)
    assert sorted(totals) == ["node1", "node2"]


def test_live_fio_feeds_a_status_from_the_second_document():
    status = Status("run", [PlainSink(lambda text: None, 0.1)])
    live = LiveFio(status)
    docs = status_docs()
    live.doc(docs[0])
    assert status.snapshot().nodes == {}
    live.doc(docs[1])
    live.doc({"no": "jobs"})                      # unreadable: ignored, the load goes on
    assert status.snapshot().nodes["local"].bw > 0


def test_soak_records_become_events_paths_md_and_temperatures():
    written = []

    class Log:
        def append(self, record):
            written.append(record)
            return record
    status = Status("soak", [PlainSink(lambda text: None, 0.1)])
    log = ObservedLog(Log(), status)
    log.append({"type": "interruption", "id": 4, "kind": "path-lost", "detail": "nvme1 is connecting"})
    assert status.snapshot().open_events == ("path-lost",)
    log.append({"type": "interruption-end", "id": 4, "detail": "nvme1 live again"})
    log.append({"type": "telemetry", "paths": {"nvme0": {"state": "live"}, "nvme1": {"state": "connecting"}},
                "md": {"md0": {"level": "raid6", "health": "[UU_U]", "degraded": True}}, "nvme_temp_c": {"nvme0": 41.0}})
    snap = status.snapshot()
    assert len(written) == 3 and snap.open_events == () and snap.interruptions == {"path-lost": 1}
    assert snap.paths == {"nvme0": "live", "nvme1": "connecting"} and snap.md["md0"]["state"] == "[UU_U]"
    assert snap.temps_c == {"nvme0": 41.0}


def exposition(sink: MetricsSink) -> str:
    from prometheus_client import generate_latest
    return generate_latest(sink.registry).decode()


def test_metrics_file_is_node_exporter_text_written_atomically(tmp_path):
    path = tmp_path / "fxprobe.prom"
    sink = MetricsSink(path=path)
    status = Status("soak", [sink])
    status.phase("load", planned_s=100)
    status.interval(Figures("host1", 0, bw=2e9, iops=5e5, p99_ns=1.5e6, p50_ns=2e5, p999_ns=3e6, errors=2,
                            ios=1000, lat_sum_ns=4e8))
    status.event("interruption", "path-lost", "nvme1 connecting")
    status.health(paths={"nvme0": "live", "nvme1": "connecting"}, md={"md0": {"state": "[UU_U]", "degraded": True}},
                  temps_c={"nvme0": 40.0})
    assert 'kind="path-lost"} 1.0' in path.read_text()        # an event rewrites the file at once
    status.close()                                            # figures: at most once a second, and at the end
    text = path.read_text()
    assert 'fxprobe_bandwidth_bytes_per_second{command="soak",node="host1"} 2e+09' in text
    assert 'fxprobe_latency_seconds{command="soak",node="host1",quantile="0.99"} 0.0015' in text
    assert 'fxprobe_latency_seconds_count{command="soak",node="host1"} 1000.0' in text
    assert 'fxprobe_interruptions_total{command="soak",kind="path-lost"} 1.0' in text
    assert 'fxprobe_interruptions_total{command="soak",kind="stall"} 0.0' in text   # from 0: increase() works
    assert 'fxprobe_io_errors_total{command="soak",node="host1"} 2.0' in text
    assert 'fxprobe_path_up{command="soak",path="nvme1",state="connecting"} 0.0' in text
    assert 'fxprobe_md_degraded{array="md0",command="soak",state="[UU_U]"} 1.0' in text
    assert 'fxprobe_drive_temperature_celsius{command="soak",drive="nvme0"} 40.0' in text
    assert list(tmp_path.iterdir()) == [path]                 # no temp file left behind
    assert 'fxprobe_up{command="soak"} 0.0' in text


def test_metrics_port_serves_the_latest_snapshot():
    sink = MetricsSink(listen=("127.0.0.1", 0))
    try:
        status = Status("fault run", [sink])
        status.event("fault", "link-down", "link 1")
        body = urllib.request.urlopen(f"http://127.0.0.1:{sink.port}/metrics", timeout=10).read().decode()
        assert 'fxprobe_faults_total{command="fault run",kind="link-down"} 1.0' in body
        assert 'fxprobe_phase_info{command="fault run",phase="starting"} 1.0' in body
    finally:
        sink.close(status.snapshot())


@pytest.mark.parametrize("text, expected", [("9464", ("0.0.0.0", 9464)), ("127.0.0.1:9464", ("127.0.0.1", 9464)),
                                            ("[::1]:9464", ("::1", 9464))])
def test_parse_listen(text, expected):
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["0", "70000", "x", "127.0.0.1:"])
def test_parse_listen_refuses_bad_ports(text):
    with pytest.raises(BadInput, match="--metrics-port"):
        parse_listen(text)


def test_every_family_has_a_help_text():
    from fxprobe.core.status import Snapshot
    assert all(f.documentation for f in families(Snapshot("soak", 0.0), 0.0))


def test_grafana_dashboard_reads_only_series_the_exporter_writes():
    import re
    from fxprobe.core.status import Snapshot
    dashboard = json.loads((Path(__file__).parent.parent / "examples" / "grafana" / "fxprobe-live.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {name for e in exprs for name in re.findall(r"\bfxprobe_[a-z0-9_]+", e)}
    snap = Snapshot("soak", 0.0, planned_s=10, nodes={"n": Figures("n", 0, 1, 1, 1, 1, 1)},
                    faults={"link-down": 1}, paths={"nvme0": "live"}, md={"md0": {"state": "x"}}, temps_c={"d": 1})
    written = {s.name for f in families(snap, 0.0) for s in f.samples}
    assert used and used <= written, used - written


def test_steps_give_percent_and_an_eta_from_their_pace():
    clock = Clock()
    status = Status("rehearse", clock=clock)
    status.phase("[G1] selftest", planned_s=10, done_s=0, unit="steps")
    assert "step 1/10 0% ETA -" in line(status.snapshot(), clock.t)        # no pace before a step ends
    clock.t += 60
    status.progress(2)
    status.phase("[G3] multi-node read-back", planned_s=10, done_s=2, unit="steps")
    assert "step 3/10 20% ETA 0:04:00" in line(status.snapshot(), clock.t)  # 30 s a step, 8 left


def soak_argv(tmp_path) -> list[str]:
    import sys
    target = tmp_path / "target"
    target.mkdir()
    return [sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp_path / "runs"), "soak", "small-file-dataset",
            "--duration", "4s", "--target", str(target), "--size", "8M", "--metrics-file", str(tmp_path / "fxprobe.prom")]


@pytest.mark.alone   # lines per second of wall time, and the soak's verdict (stalls, time covered) measured here
def test_a_real_soak_off_a_terminal_prints_one_line_per_interval_and_writes_the_metrics_file(tmp_path):
    import subprocess
    import time
    argv = soak_argv(tmp_path)
    began = time.time()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    wall = time.time() - began
    assert done.returncode == 0, done.stderr
    lines = [text for text in done.stderr.splitlines() if text.startswith("soak: ")]
    assert lines and len(lines) <= wall / 1.0 + 1, (lines, wall)            # interval: 1 s for a 4 s soak
    assert any("% ETA" in text and "MB/s" in text and "IOPS p99" in text for text in lines), lines
    text = (tmp_path / "fxprobe.prom").read_text()
    assert 'fxprobe_up{command="soak"} 0.0' in text and "fxprobe_bandwidth_bytes_per_second" in text


def test_a_real_soak_with_json_off_a_terminal_prints_no_line(tmp_path):
    import subprocess
    argv = soak_argv(tmp_path)
    with_json = subprocess.run(argv[:3] + ["--json"] + argv[3:], capture_output=True, text=True, timeout=120)
    assert json.loads(with_json.stdout)["command"] == "soak"               # stdout: the JSON alone
    assert "soak: " not in with_json.stderr                                # off a terminal, --json: no line


@pytest.mark.alone   # a timer thread's progress over 0.3 s of this machine's clock
def test_a_timed_phase_advances_with_the_clock_until_the_next_phase():
    import time
    status = Status("run", [PlainSink(lambda text: None, 0.01)])
    status.phase("starting", planned_s=10)
    status.timed("repeat 1/2", 0.0, 5.0, every_s=0.05)
    time.sleep(0.3)
    moving = status.snapshot().done_s
    assert 0.1 < moving <= 5.0
    status.phase("repeat 2/2", done_s=5.0)
    time.sleep(0.2)
    assert status.snapshot().done_s == 5.0                # the first phase's clock stopped
    status.close()
