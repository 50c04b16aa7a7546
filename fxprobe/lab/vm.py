"""The VM lab: an array guest and host guests under QEMU, reached over SSH like real nodes.

Python API (what the other features use)::

    lab = Lab.load("default")               # a lab started by `fxprobe lab up` (any process)
    host = lab.guest("host1")               # a fxprobe.core.hosts.SshHost
    lab.exec("array", ["mdadm", "--detail", "/dev/md/fxlab"], timeout=30)   # -> CommandResult
    lab.drive_pull(3); lab.drive_restore(3)
    lab.link_down(2, host="host1"); lab.link_up(2, host="host1")
    lab.throttle(1, "200mbit", host="host1"); lab.throttle(1, "off")
    lab.add_export("raid0", [20, 21], name="twin")   # a second subsystem, no reboot
    lab.status()                            # dict: guests, drives, md, links, paths
    lab.down()

Everything a new process needs is in ``<lab folder>/state.json`` (lab folder:
``$FXPROBE_LAB_HOME/<name>``, default ``~/.local/state/fxprobe/labs/<name>``, mode 0700).

Guests see the host's ``/`` read-only over 9p with ``cache=loose`` (fast under TCG): a source
file edited on the host after a guest read it may stay stale in that guest until the lab restarts.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import os
import re
import shutil
import signal
import socket
import struct
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil

from fxprobe.core.errors import BadInput, FxprobeError, NotRunnable, ToolError
from fxprobe.core.kernel import PROC_NET_TCP
from fxprobe.core.hosts import SshHost, never_connected
from fxprobe.lab import sshkeys
from fxprobe.lab.guestpython import python_argv
from fxprobe.lab.initramfs import ensure_initramfs, guest_file
from fxprobe.lab.kernel import ensure_kernel
from fxprobe.lab.qemu import (ARRAY_MEMORY_MB, BOOTED, GuestConfig, Nic, _alive, check_running, choose_accel,
                              guest_argv, qemu_binary)
from fxprobe.lab.spec import (NVME_PORT, SUBSYS_PREFIX, LabSpec, LinkPlan, drive_serial, host_identity,
                              hosts_file, link_plan)
from fxprobe.lab.state import DriveState, ExportState, GuestState, KernelState, LabState, LinkState
from fxprobe.tools.qmp import Qmp, event_epoch
from fxprobe.core.rundir import utc_stamp
from fxprobe.core.runner import CommandResult, Runner

# Loaded at boot, one `modprobe -a` per line. An array guest gets the initiator and target stacks, RAID
# and null_blk (the native lab and the Linux target-control hook run there too); a host guest is an initiator
# and gets what its loads, paths and link shaping use: loading the target stack and md costs a guest ~7 s of
# boot under TCG (raid456's gen/xor benchmarks among it), times 8 hosts on 2 cores. Every module is in a
# guest's /lib/modules, for a host guest that needs one more (`modprobe`).
GUEST_MODULES = (("configfs", "rdma_rxe", "ib_uverbs", "rdma_ucm"),
                 ("nvme", "nvme-tcp", "nvme-rdma"),
                 ("nvmet", "nvmet-tcp", "nvmet-rdma", "raid0", "raid1", "raid10", "raid456",
                  "null_blk", "loop", "dm_delay", "dm_flakey", "sch_tbf"))
HOST_GUEST_MODULES = GUEST_MODULES[:2] + (("loop", "sch_tbf"),)
MODPROBE_CONF = "options null_blk nr_devices=0\n"
HOST_MEMORY_MB = 768
DATA_MTU = 9000
READY_TIMEOUT = 300
GUEST_CONNECT_TIMEOUT_S = 30   # sshd in a TCG guest under a fio load was seen to take > 10 s to send its banner
RATE_RE = re.compile(r"^\d+(\.\d+)?(bit|kbit|mbit|gbit|tbit|bps|kbps|mbps|gbps)$")
MAIN_MD = "fxlab"
ALT_PORT_OFFSET = 50      # nvmet port id of a link's second transport
STATE = "state.json"


def lab_home() -> Path:
    base = os.environ.get("FXPROBE_LAB_HOME") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "fxprobe", "labs")
    return Path(base)


def listening_ports(proc_net: Path = Path(PROC_NET_TCP), address: str | None = None) -> set[int]:
    """TCP ports in LISTEN state (IPv4) from the kernel's TCP socket table; with ``address``, only those
    listening there or on every address (the same number on another address is another program's)."""
    ports = set()
    try:
        lines = proc_net.read_text().splitlines()[1:]
    except OSError:
        return ports
    for line in lines:
        fields = line.split()
        if len(fields) > 3 and fields[3] == "0A":
            where, port = fields[1].rsplit(":", 1)
            # the kernel prints the address as its 32-bit word in this machine's byte order
            ip = socket.inet_ntoa(struct.pack("=I", int(where, 16)))
            if address is None or ip in (address, "0.0.0.0"):
                ports.add(int(port, 16))
    return ports


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def choose_ports(spec: LabSpec) -> list[int]:
    if spec.port_base is not None:
        ports = list(range(spec.port_base, spec.port_base + spec.port_count))
        for port in ports:
            if not port_is_free(port):
                raise BadInput(f"--port-base {spec.port_base}: port {port} on 127.0.0.1 is already taken",
                               hint="pick another --port-base, or leave it out to use free ports")
        return ports
    held = []
    try:
        for _ in range(spec.port_count):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            probe.bind(("127.0.0.1", 0))
            held.append(probe)
        return [probe.getsockname()[1] for probe in held]
    finally:
        for probe in held:
            probe.close()


def check_capacity(spec: LabSpec, folder_parent: Path) -> None:
    need_mb = (ARRAY_MEMORY_MB + 16 * spec.drives) * spec.arrays + HOST_MEMORY_MB * spec.hosts
    free_mb = psutil.virtual_memory().available // (1 << 20)
    if need_mb + 512 > free_mb:
        raise BadInput(f"the lab needs about {need_mb} MiB of memory, this machine has {free_mb} MiB available",
                       hint="use fewer --hosts or --drives")
    folder_parent.mkdir(parents=True, exist_ok=True)
    disk = shutil.disk_usage(folder_parent)
    need_disk = spec.drives * spec.drive_mb * (1 << 20)
    if need_disk > disk.free:
        raise BadInput(f"{spec.drives} drives of {spec.drive_mb} MiB need {need_disk >> 20} MiB in {folder_parent}, "
                       f"only {disk.free >> 20} MiB free", hint="use fewer --drives or a smaller --drive-mb")


def check_tools() -> None:
    for tool, package in ((qemu_binary(), "qemu-system-x86"), ("ssh", "openssh-client"),
                          ("ssh-keygen", "openssh-client")):
        if shutil.which(tool) is None:
            raise NotRunnable(f"`{tool}` is not installed: the VM lab cannot start",
                              hint=f"apt-get install --no-install-recommends {package}")
    if not os.access("/usr/sbin/sshd", os.X_OK):
        raise NotRunnable("/usr/sbin/sshd is missing: the lab guests use the host's sshd",
                          hint="apt-get install openssh-server")


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no console output)"


@dataclass(frozen=True)
class PathLine:
    """One NVMe-oF controller (path) of a host guest, as ``guest/paths.sh`` prints it."""

    nqn: str
    controller: str
    state: str
    transport: str
    address: str = ""


def parse_path_lines(text: str) -> list[PathLine]:
    """Lines "NQN CONTROLLER STATE TRANSPORT ADDRESS" (see ``Lab.live_paths``)."""
    paths = []
    for line in text.splitlines():
        parts = line.split(None, 4)
        if len(parts) >= 4:
            paths.append(PathLine(*parts[:4], address=parts[4] if len(parts) == 5 else ""))
    return paths


class Lab:
    """A running VM lab, described by its state file."""

    def __init__(self, folder: Path, state: LabState, runner: Runner | None = None):
        self.folder = Path(folder)
        self.state = state
        self.runner = runner or Runner()
        self._children: dict[str, object] = {}

    # -- loading and saving -----------------------------------------------------
    @property
    def name(self) -> str:
        return self.state.spec.name

    @property
    def spec(self) -> LabSpec:
        return self.state.spec

    @staticmethod
    def is_up(name: str) -> bool:
        """A lab of this name has a state file (is up, or went down without ``lab down``: its guests are gone)."""
        return (lab_home() / name / STATE).exists()

    @classmethod
    def load(cls, name: str = "default", runner: Runner | None = None) -> "Lab":
        folder = lab_home() / name
        path = folder / STATE
        if not path.exists():
            raise BadInput(f"no lab named {name!r} is up ({path} does not exist)", hint="start one: fxprobe lab up")
        return cls(folder, LabState.read(path, name), runner)

    def save(self) -> None:
        self.state.write(self.folder / STATE)

    def reload(self) -> None:
        """Read the state file again (another process changed the lab)."""
        self.state = LabState.read(self.folder / STATE, self.name)

    # -- guests -----------------------------------------------------------------------
    def guest_name(self, name: str) -> str:
        name = "host1" if name == "host" else name
        if name not in self.state.guests:
            raise BadInput(f"no guest {name!r} in lab {self.name!r}",
                           hint=f"guests: {', '.join(self.state.guests)}")
        return name

    def guest(self, name: str) -> SshHost:
        """The guest as a remote node: every fxprobe feature runs commands there through this."""
        name = self.guest_name(name)
        return SshHost(name=name, address="127.0.0.1", port=self.state.guests[name].ssh_port, user="root",
                       identity=self.folder / sshkeys.CLIENT_KEY, known_hosts=self.folder / sshkeys.KNOWN_HOSTS,
                       connect_timeout=GUEST_CONNECT_TIMEOUT_S, options=self._shared_connection)

    @functools.cached_property
    def _shared_connection(self) -> tuple[str, ...]:
        """ssh options that let every fxprobe process share one connection per guest (ControlMaster):
        a TCG guest's sshd takes seconds per handshake, a multiplexed session a fraction of one. The
        sockets live in the lab folder (removed by ``down``), or in a private /tmp folder when that
        path would be too long for a socket."""
        folder = self.folder / "ssh"
        if len(str(folder)) + 42 > 100:
            folder = Path("/tmp") / f"fxprobe-ssh-{os.getuid()}"
        folder.mkdir(mode=0o700, exist_ok=True)
        return ("ControlMaster=auto", f"ControlPath={folder}/%C", "ControlPersist=60")

    def exec(self, guest: str, argv: list[str], timeout: float = 120, check: bool = False,
             input: str | None = None, label: str | None = None) -> CommandResult:
        # an emulated guest under load can take > 10 s to answer ssh: a connection that never reached the
        # command is tried again (3 attempts); a command that ran and failed is not
        return self.runner.run(argv, timeout=timeout, host=self.guest(guest), check=check, input=input,
                               label=label, what=f"in lab guest {guest}", retry_if=never_connected, attempts=3)

    def python(self, module: str, *args: str) -> list[str]:
        """argv that runs a fxprobe module inside a guest with this process's imports (lab.guestpython)."""
        return python_argv(module, *args)

    def qmp(self, guest: str) -> Qmp:
        return Qmp(Path(self.state.guests[self.guest_name(guest)].qmp))

    def guest_info(self, guest: str) -> dict:
        result = self.exec(guest, self.python("fxprobe.lab.guestinfo"), timeout=60, check=True, label="guestinfo")
        return json.loads(result.stdout)

    @property
    def hosts(self) -> list[str]:
        """Names of the host guests (host1..hostN)."""
        return self.state.host_names

    @property
    def main_export(self) -> ExportState:
        return self.state.main_export

    def links(self, host: str | None = None) -> list[LinkState]:
        return [l for l in self.state.links if host is None or l.host == self.guest_name(host)]

    def link(self, n: int, host: str = "host1") -> LinkState:
        host = self.guest_name(host)
        for link in self.state.links:
            if link.host == host and link.n == int(n):
                return link
        raise BadInput(f"no link {n} on {host}", hint=f"links: 1..{self.spec.links}")

    def drive(self, slot: int) -> DriveState:
        for drive in self.state.drives:
            if drive.slot == int(slot):
                return drive
        raise BadInput(f"no drive slot {slot}", hint=f"slots: 0..{len(self.state.drives) - 1}")

    # -- bring-up ---------------------------------------------------------------------
    @classmethod
    def up(cls, spec: LabSpec, runner: Runner | None = None, progress=lambda text: None) -> "Lab":
        spec.validate()
        check_tools()
        folder = lab_home() / spec.name
        longest = folder / "array" / "qmp.sock"
        if len(str(longest)) > 100:
            raise BadInput(f"{longest}: too long for a unix socket (100 characters at most)",
                           hint="set FXPROBE_LAB_HOME to a shorter folder")
        if (folder / STATE).exists():
            existing = cls.load(spec.name, runner)
            if any(_alive(g.pid) for g in existing.state.guests.values()):
                raise BadInput(f"lab {spec.name!r} is already up", hint=f"fxprobe lab down --name {spec.name}")
            existing.down()
        check_capacity(spec, folder.parent)
        ports = choose_ports(spec)
        runner = runner or Runner()
        started = time.monotonic()
        kernel = ensure_kernel(runner, progress)
        initramfs = ensure_initramfs(runner, kernel)
        accel = choose_accel(runner, kernel, initramfs, spec.accel, progress)
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        state = LabState(spec=spec, created=utc_stamp(), accel=accel, kernel=KernelState(**kernel.to_dict()),
                         python=sys.executable)
        lab = cls(folder, state, runner)
        try:
            lab._prepare(spec, ports)
            lab._boot(spec, kernel, initramfs, accel, progress)
            state.timings["booted_s"] = round(time.monotonic() - started, 1)
            lab._build_array(spec, progress)
            if spec.connect:
                lab._connect_hosts(lab.main_export.nqn, progress)
            for number in range(2, spec.arrays + 1):     # extra array guests: drives only (lab/arrays.py)
                from fxprobe.lab.arrays import add_array
                add_array(lab, f"array{number}", spec.drives, progress)
            state.timings["ready_s"] = round(time.monotonic() - started, 1)
            state.ready = utc_stamp()
            lab.save()
        except (FxprobeError, OSError, KeyboardInterrupt) as exc:
            for name in state.guests:
                progress(f"--- console of {name} (last lines) ---\n{_tail(folder / name / 'console.log')}")
            lab.down()
            if isinstance(exc, FxprobeError):
                raise
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise ToolError(f"lab up failed: {exc}") from None
        progress(f"ready in {state.timings['ready_s']} s")
        return lab

    def _prepare(self, spec: LabSpec, ports: list[int]) -> None:
        token = os.urandom(4).hex()
        self.state.token = token
        client_pub, host_pub = sshkeys.make_keys(self.runner, self.folder)
        plan = link_plan(spec)
        ssh_ports = dict(zip(spec.guest_names, ports))
        socket_ports = ports[len(spec.guest_names):]
        drives_dir = self.folder / "drives"
        drives_dir.mkdir(mode=0o700, exist_ok=True)
        for slot in range(spec.drives):
            image = drives_dir / f"slot{slot:02d}.img"
            with open(image, "wb") as handle:
                handle.truncate(spec.drive_mb << 20)
            self.state.drives.append(DriveState(slot=slot, serial=drive_serial(token, slot), image=str(image)))
        for link, port in zip(plan, socket_ports):
            self.state.links.append(LinkState(**link.to_dict(), socket_port=port))
        sshkeys.write_known_hosts(self.folder, host_pub, ssh_ports.values())
        for index, name in enumerate(spec.guest_names):
            share = self.folder / name
            share.mkdir(mode=0o700, exist_ok=True)
            hostnqn, hostid = host_identity(token, name)
            env = {"FXLAB_NAME": name, "FXLAB_MTU": DATA_MTU, "FXLAB_RXE": 1, "FXLAB_HOSTNQN": hostnqn,
                   "FXLAB_HOSTID": hostid, "FXLAB_FORWARD": int(name == "array")}
            (share / "guest.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
            modules = GUEST_MODULES if name == "array" else HOST_GUEST_MODULES
            (share / "modules").write_text("".join(" ".join(line) + "\n" for line in modules))
            (share / "modprobe.conf").write_text(MODPROBE_CONF)
            (share / "hosts").write_text(hosts_file(spec, name))
            nics = [f"52:54:00:00:{index:02x}:00 mgmt 10.0.2.15/24"]
            routes = []
            for link in plan:
                if name == "array":
                    nics.append(f"{link.mac(1)} {link.array_nic} {link.array_ip}/24")
                elif name == f"host{link.host}":
                    nics.append(f"{link.mac(2)} {link.host_nic} {link.host_ip}/24")
                    routes.append(f"10.{link.n}.0.0/16 {link.array_ip}")
            (share / "nics").write_text("\n".join(nics) + "\n")
            (share / "routes").write_text("\n".join(routes) + ("\n" if routes else ""))
            sshkeys.write_guest_files(self.folder, share, client_pub, os.path.dirname(sys.executable))
            self.state.guests[name] = GuestState(ssh_port=ssh_ports[name], qmp=str(share / "qmp.sock"),
                                                 console=str(share / "console.log"), hostnqn=hostnqn,
                                                 role="array" if name == "array" else "host")
        self.save()

    def _guest_config(self, spec: LabSpec, name: str, index: int) -> GuestConfig:
        share = self.folder / name
        nics = []
        for link in self.state.links:
            plan = LinkPlan(int(link.host[4:]), link.n)
            if name == "array":
                nics.append(Nic(plan.array_nic, plan.mac(1), plan.array_ip, listen=link.socket_port,
                                speed=spec.link_speed))
            elif name == link.host:
                nics.append(Nic(plan.host_nic, plan.mac(2), plan.host_ip, connect=link.socket_port,
                                speed=spec.link_speed))
        drives = tuple(d.device() for d in self.state.drives) if name == "array" else ()
        memory = ARRAY_MEMORY_MB + 16 * spec.drives if name == "array" else HOST_MEMORY_MB
        return GuestConfig(name, share, self.state.guests[name].ssh_port, f"52:54:00:00:{index:02x}:00",
                           memory, 1, tuple(nics), drives)

    def _boot(self, spec: LabSpec, kernel, initramfs: Path, accel: str, progress) -> None:
        stage2 = guest_file("stage2.sh")
        for index, name in enumerate(spec.guest_names):
            config = self._guest_config(spec, name, index)
            argv = guest_argv(config, kernel, initramfs, stage2, accel)
            progress(f"guests: starting {name} ({len(config.drives)} drives, {len(config.nics)} data links, {accel})")
            (config.folder / BOOTED).unlink(missing_ok=True)
            child = self.runner.start(argv, label=f"qemu-{name}", stdout_path=config.folder / "qemu.out",
                                      stderr_path=config.folder / "qemu.err")
            self._children[name] = child
            guest = self.state.guests[name]
            guest.pid, guest.memory_mb, guest.argv = child.pid, config.memory_mb, argv
            self.save()
            if name == "array":
                self._wait_listening([l.socket_port for l in self.state.links], name)
        self._wait_ready(progress)

    def _wait_listening(self, ports: list[int], name: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not set(ports) <= listening_ports(address="127.0.0.1"):
            check_running(name, self._children.get(name))
            if time.monotonic() > deadline:
                raise ToolError(f"guest {name}: QEMU did not open its link sockets {ports} within {timeout:.0f} s")
            time.sleep(0.1)

    def booted(self, name: str) -> bool:
        """Whether the guest's stage 2 has finished (the flag on its share: no ssh needed to ask)."""
        return (self.folder / name / BOOTED).exists()

    def answers(self, name: str) -> bool:
        """One command over ssh (this also opens the guest's shared connection)."""
        return self.runner.run(["test", "-e", "/run/fxlab-ready"], timeout=20, host=self.guest(name),
                               label=f"ready-{name}").ok

    def _wait_ready(self, progress) -> None:
        """Until every guest has booted (its flag on the share, read here) and answers over ssh; the guests
        that booted are asked at once. (Asked over ssh before its sshd listens, a guest held each probe for
        its 20 s timeout, one guest after another: 60-80 s of an 8-host lab's boot.)"""
        pending = list(self.state.guests)
        deadline = time.monotonic() + READY_TIMEOUT
        progress(f"guests: booting {', '.join(pending)}")
        while pending:
            for name in pending:
                check_running(name, self._children.get(name))
            booted = [name for name in pending if self.booted(name)]
            if booted:
                with ThreadPoolExecutor(max_workers=len(booted)) as pool:
                    for name, ok in zip(booted, list(pool.map(self.answers, booted))):
                        if ok:
                            pending.remove(name)
                            progress(f"guests: {name} is up")
            if pending and time.monotonic() > deadline:
                raise ToolError(f"guests {', '.join(pending)} not ready within {READY_TIMEOUT} s",
                                hint=f"see {self.folder}/<guest>/console.log")
            if pending:
                time.sleep(1)

    def _build_array(self, spec: LabSpec, progress) -> None:
        slots = list(range(spec.array_drives))
        level = spec.raid
        progress(f"array: {level} over {len(slots)} drives, exported as {spec.subsystem_nqn} over {spec.transport}")
        self._create_export(level, slots, name=MAIN_MD, nqn=spec.subsystem_nqn)

    def _create_export(self, level: str, slots: list[int], name: str, nqn: str) -> ExportState:
        transport = self.spec.transport
        args = ["create", "--nqn", nqn, "--md", name, "--level", level, "--serial-number", f"FXLAB{name[:8].upper()}"]
        for slot in slots:
            args += ["--drive-serial", self.drive(slot).serial]
        # every link carries a port for each transport (soft-RoCE is always on); hosts use spec.transport
        other = "rdma" if transport == "tcp" else "tcp"
        for link in self.state.links:
            args += ["--port", f"{link.nvmet_port}:{transport}:{link.array_ip}:{NVME_PORT}",
                     "--port", f"{link.nvmet_port + ALT_PORT_OFFSET}:{other}:{link.array_ip}:{NVME_PORT}"]
        result = self.exec("array", self.python("fxprobe.lab.target", *args), timeout=180, label=f"target-{name}")
        if not result.ok:
            raise ToolError(f"building export {name} in the array guest failed: "
                            f"{(result.stderr.strip().splitlines() or ['?'])[-1]}")
        export = ExportState(name=name, nqn=nqn, level=level, slots=slots, transport=transport,
                             backing=json.loads(result.stdout)["backing"])
        for slot in slots:
            self.drive(slot).export = name
        self.state.exports.append(export)
        self.save()
        return export

    def _connect_hosts(self, nqn: str, progress, hosts: list[str] | None = None) -> None:
        """Connect ``hosts`` (default: every host guest) to ``nqn`` on each of their data links, at the same time."""
        export = self.export(nqn)

        def connect(host: str) -> None:
            for link in self.links(host):
                progress(f"hosts: {host} connecting to {link.array_ip} (link {link.n}, {export.transport})")
                self.exec(host, ["nvme", "connect", "-t", export.transport, "-a", link.array_ip,
                                 "-s", str(NVME_PORT), "-n", nqn], timeout=60, check=True, label=f"connect-{host}")
            self.wait_paths(host, nqn, len(self.links(host)))

        hosts = list(self.hosts if hosts is None else hosts)
        with ThreadPoolExecutor(max_workers=len(hosts)) as pool:  # hosts connect at the same time
            list(pool.map(connect, hosts))
        export.connected = export.connected + hosts
        self.save()

    def export(self, key: str) -> ExportState:
        """The export named ``key`` (md name) or with NQN ``key``."""
        for export in self.state.exports:
            if key in (export.name, export.nqn):
                return export
        raise BadInput(f"no export {key!r} in lab {self.name!r}",
                       hint=f"exports: {', '.join(e.name for e in self.state.exports) or 'none'}")

    def live_paths(self, host: str, nqn: str) -> list[PathLine]:
        """Live NVMe-oF paths (controllers) of ``host`` to subsystem ``nqn``, read from sysfs."""
        result = self.exec(host, ["sh", str(guest_file("paths.sh"))], timeout=30, check=True, label="paths")
        return [p for p in parse_path_lines(result.stdout) if p.nqn == nqn and p.state == "live"]

    def wait_paths(self, host: str, nqn: str, count: int, timeout: float = 60) -> list[PathLine]:
        """Wait until ``host`` has exactly ``count`` live paths to ``nqn``."""
        deadline = time.monotonic() + timeout
        while True:
            live = self.live_paths(host, nqn)
            if len(live) == count:
                return live
            if time.monotonic() > deadline:
                raise ToolError(f"{host}: {len(live)} live paths to {nqn} after {timeout:.0f} s, expected {count}")
            time.sleep(1)

    # -- second export (e.g. a raid0 "fail twin") -------------------------------------------
    def add_export(self, level: str, slots: list[int], name: str = "twin",
                   connect: bool | list[str] = True) -> ExportState:
        """Build md ``level`` over free drive ``slots`` and export it as another subsystem, no reboot; ``connect``:
        every host guest connects to it (True), none (False), or the hosts named."""
        if not re.match(r"^[a-z][a-z0-9]{0,11}$", name) or name == MAIN_MD:
            raise BadInput(f"export name {name!r}: 1-12 lowercase letters/digits, not {MAIN_MD!r}")
        if self.state.export_named(name):
            raise BadInput(f"export {name!r} exists already")
        for slot in slots:
            drive = self.drive(slot)
            if drive.export or not drive.present:
                raise BadInput(f"drive slot {slot} is {'in export ' + drive.export if drive.export else 'pulled'}",
                               hint="pick free slots (start the lab with --raid-drives K to leave some out)")
        export = self._create_export(level, [int(s) for s in slots], name, f"{SUBSYS_PREFIX}:{self.name}:{name}")
        if connect:
            self._connect_hosts(export.nqn, lambda text: None, None if connect is True else [self.guest_name(h)
                                                                                          for h in connect])
        return export

    def remove_export(self, name: str) -> None:
        export = self.export(name)
        if export.name == MAIN_MD:
            raise BadInput("the main export goes away with `lab down`")
        for host in export.connected:
            self.exec(host, ["nvme", "disconnect", "-n", export.nqn], timeout=60)
        self.exec("array", self.python("fxprobe.lab.target", "remove", "--nqn", export.nqn, "--md", export.name),
                  timeout=120, check=True)
        for slot in export.slots:
            self.drive(slot).export = None
        self.state.exports.remove(export)
        self.save()

    # -- faults ----------------------------------------------------------------------
    def drive_pull(self, slot: int) -> dict:
        """Hot-remove drive ``slot`` (QMP device_del); md marks it failed and runs degraded."""
        return self.drive_pulls([slot])[0]

    def drive_pulls(self, slots: list[int]) -> list[dict]:
        """Hot-remove drives ``slots`` at once, as drives that fail together: every device_del is sent before any
        DEVICE_DELETED is awaited (the guest releases them side by side; each drive's ``pulled`` is its event's
        timestamp), then md fails and removes the detached members, once per export."""
        drives = [self.drive(slot) for slot in slots]
        for drive in drives:
            if not drive.present:
                raise BadInput(f"drive slot {drive.slot} is already pulled",
                               hint=f"fxprobe lab fault drive-restore {drive.slot}")
        for guest in dict.fromkeys(drive.array for drive in drives):
            ids = {f"drive{drive.slot}": drive for drive in drives if drive.array == guest}
            with self.qmp(guest) as qmp:
                for device in ids:
                    qmp.command("device_del", id=device)
                released = qmp.wait_events("DEVICE_DELETED", 30, "device", list(ids))
            for device, drive in ids.items():
                if device in released:     # the instant QEMU let go of it, not when this process heard of it
                    at = event_epoch(released[device])
                    drive.present = False
                    drive.pulled = utc_stamp(dt.datetime.fromtimestamp(at, dt.timezone.utc) if at else None)
            self.save()
            held = [str(drive.slot) for device, drive in ids.items() if device not in released]
            if held:
                raise ToolError(f"drive slot {', '.join(held)}: the array guest did not release the device within 30 s")
        for drive in {d.export: d for d in drives if d.export}.values():
            self.exec(drive.array, ["mdadm", f"/dev/md/{drive.export}", "--fail", "detached", "--remove", "detached"],
                      timeout=60)
        return [{"slot": drive.slot, "serial": drive.serial, "pulled": drive.pulled} for drive in drives]

    def drive_restore(self, slot: int, replace: bool = False) -> dict:
        """Plug drive ``slot`` back (QMP device_add, same serial and PCI slot) and add it back to md: ``--re-add``
        (md's write-intent bitmap resyncs what was written meanwhile), else ``--add``; ``replace``: as a new drive
        (its md superblock wiped first, so md rebuilds it whole)."""
        drive = self.drive(slot)
        if drive.present:
            raise BadInput(f"drive slot {slot} is present", hint=f"fxprobe lab fault drive-pull {slot} first")
        with self.qmp(drive.array) as qmp:
            qmp.command("device_add", **drive.device().device_args())
        drive.present, drive.pulled = True, None
        self.save()
        found = self.exec(drive.array, self.python("fxprobe.lab.target", "wait-serial", drive.serial),
                          timeout=90, check=True, label="wait-serial")
        device = found.stdout.strip()
        result = {"slot": drive.slot, "serial": drive.serial, "device": device}
        if drive.export:
            md = f"/dev/md/{drive.export}"
            if replace:
                self.exec(drive.array, ["mdadm", "--zero-superblock", device], timeout=60, check=True)
            added = self.exec(drive.array, ["mdadm", md, "--re-add", device], timeout=60) if not replace else None
            if added is None or not added.ok:     # a new drive, no bitmap, or too far behind: a full rebuild
                self.exec(drive.array, ["mdadm", md, "--add", device], timeout=60, check=True)
            result["md"] = md
            result["md_action"] = "replace" if replace else "re-add" if added.ok else "add"
        return result

    def _set_link(self, n: int, host: str, up: bool) -> dict:
        link = self.link(n, host)
        with self.qmp(link.host) as qmp, self.qmp(link.array) as array_qmp:
            requested = utc_stamp()      # the link changes from the first set_link on: "at" is its instant
            qmp.command("set_link", name=f"nic-{link.host_nic}", up=up)
            array_qmp.command("set_link", name=f"nic-{link.array_nic}", up=up)
            done = utc_stamp()
        link.up, link.changed = up, requested
        self.save()
        return {"host": link.host, "n": link.n, "up": up, "at": requested, "done": done}

    def link_down(self, n: int, host: str = "host1") -> dict:
        """Cut data link ``n`` of ``host`` at both ends (QMP set_link up=false)."""
        return self._set_link(n, host, False)

    def link_up(self, n: int, host: str = "host1") -> dict:
        return self._set_link(n, host, True)

    def throttle(self, n: int, rate: str, host: str = "host1") -> dict:
        """Limit link ``n`` both ways with a tbf qdisc (``rate`` in tc units, e.g. 200mbit; "off" removes it)."""
        link = self.link(n, host)
        if rate != "off" and not RATE_RE.match(rate):
            raise BadInput(f"rate {rate!r}: use tc units such as 100mbit or 2gbit, or off")
        for guest, nic in ((link.host, link.host_nic), (link.array, link.array_nic)):
            if rate == "off":
                self.exec(guest, ["tc", "qdisc", "del", "dev", nic, "root"], timeout=30)
            else:
                self.exec(guest, ["tc", "qdisc", "replace", "dev", nic, "root", "tbf", "rate", rate,
                                  "burst", "256kb", "latency", "100ms"], timeout=30, check=True)
        link.rate = None if rate == "off" else rate
        self.save()
        return {"host": link.host, "n": link.n, "rate": link.rate}

    # -- status -------------------------------------------------------------------------
    def _infos(self, guests: dict) -> dict[str, dict]:
        """guestinfo of every running guest, one SSH round trip each, all at once."""
        infos = {}

        def look(name: str) -> None:
            try:
                infos[name] = self.guest_info(name)
            except FxprobeError as exc:
                guests[name]["error"] = str(exc)

        with ThreadPoolExecutor(max_workers=len(guests)) as pool:
            list(pool.map(look, [name for name, g in guests.items() if g["running"]]))
        return infos

    def _drive_status(self, infos: dict) -> list[dict]:
        drives = []
        for array in self.state.array_names:
            info = infos.get(array, {})
            by_serial = {c["serial"]: c for c in info.get("nvme_controllers", []) if c.get("transport") == "pcie"}
            md_by_device = {m["device"]: (md["name"], "faulty" if m["faulty"] else "active")
                            for md in info.get("md", []) for m in md["members"]}
            for drive in (d for d in self.state.drives if d.array == array):
                ctrl = by_serial.get(drive.serial)
                device = ctrl["namespaces"][0] if ctrl and ctrl["namespaces"] else None
                md_name, md_state = md_by_device.get(device, (None, None))
                drives.append({"array": array, "slot": drive.slot, "serial": drive.serial, "export": drive.export,
                               "state": "present" if ctrl else ("pulled" if not drive.present else "missing"),
                               "device": device, "md": md_name, "md_state": md_state})
        return drives

    def _link_status(self, infos: dict) -> list[dict]:
        links = []
        for link in self.state.links:
            nets = {n["name"]: n for n in infos.get(link.host, {}).get("net", [])}
            array_nets = {n["name"]: n for n in infos.get(link.array, {}).get("net", [])}
            host_nic = nets.get(link.host_nic, {})
            links.append({**link.model_dump(include={"host", "n", "array_ip", "host_ip", "nvmet_port", "up", "rate"}),
                          "host_operstate": host_nic.get("operstate"), "speed_mbps": host_nic.get("speed_mbps"),
                          "array_operstate": array_nets.get(link.array_nic, {}).get("operstate")})
        return links

    def status(self) -> dict:
        guests = {name: {"running": _alive(g.pid), "pid": g.pid, "ssh": f"127.0.0.1:{g.ssh_port}", "qmp": g.qmp}
                  for name, g in self.state.guests.items()}
        infos = self._infos(guests)
        state = self.state.to_dict()
        return {"name": self.name, "folder": str(self.folder), "spec": state["spec"], "accel": self.state.accel,
                "kernel": self.state.kernel.version, "timings": self.state.timings, "guests": guests,
                "drives": self._drive_status(infos), "exports": state["exports"],
                "md": [md for a in self.state.array_names for md in infos.get(a, {}).get("md", [])],
                "links": self._link_status(infos),
                "nvme": {name: infos.get(name, {}).get("nvme_subsystems", []) for name in self.hosts if name in infos},
                "rdma": {n: i.get("rdma", []) for n, i in infos.items()}}

    # -- teardown ---------------------------------------------------------------------
    def down(self, timeout: float = 15) -> list[str]:
        """Stop every guest and remove the lab folder (keys, sockets, drives). Returns what was done."""
        done = []
        for name, guest in self.state.guests.items():
            pid = guest.pid
            if not _alive(pid):
                continue
            try:
                with Qmp(Path(guest.qmp), timeout=5) as qmp:
                    qmp.command("quit")
            except FxprobeError:
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
            done.append(f"stopped {name} (pid {pid})")
        for child in self._children.values():
            child.stop(timeout=timeout)
        if self.folder.exists():
            shutil.rmtree(self.folder)
            done.append(f"removed {self.folder}")
        return done


def down_by_name(name: str, runner: Runner | None = None) -> list[str]:
    """``lab down`` from any process, even with a damaged state file."""
    folder = lab_home() / name
    try:
        return Lab.load(name, runner).down()
    except BadInput:
        if folder.exists():
            shutil.rmtree(folder)
            return [f"removed {folder}"]
        raise
