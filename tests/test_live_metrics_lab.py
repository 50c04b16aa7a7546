"""A real Prometheus scrapes a lab soak's --metrics-port through a planted link cut (issue 16, Must-show 1).

Prometheus (Debian's package, installed by scripts/setup) is started on a loopback port with a
temporary config and storage; ``fxprobe soak --metrics-port`` runs in host1, its port forwarded to
loopback here; link 2 of host1 is cut for 12 s mid-soak (when it carried the I/O, the soak makes up
the stalled time: the test then lasts longer). Prometheus's HTTP API must then hold the
bandwidth series and a path-lost interruption counter that went from 0 to at least 1 during the cut.
The soak's stderr is not a terminal: it must print at most one status line per interval.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from fxprobe.core.runner import Runner
from fxprobe.lab.forward import forwarded
from test_soak_lab import main_namespace, wait_for, when

pytestmark = pytest.mark.lab

HOST = "host1"
SOAK_S = 25
CUT_S = 12            # the dead path is seen after ~8 s (keep-alive), the counter goes up before the restore
GUEST_PORT = 9464


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def query(port: int, path: str, **params) -> dict:
    url = f"http://127.0.0.1:{port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    reply = json.loads(urllib.request.urlopen(url, timeout=10).read())
    assert reply["status"] == "success", reply
    return reply["data"]


@pytest.fixture
def prometheus(tmp_path):
    """A Prometheus on 127.0.0.1 scraping what the test writes to its file_sd targets file every second
    (started, not yet waited for: it gets ready while the soak starts in the guest)."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus is not installed (scripts/setup installs Debian's package)")
    targets = tmp_path / "targets.json"
    targets.write_text("[]")
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                      "  - job_name: fxprobe\n    file_sd_configs:\n"
                      f"      - files: ['{targets}']\n        refresh_interval: 1s\n")
    port = free_port()
    process = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                                f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                               stderr=open(tmp_path / "prometheus.log", "w"), start_new_session=True)
    def ready():
        try:
            return urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2).status == 200
        except OSError:
            return False
    try:
        yield port, targets, ready
    finally:
        process.terminate()          # its storage is a temp folder: no need to wait for a clean shutdown
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def test_prometheus_scrapes_a_lab_soak_and_sees_the_link_cut(lab, tmp_path, prometheus):
    prom_port, targets, ready = prometheus
    t0 = time.time()
    say = lambda text: print(f"[{time.time() - t0:5.1f} s] {text}")
    assert len(lab.links(HOST)) == 2, "the cut must be survivable: 2 links"
    device, serial = main_namespace(lab)
    lab.exec(HOST, ["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], timeout=60, check=True)   # 9p cache
    name = f"soak-metrics-{os.getpid()}"
    guest_dir, host_dir = f"/fxlab/runs/{name}", lab.folder / HOST / "runs" / name
    argv = lab.python("fxprobe.cli.main", "--run-dir", guest_dir, "soak", "small-file-dataset", "--duration",
                      f"{SOAK_S}s", "--target", device, "--allow-serial", serial, "--size", "8M",
                      "--sample", "5", "--metrics-port", str(GUEST_PORT))
    cut = restored = None
    with forwarded(lab, HOST, GUEST_PORT) as rule:
        targets.write_text(json.dumps([{"targets": [f"{rule.host_address}:{rule.host_port}"],
                                        "labels": {"lab": lab.name}}]))
        began = time.time()
        soak = Runner().start(argv, host=lab.guest(HOST), stdout_path=tmp_path / "soak.out",
                              stderr_path=tmp_path / "soak.err")
        try:
            records = host_dir / "soak.jsonl"
            wait_for(ready, 60, "prometheus to be ready", step=0.5)
            # the exporter listens from the command's start: the counter's 0 is scraped during the layout
            wait_for(lambda: query(prom_port, "query", query="fxprobe_interruptions_total")["result"], 120,
                     "prometheus to scrape the soak", step=0.5)
            wait_for(lambda: records.exists() and '"type":"segment"' in records.read_text(), 300,
                     "the soak load to start", step=0.5)
            say("soak load started; cutting link 2")
            cut = lab.link_down(2, HOST)
            try:
                time.sleep(CUT_S)
            finally:
                restored = lab.link_up(2, HOST)
            say("link restored")
            code = soak.wait(timeout=SOAK_S * 4 + 120)
            wall = time.time() - began
            say("soak ended")
        finally:
            if soak.alive():
                soak.stop()
            lab.wait_paths(HOST, lab.spec.subsystem_nqn, len(lab.links(HOST)), timeout=180)
            say("both paths live again")
    out, err = soak.output()
    assert "Traceback" not in err, err[-2000:]
    results = json.loads((host_dir / "results.json").read_text())
    lost = [i for i in results["interruptions"] if i["kind"] == "path-lost"]
    assert code == 1 and lost, (code, results["interruptions"])
    end = time.time()
    start = when(cut["at"]) - 30
    # the bandwidth series, as a dashboard reads it
    series = query(prom_port, "query_range", query='fxprobe_bandwidth_bytes_per_second{command="soak"}',
                   start=start, end=end, step=1)["result"]
    assert series and series[0]["metric"]["node"] == "local" and series[0]["metric"]["lab"] == lab.name
    values = [float(v) for _, v in series[0]["values"]]
    assert len(values) >= 2 and max(values) > 0, values     # a TCG guest at load 20 reports seldom
    # the interruption counter: 0 before the cut, >= 1 after it, and it went up between cut and restore + 15 s
    counter = query(prom_port, "query_range", query='fxprobe_interruptions_total{kind="path-lost"}',
                    start=start, end=end, step=1)["result"]
    points = [(float(t), float(v)) for t, v in counter[0]["values"]]
    before = [v for t, v in points if t < when(cut["at"])]
    after = [v for t, v in points if t > when(restored["at"]) + 1]
    assert before and max(before) == 0, points
    assert after and after[-1] >= 1, points
    rise = next(t for t, v in points if v >= 1)
    assert when(cut["at"]) <= rise <= when(restored["at"]) + 15, (rise, cut, restored)
    increase = query(prom_port, "query", query='increase(fxprobe_interruptions_total{kind="path-lost"}[5m])',
                     time=end)["result"]
    assert increase and float(increase[0]["value"][1]) > 0
    # off a terminal: at most one status line per interval (1 s for this soak), plus the last state
    lines = [line for line in err.splitlines() if line.startswith("soak: ")]
    assert lines and len(lines) <= wall / 1.0 + 1, (len(lines), wall)
    assert any("% ETA" in line and "MB/s" in line and "interruptions: path-lost 1" in line for line in lines), lines
