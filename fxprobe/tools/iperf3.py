"""iperf3 adapter: ``--json`` results (TCP and UDP), intervals, totals, retransmits, CPU, errors.

Format: esnet/iperf src/iperf_api.c. ``start.test_start`` describes the test,
``intervals[].sum`` per reporting interval, ``end.sum_sent``/``end.sum_received``
(TCP) or ``end.sum`` (UDP), ``end.cpu_utilization_percent``. A failure sets the
top-level ``"error"``; the parsed result carries it and ``run_*`` raises ToolError.
iperf3 before 3.16 is single-threaded (about 35 Gb/s on 100 GbE): label results TCP.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from fxprobe.core.data import AsDict
from fxprobe.core.errors import ParseError, ToolError
from fxprobe.core.hosts import LOCAL, Host
from fxprobe.core.runner import Runner
from fxprobe.tools.fields import Fields, load_json, text

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
        """Goodput: what the receiver got (TCP: only that, never the sender's rate - the parser refuses a TCP
        result without it); the sender's rate for UDP without receiver totals."""
        if self.protocol.upper() == "TCP":
            return self.received_bits_per_second
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


def _sum(f: Fields) -> tuple[int, float, int | None]:
    return f.int("bytes", 0), f.number("bits_per_second"), f.int("retransmits")


def _interval(raw, source: str, where: str) -> IperfInterval:
    f = Fields(Fields(raw, source, where).data.get("sum"), source, f"{where}.sum")
    return IperfInterval(f.number("start"), f.number("end"), f.number("seconds"), *_sum(f),
                         omitted=bool(f.data.get("omitted", False)))


def parse_iperf3_json(output: str, source: str = "iperf3") -> IperfResult:
    """Parse ``iperf3 --json`` (client or server side). A top-level "error" is kept in ``.error``."""
    data = Fields(load_json(output, source), source)
    error = data.opt("error", text)
    start, end = data.sub("start"), data.sub("end")
    test = start.sub("test_start")
    if "sum_sent" in end.data or "sum_received" in end.data:
        sent, received = _sum(end.sub("sum_sent")), _sum(end.sub("sum_received"))
    elif "sum" in end.data:  # UDP
        sent = received = _sum(end.sub("sum"))
    elif error is None:
        raise ParseError(source, "end.sum_sent", "missing: the test printed no totals")
    else:
        sent = received = (0, 0.0, None)
    if error is None and test.text("protocol").upper() == "TCP" and not received[1]:
        what = "missing" if "sum_received" not in end.data else f"{received[1]!r} bits/s"
        raise ParseError(source, "end.sum_received", f"{what}: a TCP test's goodput is what the receiver got, and "
                         "the sender's rate is not goodput (an aborted test, or a truncated --json output)")
    cpu = end.sub("cpu_utilization_percent")
    return IperfResult(
        source=source, version=start.text("version"), protocol=test.text("protocol"),
        num_streams=test.int("num_streams", 0), blksize=test.int("blksize", 0), duration=test.number("duration"),
        reverse=bool(test.int("reverse", 0)), intervals=data.each("intervals", _interval),
        sent_bytes=sent[0], sent_bits_per_second=sent[1], received_bytes=received[0],
        received_bits_per_second=received[1], retransmits=sent[2],
        cpu_host_total=cpu.number("host_total", None), cpu_remote_total=cpu.number("remote_total", None),
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


VERSION_ARGV = ("iperf3", "--version")
VERSION_PATTERN = r"iperf (?P<version>(?P<major>\d+)\.(?P<minor>\d+)\S*)"     # also what `fxprobe doctor` prints


