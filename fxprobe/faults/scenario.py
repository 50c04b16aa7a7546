"""Fault scenarios: ``faults/<name>.toml`` checked against a schema, errors naming file, key and allowed values.

A scenario says which fault to inject and how (``[fault]``), when and for how long (``[timing]``),
what load runs meanwhile (``[load]``), the invisibility criteria (``[criteria]``) and, for the lab,
which export and how many paths (``[lab]``). ``[fault]``, ``[timing]`` and ``[criteria]`` must be there (a
truncated file is refused, never run on defaults); every key in them has a documented default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, ValidationInfo, field_validator

from fxprobe.core.data import AsDict
from fxprobe.core.errors import BadInput
from fxprobe.core.schema import (InputModel, NonEmptyStr, NonNegativeFloat, NonNegativeInt, Percent, PositiveFloat,
                                 PositiveInt, SizeAsWritten, VerifyMethod, beside, validate)
from fxprobe.core.tomlfile import parse_toml, read_text

SCENARIO_DIR = Path(__file__).resolve().parent.parent.parent / "faults"

# fault kind -> mechanisms that can produce it ("auto" picks one from what the environment offers)
KINDS: dict[str, tuple[str, ...]] = {
    "drive-pull": ("qmp", "sysfs", "md", "nullblk", "manual", "command"),
    "link-down": ("qmp", "netlink", "manual", "command"),
    "link-flap": ("qmp", "netlink"),
    "path-loss": ("nvme-disconnect",),
    "port-disable": ("configfs",),
    "namespace-disable": ("configfs",),
    "corrupt": ("dd",),          # lab: a raid0 member below md; host: fault.device
}
LINK_KINDS = ("link-down", "link-flap", "path-loss", "port-disable")   # the kinds that cut a path, not a drive
RW = ("randread", "read", "randwrite", "write", "randrw", "rw")

FaultKind = Literal["drive-pull", "link-down", "link-flap", "path-loss", "port-disable", "namespace-disable",
                    "corrupt"]
Via = Literal["auto", "qmp", "sysfs", "md", "nullblk", "manual", "netlink", "nvme-disconnect", "configfs", "command",
              "dd"]
Rw = Literal["randread", "read", "randwrite", "write", "randrw", "rw"]
IoPolicy = Literal["", "numa", "round-robin", "queue-depth"]
MAX_SPAN_S = 3600 * 72
Span = Annotated[float, Field(ge=0, le=MAX_SPAN_S)]
LastingSpan = Annotated[float, Field(gt=0, le=MAX_SPAN_S)]     # a fault of 0 s is injected and restored at once
Text = Annotated[str | None, Field(min_length=1)]


def _help(text: str, **constraints: Any) -> Any:
    return Field(description=text, **constraints)


class FaultTable(InputModel):
    kind: FaultKind = _help("what breaks: " + ", ".join(KINDS))
    via: Via = _help("how: auto, qmp, sysfs, md, nullblk, manual, netlink, nvme-disconnect, configfs, dd, command "
                     "(a target-control executable: docs/target-control.md)", default="auto")
    command: list[NonEmptyStr] | None = _help("via command: the target-control executable and its first arguments; "
                                              "fxprobe appends drive-pull SLOT|SERIAL, drive-restore, port-down PORT, "
                                              "port-up PORT or status", default=None)
    target_port: Text = _help("link-down via command: the PORT the executable takes down (the lab's: HOST:LINK)",
                              default=None)
    slot: NonNegativeInt | None = _help("lab drive slot (drive-pull via qmp; default: the first drive of the export)",
                                        default=None)
    slots: list[NonNegativeInt] = _help("several lab drive slots pulled together (drive-pull via qmp; the redundancy "
                                        "refusal judges the combination by the RAID's geometry)", default=[])
    serials: list[NonEmptyStr] = _help("the same by serial (lab drive-pull)", default=[])
    delay_s: Span = _help("time between the pulls of several drives (0: at once)", default=0.0)
    replace: bool = _help("lab drive-pull: restore each slot as a new drive (its md superblock wiped, md rebuilds it "
                          "whole) instead of the pulled one re-inserted (md's write-intent bitmap resyncs only what "
                          "was written while it was out)", default=False)
    serial: Text = _help("drive serial number (drive-pull on a Linux host)", default=None)
    md: Text = _help("md device holding the drive, e.g. /dev/md0 (via md)", default=None)
    nullb: Text = _help("null_blk configfs name (via nullblk)", default=None)
    link: NonNegativeInt | None = _help("lab data link number (link faults via qmp)", default=None)
    interface: Text = _help("network interface name (link faults via netlink)", default=None)
    address: Text = _help("traddr of the path to drop (path-loss)", default=None)
    nqn: Text = _help("subsystem NQN (path-loss, port-disable, namespace-disable)", default=None)
    port: NonNegativeInt | None = _help("nvmet port id (port-disable)", default=None)
    nsid: PositiveInt | None = _help("namespace id (namespace-disable)", default=None)
    period_s: PositiveFloat = _help("link-flap: one down+up cycle (half down, half up)", default=4.0)
    array_offset: SizeAsWritten | None = _help("corrupt: where in the export (raid0) the overwritten range starts; "
                                               "it is written on the member drive that holds it, below md",
                                               default=None)
    length: SizeAsWritten = _help("corrupt: bytes overwritten with zeros (within one chunk)", default="256k")
    device: Text = _help("corrupt on a Linux host: the block device overwritten at array_offset (e.g. the load's own "
                         "target); checked like every destructive target (nothing mounted, swap, md or dm holds) and "
                         "allowed by its serial", default=None)

    @field_validator("serials")
    @classmethod
    def _one_way_to_name_drives(cls, serials: list[str], info: ValidationInfo) -> list[str]:
        named = [k for k, v in (("slot", info.data.get("slot") is not None), ("slots", info.data.get("slots")),
                                ("serials", serials)) if v]
        if len(named) > 1:
            raise ValueError(f"name the drives one way: {' and '.join(named)} are both set")
        for key, values in (("slots", info.data.get("slots") or []), ("serials", serials)):
            if len(set(values)) != len(values):
                raise ValueError(f"fault.{key} names a drive twice: {values}")
        return serials

    _via_fits_kind = beside("via", "kind", lambda via, kind: f"{kind} cannot be done via {via!r}; use one of auto, "
                            f"{', '.join(KINDS[kind])}" if kind and via != "auto" and via not in KINDS[kind] else None)


class TimingTable(InputModel):
    steady_s: Span = _help("load before the fault (the pre-fault steady state)", default=10.0)
    settle_s: Span = _help("start of the load discarded as warm-up", default=2.0)
    fault_s: LastingSpan = _help("how long the fault lasts (G4 judges a run against gates.toml "
                                 "g4.fault_window_min_s)", default=10.0)
    recover_s: Span = _help("load kept running after the restore, and judged: a stall is looked for until "
                            "recover_s + 2 s after it (G4: g4.fault_recover_min_s)", default=10.0)
    rebuild_s: Span = _help("drive pulls: after the restore the load keeps running while md rebuilds the returned "
                            "drive(s), until the rebuild ends or this many seconds after the restore (the bound, "
                            "printed); 0: the rebuild is not observed", default=300.0)

    _steady_state_left = beside("settle_s", "steady_s", lambda settle_s, steady_s: (
        f"must be shorter than timing.steady_s ({settle_s:g} s >= {steady_s:g} s): no steady state would be left"
        if settle_s >= steady_s else None))


class LoadTable(InputModel):
    rw: Rw = _help("fio rw: " + ", ".join(RW), default="randread")
    bs: SizeAsWritten = _help("fio block size", default="4k")
    iodepth: PositiveInt = _help("fio iodepth", default=8)
    numjobs: PositiveInt = _help("fio numjobs", default=1)
    rate_iops: NonNegativeInt = _help("fio rate_iops: a fixed offered load, I/O per second per job (0: as fast as "
                                      "the target answers)", default=0)
    log_msec: PositiveInt = _help("fio log_avg_msec / log_hist_msec: the timeline resolution", default=500)
    host: NonEmptyStr = _help("lab guest that runs the load", default="host1")
    target: str = _help("block device the load reads (Linux host runs; the lab uses its export)", default="")
    region: SizeAsWritten = _help("the part of the device (from offset 0) the layout writes with verify headers and "
                                  "the load covers (on a real array: larger than its cache)", default="8M")
    verify: VerifyMethod = _help("fio verify checksum of the layout and the load (off: only with no_verify_reason)",
                                 default="crc32c")
    no_verify_reason: str = _help("why the data is not verified (required with verify = \"off\"; printed)",
                                  default="")

    _reason_to_opt_out = beside("no_verify_reason", "verify", lambda reason, verify: (
        'required with verify = "off": say why this run does not verify its data'
        if verify == "off" and not reason.strip() else None))


class CriteriaTable(InputModel):
    max_errors: NonNegativeInt = _help("I/O errors allowed", default=0)
    max_stall_s: NonNegativeFloat = _help("longest time with no completed I/O allowed", default=2.0)
    min_throughput_pct: Percent = _help("throughput in the fault window vs pre-fault, at least", default=50.0)
    max_p99_ratio: PositiveFloat = _help("p99 latency in the window / pre-fault p99, at most", default=10.0)
    max_rebuild_s: NonNegativeFloat | None = _help(
        "drive pulls: judge the md rebuild time (restore to md clean) against this many seconds (unset: the "
        "rebuild is information, not judged)", default=None)
    min_rebuild_throughput_pct: Percent | None = _help(
        "drive pulls: judge the throughput while md rebuilds vs pre-fault, at least (unset: information)",
        default=None)


class LabTable(InputModel):
    export: Literal["main", "twin"] = _help("which export carries the load: main, or a twin built for the scenario",
                                            default="main")
    twin_level: NonEmptyStr = _help("RAID level of the twin export", default="raid0")
    twin_slots: list[NonNegativeInt] = _help("free drive slots the twin is built from (empty: the first free ones)",
                                             default=[])
    twin_drives: PositiveInt = _help("how many free drives the twin takes when twin_slots is empty", default=2)
    paths: Annotated[int, Field(ge=0, le=8)] = _help(
        "live paths to keep during the run (0: as connected; 1: drop the others first)", default=0)
    iopolicy: IoPolicy = _help("multipath iopolicy to set on the host (numa, round-robin, queue-depth)", default="")
    keep_alive_tmo: NonNegativeInt = _help("reconnect the paths with this kato before the run (0: leave as is)",
                                           default=0)
    ctrl_loss_tmo: Annotated[int, Field(ge=-1)] = _help("... and this ctrl_loss_tmo (0: leave as is, -1: forever)",
                                                        default=0)
    reconnect_delay: NonNegativeInt = _help("... and this reconnect_delay (0: leave as is)", default=0)
    fast_io_fail_tmo: Annotated[int, Field(ge=-2)] = _help(
        "write this fast_io_fail_tmo on each path (-2: leave as is, -1: off)", default=-2)
    transport: Literal["", "tcp", "rdma"] = _help(
        "reconnect the load's paths over this transport before the run (tcp, rdma; empty: as connected)", default="")
    expect: Literal["", "invisible", "visible"] = _help(
        "the verdict this scenario gives in fxprobe's QEMU lab (scripts/bench verdicts counts the runs that give "
        "it; empty: not checked)", default="")
    expect_reason: str = _help("why the lab gives that verdict (printed in the bench matrix)", default="")
    twin: str = _help("the planted-fail twin of this scenario (a scenario name): run beside it by scripts/bench "
                      "verdicts, it must give the visible verdict", default="")


class ScenarioFile(InputModel):
    """A fault scenario (faults/*.toml)."""

    description: str = _help("one line saying what the scenario shows", default="")
    fault: FaultTable
    timing: TimingTable           # required: when the fault happens and how long the load runs
    load: LoadTable = LoadTable()
    criteria: CriteriaTable       # required: what "invisible" means is never left to the defaults
    lab: LabTable = LabTable()


REQUIRED_TABLES = {"timing": "timing (steady_s, fault_s, recover_s)",      # and [fault], which the schema requires
                   "criteria": "criteria (max_errors, max_stall_s, min_throughput_pct, max_p99_ratio)"}
TABLES = {"fault": FaultTable, "timing": TimingTable, "load": LoadTable, "criteria": CriteriaTable, "lab": LabTable}
# section -> key -> field (type, default, help), "" for the top level: what faults/README.md documents
SCHEMA = {"": {"description": ScenarioFile.model_fields["description"]},
          **{name: dict(table.model_fields) for name, table in TABLES.items()}}
IOPOLICIES = get_args(IoPolicy)
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")


@dataclass(frozen=True)
class Scenario(AsDict):
    name: str
    source: str
    description: str
    fault: dict
    timing: dict
    load: dict
    criteria: dict
    lab: dict = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.fault["kind"]

    @property
    def total_s(self) -> float:
        t = self.timing
        return t["steady_s"] + t["fault_s"] + t["recover_s"]

    @property
    def rebuild_bound_s(self) -> float:
        """How long after the restore the load may run on while md rebuilds (drive pulls; else 0)."""
        return self.timing["rebuild_s"] if self.kind == "drive-pull" else 0.0

    @property
    def planned_s(self) -> float:
        """The longest the load runs: to the end of the recovery window or of the rebuild bound."""
        t = self.timing
        return t["steady_s"] + t["fault_s"] + max(t["recover_s"], self.rebuild_bound_s)


def parse_scenario(text: str, source: str, name: str | None = None) -> Scenario:
    """Validate scenario TOML text; BadInput names the file, the field and what is allowed."""
    data = parse_toml(text, source)
    for table in REQUIRED_TABLES:
        if "fault" in data and table not in data:
            raise BadInput(f"{source}: field '{table}': missing: no [{table}] table - a scenario states its "
                           f"{REQUIRED_TABLES[table]}, a truncated file is never run on defaults (faults/README.md)")
    parsed = validate(ScenarioFile, data, source)
    tables = {key: getattr(parsed, key).model_dump() for key in TABLES}
    return Scenario(name or Path(source).stem, source, parsed.description, **tables)


def scenario_names(folder: Path = SCENARIO_DIR) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.toml"))


def load_scenario(name_or_path: str, folder: Path = SCENARIO_DIR) -> Scenario:
    """A scenario by name (``faults/<name>.toml``) or by path."""
    path = Path(name_or_path)
    if not (path.suffix == ".toml" or "/" in name_or_path):
        if not NAME_RE.match(name_or_path):
            raise BadInput(f"scenario {name_or_path!r}: not a scenario name or a .toml path")
        path = folder / f"{name_or_path}.toml"
        if not path.exists():
            raise BadInput(f"scenario {name_or_path!r}: no {path}",
                           hint=f"known scenarios: {', '.join(scenario_names(folder)) or 'none'}")
    return parse_scenario(read_text(path, "scenario file"), str(path))
