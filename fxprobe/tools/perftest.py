"""perftest adapter (ib_read_bw / ib_write_bw): text report, units normalized exactly.

Formats: linux-rdma/perftest src/perftest_parameters.[ch], man/perftest.1.
``MB/sec`` is MiB/s (2^20 bytes/s, format_factor 0x100000); ``Gb/sec`` (--report_gbits)
is 10^9 bit/s. Under ``-D`` perftest prints ``BW peak`` as 0.00: use the average.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Sequence

from fxprobe.core.data import AsDict
from fxprobe.core.errors import ParseError, ToolError
from fxprobe.core.hosts import LOCAL, Host
from fxprobe.core.runner import Runner
from fxprobe.tools.probe import probe_command
from fxprobe.tools.fields import integer, number

MIB = 1 << 20
UNIT_MIB = "MB/sec"     # perftest's "MB/sec" = MiB/s
UNIT_GBIT = "Gb/sec"    # 10^9 bit/s
DEFAULT_PORT = 18515
TESTS = ("ib_read_bw", "ib_write_bw", "ib_send_bw")


def to_bytes_per_second(value: float, unit: str) -> float:
    if unit == UNIT_MIB:
        return value * MIB
    if unit == UNIT_GBIT:
        return value * 1e9 / 8
    raise ValueError(f"unknown perftest unit {unit!r}")


@dataclass(frozen=True)
class PerftestRow:
    """One result row. Rates in bytes/s and bit/s; ``unit`` and ``*_printed`` keep what perftest printed."""

    msg_size: int
    iterations: int
    bw_peak_bytes: float
    bw_average_bytes: float
    msg_rate_mpps: float
    unit: str
    bw_peak_printed: float
    bw_average_printed: float

    @property
    def bw_average_bits(self) -> float:
        return self.bw_average_bytes * 8

    @property
    def bw_peak_bits(self) -> float:
        return self.bw_peak_bytes * 8

    def to_dict(self) -> dict:
        return {**asdict(self), "bw_average_bits": self.bw_average_bits, "bw_peak_bits": self.bw_peak_bits}


@dataclass(frozen=True)
class PerftestInfo(AsDict):
    """The header block: what the run really used (MTU, link type, GID index, device, QPs)."""

    test: str = ""
    device: str = ""
    qps: int | None = None
    transport: str = ""
    connection: str = ""
    mtu: int | None = None
    link_type: str = ""
    gid_index: int | None = None
    rdma_cm: bool | None = None
    tx_depth: int | None = None
    outstanding_reads: int | None = None
    raw: dict = field(default_factory=dict)


@dataclass(frozen=True)
class PerftestResult:
    source: str
    info: PerftestInfo
    rows: tuple[PerftestRow, ...]
    warnings: tuple[str, ...] = ()

    @property
    def row(self) -> PerftestRow:
        """The result row (the largest message size when -a printed several)."""
        return max(self.rows, key=lambda r: r.msg_size)

    @property
    def bw_average_bits(self) -> float:
        return self.row.bw_average_bits

    def to_dict(self) -> dict:
        return {"source": self.source, "info": self.info.to_dict(),
                "rows": [r.to_dict() for r in self.rows], "warnings": list(self.warnings)}


def _make_row(values: dict, unit: str, source: str, where: str) -> PerftestRow:
    peak = number(values["peak"], source, f"{where}.BW peak")
    average = number(values["average"], source, f"{where}.BW average")
    if peak < 0 or average < 0:
        raise ParseError(source, f"{where}.BW average", "negative bandwidth")
    size, iterations = integer(values["size"], source, f"{where}.#bytes"), \
        integer(values["iterations"], source, f"{where}.#iterations")
    if average == 0 and size > 0 and iterations > 0:
        # seen from soft-RoCE in the lab (150 x 64 KiB in 6 s, "Correlation coefficient r^2 < 0.9" on stderr): the
        # tool's own clock measurement failed; 0 is not what the link carried
        raise ParseError(source, f"{where}.BW average", f"0 after {iterations} iterations of {size} B: perftest's "
                         "own time measurement failed, or the rate is below the printed resolution - not a measured "
                         "bandwidth; run it again (for a link that slow: with --report_gbits, 6 decimals)")
    return PerftestRow(
        msg_size=size,
        iterations=iterations,
        bw_peak_bytes=to_bytes_per_second(peak, unit),
        bw_average_bytes=to_bytes_per_second(average, unit),
        msg_rate_mpps=number(values["rate"], source, f"{where}.MsgRate"),
        unit=unit, bw_peak_printed=peak, bw_average_printed=average)


def _on_off(value: str | None) -> bool | None:
    if value is None:
        return None
    return {"ON": True, "OFF": False}.get(value.strip().upper())


def _first_int(value, source: str, where: str) -> int | None:
    """'4096[B]' -> 4096; perftest decorates numbers with units."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return integer(value, source, where)
    match = re.match(r"\s*(-?\d+)", value if isinstance(value, str) else "")
    if not match:
        raise ParseError(source, where, f"not a number: {str(value)[:40]!r}")
    return int(match.group(1))


def _info(title: str, pairs: dict, source: str) -> PerftestInfo:
    def pick(*names):
        for name in names:
            if name in pairs:
                return pairs[name]
        return None

    def as_text(value):
        return "" if value is None else str(value).strip()

    rdma_cm = pick("rdma_cm QPs", "rdma_cm_QPs")
    return PerftestInfo(
        test=title, device=as_text(pick("Device")),
        qps=_first_int(pick("Number of qps", "Number_of_qps"), source, "Number of qps"),
        transport=as_text(pick("Transport type", "Transport_type")),
        connection=as_text(pick("Connection type", "Connection_type")),
        mtu=_first_int(pick("Mtu"), source, "Mtu"),
        link_type=as_text(pick("Link type", "Link_type")),
        gid_index=_first_int(pick("GID index", "GID_index"), source, "GID index"),
        rdma_cm=_on_off(rdma_cm) if isinstance(rdma_cm, str) else None,
        tx_depth=_first_int(pick("TX depth", "TX_depth"), source, "TX depth"),
        outstanding_reads=_first_int(pick("Outstand reads", "Outstand_reads"), source, "Outstand reads"),
        raw={str(k): v for k, v in pairs.items()})


# -- text report ---------------------------------------------------------------
_DASHES = re.compile(r"^\s*-{20,}\s*$")
_RESULT_HEADER = re.compile(r"#bytes.*BW average\[(MB/sec|Gb/sec)\]")
_ROW_START = re.compile(r"^\s*\d+\s")


def _header_pairs(line: str) -> list[tuple[str, str]]:
    """' Mtu : 4096[B]' or 'Dual-port : OFF\\t\\tDevice : rxe0' or 'rdma_cm QPs\\t : OFF'."""
    pieces: list[str] = []
    for piece in line.strip().split("\t"):
        if not piece.strip():
            continue
        if piece.strip().startswith(":") and pieces:
            pieces[-1] += piece
        else:
            pieces.append(piece)
    pairs = []
    for piece in pieces:
        key, colon, value = piece.partition(":")
        if colon and key.strip():
            pairs.append((key.strip(), value.strip()))
    return pairs


def parse_perftest_text(output: str, source: str = "ib_read_bw") -> PerftestResult:
    """Parse the text report of a bandwidth test (client side, or server side of ib_write_bw/send)."""
    if not isinstance(output, str):
        raise ParseError(source, "output", "expected text")
    lines = output.splitlines()
    title, pairs, warnings = "", {}, []
    in_header = False
    unit = None
    columns: list[str] = []
    rows: list[PerftestRow] = []
    for number_, line in enumerate(lines, 1):
        if _DASHES.match(line):
            in_header = False
            continue
        header = _RESULT_HEADER.search(line)
        if header:
            unit = header.group(1)
            columns = re.findall(r"#\w+|BW peak|BW average|MsgRate", line)
            continue
        if unit and _ROW_START.match(line):
            tokens = line.split()
            if len(tokens) < len(columns):
                raise ParseError(source, "result row", f"line {number_}: {len(tokens)} values for {len(columns)} columns")
            named = dict(zip(columns, tokens))
            try:
                values = {"size": named["#bytes"], "iterations": named["#iterations"],
                          "peak": named["BW peak"], "average": named["BW average"], "rate": named["MsgRate"]}
            except KeyError as missing:
                raise ParseError(source, "result header", f"no column {missing}") from None
            rows.append(_make_row(values, unit, source, f"result row {len(rows) + 1}"))
            continue
        if not title and line.strip().endswith("Test") and ("BW" in line or "Lat" in line):
            title, in_header = line.strip(), True
            continue
        if in_header:
            if "address:" in line or line.strip().startswith("GID:"):
                in_header = False
                continue
            for key, value in _header_pairs(line):
                pairs.setdefault(key, value)
        elif line.strip() and not rows and unit is None and not title:
            warnings.append(line.strip())
    if unit is None:
        raise ParseError(source, "result header", "no '#bytes ... BW average[...]' line: the test printed no result")
    if not rows:
        raise ParseError(source, "result row", "the result header is not followed by a result row")
    return PerftestResult(source, _info(title, pairs, source), tuple(rows), tuple(warnings))


# -- running ---------------------------------------------------------------
def perftest_argv(test: str = "ib_read_bw", server: str | None = None, *, device: str | None = None,
                  gid_index: int | None = None, size: int | None = None, qps: int | None = None,
                  duration: int | None = None, port: int | None = None, ib_port: int | None = None,
                  report_gbits: bool = False, rdma_cm: bool = False, extra: Sequence[str] = ()) -> list[str]:
    """The argument list for a perftest server (server=None) or client (server=address)."""
    if test not in TESTS:
        raise ValueError(f"unknown perftest test {test!r}")
    argv = [test, "-F"]
    for flag, value in (("-d", device), ("-x", gid_index), ("-s", size), ("-q", qps),
                        ("-D", duration), ("-p", port), ("-i", ib_port)):
        if value is not None:
            argv += [flag, str(value)]
    if report_gbits:
        argv.append("--report_gbits")
    if rdma_cm:
        argv.append("-R")
    argv += list(extra)
    if server:
        argv.append(server)
    return argv


def run_bw_client(runner: Runner, server: str, *, timeout: float, host: Host = LOCAL,
                  test: str = "ib_read_bw", report_gbits: bool = False, attempts: int = 1,
                  **options) -> PerftestResult:
    """Run the client against ``server`` and parse its report. A failed run is a ToolError
    naming the command; a run that prints no result row is a ParseError naming the field."""
    argv = perftest_argv(test, server, report_gbits=report_gbits, **options)
    result = runner.run(argv, timeout=timeout, host=host, label=test, attempts=attempts,
                        retry_if=(lambda r: not r.ok) if attempts > 1 else None)
    if result.dry_run:
        return PerftestResult(result.command_line, PerftestInfo(), ())
    if not result.ok:
        raise ToolError(result.failure(test), hint="is the server running on the peer, and the RDMA device up?")
    return parse_perftest_text(result.stdout, source=result.command_line[:200])


VERSION_PATTERN = r"Version:\s*(?P<version>\S+)"     # `TEST --version`; also what `fxprobe doctor` prints


def probe_rdma_device(runner: Runner, host: Host = LOCAL) -> str | None:
    """None when host has at least one RDMA device (/sys/class/infiniband); else the reason."""
    return probe_command(runner, ["ls", "-1", "/sys/class/infiniband"],
                         "no RDMA device{where} (/sys/class/infiniband is empty or missing): load a RoCE driver or "
                         "soft-RoCE (modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IF)",
                         host=host, label="rdma-devices", needs_output=True)