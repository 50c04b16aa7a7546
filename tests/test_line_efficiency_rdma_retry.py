"""A client that fails against fxprobe's own ib_read_bw server gets a new server for its next try: a server that
rejected or lost a connect does not take the next one (a loaded soft-RoCE lab: RDMA_CM_EVENT_REJECTED, a client
that hung, then "Unable to init the socket connection" three times against the same server). No RDMA here:
stand-ins on PATH print the lab's captured ib_read_bw output (the real tool runs in tests/test_lab_net.py)."""

import os
import stat
from pathlib import Path

import pytest

from fxprobe.core.errors import ToolError
from fxprobe.core.hosts import LOCAL
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.network import line_efficiency
from fxprobe.network.line_efficiency import Settings

FIXTURES = Path(__file__).parent / "fixtures" / "lab"


@pytest.fixture(autouse=True)
def no_wait(monkeypatch):
    """The attempts follow each other at once here (the lab waits RETRY_WAIT_S x the attempt's number)."""
    monkeypatch.setattr(line_efficiency, "RETRY_WAIT_S", 0)


def stand_ins(folder: Path, client_failures: int) -> Path:
    """ib_read_bw: a server (no address given) says it waits and sleeps; a client fails ``client_failures``
    times (as the lab's did), then prints the captured report. Each server start is counted."""
    folder.mkdir()
    script = folder / "ib_read_bw"
    script.write_text(f"""#!/bin/sh
last=""; for a in "$@"; do last="$a"; done
case "$last" in
  10.*) n=$(cat {folder}/clients 2>/dev/null || echo 0); echo $((n + 1)) > {folder}/clients
        if [ "$n" -lt {client_failures} ]; then echo " Unable to init the socket connection" >&2; exit 1; fi
        cat {FIXTURES / 'perftest-ib_read_bw-gbits.txt'} ;;
  *) echo x >> {folder}/servers; echo "* Waiting for client to connect... *"; exec sleep 30 ;;
esac
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


@pytest.mark.parametrize("failures, servers", [(0, 1), (2, 3)])
def test_each_client_attempt_gets_a_server_of_its_own(tmp_path, monkeypatch, failures, servers):
    folder = stand_ins(tmp_path / "bin", failures)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    runner = Runner(RunDir.start("line-efficiency", [], path=tmp_path / "run"))
    measurement, _ = line_efficiency.measure_rdma(runner, Settings(peer="10.1.1.1", duration=1), 65536, 1, 1,
                                                  LOCAL, LOCAL)
    assert measurement.bits_per_second > 0
    assert len((folder / "servers").read_text().split()) == servers
    assert (folder / "clients").read_text().strip() == str(failures + 1)


def test_three_failed_attempts_raise_the_last_failure(tmp_path, monkeypatch):
    folder = stand_ins(tmp_path / "bin", 9)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    runner = Runner(RunDir.start("line-efficiency", [], path=tmp_path / "run"))
    with pytest.raises(ToolError, match="Unable to init the socket connection"):
        line_efficiency.measure_rdma(runner, Settings(peer="10.1.1.1", duration=1), 65536, 1, 1, LOCAL, LOCAL)
    assert len((folder / "servers").read_text().split()) == line_efficiency.RDMA_SERVER_ATTEMPTS
