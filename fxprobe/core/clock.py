"""Clock synchronisation state straight from the kernel (adjtimex), no daemon tool needed."""

from __future__ import annotations

import ctypes
import ctypes.util

STA_UNSYNC = 0x0040
TIME_ERROR = 5


class _Timex(ctypes.Structure):
    _fields_ = [("modes", ctypes.c_uint), ("offset", ctypes.c_long), ("freq", ctypes.c_long),
                ("maxerror", ctypes.c_long), ("esterror", ctypes.c_long), ("status", ctypes.c_int),
                ("constant", ctypes.c_long), ("precision", ctypes.c_long), ("tolerance", ctypes.c_long),
                ("time_sec", ctypes.c_long), ("time_usec", ctypes.c_long), ("tick", ctypes.c_long),
                ("ppsfreq", ctypes.c_long), ("jitter", ctypes.c_long), ("shift", ctypes.c_int),
                ("stabil", ctypes.c_long), ("jitcnt", ctypes.c_long), ("calcnt", ctypes.c_long),
                ("errcnt", ctypes.c_long), ("stbcnt", ctypes.c_long), ("tai", ctypes.c_int),
                ("padding", ctypes.c_int * 11)]


def clock_state() -> dict | None:
    """{'synchronized': bool, 'maxerror_us': int, 'esterror_us': int} or None where adjtimex is unavailable."""
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return None
    libc = ctypes.CDLL(libc_name, use_errno=True)
    timex = _Timex()
    state = libc.adjtimex(ctypes.byref(timex))
    if state < 0:
        return None
    synchronized = state != TIME_ERROR and not (timex.status & STA_UNSYNC)
    return {"synchronized": synchronized, "kernel_state": state,
            "maxerror_us": timex.maxerror, "esterror_us": timex.esterror}
