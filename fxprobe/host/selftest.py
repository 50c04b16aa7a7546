"""G1: every array's self-test recognizes all its drives, each live and healthy.

Drives are found in sysfs (the kernel's view), their SMART health read with
nvme-cli, and nvme-cli's own list is cross-checked against sysfs. Drives are
named by slot and serial number, never only by /dev name: the slot is the one an
expected list gives (``--serials`` or ``--expect-from`` an earlier run), else the
platform's PCI slot the kernel reports, else the drive's PCI address. A missing
drive can be named only against an expected list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError

from fxprobe.core import kernel
from fxprobe.core.data import AsDict
from fxprobe.tools import nvme_sysfs
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


def find_drives(runner: Runner, subsystem: str | None = None) -> list[Drive]:
    """Every NVMe controller of this host (or of one subsystem), with its SMART log."""
    controllers = nvme_sysfs.controllers()
    if subsystem:
        controllers = [c for c in controllers if c.subsysnqn == subsystem]
    drives = []
    for ctrl in controllers:
        smart, error = None, None
        try:
            log = nvme.run_smart_log(runner, f"/dev/{ctrl.name}", timeout=30)
            smart = log.to_dict() if log else None
        except ToolError as exc:
            error = exc.message
        drives.append(Drive(ctrl.name, (ctrl.serial or "").strip(), ctrl.model, ctrl.firmware,
                            ctrl.transport, ctrl.state, ctrl.subsysnqn, smart, error,
                            slot=ctrl.slot or ctrl.pci_address, pci_address=ctrl.pci_address))
    return sorted(drives, key=drive_order)


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


def evaluate(drives: list[Drive], limits: Limits, expected: list[ExpectedDrive] | None = None) -> Verdict:
    criteria: list[Criterion] = []
    drives = with_expected_slots(drives, expected)
    expected = sorted(expected, key=drive_order) if expected else expected
    detail = ", ".join(d.label() for d in drives) if len(drives) < 4 else ""
    if len(drives) < limits.expect_drives and not expected:
        detail = "; ".join(filter(None, [detail, "which drive is missing is named only against an expected list: "
                                                 "--expect-from RUNDIR (an earlier selftest or inventory) or --serials FILE"]))
    criteria.append(Criterion.compare("drives recognized", len(drives), "==", limits.expect_drives, detail=detail))
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
        return Verdict("G1 self-test", tuple(criteria), reason="no NVMe drive visible to this host")

    live = [d for d in drives if d.state == "live"]
    criteria.append(_count("drives live", live, total,
                           [f"{d.label()}: state {d.state}" for d in drives if d.state != "live"]))
    readable = [d for d in drives if d.smart is not None]
    criteria.append(_count("SMART log readable", readable, total,
                           [f"{d.label()}: {d.smart_error}" for d in drives if d.smart is None]))
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
    accounted = [d for d in readable if d.smart.get("avail_spare") or d.smart.get("spare_thresh")]
    low = [f"{d.label()}: spare {d.smart['avail_spare']} % (threshold {d.smart['spare_thresh']} %, minimum {limits.min_spare_percent} %)"
           for d in accounted
           if d.smart["avail_spare"] < max(d.smart.get("spare_thresh") or 0, limits.min_spare_percent)]
    no_spare = [d.label() for d in readable if d not in accounted]
    criteria.append(Criterion(
        f"available spare >= max(threshold, {limits.min_spare_percent} %)", Outcome.PASS if not low else Outcome.FAIL,
        f"{len(accounted) - len(low)}/{len(accounted)} reporting drives",
        detail="; ".join(low + ([f"{len(no_spare)} drive(s) report no spare accounting (0 % with threshold 0 %, "
                                 f"as emulated drives do): not judged"] if no_spare else []))))
    firmware: dict[str, list[str]] = {}
    for d in drives:
        firmware.setdefault(d.firmware or "?", []).append(d.serial)
    mixed = len(firmware) > 1
    criteria.append(Criterion(
        "firmware versions agree", Outcome.FAIL if mixed and not limits.allow_mixed_firmware else Outcome.PASS,
        ", ".join(f"{fw} x{len(s)}" for fw, s in sorted(firmware.items())), "one version",
        detail=("differences: " + "; ".join(f"{fw}: {', '.join(s)}" for fw, s in sorted(firmware.items()))
                + (" (allowed by --allow-mixed-firmware)" if limits.allow_mixed_firmware else "")) if mixed else ""))
    return Verdict("G1 self-test", tuple(criteria))


def run_selftest(runner: Runner, limits: Limits, subsystem: str | None = None,
                 expected: list[ExpectedDrive] | None = None) -> tuple[list[Drive], Verdict, list[str]]:
    """Find the drives, judge them, and cross-check nvme-cli's list against sysfs."""
    if not kernel.has(kernel.NVME_CLASS):
        raise NotRunnable(f"no NVMe driver on this host ({kernel.NVME_CLASS} is absent)",
                          hint="run on the array (or a host with its drives); in the lab: "
                               "fxprobe lab exec array -- fxprobe selftest")
    drives = find_drives(runner, subsystem)
    disagreements = []
    try:
        listed = {ns.serial.strip() for ns in nvme.run_list(runner) if ns.serial}
        for drive in drives:
            if drive.serial not in listed and drive.state == "live":
                disagreements.append(f"{drive.label()}: in sysfs, not in nvme list")
    except ToolError as exc:
        disagreements.append(f"nvme list failed: {exc.message}")
    return with_expected_slots(drives, expected), evaluate(drives, limits, expected), disagreements
