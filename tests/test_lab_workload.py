"""Workloads in the lab: a read profile on the NVMe-oF namespace from one host and from two hosts
at once through fio client/server, and nothing left behind (issue 6, Must-show 2 and 3).

fio's client runs here; each guest's ``fio --server`` is reached through a loopback port QEMU
forwards for the run (``fxprobe.lab.forward``). The namespace is shared with other lab tests,
so only a read profile runs, with ``--no-layout``: nothing is written to it.
"""

from __future__ import annotations

import json
import os
import threading
import time

import psutil
import pytest

from fxprobe.cli.main import main
from fxprobe.lab import forward
from fxprobe.tools import fio
from histref import hist_view_checked, independent_merge, numpy_percentile

pytestmark = pytest.mark.lab

TARGET = "/dev/nvme0n1"   # the native-multipath head of the array's namespace on every host
# scaled down for an emulated lab: 2 readers of 4 MiB chunks (16-token chunks), 3 s measured after 1 s ramp
SHORT = ["qwen25-32b-cold-restore", "--target", TARGET, "--no-layout", "--size", "64M",
         "--set", "threads=2", "--set", "chunk_tokens=16", "--runtime", "3", "--ramp", "1", "--repeats", "3"]


def run_json(capsys, tmp_path, lab, nodes: str, *extra: str) -> dict:
    capsys.readouterr()
    code = main(["--runs", str(tmp_path / "runs"), "--json", "run", *SHORT, "--lab", lab.name,
                 "--nodes", nodes, *extra])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code in (0, 1), err   # pass or fail on the repeat/steady criteria; never an error
    return json.loads(out)


def fio_servers_in(lab, guest: str) -> list[str]:
    script = 'for p in /proc/[0-9]*; do tr "\\0" " " < "$p/cmdline" 2>/dev/null; echo; done'
    out = lab.exec(guest, ["sh", "-c", script], timeout=60, check=True).stdout
    return [line for line in out.splitlines() if "fio --server" in line]


def qemu_listening(lab, guests: list[str]) -> set[tuple[str, int]]:
    """(address, port) of the TCP sockets the guests' own QEMU processes listen on: the check is about
    this lab's forwards, not about a port number another process on this machine may have bound since
    (the lab beside, or anything else, can be handed the same port on another address)."""
    found = set()
    for guest in guests:
        qemu = psutil.Process(lab.state.guests[lab.guest_name(guest)].pid)
        found |= {(c.laddr.ip, c.laddr.port) for c in qemu.net_connections(kind="tcp4")
                  if c.status == psutil.CONN_LISTEN}
    return found


def assert_nothing_left(lab, guests: list[str], endpoints: list[tuple[str, int]]) -> None:
    for guest in guests:
        assert fio_servers_in(lab, guest) == [], guest
        rules = forward.usernet_forwards(lab, guest)
        assert [r for r in rules if r[2] != 22] == [], rules   # only the boot-time SSH rule remains
    listening = qemu_listening(lab, guests)
    # the twin: the boot-time SSH forward is still seen listening, so the check can see a forward
    assert {("127.0.0.1", lab.state.guests[lab.guest_name(g)].ssh_port) for g in guests} <= listening, listening
    assert not set(endpoints) & listening, listening


def fio_commands(tmp_path) -> tuple[list[list[str]], list[dict]]:
    """(fio client argv lists, background server records) of the one run under tmp_path/runs."""
    (log,) = (tmp_path / "runs").glob("*-run/commands.jsonl")
    commands = [json.loads(line) for line in log.read_text().splitlines()]
    clients = [c["argv"] for c in commands if c["argv"][:1] == ["fio"] and any("--client=" in a for a in c["argv"])]
    return clients, [c for c in commands if c["background"]]


def client_endpoints(clients: list[list[str]]) -> list[tuple[str, int]]:
    """(address, port) each fio client dialed: ``--client=ip:127.0.1.1,46433``."""
    dialed = {tuple(a.removeprefix("--client=ip:").rsplit(",", 1)) for argv in clients for a in argv
              if a.startswith("--client=ip:")}
    return sorted((address, int(port)) for address, port in dialed)


def check_statistics(wl: dict) -> None:
    assert len(wl["repeats"]) == 3
    bw = wl["bandwidth_bytes"]
    assert bw["mean"] > 0 and bw["cv_pct"] >= 0 and len(bw["values"]) == 3
    assert all(r["steady"]["detail"] for r in wl["repeats"])
    assert isinstance(wl["steady_attained"], int) and 0 <= wl["steady_attained"] <= 3
    p = wl["percentiles_ns"]
    assert 0 < p["p50"] <= p["p99"] <= p["p99.9"]
    assert wl["latency_samples"] > 0
    # p99 is a bin value of fio's json+ histogram (merged bins, never an average of percentiles)
    assert fio.bin_value_ns(fio.bin_index_ns(p["p99"])) == p["p99"]
    assert wl["layout"].startswith("none (reads the data already on the device")


def check_array_seen(lab, run) -> None:
    """Each node recorded the array it read as its kernel names it (the namespace's NVMe subsystem: the export's NQN,
    the array's ports on that host's links), and G3 ties the read-back to a gates file naming those ports - and
    fails it for a file naming another port (the planted twin)."""
    from fxprobe.gates import GATES, Evidence
    from fxprobe.gates.config import parse_config
    from fxprobe.gates.measured_array import NAME
    seen = {e["node"]: e for e in json.loads((run / "results.json").read_text())["array_seen"]}
    assert sorted(seen) == ["host1", "host2"], seen
    for host, entry in seen.items():
        assert entry["nqn"] == lab.main_export.nqn and entry["transport"] == "tcp" and entry["serial"], entry
        assert entry["addresses"] == sorted(link.array_ip for link in lab.links(host)), entry
    ports = sorted({link.array_ip for link in lab.links()})
    for named, outcome in ((ports, "pass"), (ports[1:] + ["10.99.0.1"], "fail")):
        config = parse_config(f"[array]\naddresses = {json.dumps(named)}\n", "gates.toml")
        verdict = GATES["g3"].evaluate(Evidence.from_paths([run]), config)
        (row,) = [c for c in verdict.criteria if c.name.startswith(NAME)]
        assert row.outcome.value == outcome, row.line()
    print(f"array seen: {lab.main_export.nqn} at {', '.join(ports)}")


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_read_profile_on_the_namespace_from_host1(lab, capsys, tmp_path):
    data = run_json(capsys, tmp_path, lab, "host1")
    wl = data["workload"]
    check_statistics(wl)
    assert wl["nodes"] == ["host1"] and wl["target"] == TARGET
    assert wl["target_check"]["safe"]
    clients, servers = fio_commands(tmp_path)
    assert len(servers) == 1 and "--server=ip:0.0.0.0," in " ".join(servers[0]["argv"])
    assert_nothing_left(lab, ["host1"], client_endpoints(clients))
    print(f"host1: {wl['bandwidth_bytes']['mean'] / 1e6:.1f} MB/s, CV {wl['bandwidth_bytes']['cv_pct']:.1f} %, "
          f"p99 {wl['percentiles_ns']['p99'] / 1e6:.1f} ms, steady {wl['steady_attained']}/3")


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_two_hosts_at_once_through_fio_client_server(lab, capsys, tmp_path):
    data = run_json(capsys, tmp_path, lab, "host1,host2", "--ceiling", "100")
    wl = data["workload"]
    check_statistics(wl)
    assert wl["nodes"] == ["host1", "host2"]
    per_node = wl["per_node_bw_bytes"]
    assert set(per_node) == {"host1", "host2"} and all(v > 0 for v in per_node.values())
    assert sum(per_node.values()) == pytest.approx(wl["bandwidth_bytes"]["mean"], rel=1e-6)
    assert wl["slowest_node"] == min(per_node, key=per_node.get)
    together = wl["concurrent"]       # G3's figure: what both guests moved while both ran, not their rates added
    assert together["sum_of_rates_bps"] == wl["bandwidth_bytes"]["mean"] and len(together["spans"]) == 3
    if together["aggregate_bps"] is None:
        # fio's client starts the guests' jobs one after the other: beside another lab a repeat's 3 s jobs did not
        # overlap (a CI-like run). Then there is no figure, and the record says which repeat and why
        assert wl["fraction_of_ceiling"] is None and together["fraction_of_ceiling"] is None, together
        assert together["reason"].startswith("repeat ") and "never all ran at once" in together["reason"], together
        print(f"no common span: {together['reason']}")
    else:
        assert wl["fraction_of_ceiling"] == together["fraction_of_ceiling"] == pytest.approx(
            together["aggregate_bps"] * 8 / 100e9)
    for repeat in wl["repeats"]:
        assert set(repeat["per_node_bw"]) == {"host1", "host2"}
        assert repeat["series"]   # bw logs came back from both servers
        view = repeat["stragglers"]       # when the first and the last node finished, the aggregate until each
        assert sorted(s["node"] for s in view["spans"]) == ["host1", "host2"]
        assert 0 < view["first_finished_s"] <= view["last_finished_s"] and view["first_aggregate_bps"] > 0
        assert sum(s["bytes"] for s in view["spans"]) == repeat["io_bytes"]
        assert all(0 <= s["logged_ios"] <= s["ios"] for s in view["spans"])     # hist windows never overcount
    assert sorted(wl["node_figures"]) == ["host1", "host2"]
    assert all(f["samples"] > 0 and f["p50_ns"] <= f["p99_ns"] for f in wl["node_figures"].values())
    # the merged p50/p99 of the raw clat_hist logs both guests sent back equal an independent merge of them
    (run,) = (tmp_path / "runs").glob("*-run")
    logs = sorted((run / "raw").glob("*_clat_hist.*.log.127.0.1.*"))
    hist = wl["hist_logs"]
    assert hist["nodes"] == ["host1", "host2"] and hist["files"] == len(logs) == 2 * 2 * 3
    if hist_view_checked(hist, logs, wl["latency_samples"]):
        reference = independent_merge(logs, 3, fio.hist_bin_values_ns(fio.PLAT_NR, 0), fio_client=True)[0]
        assert 0 < hist["samples"] == sum(reference.values()) <= wl["latency_samples"]
        assert [hist["percentiles_ns"][f"p{p}"] for p in (50, 99)] == [numpy_percentile(reference, p) for p in (50, 99)]
    check_array_seen(lab, run)
    # one fio client here dialed both guests through forwarded loopback ports
    clients, servers = fio_commands(tmp_path)
    assert clients and all(sum(a.startswith("--client=ip:127.0.1.") for a in argv) == 2 for argv in clients)
    assert len(servers) == 2 and all("--server=ip:0.0.0.0," in " ".join(c["argv"]) for c in servers)
    assert_nothing_left(lab, ["host1", "host2"], client_endpoints(clients))
    print("per node: " + ", ".join(f"{k} {v / 1e6:.1f} MB/s" for k, v in per_node.items())
          + f"; rates added {wl['bandwidth_bytes']['mean'] / 1e6:.1f} MB/s, CV {wl['bandwidth_bytes']['cv_pct']:.1f} %, "
          + (f"both at once {together['aggregate_bps'] / 1e6:.1f} MB/s over "
             f"{', '.join(str(s['span_s']) for s in together['spans'])} s, {wl['fraction_of_ceiling'] * 100:.3f} % of "
             "100 Gb/s" if together["aggregate_bps"] is not None else "never both at once")
          + f", p99 {wl['percentiles_ns']['p99'] / 1e6:.1f} ms")


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_forward_rule_is_added_and_removed(lab):
    with forward.forwarded(lab, "host1", 18765) as rule:
        assert (rule.host_address, rule.host_port, 18765) in forward.usernet_forwards(lab, "host1")
    assert (rule.host_address, rule.host_port, 18765) not in forward.usernet_forwards(lab, "host1")
    forward.unforward(lab, rule)   # already gone: not an error


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_refused_run_removes_its_forwards(lab, capsys, tmp_path):
    """A run that stops with an error (no such device on the guest) still removes its forwards."""
    before = {g: forward.usernet_forwards(lab, g) for g in ("host1", "host2")}
    capsys.readouterr()
    code = main(["--runs", str(tmp_path / "runs"), "run", "qwen25-32b-cold-restore", "--target", "/dev/nvme9n9",
                 "--no-layout", "--size", "64M", "--lab", lab.name, "--nodes", "host1,host2"])
    out, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in out + err
    assert len([l for l in err.splitlines() if l.startswith("fxprobe:")]) == 1, err
    assert "/dev/nvme9n9" in err
    assert {g: forward.usernet_forwards(lab, g) for g in ("host1", "host2")} == before


def kill_client_when_measuring(marker: str, stop: threading.Event, after_s: float = 3) -> None:
    """Kill the fio client this run started (its job file name, a child of this process: another
    pytest on the machine may run the same profile), a few seconds into a repeat."""
    while not stop.is_set():
        for proc in psutil.process_iter(["name", "cmdline", "ppid"]):
            if proc.info["name"] == "fio" and proc.info["ppid"] == os.getpid() \
                    and any(marker in part for part in proc.info["cmdline"] or []):
                time.sleep(after_s)
                try:
                    proc.kill()
                except psutil.NoSuchProcess:
                    pass
                return
        time.sleep(0.1)


@pytest.mark.lab_parallel   # judges no time or throughput: runs beside another lab's tests
def test_fio_client_killed_mid_run_leaves_nothing_behind(lab, capsys, tmp_path):
    """fio killed mid-run: one clear line, exit 4, the guests' servers stopped and the forwards removed."""
    stop = threading.Event()
    killer = threading.Thread(target=kill_client_when_measuring, args=("qwen25-32b-cold-restore.r1.fio", stop))
    killer.start()
    try:
        capsys.readouterr()
        code = main(["--runs", str(tmp_path / "runs"), "run", *SHORT[:-6], "--runtime", "20", "--ramp", "1",
                     "--repeats", "1", "--lab", lab.name, "--nodes", "host1,host2"])
    finally:
        stop.set()
        killer.join()
    out, err = capsys.readouterr()
    assert code == 4 and "Traceback" not in out + err, err
    assert len([l for l in err.splitlines() if l.startswith("fxprobe:")]) == 1, err
    print([l for l in err.splitlines() if l.startswith("fxprobe:")][0])
    clients, servers = fio_commands(tmp_path)
    assert clients and len(servers) == 2
    assert_nothing_left(lab, ["host1", "host2"], client_endpoints(clients))
