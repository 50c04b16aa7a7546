"""Each exit code through the real CLI entry point, and no traceback in any output."""

import json
import os
import subprocess
import sys

import pytest


def fxprobe(tmp_path, *args, env=None):
    argv = [sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp_path / "runs"), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})
    assert "Traceback" not in done.stdout + done.stderr
    return done


def test_help_lists_the_groups(tmp_path):
    done = fxprobe(tmp_path, "--help")
    assert done.returncode == 0
    for command in ("doctor", "preflight", "netcheck"):
        assert command in done.stdout


def test_exit_0_doctor_json_reports_tools_and_missing_kernel_facilities(tmp_path):
    done = fxprobe(tmp_path, "--json", "doctor")
    assert done.returncode == 0
    caps = {c["name"]: c for c in json.loads(done.stdout)["capabilities"]}
    for tool in ("fio", "nvme-cli", "perftest", "iperf3"):
        assert caps[tool]["present"] and caps[tool]["version"][0].isdigit(), caps[tool]
    if not os.path.exists("/sys/kernel/config/nvmet"):   # this machine's kernel: no nvmet, null_blk, RDMA
        for facility in ("nvmet", "null_blk", "rdma"):
            assert not caps[facility]["present"] and caps[facility]["reason"] and caps[facility]["fix"]


def test_exit_2_usage_error_is_one_line(tmp_path):
    done = fxprobe(tmp_path, "doctor", "--no-such-option")
    assert done.returncode == 2 and "no-such-option" in done.stderr


def test_exit_2_bad_input_names_the_option(tmp_path):
    done = fxprobe(tmp_path, "netcheck", "--iface", "no-such-nic0")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "no-such-nic0" in done.stderr


def test_exit_3_missing_tool_names_the_package(tmp_path):
    bare = tmp_path / "bin"
    bare.mkdir()
    done = fxprobe(tmp_path, "netcheck", "--iface", "lo", "--peer", "127.0.0.1", env={"PATH": str(bare)})
    assert done.returncode == 3
    assert "ping" in done.stderr and "apt-get install iputils-ping" in done.stderr


def test_unknown_command_is_usage_error(tmp_path):
    assert fxprobe(tmp_path, "no-such-command").returncode == 2


def test_exit_1_verdict_failed(tmp_path):
    """The reference report's own claims: some headlines do not hold against its table."""
    done = fxprobe(tmp_path, "claims", "check", "examples/claims/reference-r2.toml")
    assert done.returncode == 1 and "28.9" in done.stdout


def test_exit_4_tool_error_names_the_command(tmp_path):
    """iperf3 against a port where nothing listens: the wrapped tool fails, one line names it."""
    done = fxprobe(tmp_path, "line-efficiency", "--transport", "tcp", "--peer", "127.0.0.1", "--server-running",
                   "--port", "5298", "--line-rate", "1", "--duration", "1")
    assert done.returncode == 4
    errors = [line for line in done.stderr.splitlines() if line.startswith("fxprobe:")]
    assert len(errors) == 1 and "iperf3" in errors[0] and "Connection refused" in errors[0]
