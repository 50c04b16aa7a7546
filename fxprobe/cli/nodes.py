"""Turn a node name from the command line into a Host: local, a lab guest, or ``[user@]host[:port]`` over SSH."""

from __future__ import annotations

import re

from fxprobe.core.errors import BadInput
from fxprobe.core.hosts import LOCAL, Host, SshHost

_SSH = re.compile(r"^(?:(?P<user>[A-Za-z0-9._-]+)@)?(?P<host>[A-Za-z0-9._-]+|\[[0-9a-fA-F:]+\])(?::(?P<port>\d+))?$")


def resolve(spec: str | None, lab: str | None = None) -> Host:
    if spec in (None, "", "local", "localhost"):
        return LOCAL
    if lab is not None:
        from fxprobe.lab.vm import Lab
        return Lab.load(lab).guest(spec)
    match = _SSH.match(spec)
    if not match:
        raise BadInput(f"node {spec!r}: expected local, [user@]host[:port], or a lab guest with --lab")
    port = int(match.group("port") or 22)
    if not 1 <= port <= 65535:
        raise BadInput(f"node {spec!r}: port {port} out of range")
    return SshHost(spec, match.group("host").strip("[]"), port, match.group("user") or "root")
