"""line-efficiency: arithmetic, bad input, and real TCP measurements over a throttled veth link."""

import json
import subprocess
import sys
import time

import pytest

from fxprobe.network import roce
from fxprobe.cli.main import main
from netns import VethPair, require_netns


def test_100gbe_arithmetic():
    assert roce.line_efficiency(83e9, 100e9) == pytest.approx(0.83)
    assert roce.protocol_efficiency(83e9, 100e9, 4096) == pytest.approx(0.8466, abs=5e-4)


def test_server_location_is_required(tmp_path, capsys):
    assert main(["--run-dir", str(tmp_path / "r"), "line-efficiency", "--peer", "10.0.0.1"]) == 2
    assert "--server-node" in capsys.readouterr().err


def test_no_rdma_device_is_not_run_and_offers_tcp(tmp_path, capsys):
    import os
    if os.path.isdir("/sys/class/infiniband") and os.listdir("/sys/class/infiniband"):
        pytest.skip("this machine has an RDMA device")
    assert main(["--run-dir", str(tmp_path / "r"), "line-efficiency", "--peer", "127.0.0.1", "--server-running"]) == 3
    assert "--transport tcp" in capsys.readouterr().err


def _measure(pair: VethPair, tmp_path, rate_mbit: int, threshold: float):
    tc = ["ip", "netns", "exec", pair.ns_b, "tc", "qdisc", "replace", "dev", pair.if_b, "root", "tbf",
          "rate", f"{rate_mbit}mbit", "burst", "64kb", "latency", "50ms"]
    subprocess.run(tc, check=True)
    server = subprocess.Popen(["ip", "netns", "exec", pair.ns_b, "iperf3", "-s", "-1", "-p", "5299"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        argv = pair.in_a([sys.executable, "-m", "fxprobe.cli.main", "--run-dir", str(tmp_path / f"r{rate_mbit}"),
                          "--json", "line-efficiency", "--peer", pair.addr_b, "--server-running", "--transport", "tcp",
                          "--port", "5299", "--duration", "3", "--streams", "2", "--line-rate", "0.1",
                          "--threshold", str(threshold)])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    finally:
        server.kill()
        server.wait()
    return done.returncode, json.loads(done.stdout), done.stderr


@pytest.mark.alone   # judges the TCP throughput measured here against the throttled rate
def test_throttled_tcp_link_reports_the_throttled_fraction(tmp_path):
    """Receiver side throttled: 100 Mb/s 'line' passes 0.83; the same link at 50 Mb/s fails near 0.5."""
    require_netns()
    pair = VethPair(1500, 1500)
    try:
        full_code, full, err_full = _measure(pair, tmp_path, 100, 0.83)
        half_code, half, err_half = _measure(pair, tmp_path, 50, 0.83)
    finally:
        pair.close()
    full_eff = full["summary"]["line_efficiency"]
    half_eff = half["summary"]["line_efficiency"]
    assert full["label"].startswith("TCP") and "TCP" in full["verdict"]["name"]
    # TCP goodput on a 1500-byte MTU is at most (1500-52)/(1500+38) = 0.941 of the wire
    assert 0.85 <= full_eff <= 0.97 and full_code == 0, err_full
    assert 0.44 <= half_eff <= 0.49 and half_code == 1, err_half
