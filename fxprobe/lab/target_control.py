"""The lab's target-control executable (docs/target-control.md): ``examples/target-control/lab`` runs this.

    python -m fxprobe.lab.target_control [--lab NAME] drive-pull SLOT|SERIAL | drive-restore SLOT|SERIAL |
                                         port-down PORT | port-up PORT | status

The lab is ``--lab``, else ``$FXPROBE_LAB`` (fxprobe sets it when it calls the hook for a lab run), else
"default". PORT is ``HOST:LINK`` (``host1:2``) or ``LINK`` (host1's). Each verb prints one JSON object on
stdout and exits 0; a failure is one line on stderr and exit 1 (2: bad usage). ``status`` lists every drive
(slot, serial, present, md, level, redundancy_left) and port (port, up).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from fxprobe.core.errors import FxprobeError


def _slot(lab, text: str) -> int:
    for drive in lab.state.drives:
        if text in (str(drive.slot), drive.serial):
            return drive.slot
    raise SystemExit(_fail(f"no drive {text!r} in lab {lab.name}", 2))


def _port(lab, text: str) -> tuple[int, str]:
    host, _, link = text.rpartition(":")
    if not link.isdigit():
        raise SystemExit(_fail(f"port {text!r}: use HOST:LINK (host1:2) or LINK", 2))
    return int(link), host or "host1"


def _fail(text: str, code: int = 1) -> int:
    print(f"fxlab-target-control: {text}", file=sys.stderr)
    return code


def status(lab) -> dict:
    from fxprobe.faults.methods import md_redundancy_left
    infos = {name: lab.guest_info(name) for name in lab.state.array_names}
    drives = []
    for drive in lab.state.drives:
        info = infos.get(drive.array, {})
        ctrl = next((c for c in info.get("nvme_controllers", []) if c.get("serial") == drive.serial
                     and c.get("transport") == "pcie"), None)
        device = ctrl["namespaces"][0] if ctrl and ctrl.get("namespaces") else None
        md = next((m for m in info.get("md", []) if any(x["device"] == device and not x.get("faulty")
                                                           for x in m["members"])), None) if device else None
        drives.append({"slot": drive.slot, "serial": drive.serial, "array": drive.array, "present": ctrl is not None,
                       "device": device, "md": md["name"] if md else None, "level": md["level"] if md else None,
                       "redundancy_left": md_redundancy_left(md["level"], md.get("raid_disks"), md.get("working_disks"))
                       if md else None})
    ports = [{"port": f"{link.host}:{link.n}", "up": link.up, "array_ip": link.array_ip} for link in lab.state.links]
    return {"target": f"lab {lab.name}", "drives": drives, "ports": ports}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fxlab-target-control")
    parser.add_argument("--lab", default=os.environ.get("FXPROBE_LAB") or "default")
    parser.add_argument("verb", choices=("drive-pull", "drive-restore", "port-down", "port-up", "status"))
    parser.add_argument("what", nargs="?")
    args = parser.parse_args(argv)
    if args.verb != "status" and not args.what:
        return _fail(f"{args.verb} needs its SLOT|SERIAL or PORT", 2)
    from fxprobe.faults.methods import REDUNDANCY, lab_set_link, restore_from_record
    from fxprobe.lab.vm import Lab
    try:
        lab = Lab.load(args.lab)
        if args.verb == "status":
            result = status(lab)
        elif args.verb == "drive-pull":
            result = lab.drive_pull(_slot(lab, args.what))
        elif args.verb == "drive-restore":
            slot = _slot(lab, args.what)
            drive = lab.drive(slot)
            export = lab.state.export_named(drive.export) if drive.export else None
            said = restore_from_record({"method": "lab-drive", "lab": lab.name, "slot": slot,      # as via qmp
                                        "md_readd": REDUNDANCY.get(export.level if export else None, 1) != 0})
            result = {"slot": slot, "serial": drive.serial, "restored": said}
        else:
            n, host = _port(lab, args.what)
            result = lab_set_link(lab, n, host, args.verb == "port-up")
    except FxprobeError as exc:
        return _fail(str(exc))
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
