"""The VM lab's state file (``<lab folder>/state.json``) as typed records.

One ``LabState`` holds what a new process needs to drive a running lab: the spec it was started
with, every guest (SSH port, QMP socket, QEMU pid), every drive slot, every data link and every
export. ``LabState.read``/``write`` round-trip the file; everything else reads attributes.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fxprobe.core.errors import BadInput
from fxprobe.core.rundir import write_json
from fxprobe.lab.kernel import LabKernel
from fxprobe.lab.qemu import Drive
from fxprobe.lab.spec import LabSpec


class Record(BaseModel):
    """Base of the state records: assignments are checked, unknown keys of older files are dropped."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True)


class GuestState(Record):
    ssh_port: int
    qmp: str                      # QMP unix socket path
    console: str                  # serial console log
    hostnqn: str
    pid: int | None = None        # QEMU process, once started
    cpus: int = 1
    memory_mb: int = 0
    argv: list[str] = Field(default_factory=list)
    role: str = "host"            # "array" or "host"

    @property
    def is_array(self) -> bool:
        return self.role == "array"


class DriveState(Record):
    slot: int
    serial: str
    image: str                    # backing file on this machine
    present: bool = True
    export: str | None = None     # the export (md name) the drive belongs to
    pulled: str | None = None     # UTC stamp of the last pull while not present
    array: str = "array"          # the array guest holding the slot
    position: int | None = None   # its place on that guest's PCI bus (None: the slot)

    def device(self) -> Drive:
        return Drive(self.slot, self.serial, self.image, self.position)


class LinkState(Record):
    host: str
    n: int
    array_nic: str
    host_nic: str
    array_ip: str
    host_ip: str
    nvmet_port: int
    socket_port: int
    up: bool = True
    rate: str | None = None       # tbf rate while throttled
    changed: str | None = None    # UTC stamp of the last up/down
    array: str = "array"


class ExportState(Record):
    name: str                     # md name (also the export's key)
    nqn: str
    level: str
    slots: list[int]
    transport: str
    backing: str                  # the block device nvmet serves
    connected: list[str] = Field(default_factory=list)
    array: str = "array"


class KernelState(Record):
    version: str
    package: str
    root: str

    def kernel(self) -> LabKernel:
        return LabKernel(self.version, self.package, Path(self.root))


class LabState(Record):
    spec: LabSpec
    created: str
    accel: str
    kernel: KernelState
    python: str                   # the interpreter guests run fxprobe modules with
    token: str = ""
    guests: dict[str, GuestState] = Field(default_factory=dict)
    drives: list[DriveState] = Field(default_factory=list)
    links: list[LinkState] = Field(default_factory=list)
    exports: list[ExportState] = Field(default_factory=list)
    timings: dict[str, float] = Field(default_factory=dict)
    ready: str | None = None

    @classmethod
    def read(cls, path: Path, name: str) -> "LabState":
        try:
            return cls.model_validate(json.loads(path.read_text()))
        except json.JSONDecodeError as exc:
            raise BadInput(f"{path}: not valid JSON ({exc.msg}); "
                           f"remove the lab with `fxprobe lab down --name {name}`") from None
        except ValidationError as exc:
            where = ".".join(str(part) for part in exc.errors()[0]["loc"])
            raise BadInput(f"{path}: field {where}: {exc.errors()[0]['msg']} (a state file of another fxprobe "
                           f"version?)", hint=f"restart the lab: fxprobe lab down --name {name}; fxprobe lab up") \
                from None

    def write(self, path: Path) -> None:
        write_json(path, self.to_dict())

    def to_dict(self) -> dict:
        return self.model_dump(mode="json")

    # -- views ------------------------------------------------------------------------
    @property
    def host_names(self) -> list[str]:
        return [name for name, guest in self.guests.items() if not guest.is_array]

    @property
    def array_names(self) -> list[str]:
        return [name for name, guest in self.guests.items() if guest.is_array]

    @property
    def main_export(self) -> ExportState:
        return self.exports[0]

    def export_named(self, name: str) -> ExportState | None:
        return next((e for e in self.exports if e.name == name), None)

    def free_slots(self, array: str = "array") -> list[int]:
        """Slots of present drives in no export."""
        return [d.slot for d in self.drives if d.array == array and d.export is None and d.present]
