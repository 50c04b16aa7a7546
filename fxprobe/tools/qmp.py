"""QMP (the QEMU Machine Protocol) over a unix socket, through the ``qemu.qmp`` library.

One short-lived connection per operation: lab commands run from new processes, so nothing is
kept open between them. Errors name the socket and the command.
"""

from __future__ import annotations

import time
from pathlib import Path

from qemu.qmp import QMPError
from qemu.qmp.legacy import QEMUMonitorProtocol

from fxprobe.core.errors import ToolError


def event_epoch(event: dict) -> float | None:
    """When QEMU sent ``event``: its ``timestamp`` (seconds and microseconds of this machine's clock), or None."""
    stamp = event.get("timestamp") or {}
    try:
        return int(stamp["seconds"]) + int(stamp["microseconds"]) / 1e6
    except (KeyError, TypeError, ValueError):
        return None


class Qmp:
    """``with Qmp(path) as qmp: qmp.command("set_link", name="nic-l1", up=False)``

    The command name is positional-only, so QMP arguments called ``name`` pass through.
    """

    def __init__(self, socket_path: Path, timeout: float = 15.0):
        self.socket_path = Path(socket_path)
        self.timeout = timeout
        self._monitor: QEMUMonitorProtocol | None = None

    def __enter__(self) -> "Qmp":
        monitor = QEMUMonitorProtocol(str(self.socket_path))
        try:
            monitor.connect(negotiate=True)
        except (OSError, QMPError) as exc:
            raise ToolError(f"QMP {self.socket_path}: cannot connect: {exc}",
                            hint="is the lab guest running? see `fxprobe lab status`") from None
        monitor.settimeout(self.timeout)
        self._monitor = monitor
        return self

    def __exit__(self, *exc) -> None:
        if self._monitor is not None:
            try:
                self._monitor.close()
            except (OSError, QMPError, EOFError):
                pass  # the peer is already gone (after quit): nothing left to close
            self._monitor = None

    def command(self, name: str, /, **arguments):
        assert self._monitor is not None, "use Qmp as a context manager"
        try:
            reply = self._monitor.cmd_obj({"execute": name, "arguments": arguments} if arguments
                                          else {"execute": name})
        except EOFError:
            if name == "quit":  # QEMU closes the socket as it exits: that is the answer
                return {}
            raise ToolError(f"QMP {self.socket_path}: {name}: QEMU closed the connection") from None
        except (OSError, QMPError) as exc:
            raise ToolError(f"QMP {self.socket_path}: {name}: {exc}") from None
        if "error" in reply:
            error = reply["error"]
            raise ToolError(f"QMP {self.socket_path}: {name}: {error.get('class')}: {error.get('desc')}")
        return reply.get("return")

    def _events(self, name: str, timeout: float):
        """Events ``name`` as they come, until ``timeout`` s have passed or the connection ends."""
        assert self._monitor is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                event = self._monitor.pull_event(wait=max(0.1, deadline - time.monotonic()))
            except (OSError, QMPError, TimeoutError, EOFError):
                return
            if event and event.get("event") == name:
                yield event

    def wait_events(self, name: str, timeout: float, key: str, values: list) -> dict:
        """Events ``name`` whose data[``key``] is each of ``values`` (in any order), within ``timeout`` s:
        {value: event} of those that came."""
        seen: dict = {}
        if values:
            for event in self._events(name, timeout):
                value = event.get("data", {}).get(key)
                if value in values:
                    seen[value] = event
                if len(seen) == len(values):
                    break
        return seen

    def wait_event(self, name: str, timeout: float, match: dict | None = None) -> dict | None:
        """The first event ``name`` (whose data contains ``match``) within ``timeout`` s, or None."""
        return next((event for event in self._events(name, timeout) if all(
            event.get("data", {}).get(k) == v for k, v in (match or {}).items())), None)
