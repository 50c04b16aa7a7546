"""Run-time port forwards into lab guests and fio nodes with separate listen/dial endpoints (no lab needed)."""

from __future__ import annotations

import pytest

from fxprobe.core.errors import BadInput
from fxprobe.core.hosts import LocalHost, SshHost
from fxprobe.lab import forward
from fxprobe.core.runner import Runner
from fxprobe.workload.plan import plan_run
from fxprobe.workload.run import FioServers, Node

INFO_USERNET = """Hub -1 (mgmt):
  Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ
  TCP[HOST_FORWARD]  13       127.0.1.1 33545       10.0.2.15  8765     0     0
  TCP[HOST_FORWARD]   8       127.0.0.1 39437       10.0.2.15    22     0     0
  TCP[ESTABLISHED]   25       127.0.0.1 39437       10.0.2.15    22     0     0
"""


def test_parse_info_usernet_lists_host_forward_rules():
    assert forward.parse_usernet_forwards(INFO_USERNET) == [("127.0.1.1", 33545, 8765), ("127.0.0.1", 39437, 22)]
    assert forward.parse_usernet_forwards("") == []


def test_forward_rule_text_and_loopback_only():
    rule = forward.Forward("host1", 8765, "127.0.1.2", 40000)
    assert rule.rule == "tcp:127.0.1.2:40000-:8765"
    with pytest.raises(BadInput, match="only loopback"):
        forward._loopback("10.0.2.2")
    with pytest.raises(BadInput, match="IPv4 loopback"):
        forward._loopback("localhost")
    assert forward.guest_address(1) == "127.0.1.1" and forward.guest_address(2) == "127.0.1.2"


def test_node_listens_inside_and_is_dialed_outside():
    host = SshHost("host1", "127.0.0.1", 2222)
    node = Node(host, "127.0.1.1", 40000, listen_address="0.0.0.0", listen_port=8765, label="host1")
    assert node.listen == "ip:0.0.0.0,8765" and node.name == "host1"
    assert node.to_dict()["listen"] == "ip:0.0.0.0,8765"
    plain = Node(LocalHost(), "127.0.0.2", 9000)
    assert plain.listen == "ip:127.0.0.2,9000" and plain.name == "127.0.0.2" and "listen" not in plain.to_dict()


def test_nodes_sharing_a_dial_address_are_refused():
    """fio's client names returned logs after the dialed address: two nodes on one address would collide."""
    nodes = [Node(LocalHost(), "127.0.0.1", 9001), Node(LocalHost(), "127.0.0.1", 9002)]
    with pytest.raises(BadInput, match="its own address"):
        FioServers(Runner(None), nodes, 60)


def test_no_layout_is_for_block_devices_only(tmp_path):
    with pytest.raises(BadInput, match="--no-layout applies to a block device"):
        plan_run("qwen25-32b-cold-restore", str(tmp_path), layout=False, max_bytes=16 << 20)
