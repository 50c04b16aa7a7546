"""The testbed inventory and its reproducibility risks, from each run folder's ``environment.json``.

Runs made on the same machine (same host name, kernel and CPU) share one entry. Every item the log could not
record is a reproducibility risk; every biasing knob it found is a warning with its fix. A run without an
environment.json is itself a risk, named.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from fxprobe.core.rundir import ENVIRONMENT
from fxprobe.core.verdict import format_number
from fxprobe.host.selftest import natural_key
from fxprobe.report.collect import RunView
from fxprobe.report.evidence import Link, href
from fxprobe.tools.dpkg import PACKAGED


@dataclass(frozen=True)
class Machine:
    name: str
    runs: tuple[str, ...]
    items: tuple[tuple[str, str], ...]      # (what, value) for a person
    risks: tuple[str, ...]                  # items missing from the log, with the reason
    warnings: tuple[str, ...]               # biasing knobs, with the fix
    source: Link


def read_environment(run: RunView) -> dict | None:
    path = run.path / ENVIRONMENT
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("items"), dict) else None


def _text(value) -> str:
    return ", ".join(f"{k} {v}" for k, v in value.items()) if isinstance(value, dict) else str(value)


def describe(items: dict) -> list[tuple[str, str]]:
    """The inventory lines a committee reads (the full log stays in environment.json)."""
    out = []
    kernel, distro, cpu = items.get("kernel") or {}, items.get("distro") or {}, items.get("cpu") or {}
    if kernel or distro:
        out.append(("system", f"{distro.get('PRETTY_NAME', '?')}, kernel {kernel.get('release', '?')} "
                              f"({kernel.get('machine', '?')})"))
    if cpu:
        out.append(("CPU", f"{cpu.get('model', '?')}, {cpu.get('logical_cpus', '?')} logical CPUs"))
    if isinstance(items.get("memory"), dict) and "total_bytes" in items["memory"]:
        out.append(("memory", format_number(items["memory"]["total_bytes"] / 2**30, "GiB")))
    for nic in items.get("nics") or []:
        if isinstance(nic, dict):
            firmware = (nic.get("ethtool") or {}).get("firmware-version") if isinstance(nic.get("ethtool"), dict) else ""
            out.append((f"NIC {nic.get('name')}", f"{nic.get('driver') or '?'}, {nic.get('speed_mbps')} Mb/s, "
                                                  f"MTU {nic.get('mtu')}, firmware {firmware or 'not reported'}"))
    models: dict[str, int] = {}
    for ctrl in items.get("nvme_controllers") or []:
        if isinstance(ctrl, dict):
            key = f"{ctrl.get('model')} firmware {ctrl.get('firmware_rev')} ({ctrl.get('transport')})"
            models[key] = models.get(key, 0) + 1
    out += [("NVMe", f"{count} x {model}") for model, count in models.items()]
    for key in ("rdma_devices", "gpus"):
        if items.get(key):
            out.append((key.replace("_", " "), "; ".join(_text(d) for d in items[key])))
    if items.get("tools"):
        out.append(("tools", _text(items["tools"])))
    origins = {n: o for n, o in (items.get("tool_origins") or {}).items() if isinstance(o, dict)}
    if origins:
        odd = [f"{n}: {o.get('path')} {o.get('state')}" for n, o in origins.items() if o.get("state") != PACKAGED]
        out.append(("tool origins", f"{len(origins) - len(odd)} of {len(origins)} {PACKAGED} (md5 against dpkg's "
                                    f"record of the package)" + "".join(f"; {line}" for line in odd)))
    if isinstance(items.get("clock"), dict):
        out.append(("clock", "synchronized" if items["clock"].get("synchronized") else "NOT synchronized"))
    return out


def machines(runs: list[RunView]) -> tuple[list[Machine], list[str]]:
    """One Machine per distinct machine among the runs, and the runs that carry no environment.json."""
    found: dict[tuple, list] = {}
    without = []
    for run in runs:
        env = read_environment(run)
        if env is None:
            without.append(run.name)
            continue
        items = env["items"]
        key = (env.get("hostname"), json.dumps(items.get("kernel"), sort_keys=True),
               json.dumps(items.get("cpu"), sort_keys=True))
        found.setdefault(key, [env, []])[1].append(run)
    out = []
    for (hostname, _, _), (env, members) in found.items():
        risks = tuple(f"{m.get('item')}: {m.get('reason')}" for m in env.get("missing") or [] if isinstance(m, dict))
        warnings = warning_lines([w for w in env.get("warnings") or [] if isinstance(w, dict)])
        out.append(Machine(str(hostname or "unnamed machine"), tuple(r.name for r in members),
                           tuple(describe(env["items"])), risks, warnings, Link(f"{members[0].name}/{ENVIRONMENT}",
                                                                                  href(members[0], ENVIRONMENT))))
    return out, without


def warning_lines(warnings: list[dict]) -> tuple[str, ...]:
    """One line per biasing knob and observed value: the same warning on 25 drives is one line that
    names the drives in slot order (``nvme2`` before ``nvme10``), with the fix written for any of them."""
    groups: dict[tuple, list[str]] = {}
    for w in warnings:
        device, sep, value = str(w.get("observed")).partition(": ")
        if not sep:
            device, value = "", device
        groups.setdefault((w.get("knob"), value, w.get("why"), w.get("fix") if not device else None), []).append(
            (device, str(w.get("fix"))))
    lines = []
    for (knob, value, why, _), members in groups.items():
        devices = sorted({d for d, _ in members if d}, key=natural_key)
        if len(devices) <= 1:
            lines += [f"{knob}: {d + ': ' if d else ''}{value} - {why}; fix: {f}" for d, f in members]
            continue
        generic = members[0][1].replace(members[0][0], "<device>")
        lines.append(f"{knob}: {value} on {len(devices)} devices ({', '.join(devices)}) - {why}; fix: {generic}")
    return tuple(lines)
