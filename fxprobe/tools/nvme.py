"""nvme-cli adapter: list, list -v, discover, smart-log, connect/disconnect.

Formats: linux-nvme/nvme-cli nvme-print-json.c (2.x) and nvme-print.c (1.x).
Both shapes are accepted. Numbers may arrive as strings (128-bit counters in 2.3,
old json-c), serial/model/firmware are space padded (stripped here), the SMART
temperature is Kelvin (Celsius given too). Drives are identified by serial/NQN,
never by /dev name.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Sequence

from fxprobe.core.errors import ParseError, ToolError
from fxprobe.core.hosts import LOCAL, Host
from fxprobe.core.runner import Runner
from fxprobe.tools.probe import parse_major_minor, probe_command, probe_version
from fxprobe.tools.fields import Fields, integer, load_json, obj

KELVIN_OFFSET = 273.15
DATA_UNIT_BYTES = 512_000  # one SMART "data unit" = 1000 x 512 bytes


def _dict(instance) -> dict:
    return asdict(instance)


# -- list ----------------------------------------------------------------------
@dataclass(frozen=True)
class Namespace:
    name: str                 # nvme0n1 (list -v) or the device path's basename (list)
    nsid: int | None
    used_bytes: int | None
    maximum_lba: int | None
    physical_size: int | None
    sector_size: int | None
    device_path: str = ""     # /dev/nvme0n1 (plain list)
    generic_path: str = ""
    serial: str = ""          # plain list carries the controller identity per namespace
    model: str = ""
    firmware: str = ""

    def to_dict(self) -> dict:
        return _dict(self)


def _namespace(raw, source: str, where: str) -> Namespace:
    f = Fields(raw, source, where)
    device_path = f.text("DevicePath")
    name_value = f.data.get("NameSpace")
    # plain list: NameSpace is the NSID (a number); list -v: NameSpace is "nvme0n1" and NSID separate
    if isinstance(name_value, str) and not name_value.strip().isdigit():
        name, nsid = name_value.strip(), f.int("NSID")
    else:
        name = device_path.rsplit("/", 1)[-1]
        nsid = f.int("NSID") if name_value is None else f.need("NameSpace", integer)
    if not name and not device_path and nsid is None:
        raise ParseError(source, f.at("NameSpace"), "missing (no NameSpace, NSID or DevicePath)")
    return Namespace(name=name, nsid=nsid, used_bytes=f.int("UsedBytes"), maximum_lba=f.int("MaximumLBA"),
                     physical_size=f.int("PhysicalSize"), sector_size=f.int("SectorSize"), device_path=device_path,
                     generic_path=f.text("GenericPath") or f.text("Generic"), serial=f.text("SerialNumber"),
                     model=f.text("ModelNumber"), firmware=f.text("Firmware"))


def parse_list(output: str, source: str = "nvme list") -> tuple[Namespace, ...]:
    """``nvme list -o json`` (1.x and 2.x): one entry per namespace with its controller's identity."""
    return Fields(load_json(output, source), source).each("Devices", _namespace, required=True)


# -- list -v -----------------------------------------------------------------
@dataclass(frozen=True)
class NamespacePath:
    path: str            # nvme0c0n1
    ana_state: str

    def to_dict(self) -> dict:
        return _dict(self)


@dataclass(frozen=True)
class Controller:
    name: str
    serial: str
    model: str
    firmware: str
    transport: str
    address: str
    cntlid: int | None = None
    namespaces: tuple[Namespace, ...] = ()
    paths: tuple[NamespacePath, ...] = ()

    @property
    def address_fields(self) -> dict[str, str]:
        return parse_address(self.address)

    def to_dict(self) -> dict:
        return {**{k: v for k, v in _dict(self).items() if k not in ("namespaces", "paths")},
                "namespaces": [n.to_dict() for n in self.namespaces],
                "paths": [p.to_dict() for p in self.paths]}


@dataclass(frozen=True)
class Subsystem:
    name: str
    nqn: str
    host_nqn: str = ""
    host_id: str = ""
    controllers: tuple[Controller, ...] = ()
    namespaces: tuple[Namespace, ...] = ()

    def to_dict(self) -> dict:
        return {"name": self.name, "nqn": self.nqn, "host_nqn": self.host_nqn, "host_id": self.host_id,
                "controllers": [c.to_dict() for c in self.controllers],
                "namespaces": [n.to_dict() for n in self.namespaces]}


def parse_address(address: str) -> dict[str, str]:
    """'traddr=10.0.0.1,trsvcid=4420,src_addr=10.0.0.2' -> dict; a PCI address -> {'traddr': it}."""
    if "=" not in address:
        return {"traddr": address} if address else {}
    fields = {}
    for part in address.replace(" ", ",").split(","):
        key, sep, value = part.partition("=")
        if sep and key:
            fields[key.strip()] = value.strip()
    return fields


def _namespace_path(raw, source: str, where: str) -> NamespacePath:
    f = Fields(raw, source, where)
    return NamespacePath(f.need("Path"), f.text("ANAState"))


def _controller(raw, source: str, where: str) -> Controller:
    f = Fields(raw, source, where)
    return Controller(name=f.need("Controller"), serial=f.text("SerialNumber"), model=f.text("ModelNumber"),
                      firmware=f.text("Firmware"), transport=f.text("Transport"), address=f.text("Address"),
                      cntlid=f.int("Cntlid"), namespaces=f.each("Namespaces", _namespace),
                      paths=f.each("Paths", _namespace_path))


def _verbose_subsystem(f: Fields, host_nqn: str, host_id: str) -> Subsystem:
    return Subsystem(name=f.need("Subsystem"), nqn=f.text("SubsystemNQN"), host_nqn=host_nqn, host_id=host_id,
                     controllers=f.each("Controllers", _controller), namespaces=f.each("Namespaces", _namespace))


def parse_list_verbose(output: str, source: str = "nvme list -v") -> tuple[Subsystem, ...]:
    """``nvme list -v -o json``: 2.x nests Subsystems under a host entry; 1.x lists subsystems directly."""
    subsystems: list[Subsystem] = []
    for entry in Fields(load_json(output, source), source).each("Devices", Fields, required=True):
        if "Subsystems" in entry.data:   # 2.x: one entry per host NQN
            host_nqn, host_id = entry.text("HostNQN"), entry.text("HostID")
            subsystems += [_verbose_subsystem(sub, host_nqn, host_id)
                           for sub in entry.each("Subsystems", Fields, required=True)]
        else:                            # 1.x
            subsystems.append(_verbose_subsystem(entry, "", ""))
    return tuple(subsystems)


# -- discover -------------------------------------------------------------------
@dataclass(frozen=True)
class DiscoveryRecord:
    trtype: str
    adrfam: str
    subtype: str
    treq: str
    portid: int | None
    trsvcid: str
    subnqn: str
    traddr: str
    eflags: str = ""
    sectype: str = ""
    rdma_prtype: str = ""
    rdma_qptype: str = ""
    rdma_cms: str = ""
    rdma_pkey: str = ""

    @property
    def is_discovery(self) -> bool:
        return "discovery" in self.subtype

    def to_dict(self) -> dict:
        return _dict(self)


@dataclass(frozen=True)
class DiscoveryLog:
    genctr: int | None
    records: tuple[DiscoveryRecord, ...]

    def subsystems(self) -> tuple[DiscoveryRecord, ...]:
        return tuple(r for r in self.records if not r.is_discovery)

    def to_dict(self) -> dict:
        return {"genctr": self.genctr, "records": [r.to_dict() for r in self.records]}


def parse_discover(output: str, source: str = "nvme discover") -> DiscoveryLog:
    """``nvme discover -o json``: ``{"genctr", "records": [...]}`` with transport-specific fields."""
    data = Fields(load_json(output, source), source)
    return DiscoveryLog(data.int("genctr"), data.each("records", _discovery_record, required=True))


_DISCOVERY_TEXT = ("adrfam", "subtype", "treq", "trsvcid", "traddr", "eflags", "sectype", "rdma_prtype",
                   "rdma_qptype", "rdma_cms", "rdma_pkey")   # optional text fields of a record


def _discovery_record(raw, source: str, where: str) -> DiscoveryRecord:
    f = Fields(raw, source, where)
    return DiscoveryRecord(trtype=f.need("trtype"), subnqn=f.need("subnqn"), portid=f.int("portid"),
                           **{key: f.text(key) for key in _DISCOVERY_TEXT})


# -- smart-log ----------------------------------------------------------------
@dataclass(frozen=True)
class SmartLog:
    critical_warning: int
    temperature_k: int
    avail_spare: int
    spare_thresh: int
    percent_used: int
    data_units_read: int
    data_units_written: int
    host_read_commands: int
    host_write_commands: int
    power_cycles: int
    power_on_hours: int
    unsafe_shutdowns: int
    media_errors: int
    num_err_log_entries: int
    warning_temp_time: int = 0
    critical_comp_time: int = 0

    @property
    def temperature_c(self) -> float | None:
        """Celsius; None when the controller reports 0 K (nvmet fabrics controllers do: no sensor)."""
        return round(self.temperature_k - KELVIN_OFFSET, 2) if self.temperature_k else None

    @property
    def bytes_read(self) -> int:
        return self.data_units_read * DATA_UNIT_BYTES

    @property
    def bytes_written(self) -> int:
        return self.data_units_written * DATA_UNIT_BYTES

    @property
    def spare_below_threshold(self) -> bool:
        """Emulated drives report 0 spare with threshold 0: that is not below."""
        return self.avail_spare < self.spare_thresh

    def to_dict(self) -> dict:
        return {**_dict(self), "temperature_c": self.temperature_c, "bytes_read": self.bytes_read,
                "bytes_written": self.bytes_written, "spare_below_threshold": self.spare_below_threshold}


_SMART_REQUIRED = ("critical_warning", "temperature", "avail_spare", "spare_thresh", "percent_used")
_SMART_COUNTERS = ("data_units_read", "data_units_written", "host_read_commands", "host_write_commands",
                   "power_cycles", "power_on_hours", "unsafe_shutdowns", "media_errors",
                   "num_err_log_entries", "warning_temp_time", "critical_comp_time")
_SMART_ALIASES = {"percent_used": ("percentage_used",), "host_read_commands": ("host_reads",),
                  "host_write_commands": ("host_writes",), "num_err_log_entries": ("num_err_log_entries",)}


def parse_smart_log(output: str, source: str = "nvme smart-log") -> SmartLog:
    """``nvme smart-log -o json``: counters as numbers or strings; temperature in Kelvin."""
    data = obj(load_json(output, source), source, "(top level)")

    def value(key: str, required: bool) -> int:
        for name in (key, *_SMART_ALIASES.get(key, ())):
            if name in data and data[name] is not None:
                return integer(data[name], source, name)
        if required:
            raise ParseError(source, key, "missing")
        return 0
    values = {key: value(key, True) for key in _SMART_REQUIRED}
    values.update({key: value(key, False) for key in _SMART_COUNTERS})
    values["temperature_k"] = values.pop("temperature")
    return SmartLog(**values)


# -- connect / disconnect --------------------------------------------------------
@dataclass(frozen=True)
class ConnectResult:
    ok: bool
    device: str = ""              # nvme3
    already_connected: bool = False
    message: str = ""

    def to_dict(self) -> dict:
        return _dict(self)


_CONNECTED_TEXT = re.compile(r"(?:connecting to device|device):?\s*\"?\s*:?\s*\"?(nvme\d+)")


def parse_connect(stdout: str, stderr: str, returncode: int | None, source: str = "nvme connect") -> ConnectResult:
    """Result of ``nvme connect``. nvme-cli 2.3 prints nothing on success, or ``{"device": "nvme0"}``
    with ``-o json`` (lab captures). A refused connect is ``ok=False`` with the tool's message."""
    if not isinstance(stdout, str) or not isinstance(stderr, str):
        raise ParseError(source, "output", "expected text")
    message = (stderr.strip() or stdout.strip()).splitlines()[-1:] or [""]
    combined = f"{stdout}\n{stderr}"
    already = "already connected" in combined or "Operation already in progress" in combined \
        or returncode == 114
    match = _CONNECTED_TEXT.search(stdout)
    if returncode == 0:
        return ConnectResult(True, match.group(1) if match else "", already, message[0])
    return ConnectResult(False, "", already, message[0])


def parse_disconnect(output: str, source: str = "nvme disconnect") -> int:
    """'NQN:<nqn> disconnected 2 controller(s)' -> 2."""
    match = re.search(r"disconnected\s+(\d+)\s+controller", output if isinstance(output, str) else "")
    if not match:
        raise ParseError(source, "disconnected", f"no 'disconnected N controller(s)' in {str(output).strip()[:80]!r}")
    return int(match.group(1))


# -- running nvme-cli ----------------------------------------------------------
def _json_command(runner: Runner, args: Sequence[str], host: Host, timeout: float, label: str):
    result = runner.run(["nvme", *args, "-o", "json"], timeout=timeout, host=host, label=label)
    if result.dry_run:
        return None, result
    if not result.ok:
        raise ToolError(result.failure(f"nvme {args[0]}"))
    return result.stdout, result


def run_list(runner: Runner, *, host: Host = LOCAL, timeout: float = 60) -> tuple[Namespace, ...]:
    out, result = _json_command(runner, ["list"], host, timeout, "nvme-list")
    return () if out is None else parse_list(out, result.command_line)


def run_list_verbose(runner: Runner, *, host: Host = LOCAL, timeout: float = 60) -> tuple[Subsystem, ...]:
    out, result = _json_command(runner, ["list", "-v"], host, timeout, "nvme-list-v")
    return () if out is None else parse_list_verbose(out, result.command_line)


def run_discover(runner: Runner, *, transport: str, traddr: str, trsvcid: str | int = 4420,
                 host_traddr: str | None = None, host_iface: str | None = None, host: Host = LOCAL,
                 timeout: float = 60) -> DiscoveryLog:
    args = ["discover", "-t", transport, "-a", traddr, "-s", str(trsvcid)]
    if host_traddr:
        args += ["-w", host_traddr]
    if host_iface:
        args += ["-f", host_iface]
    out, result = _json_command(runner, args, host, timeout, "nvme-discover")
    return DiscoveryLog(None, ()) if out is None else parse_discover(out, result.command_line)


def run_smart_log(runner: Runner, device: str, *, host: Host = LOCAL, timeout: float = 60) -> SmartLog | None:
    out, result = _json_command(runner, ["smart-log", device], host, timeout, "nvme-smart-log")
    return None if out is None else parse_smart_log(out, result.command_line)


# nvme connect options with a value (nvme-cli 2.3 spellings), then the on/off ones
CONNECT_VALUES = ("host_traddr", "host_iface", "keep_alive_tmo", "ctrl_loss_tmo", "reconnect_delay", "nr_io_queues",
                  "queue_size", "hostnqn", "hostid", "dhchap_secret", "dhchap_ctrl_secret")
CONNECT_FLAGS = ("hdr_digest", "data_digest")
SECRET_OPTIONS = ("dhchap_secret", "dhchap_ctrl_secret")


def connect_argv(*, transport: str, traddr: str, nqn: str, trsvcid: str | int = 4420, **options) -> list[str]:
    """``nvme connect`` for one path; ``options`` are CONNECT_VALUES (None: left out) and CONNECT_FLAGS."""
    unknown = set(options) - set(CONNECT_VALUES) - set(CONNECT_FLAGS)
    if unknown:
        raise TypeError(f"connect_argv: unknown option(s) {sorted(unknown)}")
    argv = ["nvme", "connect", "-t", transport, "-a", traddr, "-s", str(trsvcid), "-n", nqn]
    for name in CONNECT_VALUES:
        if options.get(name) is not None:
            argv += ["--" + name.replace("_", "-"), str(options[name])]
    argv += ["--" + name.replace("_", "-") for name in CONNECT_FLAGS if options.get(name)]
    return argv


def masked(text: str, secrets) -> str:
    """``text`` with each secret shown as <secret> (DH-CHAP keys never reach a log or an error line)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "<secret>")
    return text


def run_connect(runner: Runner, *, host: Host = LOCAL, timeout: float = 60, **options) -> ConnectResult:
    """``nvme connect``; a refusal is ``ok=False`` with the tool's message (callers decide). DH-CHAP secrets
    are redacted from the run folder's record (RunDir.redact) and from every message."""
    secrets = [str(options[k]) for k in SECRET_OPTIONS if options.get(k)]
    if secrets and runner.rundir is not None:
        runner.rundir.redact(*secrets)
    result = runner.run(connect_argv(**options), timeout=timeout, host=host, label="nvme-connect")
    if result.dry_run:
        return ConnectResult(True, "", False, "dry run")
    if result.timed_out:
        raise ToolError(masked(result.failure("nvme connect"), secrets))
    parsed = parse_connect(result.stdout, result.stderr, result.returncode, masked(result.command_line, secrets))
    return ConnectResult(parsed.ok, parsed.device, parsed.already_connected, masked(parsed.message, secrets))


def run_disconnect(runner: Runner, *, nqn: str | None = None, device: str | None = None,
                   host: Host = LOCAL, timeout: float = 60) -> int:
    """Disconnect by NQN (all its controllers) or one controller device; returns how many went."""
    if bool(nqn) == bool(device):
        raise ValueError("give exactly one of nqn or device")
    args = ["nvme", "disconnect", *(["-n", nqn] if nqn else ["-d", device])]
    result = runner.run(args, timeout=timeout, host=host, label="nvme-disconnect")
    if result.dry_run:
        return 0
    if not result.ok:
        raise ToolError(result.failure("nvme disconnect"))
    return parse_disconnect(result.stdout, result.command_line)


VERSION_ARGV = ("nvme", "version")
VERSION_PATTERN = r"nvme version (?P<version>(?P<major>\d+)\.(?P<minor>\d+)\S*)"   # also what `fxprobe doctor` prints
LIBNVME_VERSION_PATTERN = r"libnvme version (?P<version>\S+)"                     # the same command's second line


def parse_nvme_version(output: str, source: str = "nvme version") -> tuple[int, int]:
    return parse_major_minor(output, source, VERSION_PATTERN, "nvme version X.Y")


def probe_nvme_cli(runner: Runner, host: Host = LOCAL) -> str | None:
    """None when nvme-cli runs on host; else the reason."""
    return probe_version(runner, VERSION_ARGV, parse_nvme_version, host=host, label="nvme-version")[1]


def probe_nvme_fabrics(runner: Runner, host: Host = LOCAL) -> str | None:
    """None when the host can make fabric connections (/dev/nvme-fabrics exists); else the reason."""
    return probe_command(runner, ["test", "-c", "/dev/nvme-fabrics"],
                         "/dev/nvme-fabrics is missing{where}: the kernel has no NVMe-oF host driver loaded "
                         "(modprobe nvme-tcp or nvme-rdma)", host=host, label="nvme-fabrics")