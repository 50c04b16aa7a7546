"""Issue 5 in the lab: line efficiency over soft-RoCE on a throttled link (RoCEv2/MTU readiness: the both-ends
test in tests/test_lab_netcheck_both_ends.py)."""

from __future__ import annotations

import json

import pytest

from fxprobe.core.rundir import RunDir
from fxprobe.tools import dpkg


pytestmark = pytest.mark.lab


def _line_efficiency(lab, tmp_path, label: str, threshold: float):
    """Run from this machine: client on host1, ib_read_bw server started on the array, both over SSH."""
    from fxprobe.cli.main import main
    link = lab.link(1, "host1")
    run_dir = tmp_path / label
    code = main(["--run-dir", str(run_dir), "line-efficiency", "--lab", lab.name, "--client-node", "host1",
                 "--server-node", "array", "--peer", link.array_ip, "--duration", "6", "--qps", "1",
                 "--outs", "2", "--size", "64K", "--threshold", str(threshold)])
    return code, json.loads((run_dir / "results.json").read_text())


def test_line_efficiency_tracks_a_throttled_link_over_soft_roce(lab, tmp_path):
    """The host NIC advertises 20 Mb/s; tbf at 20 Mb/s is the 'wire', 10 Mb/s the throttled link.

    tbf drops what exceeds its queue (100 ms) and RoCE is built for a lossless fabric, so the
    reads in flight are kept below the queue (1 QP x 2 outstanding x 64 KiB = 128 KiB)."""
    link = lab.link(1, "host1")
    lab.exec("host1", ["ethtool", "-s", link.host_nic, "speed", "20", "duplex", "full"], check=True)
    try:
        lab.throttle(1, "20mbit", "host1")
        full_code, full = _line_efficiency(lab, tmp_path, "full", 0.83)
        lab.throttle(1, "10mbit", "host1")
        # the fail twin of the origins: host1 runs a copy first on its PATH (its overlay; the same bytes)
        lab.exec("host1", ["cp", "/usr/bin/ib_read_bw", "/usr/local/bin/ib_read_bw"], check=True)
        half_code, half = _line_efficiency(lab, tmp_path, "half", 0.83)
    finally:
        lab.exec("host1", ["rm", "-f", "/usr/local/bin/ib_read_bw"])
        lab.throttle(1, "off", "host1")
        lab.exec("host1", ["ethtool", "-s", link.host_nic, "speed", "100000", "duplex", "full"])
    # a measurement that did not finish: its reason, and what both kernels said (a program ended by a signal)
    assert "summary" in full and "summary" in half, (full.get("reason"), half.get("reason"),
                                                     *(lab.exec(g, ["dmesg"]).stdout[-2000:] for g in ("array", "host1")))
    ceiling = full["summary"]["payload_ceiling_bps"] / full["line_rate_bps"]   # RoCEv2 payload share at the MTU
    assert full["line_rate_bps"] == 20e6 and full["line_rate_source"].endswith("/speed")
    assert full["transport"] == "rdma" and full["mtu"] == 4096
    assert full_code == 0 and full["summary"]["line_efficiency"] == pytest.approx(ceiling, abs=0.06)
    assert half_code == 1 and half["summary"]["line_efficiency"] == pytest.approx(0.5 * ceiling, abs=0.1)
    # where the program that measured on each node came from, recorded before it ran (origins.jsonl)
    full_origins = {o["host"]: o for o in RunDir(tmp_path / "full").origins()}
    assert {h: (o["program"], o["path"], o["state"], o["package"]) for h, o in full_origins.items()} == {
        h: ("ib_read_bw", "/usr/bin/ib_read_bw", dpkg.PACKAGED, "perftest") for h in ("host1", "array")}
    half_origins = {o["host"]: o for o in RunDir(tmp_path / "half").origins()}
    assert (half_origins["host1"]["path"], half_origins["host1"]["state"]) == ("/usr/local/bin/ib_read_bw",
                                                                               dpkg.UNPACKAGED)
    assert half_origins["host1"]["sha256"] == full_origins["host1"]["sha256"]    # same bytes: only a trusted list
    assert half_origins["array"]["state"] == dpkg.PACKAGED                     # (gates.toml [provenance]) admits it
    # no ib_read_bw left on the peer
    assert lab.exec("array", ["pgrep", "-f", "[i]b_read_bw"]).returncode == 1
