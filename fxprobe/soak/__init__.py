"""Soak runs (G4: continuous load without interruption) and their evidence.

A profile's fio job runs for the whole period with ``--status-interval=1
--output-format=json``: fio prints one JSON document per second (cumulative counters) on
a pipe that is read as it comes (:mod:`.stream`). Each document becomes a sample (interval
bandwidth, IOPS, error count); telemetry (psutil counters, NVMe temperatures, path states,
md state) is sampled every ``sample_s`` seconds, ``nvme smart-log`` every ``health_s``
seconds, both in worker threads so that a reconnecting controller never delays detection.

Interruptions (kind, start, end, detail), decided by :class:`.monitor.Monitor`:
  stall      no completed I/O for more than ``stall_s`` seconds: fio's reports show no
             progress past the limit, or an I/O took longer than the limit (fio cannot
             report while an I/O is stuck), or fio printed nothing for max(60 s, 10 x stall_s)
  io-error   fio counted new I/O errors (the job runs with continue_on_error=io)
  fio-exit   fio ended with its reports short of the planned time (from its last report; the
             load is restarted for the remaining time, leftover job processes are stopped)
  path-lost  an NVMe controller that was live is not (or vanished); ends when it is live again
  gap        fxprobe itself was not running (crash, kill -9) until ``--resume``
  clock      the wall clock moved more than CLOCK_STEP_S (2 s) away from the monotonic clock between two
             receipts (date -s, an NTP step); covered time is counted on the monotonic clock, never the wall's

Evidence: ``soak.jsonl`` in the run directory, append-only JSON lines, each flushed and
fsync'd, so a crash loses nothing already written (:mod:`.records`); ``soak-state.json``
holds what ``--resume`` needs (parameters, the fio pid and command line). The summary
is always recomputed from the records (:func:`.summary.summarize`).
"""

from fxprobe.soak.common import (DEFAULT_HEALTH_S, DEFAULT_SAMPLE_S, DEFAULT_STALL_S, END_TOLERANCE_S,
                                 MAX_RESTARTS, RECORDS, STARTUP_GRACE_S, STATE, end_tolerance_s, hms, parse_duration,
                                 stamp)
from fxprobe.soak.stream import StatusPoint, parse_status_doc
from fxprobe.tools.fio_status import JsonStream
from fxprobe.soak.records import RecordLog, read_records, repair_tail
from fxprobe.soak.monitor import Interruption, Monitor
from fxprobe.soak.summary import SoakSummary, summarize
from fxprobe.soak.run import Soak, SoakConfig, kill_orphan, load_state, plan_soak

__all__ = ["DEFAULT_HEALTH_S", "DEFAULT_SAMPLE_S", "DEFAULT_STALL_S", "END_TOLERANCE_S", "MAX_RESTARTS",
           "RECORDS", "STARTUP_GRACE_S", "STATE", "end_tolerance_s", "hms", "parse_duration", "stamp", "JsonStream",
           "StatusPoint", "parse_status_doc", "RecordLog", "read_records", "repair_tail", "Interruption", "Monitor",
           "SoakSummary", "summarize", "Soak", "SoakConfig", "kill_orphan", "load_state", "plan_soak"]
