"""What this host sees of NVMe: subsystems, controllers, namespaces, paths, block devices, SMART health.

Two sources — nvme-cli's JSON and the kernel's sysfs — must agree; every disagreement is
reported. Block devices come from udev (pyudev) where udev runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fxprobe.core import kernel
from fxprobe.tools import nvme_sysfs
from fxprobe.core.errors import NotRunnable, ToolError
from fxprobe.core.runner import Runner
from fxprobe.tools import nvme


def udev_disks() -> dict[str, dict]:
    """NVMe block devices as udev knows them (serial, model, WWN); empty when udev is not running."""
    try:
        import pyudev
        context = pyudev.Context()
        found = {}
        for device in context.list_devices(subsystem="block", DEVTYPE="disk"):
            if device.sys_name.startswith("nvme"):
                props = device.properties
                found[device.sys_name] = {k: props.get(k) for k in
                                          ("DEVNAME", "ID_SERIAL_SHORT", "ID_MODEL", "ID_WWN", "ID_PATH")
                                          if props.get(k)}
        return found
    except (ImportError, OSError):
        return {}


@dataclass
class Inventory:
    subsystems: list[dict] = field(default_factory=list)
    controllers: list[dict] = field(default_factory=list)
    namespaces: list[dict] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"subsystems": self.subsystems, "controllers": self.controllers, "namespaces": self.namespaces,
                "disagreements": self.disagreements, "notes": self.notes}


def compare(cli: tuple[nvme.Subsystem, ...], sys_ctrls: list[nvme_sysfs.SysController],
            sys_namespaces: list[nvme_sysfs.SysNamespace]) -> list[str]:
    """Every way nvme-cli's view differs from sysfs's, one line each."""
    problems = []
    cli_ctrls = {c.name: c for s in cli for c in s.controllers}
    by_name = {c.name: c for c in sys_ctrls}
    for name in sorted(set(cli_ctrls) - set(by_name)):
        problems.append(f"controller {name}: in nvme list -v, not in {kernel.NVME_CLASS}")
    for name in sorted(set(by_name) - set(cli_ctrls)):
        problems.append(f"controller {name}: in {kernel.NVME_CLASS}, not in nvme list -v")
    for name in sorted(set(cli_ctrls) & set(by_name)):
        c, k = cli_ctrls[name], by_name[name]
        for what, a, b in (("serial", c.serial, k.serial), ("model", c.model, k.model),
                           ("firmware", c.firmware, k.firmware), ("transport", c.transport, k.transport),
                           ("address", c.address, k.address)):
            if (a or "").strip() != (b or "").strip():
                problems.append(f"controller {name}: {what} {a!r} (nvme-cli) vs {b!r} (sysfs)")
    cli_ns = {n.name: n for s in cli for n in s.namespaces}
    sys_ns = {n.name: n for n in sys_namespaces}
    for name in sorted(set(cli_ns) ^ set(sys_ns)):
        side = "nvme list -v" if name in cli_ns else kernel.BLOCK_CLASS
        problems.append(f"namespace {name}: only in {side}")
    for name in sorted(set(cli_ns) & set(sys_ns)):
        a, b = cli_ns[name], sys_ns[name]
        if a.physical_size is not None and b.size_bytes is not None and a.physical_size != b.size_bytes:
            problems.append(f"namespace {name}: size {a.physical_size} (nvme-cli) vs {b.size_bytes} (sysfs)")
        if a.sector_size is not None and b.logical_block_size is not None and a.sector_size != b.logical_block_size:
            problems.append(f"namespace {name}: block size {a.sector_size} (nvme-cli) vs {b.logical_block_size} (sysfs)")
    return problems


def collect(runner: Runner, smart: bool = True) -> Inventory:
    sys_ctrls = nvme_sysfs.controllers()
    sys_subs = nvme_sysfs.subsystems()
    sys_ns = nvme_sysfs.namespaces()
    if not sys_ctrls and not sys_subs and not kernel.has(kernel.NVME_CLASS):
        raise NotRunnable(f"no NVMe driver on this host ({kernel.NVME_CLASS} is absent)",
                          hint="run where the drives or the NVMe-oF host are, or in the lab: fxprobe lab exec host1 -- fxprobe inventory")
    inv = Inventory()
    try:
        cli = nvme.run_list_verbose(runner)
    except ToolError as exc:
        cli = ()
        inv.disagreements.append(f"nvme list -v failed ({exc.message}); sysfs alone is shown")
    disks = udev_disks()
    if not disks:
        inv.notes.append("udev has no NVMe block devices (udevd not running?): block-device identities from sysfs only")
    cli_ctrls = {c.name: c for s in cli for c in s.controllers}
    for sub in sys_subs:
        inv.subsystems.append(sub.to_dict())
    for ctrl in sys_ctrls:
        entry = ctrl.to_dict()
        if ctrl.name in cli_ctrls:
            entry["cli"] = cli_ctrls[ctrl.name].to_dict()
        if smart:
            try:
                log = nvme.run_smart_log(runner, f"/dev/{ctrl.name}")
                entry["smart"] = log.to_dict() if log else None
            except ToolError as exc:
                entry["smart"] = None
                entry["smart_error"] = exc.message
        inv.controllers.append(entry)
    for ns in sys_ns:
        inv.namespaces.append({**ns.to_dict(), "udev": disks.get(ns.name, {})})
    inv.disagreements += compare(cli, sys_ctrls, sys_ns)
    return inv


def lines(inv: Inventory) -> list[str]:
    out = []
    for sub in inv.subsystems:
        out.append(f"{sub['name']}  {sub['nqn']}  iopolicy={sub['iopolicy']}  controllers={','.join(sub['controllers'])}")
    for c in inv.controllers:
        health = ""
        if c.get("smart"):
            s = c["smart"]
            temp = f"{s['temperature_c']:.0f}C" if s.get("temperature_k") else "temp n/a"
            health = f"  critical_warning={s['critical_warning']} {temp} media_errors={s['media_errors']}"
        paths = " ".join(f"{p['path']}:{p['ana_state']}" for p in c["paths"])
        out.append(f"  {c['name']}  {c['transport']}  {c['address'] or '-'}  {c['state']}  sn={c['serial']}  "
                   f"fw={c['firmware']}  {c['model']}{health}{'  paths: ' + paths if paths else ''}")
    for n in inv.namespaces:
        out.append(f"  {n['name']}  nsid={n['nsid']}  {n['size_bytes']} B  lbs={n['logical_block_size']}  "
                   f"nguid={n['nguid'] or '-'}  holders={','.join(n['holders']) or '-'}")
    out += [f"DISAGREE {d}" for d in inv.disagreements] + [f"note: {n}" for n in inv.notes]
    return out
