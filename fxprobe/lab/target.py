"""Build and remove an NVMe-oF export: drives -> md RAID -> nvmet subsystem on one or more ports.

The same code builds the VM lab's array (run inside the array guest as
``python -m fxprobe.lab.target create ...``) and the native lab (``fxprobe lab up --native``).
Prints JSON on stdout; errors are one line on stderr with the fxprobe exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fxprobe.core.errors import BadInput, FxprobeError, ToolError
from fxprobe.tools.nvme_sysfs import pcie_namespaces_by_serial
from fxprobe.core.kernel import MDSTAT

if TYPE_CHECKING:
    from fxprobe.core.runner import Runner

# mdadm, nvmet and the runner are imported by the actions that use them: `wait-serial` runs in the array guest at
# every drive restore, and those imports cost it 1-3 s of a TCG guest's CPU (-X importtime, at load 4-10)


@dataclass(frozen=True)
class PortSpec:
    port_id: int
    trtype: str
    traddr: str
    trsvcid: int = 4420

    @classmethod
    def parse(cls, text: str) -> "PortSpec":
        """``ID:TRTYPE:ADDR[:SVCID]``, e.g. ``101:tcp:10.1.1.1:4420``."""
        parts = text.split(":")
        if len(parts) not in (3, 4) or not parts[0].isdigit():
            raise BadInput(f"--port {text!r}: expected ID:TRTYPE:ADDR[:SVCID]")
        return cls(int(parts[0]), parts[1], parts[2], int(parts[3]) if len(parts) == 4 else 4420)


def wait_for_serials(serials: list[str], timeout: float = 60.0) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        found = pcie_namespaces_by_serial()
        missing = [s for s in serials if s not in found]
        if not missing:
            return {s: found[s] for s in serials}
        if time.monotonic() > deadline:
            raise ToolError(f"NVMe drives not found: {', '.join(missing)}",
                            hint=f"present: {', '.join(sorted(found)) or 'none'}")
        time.sleep(0.5)


def wait_for_md_link(runner: Runner, md: str, timeout: float = 60.0) -> str:
    """The /dev/mdN behind /dev/md/<name> (udev makes the link a little after mdadm returns)."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(md):
        if time.monotonic() > deadline:
            raise ToolError(f"{md} did not appear within {timeout:.0f} s after mdadm --create",
                            hint=f"is udevd running? see {MDSTAT}")
        runner.run(["udevadm", "settle", "--timeout=10"], timeout=20)
        time.sleep(0.2)
    return os.path.realpath(md)


def build_export(runner: Runner, *, nqn: str, md_name: str | None, level: str, devices: list[str],
                 ports: list[PortSpec], serial: str | None = None) -> dict:
    """md array (or a single device for level "none") exported as namespace 1 of ``nqn``."""
    from fxprobe.tools import mdadm
    from fxprobe.tools.nvmet import NvmetRoot
    root = NvmetRoot()
    root.require()
    if level == "none":
        if len(devices) != 1:
            raise BadInput(f"level none exports exactly one device, got {len(devices)}")
        backing = devices[0]
    else:
        md = f"/dev/md/{md_name}"
        mdadm.create(runner, md, level, devices)
        backing = wait_for_md_link(runner, md)
    subsystem = root.subsystem(nqn)
    if serial:
        subsystem.set_attr("serial", serial)
    subsystem.add_namespace(1, backing)
    for spec in ports:
        port = root.port(spec.port_id)
        port.configure(spec.trtype, spec.traddr, spec.trsvcid)
        port.link(subsystem)
    return {"nqn": nqn, "md": md_name if level != "none" else None, "level": level, "backing": backing,
            "devices": devices, "ports": [p.__dict__ for p in ports]}


def remove_export(runner: Runner, *, nqn: str, md_name: str | None) -> list[str]:
    from fxprobe.tools import mdadm
    from fxprobe.tools.nvmet import NvmetRoot
    removed = NvmetRoot().teardown(nqn)
    if md_name and Path(f"/dev/md/{md_name}").exists():
        mdadm.stop(runner, f"/dev/md/{md_name}").check(f"stopping md {md_name}")
        removed.append(f"md {md_name}")
    return removed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fxprobe.lab.target")
    sub = parser.add_subparsers(dest="action", required=True)
    create = sub.add_parser("create")
    create.add_argument("--nqn", required=True)
    create.add_argument("--md", required=True)
    create.add_argument("--level", required=True)
    create.add_argument("--serial-number", default=None)
    create.add_argument("--drive-serial", action="append", default=[], help="member drive by NVMe serial")
    create.add_argument("--device", action="append", default=[], help="member block device")
    create.add_argument("--port", action="append", default=[], type=PortSpec.parse)
    remove = sub.add_parser("remove")
    remove.add_argument("--nqn", required=True)
    remove.add_argument("--md", default=None)
    sub.add_parser("dump")
    wait = sub.add_parser("wait-serial", help="print the namespace device of a drive once it appears")
    wait.add_argument("serial")
    wait.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args(argv)
    try:
        if args.action == "wait-serial":
            print(wait_for_serials([args.serial], args.timeout)[args.serial])
            return 0
        from fxprobe.core.runner import Runner
        from fxprobe.tools.nvmet import NvmetRoot
        runner = Runner()
        if args.action == "create":
            devices = list(args.device)
            if args.drive_serial:
                by_serial = wait_for_serials(args.drive_serial)
                devices += [by_serial[s] for s in args.drive_serial]
            result = build_export(runner, nqn=args.nqn, md_name=args.md, level=args.level, devices=devices,
                                  ports=args.port, serial=args.serial_number)
        elif args.action == "remove":
            result = {"removed": remove_export(runner, nqn=args.nqn, md_name=args.md)}
        else:
            result = NvmetRoot().dump()
    except FxprobeError as exc:
        print(f"fxprobe lab target: {exc}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
