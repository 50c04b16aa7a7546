"""QEMU command lines for the lab guests (pure functions), and the cached KVM probe."""

from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass
from pathlib import Path

import psutil

from fxprobe.core.errors import ToolError
from fxprobe.lab.kernel import LabKernel, cache_root
from fxprobe.core.runner import Runner

QEMU = "qemu-system-x86_64"
ARRAY_MEMORY_MB = 1024   # an array guest (more with its drives)


def qemu_binary() -> str:
    """The QEMU to run: ``$FXPROBE_QEMU`` or qemu-system-x86_64 from PATH."""
    return os.environ.get("FXPROBE_QEMU") or QEMU

FIRST_DRIVE_SLOT = 3     # PCI slot of drive 0 on the root bus (0: host bridge, 1: ISA, 2: NIC bridge)
MAX_DRIVES = 28          # root-bus slots 3..30: every drive is hot-pluggable there
# Slots on the NIC bridge: 1 the management NIC, 2.. the data NICs (an array guest of 8 hosts x 2 links has 16),
# the three 9p shares at the top, clear of them.
FIRST_DATA_NIC_SLOT = 2
FIRST_SHARE_SLOT = 0x1c
MAX_DATA_NICS = FIRST_SHARE_SLOT - FIRST_DATA_NIC_SLOT
# QEMU gives each TCG guest a translation cache of up to 1 GiB of host memory by default; nine guests (an array
# and 8 hosts) on a 24 GiB machine cannot all have that, and a guest's kernel, sshd, fio and Python fit in less.
TCG_TB_MB = 256
BOOTED = "booted"        # a guest's stage 2 writes this file on its share once sshd is up and udev has settled


@dataclass(frozen=True)
class Nic:
    """A data NIC: ``netdev`` is the QEMU id (also the guest's interface name)."""

    netdev: str
    mac: str
    address: str              # a.b.c.d/prefix inside the guest
    listen: int | None = None  # socket netdev: listen on 127.0.0.1:port ...
    connect: int | None = None  # ... or connect to it
    speed: int = 100000        # advertised Mb/s


EMULATED_MODEL = "QEMU NVMe Ctrl"     # the model QEMU's nvme device reports (selftest --emulated-drives names it)


@dataclass(frozen=True)
class Drive:
    slot: int
    serial: str
    image: str
    position: int | None = None   # place on its array guest's bus (None: the slot; a second array starts at 0)

    def device_args(self) -> dict:
        """The ``device_add`` arguments, identical at boot and on restore.

        ``ioeventfd``: the guest's doorbell writes reach the emulated drive through an event the main loop
        handles, not in the trapped write itself. Without it, QEMU 7.2's NVMe drive could stop completing I/O
        after another drive was hot-plugged beside it (the guest logs "timeout, aborting", resets the controller,
        and the drive stalls again): with fio randread iodepth 32 on drives 21 and 22 while drives 23, 20 and 1
        were pulled and restored, drive 22 stalled in 2 of 3 runs (72 pull-restore cycles) without it, and
        never in 3 runs (102 cycles) with it."""
        place = self.slot if self.position is None else self.position
        return {"driver": "nvme", "id": f"drive{self.slot}", "drive": f"nv{self.slot}",
                "serial": self.serial, "bus": "pci.0", "addr": hex(FIRST_DRIVE_SLOT + place), "ioeventfd": True}


@dataclass(frozen=True)
class GuestConfig:
    name: str
    folder: Path              # the guest's writable share (and console, QMP socket)
    ssh_port: int
    mgmt_mac: str
    memory_mb: int
    cpus: int
    nics: tuple[Nic, ...] = ()
    drives: tuple[Drive, ...] = ()

    @property
    def qmp_socket(self) -> Path:
        return self.folder / "qmp.sock"

    @property
    def console(self) -> Path:
        return self.folder / "console.log"


def device_option(args: dict) -> str:
    args = dict(args)
    driver = args.pop("driver")
    return ",".join([driver] + [f"{k}={_option_value(v)}" for k, v in args.items()])


def _option_value(value) -> str:
    """A property as -device spells it (a bool as on/off; QMP's device_add takes the JSON value itself)."""
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def guest_argv(guest: GuestConfig, kernel: LabKernel, initramfs: Path, stage2: Path,
               accel: str) -> list[str]:
    if len(guest.nics) > MAX_DATA_NICS:
        raise ValueError(f"guest {guest.name}: {len(guest.nics)} data NICs, the NIC bridge holds {MAX_DATA_NICS}")
    accel_args = ["-accel", "kvm", "-cpu", "host"] if accel == "kvm" else \
        ["-accel", f"tcg,thread=multi,tb-size={TCG_TB_MB}", "-cpu", "max"]
    append = ("console=ttyS0 loglevel=4 panic=-1 net.ifnames=0 nvme_core.multipath=Y "
              f"fxlab.stage2={stage2}")
    argv = [qemu_binary(), "-name", f"fxlab-{guest.name}", "-machine", "pc", *accel_args,
            "-smp", str(guest.cpus), "-m", str(guest.memory_mb),
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-serial", f"file:{guest.console}",
            "-qmp", f"unix:{guest.qmp_socket},server=on,wait=off",
            "-kernel", str(kernel.vmlinuz), "-initrd", str(initramfs), "-append", append,
            "-device", "pci-bridge,id=nics,chassis_nr=1,bus=pci.0,addr=0x2"]
    shares = (("hostroot", "/", ",readonly=on,multidevs=remap"),
              ("modules", str(kernel.modules_base), ",readonly=on"),
              ("fxlab", str(guest.folder), ""))
    for index, (tag, path, extra) in enumerate(shares):
        argv += ["-fsdev", f"local,id=fs-{tag},path={path},security_model=passthrough{extra}",
                 "-device", f"virtio-9p-pci,fsdev=fs-{tag},mount_tag={tag},bus=nics,addr={hex(FIRST_SHARE_SLOT + index)}"]
    argv += ["-netdev", f"user,id=mgmt,net=10.0.2.0/24,restrict=on,hostfwd=tcp:127.0.0.1:{guest.ssh_port}-:22",
            "-device", f"virtio-net-pci,netdev=mgmt,id=nic-mgmt,mac={guest.mgmt_mac},bus=nics,addr=0x1,romfile="]
    for index, nic in enumerate(guest.nics, start=FIRST_DATA_NIC_SLOT):
        where = f"listen=127.0.0.1:{nic.listen}" if nic.listen else f"connect=127.0.0.1:{nic.connect}"
        argv += ["-netdev", f"socket,id={nic.netdev},{where}",
                 "-device", f"virtio-net-pci,netdev={nic.netdev},id=nic-{nic.netdev},mac={nic.mac},"
                            f"speed={nic.speed},duplex=full,bus=nics,addr={hex(index)},romfile="]
    for drive in guest.drives:
        # no-flush: a guest flush or FUA write (md's superblock and write-intent bitmap) would fdatasync the image on
        # this machine, which took over the guest's 30 s I/O timeout while other labs wrote (the drive was failed);
        # the lab's drives are disposable, so their durability across a crash of this machine is not needed
        argv += ["-blockdev", f"driver=file,filename={drive.image},node-name=file{drive.slot},cache.direct=off,"
                              "cache.no-flush=on",
                 "-blockdev", f"driver=raw,file=file{drive.slot},node-name=nv{drive.slot}",
                 "-device", device_option(drive.device_args())]
    return argv


# -- acceleration -----------------------------------------------------------------

def _probe_cache() -> Path:
    return cache_root() / "accel.json"


def _probe_key(kernel: LabKernel) -> str:
    return f"{platform.release()}|{kernel.version}"


def choose_accel(runner: Runner, kernel: LabKernel, initramfs: Path, requested: str = "auto",
                 progress=lambda text: None) -> str:
    """"kvm" if a KVM guest boots here (probed once, result cached), else "tcg"."""
    if requested in ("kvm", "tcg"):
        return requested
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "tcg"
    cache = _probe_cache()
    known = json.loads(cache.read_text()) if cache.exists() else {}
    key = _probe_key(kernel)
    if key in known:
        return known[key]
    progress("accel: probing KVM once (the result is cached)")
    argv = [qemu_binary(), "-accel", "kvm", "-cpu", "host", "-m", "256", "-nodefaults", "-no-user-config",
            "-display", "none", "-no-reboot", "-serial", "stdio",
            "-kernel", str(kernel.vmlinuz), "-initrd", str(initramfs),
            "-append", "console=ttyS0 loglevel=1 panic=-1 fxlab.probe"]
    result = runner.run(argv, timeout=20, label="kvm-probe")
    accel = "kvm" if "FXLAB-PROBE-OK" in result.stdout else "tcg"
    known[key] = accel
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(known, indent=2) + "\n")
    progress(f"accel: {accel}")
    return accel


def check_running(name: str, child) -> None:
    """ToolError with QEMU's exit code and last line if guest ``name``'s QEMU, started by this process (``child``,
    its ``Background``; None: not started here), has exited. Its own exit status, not the pid's command line."""
    if child is not None and not child.alive():
        _, err = child.output()
        raise ToolError(f"QEMU for guest {name} exited with code {child.process.poll()}: "
                        f"{(err.strip().splitlines() or ['(no message)'])[-1]}")


def _alive(pid: int | None, marker: str = "fxlab-") -> bool:
    """Whether ``pid`` is still a running lab guest's QEMU (its command line holds ``marker``): for a pid from
    the lab's state. A QEMU this process has just started is asked through ``check_running``: right after the
    start the kernel shows an empty command line for a moment (measured: 5 of 300 reads)."""
    if not pid:
        return False
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE and any(marker in a for a in process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
