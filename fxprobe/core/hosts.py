"""Where a command runs: this machine, or a remote node over OpenSSH.

The lab guests and real inference nodes are reached the same way, so the
multi-node code never knows which one it talks to.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class LocalHost:
    name: str = "local"

    def wrap(self, argv: list[str]) -> list[str]:
        return list(argv)

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": "local"}


@dataclass(frozen=True)
class SshHost:
    """A node reached with ``ssh``; argv is quoted with shlex for the remote shell."""

    name: str
    address: str
    port: int = 22
    user: str = "root"
    identity: Path | None = None
    known_hosts: Path | None = None
    options: tuple[str, ...] = field(default_factory=tuple)
    connect_timeout: int = 10

    def ssh_prefix(self) -> list[str]:
        argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={self.connect_timeout}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3",
                "-o", "LogLevel=ERROR", "-p", str(self.port)]
        if self.identity:
            argv += ["-i", str(self.identity), "-o", "IdentitiesOnly=yes"]
        if self.known_hosts:
            argv += ["-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "StrictHostKeyChecking=yes"]
        for option in self.options:
            argv += ["-o", option]
        return argv + [f"{self.user}@{self.address}"]

    def wrap(self, argv: list[str]) -> list[str]:
        return self.ssh_prefix() + ["--", shlex.join(argv)]

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": "ssh", "address": self.address, "port": self.port,
                "user": self.user}


# ssh's own messages when the connection never reached the remote command: safe to try again.
NOT_CONNECTED = ("banner exchange", "kex_exchange_identification", "Connection refused",
                 "Connection timed out", "Connection reset by peer", "Connection closed by remote host")


def never_connected(result) -> bool:
    """True when ssh exited 255 before the remote command ran (the guest was too busy to answer)."""
    return result.returncode == 255 and any(text in result.stderr for text in NOT_CONNECTED)


Host = LocalHost | SshHost
LOCAL = LocalHost()
