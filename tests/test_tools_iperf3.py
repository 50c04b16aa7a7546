"""iperf3 adapter: a real server and client on 127.0.0.1, and real 3.12 outputs as fixtures."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from fxprobe.core.errors import ParseError, ToolError
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.host.doctor import ToolProbe, probe_tool
from fxprobe.tools import iperf3

FIXTURES = Path(__file__).parent / "fixtures" / "iperf3"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_real_server_and_client(tmp_path):
    run = RunDir.create(tmp_path, "iperf3-test")
    runner = Runner(run)
    port = free_port()
    server = runner.start(iperf3.iperf3_server_argv(port=port, bind="127.0.0.1"), label="iperf3-server")
    try:
        result = iperf3.run_iperf3_client(runner, "127.0.0.1", port=port, duration=1, streams=2,
                                          interval=0.5, timeout=30, attempts=8)
        server.wait(timeout=15)
    finally:
        server.stop()
    assert result.ok and result.protocol == "TCP" and result.num_streams == 2
    assert result.bits_per_second > 1e8 and result.received_bytes > 0
    assert len(result.intervals) >= 2 and result.cpu_host_total is not None
    server_side = iperf3.parse_iperf3_json(server.output()[0], "iperf3-server")
    assert server_side.ok and server_side.received_bytes == result.received_bytes
    names = [c["name"] for c in run.commands()]
    assert any("iperf3-client" in n for n in names) and any("iperf3-server" in n for n in names)


def test_real_client_without_server_is_a_tool_error():
    with pytest.raises(ToolError, match="Connection refused"):
        iperf3.run_iperf3_client(Runner(), "127.0.0.1", port=free_port(), duration=1, timeout=30)
    result = iperf3.run_iperf3_client(Runner(), "127.0.0.1", port=free_port(), duration=1, timeout=30,
                                      check=False)
    assert not result.ok and "Connection refused" in result.error


def test_fixture_tcp_client():
    result = iperf3.parse_iperf3_json((FIXTURES / "tcp-client-3.12.json").read_text(), "tcp")
    assert result.version == "iperf 3.12" and result.retransmits == 21
    assert result.sent_bits_per_second == pytest.approx(24270311365.82235)
    assert [i.end for i in result.intervals][-1] == pytest.approx(1.0, abs=0.01)


def test_fixture_udp_and_server():
    udp = iperf3.parse_iperf3_json((FIXTURES / "udp-client-3.12.json").read_text(), "udp")
    assert udp.protocol == "UDP" and udp.bits_per_second == pytest.approx(100e6, rel=0.05)
    server = iperf3.parse_iperf3_json((FIXTURES / "tcp-server-3.12.json").read_text(), "srv")
    assert server.ok and server.received_bytes > 0


def test_fixture_error():
    result = iperf3.parse_iperf3_json((FIXTURES / "error-connection-refused-3.12.json").read_text(), "err")
    with pytest.raises(ToolError, match="err: iperf3 reported an error: unable to connect"):
        result.raise_for_error()


def test_missing_totals_names_the_field():
    with pytest.raises(ParseError) as info:
        iperf3.parse_iperf3_json('{"start": {}, "intervals": [], "end": {}}', "x.json")
    assert info.value.field == "end.sum_sent"


def test_the_installed_iperf3_version_is_read_by_its_own_pattern():
    cap = probe_tool(Runner(), ToolProbe("iperf3", iperf3.VERSION_ARGV, iperf3.VERSION_PATTERN))
    assert cap.present and cap.version.startswith("3."), cap


@pytest.mark.parametrize("received", [None, {"bytes": 0, "bits_per_second": 0.0}])
def test_tcp_without_the_receiver_s_total_is_a_parse_error_never_the_sender_s_rate(received):
    """A TCP result's goodput is what the receiver got: with end.sum_received missing or 0 the sender's 24 Gb/s
    (fixture tcp-client-3.12.json) counted as goodput; now it is a ParseError naming the field."""
    data = json.loads((FIXTURES / "tcp-client-3.12.json").read_text())
    assert iperf3.parse_iperf3_json(json.dumps(data), "tcp").bits_per_second == pytest.approx(24267787954.948524)
    del data["end"]["sum_received"]
    if received is not None:
        data["end"]["sum_received"] = received
    with pytest.raises(ParseError) as info:
        iperf3.parse_iperf3_json(json.dumps(data), "tcp")
    assert info.value.field == "end.sum_received" and "sender's rate is not goodput" in str(info.value)
