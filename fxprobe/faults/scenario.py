"""Fault scenarios: ``faults/<name>.toml`` checked against a schema, errors naming file, key and allowed values.

A scenario says which fault to inject and how (``[fault]``), when and for how long (``[timing]``),
what load runs meanwhile (``[load]``), the invisibility criteria (``[criteria]``) and, for the lab,
which export and how many paths (``[lab]``). Every key has a documented default (DEFAULTS below).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fxprobe.core.errors import BadInput
from fxprobe.core.tomlfile import parse_toml, read_text

SCENARIO_DIR = Path(__file__).resolve().parent.parent.parent / "faults"

# fault kind -> mechanisms that can produce it ("auto" picks one from what the environment offers)
KINDS: dict[str, tuple[str, ...]] = {
    "drive-pull": ("qmp", "sysfs", "md", "nullblk", "manual"),
    "link-down": ("qmp", "netlink", "manual"),
    "link-flap": ("qmp", "netlink"),
    "path-loss": ("nvme-disconnect",),
    "port-disable": ("configfs",),
    "namespace-disable": ("configfs",),
}
RW = ("randread", "read", "randwrite", "write", "randrw", "rw")

# section -> key -> (types, default, help)
SCHEMA: dict[str, dict[str, tuple[tuple[type, ...], Any, str]]] = {
    "": {"description": ((str,), "", "one line saying what the scenario shows")},
    "fault": {
        "kind": ((str,), None, "what breaks: " + ", ".join(KINDS)),
        "via": ((str,), "auto", "how: auto, qmp, sysfs, md, nullblk, manual, netlink, nvme-disconnect, configfs"),
        "slot": ((int,), None, "lab drive slot (drive-pull via qmp; default: the first drive of the export)"),
        "serial": ((str,), None, "drive serial number (drive-pull on a Linux host)"),
        "md": ((str,), None, "md device holding the drive, e.g. /dev/md0 (via md)"),
        "nullb": ((str,), None, "null_blk configfs name (via nullblk)"),
        "link": ((int,), None, "lab data link number (link faults via qmp)"),
        "interface": ((str,), None, "network interface name (link faults via netlink)"),
        "address": ((str,), None, "traddr of the path to drop (path-loss)"),
        "nqn": ((str,), None, "subsystem NQN (path-loss, port-disable, namespace-disable)"),
        "port": ((int,), None, "nvmet port id (port-disable)"),
        "nsid": ((int,), None, "namespace id (namespace-disable)"),
        "period_s": ((int, float), 4.0, "link-flap: one down+up cycle (half down, half up)"),
    },
    "timing": {
        "steady_s": ((int, float), 10.0, "load before the fault (the pre-fault steady state)"),
        "settle_s": ((int, float), 2.0, "start of the load discarded as warm-up"),
        "fault_s": ((int, float), 10.0, "how long the fault lasts"),
        "recover_s": ((int, float), 10.0, "load kept running after the restore"),
    },
    "load": {
        "rw": ((str,), "randread", "fio rw: " + ", ".join(RW)),
        "bs": ((str, int), "4k", "fio block size"),
        "iodepth": ((int,), 8, "fio iodepth"),
        "numjobs": ((int,), 1, "fio numjobs"),
        "log_msec": ((int,), 500, "fio log_avg_msec / log_hist_msec: the timeline resolution"),
        "host": ((str,), "host1", "lab guest that runs the load"),
        "target": ((str,), "", "block device the load reads (Linux host runs; the lab uses its export)"),
    },
    "criteria": {
        "max_errors": ((int,), 0, "I/O errors allowed"),
        "max_stall_s": ((int, float), 2.0, "longest time with no completed I/O allowed"),
        "min_throughput_pct": ((int, float), 50.0, "throughput in the fault window vs pre-fault, at least"),
        "max_p99_ratio": ((int, float), 10.0, "p99 latency in the window / pre-fault p99, at most"),
    },
    "lab": {
        "export": ((str,), "main", "which export carries the load: main, or a twin built for the scenario"),
        "twin_level": ((str,), "raid0", "RAID level of the twin export"),
        "twin_slots": ((list,), [], "free drive slots the twin is built from (empty: the first free ones)"),
        "twin_drives": ((int,), 2, "how many free drives the twin takes when twin_slots is empty"),
        "paths": ((int,), 0, "live paths to keep during the run (0: as connected; 1: drop the others first)"),
        "iopolicy": ((str,), "", "multipath iopolicy to set on the host (numa, round-robin, queue-depth)"),
        "keep_alive_tmo": ((int,), 0, "reconnect the paths with this kato before the run (0: leave as is)"),
        "ctrl_loss_tmo": ((int,), 0, "... and this ctrl_loss_tmo (0: leave as is)"),
        "reconnect_delay": ((int,), 0, "... and this reconnect_delay (0: leave as is)"),
        "fast_io_fail_tmo": ((int,), -2, "write this fast_io_fail_tmo on each path (-2: leave as is, -1: off)"),
    },
}
IOPOLICIES = ("", "numa", "round-robin", "queue-depth")
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}$")


@dataclass(frozen=True)
class Scenario:
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

    def to_dict(self) -> dict:
        return asdict(self)


def _bad(source: str, key: str, problem: str, hint: str | None = None) -> BadInput:
    return BadInput(f"{source}: key {key!r}: {problem}", hint=hint)


def _section(data: dict, section: str, source: str) -> dict:
    schema = SCHEMA[section]
    raw = data if section == "" else data.get(section, {})
    if not isinstance(raw, dict):
        raise _bad(source, section, "must be a table", f"write [{section}]")
    out = {}
    for key, value in raw.items():
        if section == "" and key in SCHEMA:
            continue
        where = f"{section}.{key}" if section else key
        if key not in schema:
            allowed = ", ".join(schema) + ("" if section else ", [" + "], [".join(s for s in SCHEMA if s) + "]")
            raise _bad(source, where, "unknown key", f"allowed here: {allowed}")
        types = schema[key][0]
        if isinstance(value, bool) or not isinstance(value, types):
            names = " or ".join(t.__name__.replace("str", "string").replace("int", "integer") for t in types)
            raise _bad(source, where, f"expected {names}, got {value!r}")
        out[key] = float(value) if float in types and isinstance(value, int) else value
    for key, (_, default, _) in schema.items():
        out.setdefault(key, list(default) if isinstance(default, list) else default)
    return out


def parse_scenario(text: str, source: str, name: str | None = None) -> Scenario:
    """Validate scenario TOML text; BadInput names the file, the key and what is allowed."""
    data = parse_toml(text, source)
    top = _section(data, "", source)
    fault = _section(data, "fault", source)
    timing = _section(data, "timing", source)
    load = _section(data, "load", source)
    criteria = _section(data, "criteria", source)
    lab = _section(data, "lab", source)
    kind = fault["kind"]
    if kind is None:
        raise _bad(source, "fault.kind", "missing", f"one of {', '.join(KINDS)}")
    if kind not in KINDS:
        raise _bad(source, "fault.kind", f"unknown fault {kind!r}", f"one of {', '.join(KINDS)}")
    if fault["via"] != "auto" and fault["via"] not in KINDS[kind]:
        raise _bad(source, "fault.via", f"{kind} cannot be done via {fault['via']!r}",
                   f"one of auto, {', '.join(KINDS[kind])}")
    for key in ("steady_s", "fault_s", "recover_s", "settle_s"):
        if timing[key] < 0 or timing[key] > 3600 * 72:
            raise _bad(source, f"timing.{key}", f"{timing[key]} s is out of range", "0 to 259200 s")
    if timing["settle_s"] >= timing["steady_s"]:
        raise _bad(source, "timing.settle_s", "must be shorter than timing.steady_s (no steady state left)")
    if fault["period_s"] <= 0:
        raise _bad(source, "fault.period_s", "must be > 0")
    if load["rw"] not in RW:
        raise _bad(source, "load.rw", f"unknown {load['rw']!r}", f"one of {', '.join(RW)}")
    for key in ("iodepth", "numjobs", "log_msec"):
        if load[key] < 1:
            raise _bad(source, f"load.{key}", "must be >= 1")
    if lab["iopolicy"] not in IOPOLICIES:
        raise _bad(source, "lab.iopolicy", f"unknown {lab['iopolicy']!r}", "numa, round-robin or queue-depth")
    if lab["export"] not in ("main", "twin"):
        raise _bad(source, "lab.export", f"unknown {lab['export']!r}", "main or twin")
    if lab["twin_drives"] < 1:
        raise _bad(source, "lab.twin_drives", "must be >= 1")
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in lab["twin_slots"]):
        raise _bad(source, "lab.twin_slots", "expected a list of integers")
    if not 0 <= lab["paths"] <= 8:
        raise _bad(source, "lab.paths", "0 to 8")
    for key in ("max_errors", "max_stall_s", "min_throughput_pct", "max_p99_ratio"):
        if criteria[key] < 0:
            raise _bad(source, f"criteria.{key}", "must be >= 0")
    return Scenario(name or Path(source).stem, source, top["description"], fault, timing, load, criteria, lab)


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
