"""iperf3 adapter: ``--json`` results (TCP and UDP), intervals, totals, retransmits, CPU, errors.

Format: esnet/iperf src/iperf_api.c. ``start.test_start`` describes the test,
``intervals[].sum`` per reporting interval, ``end.sum_sent``/``end.sum_received``
(TCP) or ``end.sum`` (UDP), ``end.cpu_utilization_percent``. A failure sets the
top-level ``"error"``; the parsed result carries it and ``run_*`` raises ToolError.
iperf3 before 3.16 is single-threaded (about 35 Gb/s on 100 GbE): label results TCP.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Sequence

from fxprobe.core.data import AsDict
from fxprobe.core.errors import ParseError, ToolError
from fxprobe.core.hosts import LOCAL, Host
from fxprobe.core.runner import Background, Runner
from fxprobe.tools.probe import probe_version
from fxprobe.tools.fields import arr, integer, load_json, number, obj, opt, text

DEFAULT_PORT = 5201


@dataclass(frozen=True)
class IperfInterval(AsDict):
    start: float
    end: float
    seconds: float
    bytes: int
    bits_per_second: float
    retransmits: int | None
    omitted: bool


@dataclass(frozen=True)
class IperfResult:
    source: str
    version: str
    protocol: str
    num_streams: int
    blksize: int
    duration: float
    reverse: bool
    intervals: tuple[IperfInterval, ...]
    sent_bytes: int
    sent_bits_per_second: float
    received_bytes: int
    received_bits_per_second: float
    retransmits: int | None
    cpu_host_total: float | None
    cpu_remote_total: float | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def bits_per_second(self) -> float:
        """Goodput: what the receiver got (TCP); the sender's rate for UDP without receiver totals."""
        return self.received_bits_per_second or self.sent_bits_per_second

    def raise_for_error(self) -> "IperfResult":
        if self.error is not None:
            raise ToolError(f"{self.source}: iperf3 reported an error: {self.error}")
        return self

    def to_dict(self) -> dict:
        data = asdict(self)
        data["intervals"] = [i.to_dict() for i in self.intervals]
        data["bits_per_second"] = self.bits_per_second
        return data


def _sum(raw, source: str, where: str) -> tuple[int, float, int | None]:
    data = obj(raw, source, where)
    return (opt(data, "bytes", integer, source, f"{where}.bytes", 0),
            opt(data, "bits_per_second", number, source, f"{where}.bits_per_second", 0.0),
            opt(data, "retransmits", integer, source, f"{where}.retransmits"))


def _interval(raw, source: str, where: str) -> IperfInterval:
    data = obj(obj(raw, source, where).get("sum"), source, f"{where}.sum")
    return IperfInterval(
        start=opt(data, "start", number, source, f"{where}.sum.start", 0.0),
        end=opt(data, "end", number, source, f"{where}.sum.end", 0.0),
        seconds=opt(data, "seconds", number, source, f"{where}.sum.seconds", 0.0),
        bytes=opt(data, "bytes", integer, source, f"{where}.sum.bytes", 0),
        bits_per_second=opt(data, "bits_per_second", number, source, f"{where}.sum.bits_per_second", 0.0),
        retransmits=opt(data, "retransmits", integer, source, f"{where}.sum.retransmits"),
        omitted=bool(data.get("omitted", False)))


def parse_iperf3_json(output: str, source: str = "iperf3") -> IperfResult:
    """Parse ``iperf3 --json`` (client or server side). A top-level "error" is kept in ``.error``."""
    data = obj(load_json(output, source), source, "(top level)")
    error = opt(data, "error", text, source, "error")
    start = obj(data.get("start", {}), source, "start")
    test = obj(start.get("test_start", {}), source, "start.test_start")
    end = obj(data.get("end", {}), source, "end")
    intervals = tuple(_interval(raw, source, f"intervals[{i}]")
                      for i, raw in enumerate(arr(data.get("intervals", []), source, "intervals")))
    if "sum_sent" in end or "sum_received" in end:
        sent = _sum(end.get("sum_sent", {}), source, "end.sum_sent")
        received = _sum(end.get("sum_received", {}), source, "end.sum_received")
    elif "sum" in end:  # UDP
        sent = received = _sum(end["sum"], source, "end.sum")
    elif error is None:
        raise ParseError(source, "end.sum_sent", "missing: the test printed no totals")
    else:
        sent = received = (0, 0.0, None)
    cpu = obj(end.get("cpu_utilization_percent", {}), source, "end.cpu_utilization_percent")
    return IperfResult(
        source=source,
        version=opt(start, "version", text, source, "start.version", ""),
        protocol=opt(test, "protocol", text, source, "start.test_start.protocol", ""),
        num_streams=opt(test, "num_streams", integer, source, "start.test_start.num_streams", 0),
        blksize=opt(test, "blksize", integer, source, "start.test_start.blksize", 0),
        duration=opt(test, "duration", number, source, "start.test_start.duration", 0.0),
        reverse=bool(opt(test, "reverse", integer, source, "start.test_start.reverse", 0)),
        intervals=intervals,
        sent_bytes=sent[0], sent_bits_per_second=sent[1],
        received_bytes=received[0], received_bits_per_second=received[1],
        retransmits=sent[2],
        cpu_host_total=opt(cpu, "host_total", number, source, "end.cpu_utilization_percent.host_total"),
        cpu_remote_total=opt(cpu, "remote_total", number, source, "end.cpu_utilization_percent.remote_total"),
        error=error)


def iperf3_server_argv(*, port: int = DEFAULT_PORT, bind: str | None = None, one_off: bool = True) -> list[str]:
    argv = ["iperf3", "--server", "--json", "--port", str(port)]
    if one_off:
        argv.append("--one-off")
    if bind:
        argv += ["--bind", bind]
    return argv


def iperf3_client_argv(server: str, *, port: int = DEFAULT_PORT, duration: float = 10, streams: int = 1,
                       reverse: bool = False, interval: float | None = None, bind: str | None = None,
                       udp: bool = False, bitrate: str | None = None, extra: Sequence[str] = ()) -> list[str]:
    argv = ["iperf3", "--client", server, "--json", "--port", str(port), "--time", f"{duration:g}",
            "--parallel", str(streams)]
    if interval is not None:
        argv += ["--interval", f"{interval:g}"]
    if reverse:
        argv.append("--reverse")
    if bind:
        argv += ["--bind", bind]
    if udp:
        argv.append("--udp")
    if bitrate:
        argv += ["--bitrate", bitrate]
    return argv + list(extra)


def start_iperf3_server(runner: Runner, *, host: Host = LOCAL, port: int = DEFAULT_PORT,
                        bind: str | None = None, one_off: bool = True) -> Background:
    """Start ``iperf3 --server --json`` (one client by default). Stop it with ``.stop()``."""
    return runner.start(iperf3_server_argv(port=port, bind=bind, one_off=one_off), host=host,
                        label="iperf3-server")


def _refused(result) -> bool:
    return "Connection refused" in result.stdout or "Connection refused" in result.stderr


def run_iperf3_client(runner: Runner, server: str, *, timeout: float, host: Host = LOCAL,
                      attempts: int = 1, retry_wait: float = 0.3, check: bool = True,
                      **options) -> IperfResult:
    """Run the client and parse its JSON. ``attempts`` > 1 retries while the server is not yet
    listening. With ``check`` an iperf3 "error" raises ToolError; else it is in ``.error``."""
    argv = iperf3_client_argv(server, **options)
    result = runner.run(argv, timeout=timeout, host=host, label="iperf3-client", attempts=attempts,
                        retry_if=_refused if attempts > 1 else None, retry_wait=retry_wait)
    if result.dry_run:
        return parse_iperf3_json('{"error": "dry run"}', result.command_line)
    if result.timed_out:
        raise ToolError(result.failure("iperf3"))
    try:
        parsed = parse_iperf3_json(result.stdout, source=result.command_line[:200])
    except ParseError:
        if not result.ok:
            raise ToolError(result.failure("iperf3")) from None
        raise
    return parsed.raise_for_error() if check else parsed


def parse_iperf3_version(output: str, source: str = "iperf3 --version") -> tuple[int, int]:
    match = re.search(r"iperf (\d+)\.(\d+)", output if isinstance(output, str) else "")
    if not match:
        raise ParseError(source, "version", f"no 'iperf X.Y' in {str(output).strip()[:60]!r}")
    return int(match.group(1)), int(match.group(2))


def probe_iperf3(runner: Runner, host: Host = LOCAL) -> str | None:
    """None when iperf3 runs on host; else the reason."""
    return probe_version(runner, ["iperf3", "--version"], parse_iperf3_version, host=host, label="iperf3-version")[1]