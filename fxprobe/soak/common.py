"""Names, defaults, durations and time stamps shared by the soak modules."""

from __future__ import annotations

import datetime as dt
import math
import re

from fxprobe.core.errors import BadInput
from fxprobe.core.rundir import utc_stamp

RECORDS = "soak.jsonl"
STATE = "soak-state.json"
DEFAULT_STALL_S = 5.0
DEFAULT_SAMPLE_S = 10.0
DEFAULT_HEALTH_S = 300.0
STARTUP_GRACE_S = 60.0       # fio may take this long to open its files before the first I/O
MAX_RESTARTS = 5             # fio deaths tolerated before the soak gives up
END_TOLERANCE_S = 3.0        # fio ending this close to the planned end is a normal end
STATUS_INTERVAL_S = 1.0      # fio --status-interval of the soak's load
CLOCK_STEP_S = 2.0           # the wall clock moving this much more or less than the monotonic clock between two
                             # receipts is a step (date -s, an NTP step): a "clock" interruption; NTP's slew
                             # (at most 0.5 ms/s) never comes near it


def end_tolerance_s(planned_s: float) -> float:
    """How far short of the planned time the load may end and still count as covering it: 3 s or 0.1 % of the
    planned time, whichever is more, but never more than half of it (a soak of 3 s or less would otherwise run
    no load at all and still have covered its time)."""
    return min(max(END_TOLERANCE_S, planned_s * 0.001), planned_s / 2)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, option: str = "--duration") -> float:
    """``90``, ``90s``, ``10m``, ``72h``, ``1h30m``, ``2d`` -> seconds (> 0)."""
    raw = str(text).strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        seconds = float(raw)
    elif raw and _DURATION.sub("", raw) == "" and re.fullmatch(r"(\d+(\.\d+)?[smhd])+", raw):
        seconds = sum(float(n) * _UNIT[u] for n, u in _DURATION.findall(raw))
    else:
        raise BadInput(f"{option} {text!r}: expected a duration such as 90s, 10m, 72h or 1h30m")
    if not math.isfinite(seconds) or seconds <= 0:
        raise BadInput(f"{option} {text!r}: must be more than 0 seconds")
    return seconds


def stamp(ts: float) -> str:
    return utc_stamp(dt.datetime.fromtimestamp(ts, dt.timezone.utc))


def hms(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
