"""G2's stress test: RDMA READ bandwidth (ib_read_bw) against the nominal line rate.

line efficiency     = measured payload bit/s / nominal link bit/s (the gate's 83 %)
protocol efficiency = measured payload bit/s / RoCEv2 payload ceiling at the active MTU

The server runs on the peer through the same remote path as every other node
command (or the user says it is already running); it is bounded by ``timeout``
and killed on the peer afterwards, so no stray server stays behind.
Without an RDMA device the measurement is not run (exit 3); ``transport='tcp'``
measures with iperf3 instead and every output says TCP.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, asdict, field

from fxprobe.network import roce
from fxprobe.core.errors import BadInput, NotRunnable, ParseError, ToolError
from fxprobe.core.hosts import LOCAL, Host
from fxprobe.core.runner import Background, Runner
from fxprobe.tools import dpkg, iperf3, netdev, perftest
from fxprobe.core.verdict import Criterion, Outcome, Verdict

DEFAULT_SIZE = 1 << 20        # large messages reach line rate on 100 GbE (perftest issue #252)
DEFAULT_QPS = 4
DEFAULT_DURATION = 10
DEFAULT_PORT = 18515
SERVER_GRACE = 60             # seconds the peer's server may outlive the planned run
RDMA_SERVER_ATTEMPTS = 3      # ib_read_bw client runs, each against a server of its own (fxprobe starts the server)
RETRY_WAIT_S = 3              # before the second attempt 3 s, before the third 6 s


def tcp_payload_efficiency(mtu: int) -> float:
    """TCP/IPv4 goodput share of the wire with timestamps: (MTU - 52) / (MTU + 38)."""
    return (mtu - 52) / (mtu + 38)


@dataclass(frozen=True)
class Settings:
    peer: str
    transport: str = "rdma"
    size: int = DEFAULT_SIZE
    qps: int = DEFAULT_QPS
    duration: int = DEFAULT_DURATION
    repeats: int = 1
    threshold: float = 0.83
    line_rate_bps: float | None = None
    port: int = DEFAULT_PORT
    device: str | None = None
    streams: int = 8
    outstanding: int | None = None    # RDMA READs in flight per QP (perftest -o); None: the device maximum

    def validate(self) -> "Settings":
        if self.transport not in ("rdma", "tcp"):
            raise BadInput(f"--transport {self.transport!r}: use rdma or tcp")
        for name, value, low in (("--size", self.size, 2), ("--qps", self.qps, 1), ("--duration", self.duration, 1),
                                 ("--repeat", self.repeats, 1), ("--streams", self.streams, 1)):
            if value < low:
                raise BadInput(f"{name} {value}: must be at least {low}")
        if not 0 < self.threshold <= 1.5:
            raise BadInput(f"--threshold {self.threshold}: a fraction of the line rate, e.g. 0.83")
        if self.line_rate_bps is not None and self.line_rate_bps <= 0:
            raise BadInput("--line-rate must be positive (Gb/s)")
        if self.outstanding is not None and not 1 <= self.outstanding <= 4096:
            raise BadInput(f"--outs {self.outstanding}: use 1-4096 outstanding reads per QP")
        if not 1024 <= self.port <= 65535:
            raise BadInput(f"--port {self.port}: use 1024-65535")
        return self


@dataclass(frozen=True)
class Measurement:
    size: int
    qps: int
    bits_per_second: float
    unit_printed: str
    mtu: int | None
    repeat: int

    def to_dict(self) -> dict:
        return {**asdict(self), "gbps": self.bits_per_second / 1e9}


@dataclass
class LineEfficiencyRun:
    settings: Settings
    line_bps: float
    line_source: str
    interface: str | None
    mtu: int | None
    measurements: list[Measurement] = field(default_factory=list)
    verdict: Verdict | None = None
    port_speed_bps: float | None = None     # what the port itself reports (sysfs), also under --line-rate

    def to_dict(self) -> dict:
        return {"transport": self.settings.transport, "label": label(self.settings.transport),
                "settings": asdict(self.settings), "line_rate_bps": self.line_bps,
                "line_rate_source": self.line_source, "port_speed_bps": self.port_speed_bps,
                "interface": self.interface, "mtu": self.mtu,
                "measurements": [m.to_dict() for m in self.measurements], "summary": summary(self),
                "sweep": sweep_table(self),
                "array_seen": [{"addresses": [self.settings.peer]}]}   # what array it measured: the peer (gates)


def label(transport: str) -> str:
    return "RDMA READ (ib_read_bw)" if transport == "rdma" else "TCP (iperf3) - not RDMA"


# -- facts about the client node, read through the runner so they work remotely ----------
def route_interface(runner: Runner, peer: str, host: Host) -> str:
    result = runner.run(["ip", "-j", "route", "get", peer], timeout=10, host=host, label="route-get", always=True)
    if not result.ok:
        raise ToolError(result.failure(f"no route to {peer}"), hint="check the address: fxprobe netcheck --peer ADDR")
    try:
        return json.loads(result.stdout)[0]["dev"]
    except (ValueError, LookupError, TypeError):
        raise ParseError("ip -j route get", "dev", "no device in the route") from None


def interface_speed_bps(runner: Runner, iface: str, host: Host) -> float | None:
    return netdev.speed_bps(runner, iface, host)


def check_reachable(runner: Runner, peer: str, host: Host) -> None:
    result = runner.run(["ping", "-c", "1", "-W", "3", peer], timeout=15, host=host, label="ping-peer", always=True)
    if not result.ok and not result.dry_run:
        where = f" from {host.name}" if host.name != "local" else ""
        raise ToolError(f"peer {peer} is unreachable{where}",
                        hint="check the address and the data link (fxprobe netcheck --peer ADDR)")


# -- one measurement ------------------------------------------------------------------
def _start_server(runner: Runner, argv: list[str], host: Host, duration: int,
                  ready_marker: str | None = None, ready_timeout: float = 90) -> Background:
    """Start a bounded server on the peer; wait until it says it listens (or a short grace without a marker)."""
    bounded = ["timeout", str(duration + SERVER_GRACE + int(ready_timeout)), "stdbuf", "-oL"] + argv
    server = runner.start(bounded, host=host, label=f"{argv[0]}-server")
    if runner.dry_run:
        return server
    deadline = time.monotonic() + (ready_timeout if ready_marker else 1.5)
    while time.monotonic() < deadline and server.alive():
        if ready_marker and ready_marker in server.output()[0]:
            break
        time.sleep(0.3)
    if not server.alive():
        server.finish()
        out, err = server.output()
        text = (err.strip() or out.strip()).splitlines()
        raise ToolError(f"`{argv[0]}` server on {host.name} did not start: {text[-1][:200] if text else 'no output'}",
                        hint="is another server bound to the port? pass --port, or --server-running if it is yours")
    if ready_marker and ready_marker not in server.output()[0]:
        _kill_server(runner, argv[0], int(argv[argv.index("-p") + 1]) if "-p" in argv else 0, host, server)
        raise ToolError(f"`{argv[0]}` server on {host.name} did not report ready within {ready_timeout:.0f} s")
    return server


def _kill_server(runner: Runner, argv0: str, port: int, host: Host, server: Background | None) -> None:
    if server is not None:
        server.stop(timeout=5)
    # killing the local ssh does not always end the remote process: end it on the peer by its port
    runner.run(["pkill", "-f", f"{argv0} .*(-p|--port) {port}"], timeout=15, host=host, label="kill-server")


def measure_rdma(runner: Runner, settings: Settings, size: int, qps: int, repeat: int,
                 client: Host, server_host: Host | None) -> tuple[Measurement, perftest.PerftestResult]:
    options = dict(size=size, qps=qps, duration=settings.duration, port=settings.port, rdma_cm=True,
                   device=settings.device,
                   extra=["--outs", str(settings.outstanding)] if settings.outstanding else [])
    if server_host is None:        # the user's server: the client tries again against it
        result = perftest.run_bw_client(runner, settings.peer, timeout=settings.duration + 60, host=client,
                                        report_gbits=True, attempts=4, **options)
    else:
        result = _rdma_with_fresh_servers(runner, settings, options, client, server_host)
    if not result.rows:
        raise ParseError(result.source, "results", "ib_read_bw printed no result row")
    row = result.rows[-1]
    return Measurement(size, qps, row.bw_average_bytes * 8, row.unit, result.info.mtu, repeat), result


def _rdma_with_fresh_servers(runner: Runner, settings: Settings, options: dict, client: Host,
                             server_host: Host) -> perftest.PerftestResult:
    """One client run per server started: an ib_read_bw server serves one connection, and one that rejected or
    lost a connect attempt does not take the next (a loaded soft-RoCE lab: REJECTED, then a client that hung,
    then "Unable to init the socket connection"; in the CI lab, with the unit tests running beside it, a client and
    a server both ended by a signal as their run ended, then servers ended by one at once, exit code 255 and no
    output: each attempt after the first waits RETRY_WAIT_S x its number first). Every attempt's commands are in the
    evidence."""
    failure = None
    for attempt in range(RDMA_SERVER_ATTEMPTS):
        time.sleep(RETRY_WAIT_S * attempt)
        server = None
        try:
            server = _start_server(runner, perftest.perftest_argv("ib_read_bw", None, **{**options, "device": None}),
                                   server_host, settings.duration, ready_marker="Waiting for client")
            return perftest.run_bw_client(runner, settings.peer, timeout=settings.duration + 60, host=client,
                                          report_gbits=True, **options)
        except ToolError as exc:
            failure = exc       # a client that timed out may still run on its node: end it there too
            runner.run(["pkill", "-f", f"ib_read_bw .*(-p|--port) {settings.port}"], timeout=15, host=client,
                       label="kill-client")
        finally:
            _kill_server(runner, "ib_read_bw", settings.port, server_host, server)
    raise failure


def measure_tcp(runner: Runner, settings: Settings, repeat: int, client: Host,
                server_host: Host | None) -> Measurement:
    server = None
    if server_host is not None:
        server = _start_server(runner, iperf3.iperf3_server_argv(port=settings.port), server_host, settings.duration)
    try:
        report = iperf3.run_iperf3_client(runner, settings.peer, timeout=settings.duration + 60, host=client,
                                          attempts=3, port=settings.port, duration=settings.duration,
                                          streams=settings.streams, reverse=True)
    finally:
        if server_host is not None:
            _kill_server(runner, "iperf3", settings.port, server_host, server)
    return Measurement(0, settings.streams, report.bits_per_second, "bit/s", None, repeat)


# -- the whole run ----------------------------------------------------------------------
def run(runner: Runner, settings: Settings, *, client: Host = LOCAL, server_host: Host | None = None,
        sizes: list[int] | None = None, qps_list: list[int] | None = None) -> LineEfficiencyRun:
    """Data flows from the peer to the client in both transports (RDMA READ; iperf3 --reverse).

    Measure (optionally a size x QP sweep, optionally repeated) and judge against the threshold."""
    settings.validate()
    if settings.transport == "rdma":
        reason = perftest.probe_rdma_device(runner, client)
        if reason:
            raise NotRunnable(reason, hint="measure TCP instead with --transport tcp (iperf3), labelled as TCP")
        if server_host is not None and (reason := perftest.probe_rdma_device(runner, server_host)):
            raise NotRunnable(reason)
    check_reachable(runner, settings.peer, client)
    for node in (client, server_host):            # the programs that measure on other nodes: their origins
        if node is not None:
            dpkg.witness(runner, node, "ib_read_bw" if settings.transport == "rdma" else "iperf3")
    iface = route_interface(runner, settings.peer, client)
    port_bps = interface_speed_bps(runner, iface, client)
    if settings.line_rate_bps:
        line_bps, source = settings.line_rate_bps, "--line-rate"
    else:
        line_bps, source = port_bps, netdev.attribute_path(iface, "speed")
        if line_bps is None:
            raise BadInput(f"{iface} reports no link speed", hint="pass the nominal rate with --line-rate GBPS")
    outcome = LineEfficiencyRun(settings, line_bps, source, iface, None, port_speed_bps=port_bps)
    points = [(s, q) for s in (sizes or [settings.size]) for q in (qps_list or [settings.qps])]
    for repeat in range(1, settings.repeats + 1):
        for size, qps in points:
            if settings.transport == "rdma":
                measurement, _ = measure_rdma(runner, settings, size, qps, repeat, client, server_host)
            else:
                measurement = measure_tcp(runner, settings, repeat, client, server_host)
            outcome.measurements.append(measurement)
            outcome.mtu = outcome.mtu or measurement.mtu
    if settings.transport == "tcp":
        mtu_text = netdev.read_attribute(runner, client, iface, "mtu", label="mtu") or ""
        outcome.mtu = int(mtu_text) if mtu_text.isdigit() else None
    outcome.verdict = judge(outcome)
    return outcome


def _best_point(outcome: LineEfficiencyRun) -> tuple[int, int, list[Measurement]]:
    groups: dict[tuple[int, int], list[Measurement]] = {}
    for m in outcome.measurements:
        groups.setdefault((m.size, m.qps), []).append(m)
    (size, qps), best = max(groups.items(), key=lambda kv: statistics.mean(m.bits_per_second for m in kv[1]))
    return size, qps, best


def summary(outcome: LineEfficiencyRun) -> dict:
    if not outcome.measurements:
        return {}
    size, qps, best = _best_point(outcome)
    values = [m.bits_per_second for m in best]
    mean = statistics.mean(values)
    data = {"size": size, "qps": qps, "runs": len(values), "mean_bps": mean, "min_bps": min(values),
            "max_bps": max(values), "cv": statistics.pstdev(values) / mean if len(values) > 1 and mean else 0.0,
            "line_efficiency": roce.line_efficiency(mean, outcome.line_bps)}
    if outcome.settings.transport == "rdma" and outcome.mtu in roce.IB_MTUS:
        data["protocol_efficiency"] = roce.protocol_efficiency(mean, outcome.line_bps, outcome.mtu)
        data["payload_ceiling_bps"] = roce.payload_ceiling_bps(outcome.line_bps, outcome.mtu)
    elif outcome.settings.transport == "tcp" and outcome.mtu:
        ceiling = outcome.line_bps * tcp_payload_efficiency(outcome.mtu)
        data["protocol_efficiency"] = mean / ceiling
        data["payload_ceiling_bps"] = ceiling
    return data


def sweep_table(outcome: LineEfficiencyRun) -> list[dict]:
    groups: dict[tuple[int, int], list[float]] = {}
    for m in outcome.measurements:
        groups.setdefault((m.size, m.qps), []).append(m.bits_per_second)
    return [{"size": s, "qps": q, "mean_gbps": statistics.mean(v) / 1e9,
             "line_efficiency": statistics.mean(v) / outcome.line_bps} for (s, q), v in sorted(groups.items())]


def judge(outcome: LineEfficiencyRun) -> Verdict:
    data = summary(outcome)
    name = f"line efficiency, {label(outcome.settings.transport)}"
    criteria = [Criterion.compare(
        "line efficiency vs this port's nominal rate", data.get("line_efficiency"), ">=", outcome.settings.threshold,
        detail=(f"{data['mean_bps'] / 1e9:.3f} Gb/s over {outcome.line_bps / 1e9:.3f} Gb/s nominal "
                f"({outcome.line_source}); {data['runs']} run(s), min {data['min_bps'] / 1e9:.3f}, "
                f"max {data['max_bps'] / 1e9:.3f} Gb/s") if data else "")]
    if "protocol_efficiency" in data:
        criteria.append(Criterion("protocol efficiency", Outcome.PASS, data["protocol_efficiency"],
                                  detail=f"of the {data['payload_ceiling_bps'] / 1e9:.3f} Gb/s payload ceiling "
                                         f"at MTU {outcome.mtu} (information)"))
    return Verdict(name, tuple(criteria))


def lines(outcome: LineEfficiencyRun) -> list[str]:
    out = [f"transport: {label(outcome.settings.transport)}; peer {outcome.settings.peer} via {outcome.interface}"]
    table = sweep_table(outcome)
    if len(table) > 1:
        out.append(f"{'size':>10} {'QPs':>4} {'Gb/s':>9} {'line eff':>9}")
        out += [f"{r['size']:>10} {r['qps']:>4} {r['mean_gbps']:>9.3f} {r['line_efficiency']:>9.4f}" for r in table]
    return out
