"""The live status of a fault run: fio's status documents followed as the load writes them, the
phases (steady, fault, recovery, analysis) and the fault itself as it is injected and restored."""

from __future__ import annotations

import threading
import time

from fxprobe.core.status import Status
from fxprobe.tools.fio_status import JsonStream, LiveFio


class LoadWatch:
    """Follows a background fio's stdout file (``--status-interval`` documents) into a Status."""

    def __init__(self, status: Status | None, background=None, planned_s: float = 0.0, node: str = "local",
                 poll_s: float = 0.5):
        self.status = status or Status("fault run")
        self.background, self.planned_s, self.node, self.poll_s = background, planned_s, node, poll_s
        self.kind = ""
        self.first_ts: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "LoadWatch":
        if self.status.active and self.background is not None and self.background.stdout_path is not None:
            self.status.phase("load starting", planned_s=self.planned_s, done_s=0.0)
            self._thread = threading.Thread(target=self._follow, name="fault-live", daemon=True)
            self._thread.start()
        return self

    def _follow(self) -> None:
        live, stream, offset = LiveFio(self.status, self.node), JsonStream(), 0
        path = self.background.stdout_path
        while not self._stop.is_set():
            try:
                with open(path, "rb") as handle:
                    handle.seek(offset)
                    data = handle.read()
            except OSError:
                data = b""
            offset += len(data)
            for doc in stream.feed(data):
                live.doc(doc)
                if self.first_ts is None and isinstance(doc, dict) and doc.get("jobs"):
                    self.first_ts = time.time()
                    self.status.phase("steady (before the fault)")
            if self.first_ts is not None:
                self.status.progress(min(self.planned_s, time.time() - self.first_ts))
            self._stop.wait(self.poll_s)

    def fault(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.status.phase(f"fault: {kind}")
        self.status.event("fault", kind, detail, node=self.node, open_=True)

    def restored(self, detail: str = "restored") -> None:
        if self.kind:
            self.status.ended(self.kind, detail)
        self.status.phase("recovery (after the restore)")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
            self.status.phase("analysis")
