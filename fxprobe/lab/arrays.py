"""More than one array guest: ``lab up --arrays N`` and ``Lab`` extras for a fleet of arrays (G1 over a fleet).

An extra array guest (``array2``, ``array3``...) holds its own hot-pluggable NVMe drives (serials distinct
from every other array's) and is reached over SSH like every guest; it has no data links and exports
nothing: it is there for the per-array commands (``selftest``, ``inventory``, ``preflight`` with
``--nodes``) and drive pulls. Its drive slots continue the lab's numbering (``lab fault drive-pull 24``
pulls the first drive of ``array2``); on its own PCI bus they start at the first drive slot again.
"""

from __future__ import annotations

import os
import re
import signal
import shutil
import socket
import sys
import time
from pathlib import Path

from fxprobe.core.errors import BadInput, FxprobeError, ToolError
from fxprobe.lab import sshkeys
from fxprobe.lab.initramfs import ensure_initramfs, guest_file
from fxprobe.lab.qemu import ARRAY_MEMORY_MB, BOOTED, MAX_DRIVES, GuestConfig, _alive, check_running, guest_argv
from fxprobe.lab.spec import host_identity
from fxprobe.lab.state import DriveState, GuestState
from fxprobe.tools.qmp import Qmp

NAME = re.compile(r"^array[2-9]$")
MAX_ARRAYS = 4


def array_serial(lab_token: str, array: str, position: int) -> str:
    """Distinct per array and slot: FXL<token>A2S03 (at most 20 characters)."""
    return f"FXL{lab_token[:6].upper()}A{array[5:]}S{position:02d}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def add_array(lab, name: str, drives: int, progress=lambda text: None) -> GuestState:
    """Boot array guest ``name`` with ``drives`` NVMe drives in a running lab; returns its state."""
    if not NAME.match(name):
        raise BadInput(f"array guest {name!r}: name extra arrays array2 ... array{MAX_ARRAYS}")
    if name in lab.state.guests:
        raise BadInput(f"lab {lab.name!r} has a guest {name!r} already")
    if not 1 <= drives <= MAX_DRIVES:
        raise BadInput(f"{name}: 1 to {MAX_DRIVES} drives")
    folder, state, spec = lab.folder, lab.state, lab.spec
    share = folder / name
    share.mkdir(mode=0o700, exist_ok=True)
    index = len(state.guests)
    first = max((d.slot for d in state.drives), default=-1) + 1
    for position in range(drives):
        image = folder / "drives" / f"{name}-slot{position:02d}.img"
        with open(image, "wb") as handle:
            handle.truncate(spec.drive_mb << 20)
        state.drives.append(DriveState(slot=first + position, serial=array_serial(state.token, name, position),
                                       image=str(image), array=name, position=position))
    port = _free_port()
    hostnqn, hostid = host_identity(state.token, name)
    env = {"FXLAB_NAME": name, "FXLAB_MTU": 1500, "FXLAB_RXE": "", "FXLAB_HOSTNQN": hostnqn,
           "FXLAB_HOSTID": hostid, "FXLAB_FORWARD": 0}
    (share / "guest.env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    for copied in ("modules", "modprobe.conf"):
        shutil.copyfile(folder / "array" / copied, share / copied)
    (share / "hosts").write_text(f"127.0.0.1\tlocalhost\n127.0.1.1\t{name}\n")
    mac = f"52:54:00:00:{index:02x}:00"
    (share / "nics").write_text(f"{mac} mgmt 10.0.2.15/24\n")
    (share / "routes").write_text("")
    client_pub = (folder / f"{sshkeys.CLIENT_KEY}.pub").read_text().strip()
    host_pub = (folder / f"{sshkeys.HOST_KEY}.pub").read_text().strip()
    sshkeys.write_guest_files(folder, share, client_pub, os.path.dirname(sys.executable))
    ports = [g.ssh_port for g in state.guests.values()] + [port]
    sshkeys.write_known_hosts(folder, host_pub, ports)
    guest = GuestState(ssh_port=port, qmp=str(share / "qmp.sock"), console=str(share / "console.log"),
                       hostnqn=hostnqn, role="array")
    state.guests[name] = guest
    lab.save()
    mine = tuple(d.device() for d in state.drives if d.array == name)
    config = GuestConfig(name, share, port, mac, ARRAY_MEMORY_MB + 16 * drives, 1, (), mine)
    kernel = state.kernel.kernel()
    argv = guest_argv(config, kernel, ensure_initramfs(lab.runner, kernel), guest_file("stage2.sh"), state.accel)
    progress(f"guests: starting {name} ({drives} drives, {state.accel})")
    started = time.monotonic()
    (share / BOOTED).unlink(missing_ok=True)
    child = lab.runner.start(argv, label=f"qemu-{name}", stdout_path=share / "qemu.out",
                             stderr_path=share / "qemu.err")
    guest.pid, guest.memory_mb, guest.argv = child.pid, config.memory_mb, argv
    lab.save()
    deadline = time.monotonic() + 300
    while True:
        check_running(name, child)
        if lab.booted(name) and lab.answers(name):
            break
        if time.monotonic() > deadline:
            raise ToolError(f"guest {name} not ready within 300 s", hint=f"see {share}/console.log")
        time.sleep(1)
    state.timings[f"{name}_ready_s"] = round(time.monotonic() - started, 1)
    lab.save()
    progress(f"guests: {name} is up in {state.timings[f'{name}_ready_s']} s")
    return guest


def remove_array(lab, name: str) -> list[str]:
    """Stop an extra array guest and forget it and its drives (the main ``array`` goes with ``lab down``)."""
    if not NAME.match(name) or name not in lab.state.guests:
        raise BadInput(f"no extra array guest {name!r} in lab {lab.name!r}")
    guest = lab.state.guests[name]
    done = []
    if _alive(guest.pid):
        try:
            with Qmp(Path(guest.qmp), timeout=5) as qmp:
                qmp.command("quit")
        except FxprobeError:
            os.kill(guest.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        while _alive(guest.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(guest.pid):
            os.kill(guest.pid, signal.SIGKILL)
        done.append(f"stopped {name} (pid {guest.pid})")
    for drive in [d for d in lab.state.drives if d.array == name]:
        Path(drive.image).unlink(missing_ok=True)
        lab.state.drives.remove(drive)
    del lab.state.guests[name]
    shutil.rmtree(lab.folder / name, ignore_errors=True)
    lab.save()
    return done
