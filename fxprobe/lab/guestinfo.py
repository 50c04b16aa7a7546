"""What a lab guest looks like from inside, as JSON: NVMe controllers and paths, md arrays,
network links and RDMA GIDs. Read from sysfs and /proc (root redirectable for tests).

Run in a guest as ``python -m fxprobe.lab.guestinfo``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fxprobe.tools.mdadm import parse_mdstat


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def nvme_controllers(sys_root: Path) -> list[dict]:
    out = []
    for ctrl in sorted((sys_root / "class" / "nvme").glob("nvme*"), key=lambda p: (len(p.name), p.name)):
        entry = {"name": ctrl.name}
        for attr in ("serial", "model", "transport", "address", "state", "subsysnqn", "cntlid"):
            entry[attr] = _read(ctrl / attr)
        entry["namespaces"] = sorted(p.name for p in ctrl.glob(f"{ctrl.name}n*"))
        out.append(entry)
    return out


def nvme_subsystems(sys_root: Path) -> list[dict]:
    out = []
    for subsys in sorted((sys_root / "class" / "nvme-subsystem").glob("nvme-subsys*")):
        paths = []
        for ctrl in sorted(subsys.glob("nvme[0-9]*")):
            if not ctrl.name[4:].isdigit():
                continue  # a namespace node (nvme0n1), not a controller
            paths.append({"controller": ctrl.name, "transport": _read(ctrl / "transport"),
                          "address": _read(ctrl / "address"), "state": _read(ctrl / "state")})
        out.append({"name": subsys.name, "nqn": _read(subsys / "subsysnqn"), "iopolicy": _read(subsys / "iopolicy"),
                    "namespaces": sorted(p.name for p in subsys.glob("nvme*n*") if "c" not in p.name[4:]),
                    "paths": paths})
    return out


def net_links(sys_root: Path) -> list[dict]:
    out = []
    for dev in sorted((sys_root / "class" / "net").iterdir()) if (sys_root / "class" / "net").is_dir() else []:
        if dev.name == "lo":
            continue
        speed = _read(dev / "speed")
        out.append({"name": dev.name, "operstate": _read(dev / "operstate"), "carrier": _read(dev / "carrier"),
                    "speed_mbps": int(speed) if speed and speed.lstrip("-").isdigit() else None,
                    "mtu": int(_read(dev / "mtu") or 0), "mac": _read(dev / "address")})
    return out


MAX_GID_SCAN = 64


def rdma_ports(sys_root: Path) -> list[dict]:
    out = []
    for dev in sorted((sys_root / "class" / "infiniband").glob("*")):
        for port in sorted((dev / "ports").glob("*")):
            gids = []
            # GID tables have hundreds of slots and reading an empty one is slow; used ones come first.
            empty = 0
            for index in range(MAX_GID_SCAN):
                kind = _read(port / "gid_attrs" / "types" / str(index))
                if not kind:
                    empty += 1
                    if empty >= 4:
                        break
                    continue
                empty = 0
                gids.append({"index": index, "type": kind, "gid": _read(port / "gids" / str(index)),
                             "ndev": _read(port / "gid_attrs" / "ndevs" / str(index))})
            out.append({"device": dev.name, "port": int(port.name), "state": _read(port / "state"),
                        "link_layer": _read(port / "link_layer"), "gids": gids})
    return out


def collect(root: Path = Path("/")) -> dict:
    mdstat = _read(root / "proc" / "mdstat") or ""
    sys_root = root / "sys"
    return {"nvme_controllers": nvme_controllers(sys_root), "nvme_subsystems": nvme_subsystems(sys_root),
            "md": [a.to_dict() for a in parse_mdstat(mdstat)], "net": net_links(sys_root),
            "rdma": rdma_ports(sys_root)}


if __name__ == "__main__":
    json.dump(collect(), sys.stdout, indent=1)
    sys.stdout.write("\n")
