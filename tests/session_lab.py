"""The suite's lab, as one spec: ``tests/conftest.py`` boots it for a pytest session, and ``scripts/test`` boots
two of them ahead (while the tests that need no lab run) with

    python3 tests/session_lab.py up NAME       (exit 0 when the lab is ready; its log on stdout/stderr)
    python3 tests/session_lab.py down NAME...

The lab: array guest with 24 drives (raid6 over the first 20, slots 20-23 free for ``lab.add_export``), 2 host
guests, 2 data links per host, NVMe/TCP connected on every link, an NVMe/RDMA port next to each TCP port
(soft-RoCE on every data NIC).
"""

from __future__ import annotations

import sys
from pathlib import Path

SESSION_DRIVES = 24
SESSION_RAID_DRIVES = 20
SESSION_DRIVE_MB = 128   # small drives: a re-added drive's md recovery takes ~1 min under TCG


def spec(name: str):
    from fxprobe.lab.spec import LabSpec
    return LabSpec(name=name, drives=SESSION_DRIVES, raid="raid6", raid_drives=SESSION_RAID_DRIVES,
                   hosts=2, links=2, transport="tcp", drive_mb=SESSION_DRIVE_MB)


def up(name: str, runner=None, progress=None):
    """Boot the session lab ``name``; ``progress`` gets each step (default: a line on stderr)."""
    from fxprobe.lab.vm import Lab
    if progress is None:
        progress = lambda text: print(f"[lab {name}] {text}", file=sys.stderr, flush=True)   # noqa: E731
    return Lab.up(spec(name), runner, progress=progress)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from fxprobe.core.errors import FxprobeError
    from fxprobe.lab.vm import down_by_name
    if len(argv) < 2 or argv[0] not in ("up", "down") or (argv[0] == "up" and len(argv) != 2):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        if argv[0] == "up":
            up(argv[1])
        else:
            for name in argv[1:]:
                down_by_name(name)
    except FxprobeError as exc:
        print(f"session lab {argv[0]}: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
