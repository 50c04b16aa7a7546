"""G1: every array's self-test recognizes all its drives, each live and healthy.

Drives are found in sysfs (the kernel's view), their SMART health read with
nvme-cli, and nvme-cli's own list is cross-checked against sysfs (a criterion). Drives are
named by slot and serial number, never only by /dev name: the slot is the one an
expected list gives (``--serials`` or ``--expect-from`` an earlier run), else the
platform's PCI slot the kernel reports, else the drive's PCI address. A missing
drive can be named only against an expected list.

A drive of the box is a PCIe controller; it is counted once however many controllers report its serial (and
subsystem NQN), and a serial two controllers report fails. Fabrics controllers (NVMe-oF paths to some other
box) are no drives of this one unless ``--include-fabrics``; the host's own system drive (it holds /) is not
counted. Each drive needs a usable namespace (one at least, its size > 0, not read-only). A drive reporting
0 % spare with threshold 0 % fails unless ``--emulated-drives MODEL`` names its model (QEMU's drives do).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError

from fxprobe.core import kernel, sysfs
from fxprobe.core.data import AsDict
from fxprobe.tools import nvme_sysfs
from fxprobe.tools.blockdev import SystemView
from fxprobe.core.errors import BadInput, NotRunnable, ToolError
from fxprobe.core.schema import InputModel
from fxprobe.core.tomlfile import read_text
from fxprobe.core.runner import Runner
from fxprobe.tools import nvme
from fxprobe.core.verdict import Criterion, Outcome, Verdict


@dataclass(frozen=True)
class Limits:
    expect_drives: int
    max_media_errors: int = 0
    min_spare_percent: int = 10
    max_percent_used: int = 90
    allow_mixed_firmware: bool = False
    emulated_model: str | None = None      # drives of this model report 0 % spare with threshold 0 % (emulated)

    def __post_init__(self):
        if self.expect_drives < 1:
            raise BadInput(f"--expect-drives {self.expect_drives}: must be at least 1")


@dataclass(frozen=True)
class ExpectedDrive:
    serial: str
    slot: str | None


@dataclass(frozen=True)
class Drive(AsDict):
    controller: str
    serial: str
    model: str | None
    firmware: str | None
    transport: str | None
    state: str | None
    subsysnqn: str | None
    smart: dict | None
    smart_error: str | None = None
    slot: str | None = None
    pci_address: str | None = None
    namespaces: tuple[dict, ...] = ()      # {name, size_bytes, read_only} of each block device of the drive

    def label(self) -> str:
        slot = f"slot {self.slot} " if self.slot else ""
        return f"{slot}{self.serial} ({self.controller})"


class ExpectedSerial(InputModel):
    """One line of an expected-serials file: an NVMe serial (1-20 printable ASCII characters), and its slot."""

    serial: Annotated[str, Field(pattern=r"^[\x21-\x7e]{1,20}$")]
    slot: Annotated[str, Field(pattern=r"^[\x21-\x7e]{1,20}$")] | None = None


def parse_expected_serials(text: str, source: str) -> list[ExpectedDrive]:
    """Lines of ``SERIAL`` or ``SLOT SERIAL``; ``#`` starts a comment. Errors name file and line."""
    drives: list[ExpectedDrive] = []
    serials: dict[str, int] = {}
    slots: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) > 2:
            raise BadInput(f"{source}:{number}: expected 'SERIAL' or 'SLOT SERIAL', got {len(parts)} fields: {line[:60]!r}")
        fields = {"serial": parts[-1], "slot": parts[0] if len(parts) == 2 else None}
        try:
            entry = ExpectedSerial.model_validate(fields)
        except ValidationError:
            bad = "slot" if fields["slot"] is not None and not _PRINTABLE.match(fields["slot"]) else "serial"
            raise BadInput(f"{source}:{number}: {bad} {str(fields[bad])[:40]!r} is not an NVMe {bad} "
                           "(1-20 printable ASCII characters)") from None
        for key, seen in (("serial", serials), ("slot", slots)):
            value = getattr(entry, key)
            if value is not None and value in seen:
                raise BadInput(f"{source}:{number}: {key} {value} listed twice (first on line {seen[value]})")
            if value is not None:
                seen[value] = number
        drives.append(ExpectedDrive(entry.serial, entry.slot))
    if not drives:
        raise BadInput(f"{source}: no serial numbers in the file")
    return drives


_PRINTABLE = re.compile(r"^[\x21-\x7e]{1,20}$")


def load_expected_serials(path: Path) -> list[ExpectedDrive]:
    """The expected-serials file; ``-`` reads it from stdin (how a fleet sends each node its own list)."""
    if str(path) == "-":
        import sys
        return parse_expected_serials(sys.stdin.read(), "stdin")
    return parse_expected_serials(read_text(path, "expected-serials file"), str(path))


def parse_expected_run(results: dict, source: str, node: str | None = None,
                       fleet: bool = False) -> list[ExpectedDrive]:
    """The drives an earlier ``selftest`` (its ``drives``) or ``inventory`` (its PCIe ``controllers``) saw,
    as the expected list: serial and the slot it was in. A fleet run (``nodes``) gives the drives of ``node``."""
    command = results.get("command")
    if isinstance(results.get("nodes"), list):
        names = [str(n.get("node")) for n in results["nodes"] if isinstance(n, dict)]
        entry = next((n for n in results["nodes"] if isinstance(n, dict) and n.get("node") == node), None)
        if entry is None:
            raise BadInput(f"{source}: a fleet {command} run with nodes {', '.join(names) or 'none'}; "
                           f"it has no node {node or 'local'!r}")
        results = entry.get("results") or {}
        command = results.get("command", command)
    elif fleet:
        raise BadInput(f"{source}: a {command or 'unknown'!r} run of one node; with --nodes, --expect-from takes an "
                       "earlier fleet run (selftest or inventory with --nodes), whose sub-run per node is expected")
    if command == "selftest":
        records = results.get("drives")
    elif command == "inventory":
        inventory = results.get("inventory") if isinstance(results.get("inventory"), dict) else {}
        records = [c for c in inventory.get("controllers") or [] if isinstance(c, dict) and c.get("transport") == "pcie"]
    else:
        raise BadInput(f"{source}: a {command or 'unknown'!r} run; --expect-from takes a selftest or inventory run")
    if not isinstance(records, list) or not records:
        raise BadInput(f"{source}: the {command} run lists no drives to expect")
    drives, seen = [], set()
    for index, record in enumerate(records):
        serial = (record.get("serial") or "").strip() if isinstance(record, dict) else ""
        slot = record.get("slot") or record.get("pci_address") if isinstance(record, dict) else None
        try:
            entry = ExpectedSerial.model_validate({"serial": serial, "slot": None if slot is None else str(slot)})
        except ValidationError:
            raise BadInput(f"{source}: drive {index}: serial {serial[:40]!r} / slot {str(slot)[:40]!r} is not an "
                           "NVMe serial and slot (1-20 printable ASCII characters)") from None
        if entry.serial in seen:
            raise BadInput(f"{source}: drive {index}: serial {entry.serial} listed twice")
        seen.add(entry.serial)
        drives.append(ExpectedDrive(entry.serial, entry.slot))
    return sorted(drives, key=drive_order)


def load_expected_run(path: Path, node: str | None = None, fleet: bool = False) -> list[ExpectedDrive]:
    """``--expect-from RUNDIR``: the expected drives from an earlier run folder (read through its schema)."""
    from fxprobe.core.rundir import RunDir
    run = RunDir.open(Path(path))
    return parse_expected_run(run.results(), str(Path(path) / "results.json"), node, fleet)


def find_drives(runner: Runner, subsystem: str | None = None,
                include_fabrics: bool = False) -> tuple[list[Drive], list[str]]:
    """The drives of this box - its PCIe NVMe controllers (also fabrics ones when asked), each with its
    namespaces and SMART log - and the controllers not counted, each with why."""
    controllers = nvme_sysfs.controllers()
    if subsystem:
        controllers = [c for c in controllers if c.subsysnqn == subsystem]
    namespaces = {ns.name: ns for ns in nvme_sysfs.namespaces()}
    system = SystemView(sysfs.ROOT).root_devices()
    drives, skipped, fabrics = [], [], []
    for ctrl in controllers:
        who = f"{ctrl.name} ({ctrl.transport or '?'}, serial {(ctrl.serial or '?').strip()})"
        if ctrl.transport != "pcie" and not include_fabrics:
            fabrics.append(ctrl)
            continue
        if system & set(ctrl.namespaces):
            skipped.append(f"{who}: holds / ({', '.join(sorted(system & set(ctrl.namespaces)))}): the host's "
                           "system drive, not an array drive")
            continue
        smart, error = None, None
        try:
            log = nvme.run_smart_log(runner, f"/dev/{ctrl.name}", timeout=30)
            smart = log.to_dict() if log else None
        except ToolError as exc:
            error = exc.message
        own = tuple({"name": n, "size_bytes": namespaces[n].size_bytes if n in namespaces else None,
                     "read_only": namespaces[n].read_only if n in namespaces else None} for n in ctrl.namespaces)
        drives.append(Drive(ctrl.name, (ctrl.serial or "").strip(), ctrl.model, ctrl.firmware,
                            ctrl.transport, ctrl.state, ctrl.subsysnqn, smart, error,
                            slot=ctrl.slot or ctrl.pci_address, pci_address=ctrl.pci_address, namespaces=own))
    if fabrics:
        kinds = ", ".join(sorted({c.transport or "?" for c in fabrics}))
        skipped.insert(0, f"{len(fabrics)} fabrics controller(s) ({kinds}: "
                          f"{', '.join(sorted((c.name for c in fabrics), key=natural_key))}): paths to another box, "
                          "no drives of this one (--include-fabrics counts them, one per serial and subsystem NQN)")
    return sorted(drives, key=drive_order), skipped


def distinct_drives(drives: list[Drive]) -> int:
    """How many drives the controllers are: one per serial (and subsystem NQN, where there is one)."""
    return len({(d.serial, d.subsysnqn or "") for d in drives})


CRITICAL_WARNING_BITS = ("available spare below threshold", "temperature threshold", "NVM subsystem reliability degraded",
                         "media read-only", "volatile memory backup failed", "persistent memory region read-only")


def warning_bits(value: int) -> str:
    return ", ".join(text for bit, text in enumerate(CRITICAL_WARNING_BITS) if value & (1 << bit)) or "unknown bit"


def natural_key(text: str | None) -> tuple:
    """Sort key that orders S2 before S10 (digit runs compare as numbers); None sorts last."""
    if text is None:
        return (1,)
    return (0,) + tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                        for part in re.split(r"(\d+)", text) if part)


def drive_order(drive: "Drive | ExpectedDrive") -> tuple:
    return natural_key(drive.slot), natural_key(drive.serial)


def with_expected_slots(drives: list[Drive], expected: list[ExpectedDrive] | None) -> list[Drive]:
    """The drives named by the expected list's slots where it gives one (the buyer's naming), in slot order."""
    slots = {e.serial: e.slot for e in expected or [] if e.slot}
    return sorted((Drive(**{**d.to_dict(), "slot": slots.get(d.serial, d.slot)}) for d in drives), key=drive_order)


def _count(name: str, ok: list[Drive], total: int, bad: list[str]) -> Criterion:
    return Criterion(name, Outcome.PASS if not bad else Outcome.FAIL, f"{len(ok)}/{total}", f"{total}/{total}",
                     "==", detail="; ".join(bad))


def _unique_serials(drives: list[Drive]) -> Criterion:
    by_serial: dict[str, list[str]] = {}
    for d in drives:
        by_serial.setdefault(d.serial, []).append(d.controller)
    twice = [f"{serial or '(empty)'} reported by {', '.join(names)}" for serial, names in by_serial.items()
             if len(names) > 1 or not serial]
    return Criterion("serial numbers unique", Outcome.FAIL if twice else Outcome.PASS,
                     f"{len(by_serial)} serials / {len(drives)} controllers", "one serial per controller", "",
                     detail="; ".join(twice) + (" (one drive seen through two controllers, or two drives reporting "
                                                "one serial: either way not the drives the count needs)" if twice else ""))


def namespace_problems(drive: Drive) -> list[str]:
    if not drive.namespaces:
        return [f"{drive.label()}: no namespace"]
    out = []
    for ns in drive.namespaces:
        if not ns.get("size_bytes"):
            out.append(f"{drive.label()}: {ns['name']} has size {ns.get('size_bytes') or 0} B")
        if ns.get("read_only"):
            out.append(f"{drive.label()}: {ns['name']} is read-only")
    return out


def _spare(readable: list[Drive], limits: Limits) -> Criterion:
    """Available spare against max(the drive's threshold, the minimum). 0 % with threshold 0 % is judged like any
    value (0 % left fails) unless the drive is of the model --emulated-drives names (QEMU reports no accounting)."""
    def unaccounted(d: Drive) -> bool:
        return not d.smart.get("avail_spare") and not d.smart.get("spare_thresh")
    emulated = [d for d in readable if unaccounted(d) and limits.emulated_model and d.model == limits.emulated_model]
    judged = [d for d in readable if d not in emulated]
    low = [f"{d.label()}: spare {d.smart.get('avail_spare')} % (threshold {d.smart.get('spare_thresh')} %, minimum "
           f"{limits.min_spare_percent} %)" + (" - no spare left, or no spare accounting: only --emulated-drives "
                                               "MODEL excuses an emulated drive" if unaccounted(d) else "")
           for d in judged
           if (d.smart.get("avail_spare") or 0) < max(d.smart.get("spare_thresh") or 0, limits.min_spare_percent)]
    said = [f"{len(emulated)} drive(s) of model {limits.emulated_model!r} report 0 % with threshold 0 %: emulated "
            "drives (--emulated-drives), their spare not judged"] if emulated else []
    return Criterion(f"available spare >= max(threshold, {limits.min_spare_percent} %)",
                     Outcome.PASS if not low else Outcome.FAIL, f"{len(judged) - len(low)}/{len(judged)} judged drives",
                     f"{len(judged)}/{len(judged)}", "==", detail="; ".join(low + said))


def _health(drives: list[Drive], limits: Limits) -> list[Criterion]:
    total = len(drives)
    readable = [d for d in drives if d.smart is not None]
    criteria = [_count("SMART log readable", readable, total,
                       [f"{d.label()}: {d.smart_error}" for d in drives if d.smart is None])]
    warn = [f"{d.label()}: critical_warning {d.smart['critical_warning']:#04x} ({warning_bits(d.smart['critical_warning'])})"
            for d in readable if d.smart["critical_warning"]]
    criteria.append(_count("SMART critical_warning == 0", [d for d in readable if not d.smart["critical_warning"]],
                           total, warn))
    media = [f"{d.label()}: {d.smart['media_errors']} media errors (limit {limits.max_media_errors})"
             for d in readable if (d.smart.get("media_errors") or 0) > limits.max_media_errors]
    criteria.append(_count(f"media errors <= {limits.max_media_errors}", [d for d in readable if
                           (d.smart.get("media_errors") or 0) <= limits.max_media_errors], total, media))
    used = [f"{d.label()}: {d.smart['percent_used']} % used (limit {limits.max_percent_used} %)"
            for d in readable if (d.smart.get("percent_used") or 0) > limits.max_percent_used]
    criteria.append(_count(f"wear <= {limits.max_percent_used} % used", [d for d in readable if
                           (d.smart.get("percent_used") or 0) <= limits.max_percent_used], total, used))
    criteria.append(_spare(readable, limits))
    return criteria


def evaluate(drives: list[Drive], limits: Limits, expected: list[ExpectedDrive] | None = None,
             cross_check: Criterion | None = None) -> Verdict:
    criteria: list[Criterion] = []
    drives = with_expected_slots(drives, expected)
    expected = sorted(expected, key=drive_order) if expected else expected
    count = distinct_drives(drives)
    detail = ", ".join(d.label() for d in drives) if len(drives) < 4 else ""
    if count < limits.expect_drives and not expected:
        detail = "; ".join(filter(None, [detail, "which drive is missing is named only against an expected list: "
                                                 "--expect-from RUNDIR (an earlier selftest or inventory) or --serials FILE"]))
    criteria.append(Criterion.compare("drives recognized", count, "==", limits.expect_drives, detail=detail))
    if expected:
        present = {d.serial for d in drives}
        missing = [e for e in expected if e.serial not in present]
        unexpected = [d for d in drives if d.serial not in {e.serial for e in expected}]
        criteria.append(Criterion(
            "expected serials present", Outcome.PASS if not missing else Outcome.FAIL,
            f"{len(expected) - len(missing)}/{len(expected)}", f"{len(expected)}/{len(expected)}", "==",
            detail="missing: " + ", ".join((f"slot {e.slot} " if e.slot else "") + e.serial for e in missing) if missing else ""))
        if unexpected:
            criteria.append(Criterion("no unexpected drives", Outcome.FAIL, len(unexpected), 0, "==",
                                      detail="not in the list: " + ", ".join(d.label() for d in unexpected)))
    total = len(drives)
    if total == 0:
        return Verdict("G1 self-test", tuple(criteria + ([cross_check] if cross_check else [])),
                       reason="no NVMe drive visible to this host")
    criteria.append(_unique_serials(drives))
    criteria.append(_count("drives live", [d for d in drives if d.state == "live"], total,
                           [f"{d.label()}: state {d.state}" for d in drives if d.state != "live"]))
    unusable = {d.controller: namespace_problems(d) for d in drives}
    criteria.append(_count("namespace usable (>= 1, size > 0, not read-only)",
                           [d for d in drives if not unusable[d.controller]], total,
                           [problem for d in drives for problem in unusable[d.controller]]))
    criteria += _health(drives, limits)
    firmware: dict[str, list[str]] = {}
    for d in drives:
        firmware.setdefault(d.firmware or "?", []).append(d.serial)
    mixed = len(firmware) > 1
    criteria.append(Criterion(
        "firmware versions agree", Outcome.FAIL if mixed and not limits.allow_mixed_firmware else Outcome.PASS,
        ", ".join(f"{fw} x{len(s)}" for fw, s in sorted(firmware.items())), "one version",
        detail=("differences: " + "; ".join(f"{fw}: {', '.join(s)}" for fw, s in sorted(firmware.items()))
                + (" (allowed by --allow-mixed-firmware)" if limits.allow_mixed_firmware else "")) if mixed else ""))
    return Verdict("G1 self-test", tuple(criteria + ([cross_check] if cross_check else [])))


CROSS_CHECK = "nvme-cli agrees with sysfs"


def nvme_cli_cross_check(runner: Runner, drives: list[Drive]) -> tuple[Criterion, list[str]]:
    """nvme-cli's own list against the kernel's view: every live drive in sysfs is in ``nvme list`` (by serial);
    a failing ``nvme list`` is an ERROR naming the command, its exit code and message."""
    try:
        listed = {ns.serial.strip() for ns in nvme.run_list(runner) if ns.serial}
    except ToolError as exc:
        return Criterion(CROSS_CHECK, Outcome.ERROR, None, "every live drive listed", "", "", exc.message), \
            [f"nvme list failed: {exc.message}"]
    live = [d for d in drives if d.state == "live"]
    disagree = [f"{d.label()}: in sysfs, not in nvme list" for d in live if d.serial not in listed]
    return Criterion(CROSS_CHECK, Outcome.FAIL if disagree else Outcome.PASS, f"{len(live) - len(disagree)}/{len(live)}",
                     f"{len(live)}/{len(live)}", "==", detail="; ".join(disagree)), disagree


@dataclass(frozen=True)
class SelftestRun:
    drives: list[Drive]
    verdict: Verdict
    disagreements: list[str]
    skipped: list[str]          # controllers not counted as drives of this box, each with why


def run_selftest(runner: Runner, limits: Limits, subsystem: str | None = None,
                 expected: list[ExpectedDrive] | None = None, include_fabrics: bool = False) -> SelftestRun:
    """Find the drives, judge them, and cross-check nvme-cli's list against sysfs."""
    if not kernel.has(kernel.NVME_CLASS):
        raise NotRunnable(f"no NVMe driver on this host ({kernel.NVME_CLASS} is absent)",
                          hint="run on the array (or a host with its drives); in the lab: "
                               "fxprobe lab exec array -- fxprobe selftest")
    drives, skipped = find_drives(runner, subsystem, include_fabrics)
    cross_check, disagreements = nvme_cli_cross_check(runner, drives)
    return SelftestRun(with_expected_slots(drives, expected), evaluate(drives, limits, expected, cross_check),
                       disagreements, skipped)


def results_of(result: SelftestRun, limits: Limits, expected: list[ExpectedDrive] | None = None,
               expected_source: str = "") -> dict:
    """What results.json holds beside the verdict: the G1 gate re-judges the drives' SMART figures against its own
    thresholds from here, and refuses a run whose sysfs root was not this machine's /."""
    extra = {"drives_recognized": distinct_drives(result.drives), "controllers": len(result.drives),
             "expect_drives": limits.expect_drives, "limits": limits.__dict__,
             "drives": [d.to_dict() for d in result.drives], "not_counted": result.skipped,
             "disagreements": result.disagreements, "sysfs_root": sysfs.root()}
    if expected:
        extra["expected"] = {"source": expected_source, "drives": [{"serial": e.serial, "slot": e.slot} for e in expected]}
    return extra
