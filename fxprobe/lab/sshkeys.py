"""Per-lab SSH keys and the guests' sshd configuration (files only the user can read)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterable

from fxprobe.core.runner import Runner
from fxprobe.lab import guestpython

CLIENT_KEY = "id_ed25519"
HOST_KEY = "ssh_host_ed25519_key"
KNOWN_HOSTS = "known_hosts"

SSHD_CONFIG = """\
# fxprobe lab guest sshd (generated)
Port 22
ListenAddress 0.0.0.0
HostKey /etc/fxlab/{host_key}
AuthorizedKeysFile /etc/fxlab/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PidFile /run/sshd.pid
MaxStartups 64:30:128
MaxSessions 64
SetEnv PATH={path}
Subsystem sftp internal-sftp
"""


def make_keys(runner: Runner, folder: Path) -> tuple[str, str]:
    """Create the client key and the guests' host key in ``folder``; return both public keys."""
    for name, comment in ((CLIENT_KEY, "fxprobe-lab-client"), (HOST_KEY, "fxprobe-lab-guest")):
        key = folder / name
        for stale in (key, key.with_name(name + ".pub")):
            stale.unlink(missing_ok=True)
        runner.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)],
                   timeout=30, check=True, what="making a lab SSH key")
        os.chmod(key, 0o600)
    read = lambda name: (folder / f"{name}.pub").read_text().strip()
    return read(CLIENT_KEY), read(HOST_KEY)


def write_known_hosts(folder: Path, host_pub: str, ports: Iterable[int]) -> None:
    key_type, key_data = host_pub.split()[:2]
    lines = [f"[127.0.0.1]:{port} {key_type} {key_data}\n" for port in ports]
    path = folder / KNOWN_HOSTS
    path.write_text("".join(lines))
    os.chmod(path, 0o600)


def write_guest_files(folder: Path, share: Path, client_pub: str, python_bin: str) -> None:
    """sshd config, host key and authorized key in a guest's share (copied to /etc/fxlab at boot)."""
    guestpython.write_launcher(share)
    path = ":".join([guestpython.GUEST_BIN, python_bin, "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"])
    (share / "sshd_config").write_text(SSHD_CONFIG.format(host_key=HOST_KEY, path=path))
    (share / "authorized_keys").write_text(client_pub + "\n")
    shutil.copyfile(folder / HOST_KEY, share / HOST_KEY)
    for name in ("sshd_config", "authorized_keys", HOST_KEY):
        os.chmod(share / name, 0o600)
