"""RAID geometry: which combinations of missing members an md array survives (pure: no I/O).

raid0/linear survive none, raid4/raid5 one, raid6 two, raid1 all but one. raid10 keeps ``k`` copies
of each chunk (near-k: chunk c on roles c*k .. c*k+k-1, modulo the member count); it loses data
when all copies of one chunk are gone - with 4 members near-2, roles 0+1 or 2+3 (a mirror pair),
not 0+2. Far and offset layouts put the copies on neighbouring roles too; for them every run of
``k`` neighbouring roles counts as a copy set (a superset: safe). Roles are md's RaidDevice numbers
(``/sys/block/mdX/md/dev-*/slot``), not mdstat's [n] descriptor numbers.
"""

from __future__ import annotations

import math

PARITY = {"raid4": 1, "raid5": 1, "raid6": 2}


def raid10_layout(layout: int | None) -> tuple[int, int, bool]:
    """(near copies, far copies, offset) from md's raid10 layout number (default near-2)."""
    if layout is None:
        return 2, 1, False
    return layout & 0xFF, (layout >> 8) & 0xFF, bool(layout & 0x10000)


def copy_sets(raid_disks: int, layout: int | None = None) -> list[frozenset[int]]:
    """The sets of roles that hold all copies of some chunk (raid10)."""
    near, far, offset = raid10_layout(layout)
    copies = max(1, near) * max(1, far)
    if copies >= raid_disks:
        return [frozenset(range(raid_disks))]
    if far > 1 or offset:
        starts = range(raid_disks)
    else:
        starts = range(0, raid_disks, math.gcd(near, raid_disks))
    return sorted({frozenset((s + j) % raid_disks for j in range(copies)) for s in starts}, key=sorted)


def redundancy_text(level: str, raid_disks: int, layout: int | None = None) -> str:
    if level in ("raid0", "linear"):
        return f"{level} survives no missing member"
    if level == "raid1":
        return f"raid1 of {raid_disks} survives {raid_disks - 1} missing"
    if level in PARITY:
        return f"{level} survives {PARITY[level]} missing"
    if level == "raid10":
        near, far, offset = raid10_layout(layout)
        kind = f"near-{near}" if far <= 1 and not offset else f"{'offset' if offset else 'far'}-{far}"
        return f"raid10 {kind} of {raid_disks} survives one missing per copy set"
    return f"{level}: redundancy unknown"


def data_lost(level: str, raid_disks: int, missing: set[int], layout: int | None = None) -> str | None:
    """Why the array loses data with roles ``missing`` gone (None: it survives)."""
    missing = {m for m in missing if 0 <= m < raid_disks}
    if not missing:
        return None
    n = len(missing)
    roles = ", ".join(map(str, sorted(missing)))
    why = redundancy_text(level, raid_disks, layout)
    if level in ("raid0", "linear"):
        return f"role(s) {roles} missing: {why}"
    if level == "raid1":
        return f"all {raid_disks} mirrors missing: {why}" if n >= raid_disks else None
    if level in PARITY:
        return f"{n} of {raid_disks} members missing (roles {roles}): {why}" if n > PARITY[level] else None
    if level == "raid10":
        lost = [s for s in copy_sets(raid_disks, layout) if s <= missing]
        if lost:
            return (f"roles {'+'.join(map(str, sorted(lost[0])))} hold every copy of the same data and are all "
                    f"missing: {why}")
        return None
    return f"{level}: redundancy unknown, {n} member(s) missing"
