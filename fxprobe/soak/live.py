"""The soak's records as live status events (fxprobe.core.status): every record the soak appends to
its log also reaches the status line and the metrics (interruptions by kind as they open, path and
md states and drive temperatures from telemetry)."""

from __future__ import annotations

from fxprobe.core.status import Status


class ObservedLog:
    """A RecordLog whose appended records are also handed to a Status."""

    def __init__(self, log, status: Status):
        self.log, self.status = log, status
        self.kinds: dict[int, str] = {}      # interruption id -> kind, while it is open

    def append(self, record: dict) -> dict:
        written = self.log.append(record)
        if self.status.active:
            observe(self.status, record, self.kinds)
        return written

    def close(self) -> None:
        self.log.close()

    def __getattr__(self, name):
        return getattr(self.log, name)


def observe(status: Status, record: dict, kinds: dict[int, str]) -> None:
    kind = record.get("type")
    if kind == "interruption":
        still_open = record.get("end") is None
        if still_open:
            kinds[record.get("id", 0)] = record["kind"]
        status.event("interruption", record["kind"], record.get("detail", ""), open_=still_open)
    elif kind == "interruption-end" and record.get("id") in kinds:
        status.ended(kinds.pop(record["id"]), record.get("detail", ""))
    elif kind == "telemetry":
        md = {name: {**info, "state": info.get("health") or info.get("level", "?")}
              for name, info in (record.get("md") or {}).items() if not name.startswith("_")}
        status.health(paths={name: p.get("state") for name, p in (record.get("paths") or {}).items()},
                      md=md, temps_c=record.get("nvme_temp_c") or {})
