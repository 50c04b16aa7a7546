"""What this kernel offers and where it shows it: the sysfs/procfs/configfs places the host checks name, read
through :mod:`fxprobe.core.sysfs` (its root is redirectable, so tests point it at a captured tree)."""

from __future__ import annotations

from fxprobe.core import sysfs

NVME_CLASS = "/sys/class/nvme"               # one folder per NVMe controller (PCIe or fabrics)
NVME_SUBSYSTEM_CLASS = "/sys/class/nvme-subsystem"
BLOCK_CLASS = "/sys/block"                   # disks and md/dm devices (no partitions)
BLOCK_DEVICES = "/sys/class/block"           # every block device, partitions too
MOUNTINFO = "/proc/self/mountinfo"
SWAPS = "/proc/swaps"                         # active swap devices and files
PCI_RESCAN = "/sys/bus/pci/rescan"
RDMA_CLASS = "/sys/class/infiniband"
NET_CLASS = "/sys/class/net"
CONFIGFS = "/sys/kernel/config"             # where configfs is mounted
NVMET_CONFIGFS = f"{CONFIGFS}/nvmet"
NULLB_CONFIGFS = f"{CONFIGFS}/nullb"
MDSTAT = "/proc/mdstat"
DISKSTATS = "/proc/diskstats"                # I/O counters of every block device (iostats.rst)
DEBUGFS = "/sys/kernel/debug"
DEBUGFS_BLOCK = f"{DEBUGFS}/block"           # blktrace's relay files live here
PROC_NET_TCP = "/proc/net/tcp"               # TCP sockets (IPv4), their states
STDIN = "/proc/self/fd/0"     # this process's stdin (lab guests have no /dev/stdin)


def module_loaded(name: str) -> bool:
    return sysfs.exists(f"/sys/module/{name}")


def configfs_mounted() -> bool:
    """Whether configfs is mounted (its folder has entries: nvmet, nullb ...)."""
    return bool(sysfs.listdir(CONFIGFS))


def rdma_devices() -> list[str]:
    return sysfs.listdir(RDMA_CLASS)


def has(place: str) -> bool:
    """Whether the kernel shows ``place`` (one of the constants above)."""
    return sysfs.exists(place)


def controller_attribute(controller: str, name: str) -> str:
    """The path of a controller's attribute (fast_io_fail_tmo, kato, address ...)."""
    return f"{NVME_CLASS}/{controller}/{name}"


def block_attribute(device: str, name: str) -> str:
    """The path of a block device's attribute (queue/max_sectors_kb, size ...)."""
    return f"{BLOCK_DEVICES}/{device}/{name}"


def subsystem_attribute(subsystem: str, name: str) -> str:
    """The path of an NVMe subsystem's attribute (iopolicy, subsysnqn ...)."""
    return f"{NVME_SUBSYSTEM_CLASS}/{subsystem}/{name}"
