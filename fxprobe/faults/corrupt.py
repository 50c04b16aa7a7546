"""Planted data corruption (lab): zeros written over a range of one member drive, below md, while the
load runs. The twin that shows the data check is real: on a non-redundant (raid0) export md hands the
zeros back to the reader, and a verifying load must say "data mismatch at offset ..."; the same
overwrite outside the load's region must stay invisible.

The array offset is mapped to (member, offset) from md's own sysfs (chunk size, slot and data offset
of each member). There is no undo: the overwritten range stays overwritten until the next layout.
"""

from __future__ import annotations

from fxprobe.core.errors import BadInput, ToolError, UnsafeTarget
from fxprobe.core.kernel import BLOCK_CLASS
from fxprobe.core.schema import size_bytes
from fxprobe.faults.base import Method
from fxprobe.host.safety import device_name, unsafe_reasons
from fxprobe.tools.blockdev import SystemView
from fxprobe.tools.guestview import md_geometry_argv
from fxprobe.tools.mdadm import parse_md_geometry


def fault_offset(fault: dict) -> int:
    """fault.array_offset in bytes (BadInput when missing)."""
    if fault.get("array_offset") is None:
        raise BadInput("fault.array_offset is required for corrupt (where to overwrite)")
    return size_bytes(fault["array_offset"])


class CorruptRange:
    """The range a corrupt fault overwrites, read from the scenario's fault table: ``fault.array_offset`` (where
    in the export, or in ``fault.device`` on a host) and ``fault.length``, both in bytes."""
    fault: dict

    @property
    def array_offset(self) -> int:
        return fault_offset(self.fault)

    @property
    def length(self) -> int:
        return size_bytes(self.fault["length"])


class LabCorrupt(CorruptRange, Method):
    kind, via = "corrupt", "dd"
    record = "lab-corrupt"
    _where: tuple[str, int] | None = None

    @property
    def target(self) -> str:
        return f"{self.length} B at offset {self.array_offset} of the {self.env.export} export"

    def _backing(self) -> str:
        lab = self.env.lab
        export = lab.main_export if self.env.export == "main" else lab.state.export_named(self.env.export)
        if export is None:
            raise ToolError(f"lab {lab.name} has no {self.env.export} export")
        return export.backing

    def where(self) -> tuple[str, int]:
        """(member device, byte offset) of the array offset, from md's sysfs in the array guest."""
        if self._where is None:
            name = self._backing().rsplit("/", 1)[-1]
            result = self.env.lab.exec("array", md_geometry_argv(name), timeout=60, check=True, label="md-geometry")
            geometry = parse_md_geometry(result.stdout, f"{BLOCK_CLASS}/{name}/md")
            try:
                self._where = geometry.raid0_member_offset(self.array_offset)
            except ValueError as exc:
                raise BadInput(f"fault corrupt: {exc}") from None
            if self.array_offset % self.length or self.array_offset % 4096 or self.length % 4096:
                raise BadInput("fault corrupt: array_offset and length must be multiples of 4 KiB, "
                               "the offset a multiple of the length")
            if self.array_offset % geometry.chunk_bytes + self.length > geometry.chunk_bytes:
                raise BadInput(f"fault corrupt: the range crosses a chunk ({geometry.chunk_bytes} B): "
                               "it would touch two members")
        return self._where

    def before_load(self) -> None:
        """Map the offset to its member now (an ssh round trip into a busy guest took 6.5 s at injection)."""
        self.where()

    def plan(self) -> list[str]:
        return [f"dd zeros over {self.length} B at offset {self.array_offset} of the {self.env.export} export, "
                "written on the member drive that holds it (below md) in the array guest",
                "restore: none (the range stays overwritten until the next layout)"]

    @classmethod
    def undo(cls, record: dict, ctx) -> str:
        """Nothing to put back: the overwritten range stays as it is until the next layout rewrites it."""
        where = f"lab {record['lab']}: " if record.get("lab") else ""
        return (f"{where}{record['length']} B of {record['device']} at {record['offset']} stay "
                "overwritten (no undo: the next layout rewrites them)")

    def restore_record(self) -> dict:
        device, offset = self.where()
        return {"method": self.record, "lab": self.env.lab.name, "device": f"/dev/{device}", "offset": offset,
                "length": self.length, "array_offset": self.array_offset}

    def inject(self) -> None:
        device, offset = self.where()
        self.env.lab.exec("array", ["dd", "if=/dev/zero", f"of=/dev/{device}", "bs=4096", f"seek={offset // 4096}",
                                    f"count={self.length // 4096}", "oflag=direct", "conv=notrunc", "status=none"],
                          timeout=60, check=True, label="corrupt")
        self.env.note(f"overwrote {self.length} B of /dev/{device} at {offset} (export offset {self.array_offset})")


class HostCorrupt(CorruptRange, Method):
    """On a Linux host: zeros over ``length`` bytes at ``array_offset`` of ``fault.device`` (a by-id link is
    followed to the device it names). The device passes the target check every destructive step goes through
    (host.safety): never one that is mounted, holds /, is swap, has holders (md, dm: a member below md is
    refused - overwrite below md in the lab) or partitions in use, or that the kernel reports busy; and it is
    allowed by its identity (serial, WWID, ``loop:<file>``), never by the path the scenario wrote."""
    kind, via = "corrupt", "dd"
    record = "host-corrupt"
    undo = LabCorrupt.undo

    @property
    def device(self) -> str:
        if not self.fault.get("device"):
            raise BadInput("fault.device is required for corrupt on a Linux host (the block device to overwrite)")
        return str(self.fault["device"])

    @property
    def resolved(self) -> str | None:
        """/dev/<name> of the device fault.device leads to (this machine's own /dev: dd writes there), or None."""
        name = device_name(self.device, SystemView())
        return f"/dev/{name}" if name else None

    @property
    def offset(self) -> int:       # the device offset is the scenario's array_offset: no md layer in between here
        return self.array_offset

    @property
    def target(self) -> str:
        """The identity the allow-list must name: the device's serial / WWID / loop:<file>."""
        resolved = self.resolved
        return (SystemView().identity(resolved[5:]) or f"{resolved} (no serial)") if resolved else self.device

    def probe(self) -> str | None:
        return None if self.resolved else f"no block device {self.device} here"

    def refusals(self) -> list[str]:
        """Every rule of the target check the device breaks (the allow-list is judged on ``target``)."""
        resolved = self.resolved
        if resolved is None:
            return []
        out = [f"unsafe target {reason}" for reason in unsafe_reasons(resolved, SystemView())]
        if not SystemView().identity(resolved[5:]):
            out.append(f"{resolved} reports no serial, WWID or backing file: nothing to allow it by")
        return out

    def unsafe(self) -> list[str]:
        return self.refusals()

    def plan(self) -> list[str]:
        shown = self.device if self.resolved in (None, self.device) else f"{self.device} (-> {self.resolved})"
        return [f"dd zeros over {self.length} B at offset {self.offset} of {shown}, identity {self.target}",
                "restore: none (the range stays overwritten until the next layout)"]

    def restore_record(self) -> dict:
        return {"method": self.record, "device": self.resolved or self.device, "offset": self.offset,
                "length": self.length}

    def inject(self) -> None:
        if self.offset % 4096 or self.length % 4096:
            raise BadInput("fault corrupt: array_offset and length must be multiples of 4 KiB")
        refused = self.refusals()     # again at the moment of writing, whatever was allowed since the plan
        if refused or self.resolved is None:
            raise UnsafeTarget(f"refusing to overwrite {self.device}: {refused[0] if refused else 'no such device'}; "
                               "nothing written", hint="name a scratch device that nothing uses")
        self.env.runner.run(["dd", "if=/dev/zero", f"of={self.resolved}", "bs=4096", f"seek={self.offset // 4096}",
                             f"count={self.length // 4096}", "oflag=direct", "conv=notrunc", "status=none"],
                            timeout=60, check=True, label="corrupt")
        self.env.note(f"overwrote {self.length} B of {self.resolved} at {self.offset}")
