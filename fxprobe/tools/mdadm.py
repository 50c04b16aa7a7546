"""Linux md RAID through mdadm: pure ``parse_*`` functions and thin ``run`` wrappers."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from fxprobe.core.errors import BadInput, ParseError
from fxprobe.core.hosts import LOCAL, Host

if TYPE_CHECKING:  # the runner (tenacity...) is slow to import in a TCG guest; parse_mdstat needs none of it
    from fxprobe.core.runner import CommandResult, Runner

LEVELS = ("raid0", "raid1", "raid5", "raid6", "raid10")


@dataclass(frozen=True)
class MdMember:
    device: str          # e.g. nvme3n1
    index: int
    faulty: bool = False
    spare: bool = False


@dataclass(frozen=True)
class MdArray:
    name: str            # md127
    state: str           # active / inactive
    level: str           # raid6
    members: tuple[MdMember, ...]
    raid_disks: int | None = None
    working_disks: int | None = None
    health: str = ""     # "UUUU_U" for redundant levels
    action: str | None = None      # recovery / resync / check / reshape
    progress: float | None = None  # percent of the running action
    sync_done_kib: int | None = None    # of the running action: KiB done of sync_total_kib (per member)
    sync_total_kib: int | None = None
    speed_kib_s: int | None = None      # md's own rate of the running action (speed=...K/sec)

    @property
    def degraded(self) -> bool:
        return "_" in self.health

    def to_dict(self) -> dict:
        data = asdict(self)
        data["degraded"] = self.degraded
        data["members"] = [asdict(m) for m in self.members]
        return data


_HEAD = re.compile(r"^(md\w+)\s*:\s*(\S+)\s+(?:\((?:auto-)?read-only\)\s+)?(raid\d+|linear)?\s*(.*)$")
_MEMBER = re.compile(r"^([\w.-]+)\[(\d+)\](\((?:F|S|W|R)\))*")
_COUNTS = re.compile(r"\[(\d+)/(\d+)\]\s+\[([U_]+)\]")
_ACTION = re.compile(r"\b(recovery|resync|check|reshape|repair)\s*=\s*([\d.]+)%")
_SYNC_DONE = re.compile(r"%\s*\((\d+)/(\d+)\)")
_SPEED = re.compile(r"\bspeed=(\d+)K/sec")


def parse_mdstat(text: str, source: str = "/proc/mdstat") -> list[MdArray]:
    """Arrays in /proc/mdstat text."""
    arrays: list[MdArray] = []
    current: dict | None = None

    def close():
        if current:
            arrays.append(MdArray(**current))

    for line in text.splitlines():
        head = _HEAD.match(line)
        if head and not line.startswith(" "):
            close()
            name, state, level, rest = head.groups()
            members = []
            for word in rest.split():
                member = _MEMBER.match(word)
                if member is None:
                    raise ParseError(source, name, f"cannot read member {word!r}")
                flags = word[member.end(2) + 1:]
                members.append(MdMember(member.group(1), int(member.group(2)), "(F)" in flags, "(S)" in flags))
            current = {"name": name, "state": state, "level": level or "", "members": tuple(members)}
            continue
        if current is None:
            continue
        counts = _COUNTS.search(line)
        if counts:
            current.update(raid_disks=int(counts.group(1)), working_disks=int(counts.group(2)),
                           health=counts.group(3))
        action = _ACTION.search(line)
        if action:
            current.update(action=action.group(1), progress=float(action.group(2)))
            done, speed = _SYNC_DONE.search(line), _SPEED.search(line)
            if done:
                current.update(sync_done_kib=int(done.group(1)), sync_total_kib=int(done.group(2)))
            if speed:
                current.update(speed_kib_s=int(speed.group(1)))
        elif re.search(r"\b(resync|recovery)\s*=\s*(DELAYED|PENDING)", line):
            current.update(action=re.search(r"(resync|recovery)", line).group(1), progress=0.0)
    close()
    return arrays


def read_mdstat() -> list[MdArray]:
    """This host's md arrays (``/proc/mdstat`` under the redirectable root of core.sysfs; none without md)."""
    from fxprobe.core import sysfs
    from fxprobe.core.kernel import MDSTAT
    return parse_mdstat(sysfs.read(MDSTAT, "") or "")


BITMAP_CHUNK = "1M"     # write-intent bitmap: one bit per this much of each member


def create(runner: Runner, device: str, level: str, members: list[str], host: Host = LOCAL,
           assume_clean: bool = True, bitmap_chunk: str = BITMAP_CHUNK) -> CommandResult:
    """``mdadm --create``; no initial resync by default (the lab's drives start zeroed). A redundant level gets an
    internal write-intent bitmap, as real arrays have: a member pulled and ``--re-add``-ed resyncs only the
    regions written while it was away (without one, the whole member is rebuilt)."""
    if level not in LEVELS:
        raise BadInput(f"RAID level {level!r}: use one of {', '.join(LEVELS)}")
    argv = ["mdadm", "--create", device, "--run", "--quiet", f"--level={level}",
            f"--raid-devices={len(members)}", "--metadata=1.2", "--homehost=any"]
    if level != "raid0":
        argv += ["--bitmap=internal", f"--bitmap-chunk={bitmap_chunk}"]
    if assume_clean and level != "raid0":
        argv += ["--assume-clean"]
    return runner.run(argv + members, timeout=120, host=host, check=True, what=f"creating {device}")


def stop(runner: Runner, device: str, host: Host = LOCAL) -> CommandResult:
    return runner.run(["mdadm", "--stop", device], timeout=60, host=host)


def add_back(runner: Runner, device: str, member: str, host: Host = LOCAL) -> CommandResult:
    """``--re-add`` a returning member, else ``--add`` it (a full recovery)."""
    result = runner.run(["mdadm", device, "--re-add", member], timeout=60, host=host)
    if not result.ok:
        result = runner.run(["mdadm", device, "--add", member], timeout=60, host=host,
                            check=True, what=f"adding {member} back to {device}")
    return result


# -- md geometry from sysfs (/sys/block/mdX/md: level, chunk_size, dev-*/slot, dev-*/offset), as
# tools/guestview.sh md-geometry prints it


@dataclass(frozen=True)
class MdGeometry:
    level: str
    chunk_bytes: int
    members: tuple[tuple[int, str, int], ...]     # (slot in the array, device, data offset in bytes), by slot

    def raid0_member_offset(self, array_offset: int) -> tuple[str, int]:
        """(member device, byte offset in it) holding ``array_offset`` of a raid0 of equal members."""
        if self.level != "raid0":
            raise ValueError(f"the member of an array offset is computed for raid0 only (this is {self.level})")
        if not self.members or self.chunk_bytes <= 0:
            raise ValueError("no members or no chunk size")
        chunk, within = divmod(array_offset, self.chunk_bytes)
        stripe, index = divmod(chunk, len(self.members))
        _, device, data_offset = self.members[index]
        return device, data_offset + stripe * self.chunk_bytes + within


def parse_md_geometry(text: str, source: str = "md sysfs") -> MdGeometry:
    """From ``guestview.sh md-geometry``'s output; members without a slot number (spares, 'none') are left out."""
    level, chunk, members = "", 0, []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0] == "level":
            level = fields[1]
        elif len(fields) == 2 and fields[0] == "chunk" and fields[1].isdigit():
            chunk = int(fields[1])
        elif len(fields) == 4 and fields[0] == "member" and fields[2].isdigit() and fields[3].isdigit():
            members.append((int(fields[2]), fields[1], int(fields[3]) * 512))
    if not level:
        raise ParseError(source, "level", "no md level")
    return MdGeometry(level, chunk, tuple(sorted(members)))
