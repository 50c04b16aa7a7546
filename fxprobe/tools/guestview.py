"""Views of a lab guest's kernel state through ``guestview.sh`` (shipped beside this module and run by path in the
guest: its NVMe subsystems and paths, its drives and md arrays, an md array's geometry), and pure parsers of what it
prints. The views are shell builtins only, cheap enough to sample every second in a TCG guest during a fault."""

from __future__ import annotations

from pathlib import Path

from fxprobe.tools.nvme_sysfs import TIMEOUT_ATTRS

SCRIPT = Path(__file__).with_name("guestview.sh")
VIEWS = ("host", "array", "roles", "timeouts")


def view_argv(*views: str) -> list[str]:
    """argv that prints each view once (``host``: NVMe subsystems and paths; ``array``: mdstat and NVMe drives;
    ``roles``: md members' roles and raid10 layouts; ``timeouts``: the fabrics controllers' timeouts and the
    subsystems' iopolicy, as ``parse_timeouts_view`` reads them)."""
    unknown = [v for v in views if v not in VIEWS]
    if unknown or not views:
        raise ValueError(f"guest views are {', '.join(VIEWS)}, not {unknown or 'none'}")
    return ["sh", str(SCRIPT), *views]


def loop_argv(view: str, seconds: float, interval: float) -> list[str]:
    """argv of a sampling loop on the node: every ``interval`` s a ``T <epoch>`` line, then the view (run by bash,
    whose clock and timed read sample without forking date and sleep: 3 processes a second under emulation)."""
    view_argv(view)
    return ["bash", str(SCRIPT), "loop", str(int(seconds)), f"{interval:g}", view]


def md_geometry_argv(name: str) -> list[str]:
    """argv that prints md array ``name``'s level, chunk and members (read by tools.mdadm.parse_md_geometry)."""
    return ["sh", str(SCRIPT), "md-geometry", name]


def parse_sampling(text: str, parse) -> list[tuple[float, object]]:
    """(node epoch, parsed view) per block of a sampling loop's output (a cut-off last block is dropped)."""
    blocks, current, stamp = [], [], None
    for line in text.splitlines():   # a block counts once the next "T" line shows it was complete
        if line.startswith("T "):
            if stamp is not None:
                blocks.append((stamp, "\n".join(current)))
            try:
                stamp = float(line[2:])
            except ValueError:
                stamp = None
            current = []
        else:
            current.append(line)
    return [(t, parse(body)) for t, body in blocks]


def parse_host_view(text: str) -> list[dict]:
    """``nvme_subsystems`` in the shape of fxprobe.lab.guestinfo, from the ``host`` view."""
    subsystems: dict[str, dict] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0] == "subsys":
            subsystems[fields[1]] = {"name": fields[1], "nqn": fields[2],
                                     "iopolicy": None if fields[3] == "-" else fields[3],
                                     "namespaces": [], "paths": []}
        elif len(fields) == 3 and fields[0] == "ns" and fields[1] in subsystems:
            subsystems[fields[1]]["namespaces"].append(fields[2])
        elif len(fields) >= 5 and fields[0] == "path" and fields[1] in subsystems:
            subsystems[fields[1]]["paths"].append({"controller": fields[2], "state": fields[3],
                                                   "transport": fields[4],
                                                   "address": "".join(fields[5:]) or None})
    return list(subsystems.values())


def parse_array_view(text: str) -> dict:
    """``nvme_controllers`` and ``md`` in the shape of fxprobe.lab.guestinfo, from the ``array`` view (and the
    ``roles`` view after it)."""
    from fxprobe.tools.mdadm import parse_mdstat
    mdstat, _, rest = text.partition("--fxprobe--")
    controllers = []
    for line in rest.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0] == "ctrl":
            controllers.append({"name": fields[1], "serial": fields[2], "transport": "pcie",
                                "namespaces": fields[3:4]})
    arrays = [a.to_dict() for a in parse_mdstat(mdstat)]
    by_name = {a["name"]: a for a in arrays}
    for line in rest.splitlines():
        fields = line.split()
        if len(fields) == 3 and fields[0] == "mdinfo" and fields[1] in by_name:
            by_name[fields[1]]["layout"] = int(fields[2]) if fields[2].isdigit() else None
        elif len(fields) == 4 and fields[0] == "role" and fields[1] in by_name:
            for member in by_name[fields[1]]["members"]:
                if member["device"] == fields[2]:
                    member["role"] = int(fields[3]) if fields[3].isdigit() else None
    return {"nvme_controllers": controllers, "md": arrays}


def parse_timeouts_view(text: str, nqn: str | None = None) -> dict:
    """What ``faults.advice.read_timeouts(nqn)`` gives on the node, from the ``timeouts`` view: the fabrics controllers
    (of ``nqn``) with the timeouts their sysfs holds, state and address, and the subsystem's iopolicy."""
    controllers, policies = {}, []
    for line in text.splitlines():
        fields = line.split(" ", 9)
        if fields[0] == "tmo" and len(fields) == 10 and (nqn is None or fields[3] == nqn):
            values = dict(zip(TIMEOUT_ATTRS, fields[5:9]))
            controllers[fields[1]] = {**{k: v for k, v in values.items() if v != "-"},
                                      "state": None if fields[4] == "-" else fields[4],
                                      "address": None if fields[9] == "-" else fields[9]}
        elif fields[0] == "iopolicy" and len(fields) == 3 and (nqn is None or fields[1] == nqn):
            policies.append(None if fields[2] == "-" else fields[2])
    return {"controllers": controllers, "iopolicy": policies[0] if policies else None}
