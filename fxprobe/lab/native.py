"""The native lab: the lab's array built on this machine with its own kernel modules.

null_blk devices (or files on loop devices) -> md RAID -> nvmet over TCP on 127.0.0.1, then
connected back with ``nvme connect`` (native multipath). The VM lab's array guest runs the same
target code (``fxprobe.lab.target``), and the native lab itself is tested inside that guest.
State: ``<lab home>/native-<name>/state.json``.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fxprobe.core import kernel, sysfs
from fxprobe.core.errors import BadInput, FxprobeError, NotRunnable, ToolError
from fxprobe.lab.spec import SUBSYS_PREFIX, check_name, check_raid
from fxprobe.lab.target import PortSpec, build_export, remove_export
from fxprobe.lab.vm import lab_home, port_is_free
from fxprobe.tools.nvmet import NvmetRoot
from fxprobe.core.rundir import utc_stamp, write_json
from fxprobe.core.schema import parse_json, validate
from fxprobe.core.runner import Runner

MODULES = ("nvmet", "nvmet-tcp", "nvme-tcp", "md_mod")
NATIVE_PORT_ID = 900


@dataclass(frozen=True)
class NativeSpec:
    name: str = "default"
    drives: int = 4
    raid: str = "raid6"
    port: int = 4420
    source: str = "auto"      # null_blk, files or auto (null_blk when its configfs exists)
    drive_mb: int = 256
    connect: bool = True

    def validate(self) -> "NativeSpec":
        check_name(self.name)
        check_raid(self.raid)
        if not 1 <= self.drives <= 64:
            raise BadInput(f"--drives {self.drives}: the native lab makes 1 to 64 devices")
        if self.raid == "none" and self.drives != 1:
            raise BadInput("--raid none exports one device: use --drives 1")
        check_raid(self.raid, self.drives)
        if self.source not in ("auto", "null_blk", "files"):
            raise BadInput(f"source {self.source!r}: use auto, null_blk or files")
        return self

    @property
    def nqn(self) -> str:
        return f"{SUBSYS_PREFIX}:native-{self.name}"

    @property
    def md(self) -> str | None:
        """The md array the lab builds (None: raid none exports the one device)."""
        return f"fxn-{self.name}" if self.raid != "none" else None


class NativeState(BaseModel):
    """``<lab home>/native-<name>/state.json``: what ``lab status/down --native`` need of a native lab that is up,
    written again after each step of ``lab up`` (a failed step is undone from what it says)."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True)
    name: str
    spec: NativeSpec
    source: Literal["null_blk", "files"]
    devices: list[str] = Field(default_factory=list)     # made so far, in order (/dev/... of null_blk or loop)
    nqn: str
    md: str | None = None                                # None: raid none exports the one device
    level: str
    port: int
    created: str
    exported: bool = False
    connected_as: str | None = None

    @classmethod
    def read(cls, name: str) -> "NativeState":
        path = folder_of(name) / "state.json"
        if not path.exists():
            raise BadInput(f"no native lab named {name!r} is up ({path} does not exist)",
                           hint="start one: fxprobe lab up --native")
        return validate(cls, parse_json(path.read_text(), str(path)), str(path))

    def write(self) -> None:
        write_json(folder_of(self.name) / "state.json", self.model_dump(mode="json"))


def folder_of(name: str) -> Path:
    return lab_home() / f"native-{name}"


def nullb_folder(name: str) -> Path:
    return sysfs.path(kernel.NULLB_CONFIGFS) / name


def probe_native(runner: Runner) -> str | None:
    """Why the native lab cannot run on this machine, or None (loads the modules it needs)."""
    if not Path("/lib/modules", os.uname().release).is_dir() and not kernel.module_loaded("nvmet"):
        return f"this kernel ({os.uname().release}) has no loadable modules (/lib/modules/{os.uname().release} is missing)"
    for module in MODULES:
        loaded = runner.run(["modprobe", module], timeout=60)
        if not loaded.ok:
            return f"cannot load kernel module {module}: {(loaded.stderr.strip() or '?').splitlines()[-1]}"
    if not kernel.configfs_mounted():
        runner.run(["mount", "-t", "configfs", "configfs", kernel.CONFIGFS], timeout=30)
    return NvmetRoot().probe()


def _make_nullb(name: str, size_mb: int) -> str:
    """A memory-backed null_blk disk made through configfs; returns its /dev path.

    Kernels >= 5.x name the disk after the configfs folder (/dev/<name>); older ones use
    /dev/nullb<index>: both are checked.
    """
    folder = nullb_folder(name)
    try:
        folder.mkdir()
        for attr, value in (("size", size_mb), ("blocksize", 512), ("memory_backed", 1), ("power", 1)):
            (folder / attr).write_text(f"{value}\n")
        number = (folder / "index").read_text().strip()
    except OSError as exc:
        raise ToolError(f"{folder}: cannot make a null_blk device: {exc.strerror or exc}") from None
    candidates = [Path("/dev") / name, Path(f"/dev/nullb{number}")]
    deadline = time.monotonic() + 10
    while not any(c.exists() for c in candidates):
        if time.monotonic() > deadline:
            raise ToolError(f"{folder}: powered on, but neither {candidates[0]} nor {candidates[1]} appeared")
        time.sleep(0.1)
    return str(next(c for c in candidates if c.exists()))


def _make_loop(runner: Runner, folder: Path, index: int, size_mb: int) -> str:
    image = folder / f"drive{index:02d}.img"
    with open(image, "wb") as handle:
        handle.truncate(size_mb << 20)
    result = runner.run(["losetup", "--find", "--show", "--direct-io=on", str(image)], timeout=30, check=True,
                        what="attaching a loop device")
    return result.stdout.strip()


def native_up(spec: NativeSpec, runner: Runner, progress=lambda text: None) -> NativeState:
    spec.validate()
    folder = folder_of(spec.name)
    if (folder / "state.json").exists():
        raise BadInput(f"native lab {spec.name!r} is already up", hint=f"fxprobe lab down --native --name {spec.name}")
    if not port_is_free(spec.port):
        raise BadInput(f"port {spec.port} on 127.0.0.1 is already taken", hint="pick another --port-base")
    reason = probe_native(runner)
    if reason:
        raise NotRunnable(f"native lab: {reason}", hint="use the VM lab (fxprobe lab up) on this machine")
    source = spec.source
    if source == "auto":
        runner.run(["modprobe", "null_blk", "nr_devices=0"], timeout=60)
        source = "null_blk" if sysfs.path(kernel.NULLB_CONFIGFS).is_dir() else "files"
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    state = NativeState(name=spec.name, spec=spec, source=source, nqn=spec.nqn,
                        md=spec.md, level=spec.raid, port=spec.port,
                        created=utc_stamp())
    state.write()
    try:
        progress(f"native: {spec.drives} {source} devices")
        for index in range(spec.drives):
            device = _make_nullb(f"fxnb-{spec.name}-{index}", spec.drive_mb) if source == "null_blk" else \
                _make_loop(runner, folder, index, spec.drive_mb)
            state.devices = [*state.devices, device]
            state.write()
        progress(f"native: {spec.raid} exported as {spec.nqn} on 127.0.0.1:{spec.port}")
        build_export(runner, nqn=spec.nqn, md_name=spec.md, level=spec.raid, devices=state.devices,
                     ports=[PortSpec(NATIVE_PORT_ID, "tcp", "127.0.0.1", spec.port)], serial="FXNATIVE")
        state.exported = True
        state.write()
        if spec.connect:
            runner.run(["nvme", "connect", "-t", "tcp", "-a", "127.0.0.1", "-s", str(spec.port), "-n", spec.nqn],
                       timeout=60, check=True, what="connecting to the native lab")
            state.connected_as = "nvme-tcp 127.0.0.1"
            state.write()
    except (FxprobeError, OSError) as exc:
        native_down(spec.name, runner)
        if isinstance(exc, FxprobeError):
            raise
        raise ToolError(f"native lab up failed: {exc}") from None
    return state


def native_status(name: str, runner: Runner) -> dict:
    from fxprobe.lab.guestinfo import collect
    state = NativeState.read(name)
    info = collect()
    return {**state.model_dump(mode="json"), "md_arrays": info["md"], "nvmet": NvmetRoot().dump(),
            "nvme": [s for s in info["nvme_subsystems"] if s["nqn"] == state.nqn]}


def native_down(name: str, runner: Runner) -> list[str]:
    """Disconnect, unexport, stop md, free the devices, remove the state: in that order."""
    folder = folder_of(name)
    state = NativeState.read(name)
    done = []
    if state.connected_as:
        runner.run(["nvme", "disconnect", "-n", state.nqn], timeout=60)
        done.append(f"disconnected {state.nqn}")
    if NvmetRoot().path.is_dir():
        done += remove_export(runner, nqn=state.nqn, md_name=state.md)
    for index, device in enumerate(state.devices):
        if state.source == "null_blk":
            nullb = nullb_folder(f"fxnb-{name}-{index}")
            if nullb.is_dir():
                (nullb / "power").write_text("0\n")
                nullb.rmdir()
        else:
            runner.run(["losetup", "-d", device], timeout=30)
        done.append(f"released {device}")
    shutil.rmtree(folder)
    done.append(f"removed {folder}")
    return done
