"""Find what a lab test left broken in the session lab, and mend it, so that one test's breakage (or a drive the
TCG guest lost on its own) fails that test alone instead of every test after it on the same lab.

Seen in a CI-like run: a drive hot-added back by an earlier test stopped completing I/O minutes later (the array
guest's nvme driver timed out, reset and disabled it); the test running then failed, and seven later tests on the
same lab found 23 drives, a degraded md or a path missing. tests/conftest.py calls ``mend`` after a lab test
fails and at the end of every file of lab tests; what it found and did is listed at the end of the run.

What "whole" means is the session lab as tests/session_lab.py builds it: every drive the state file holds present
is seen by its array guest and is an active member of its export's md (a rebuild under way is not broken), every
link is up and unthrottled, each host has as many live paths to the main export as it has links, no fio,
ib_read_bw or iperf3 runs in a guest, and no export beyond the main one is left.
"""

from __future__ import annotations

from dataclasses import dataclass

from fxprobe.core.errors import ToolError
from fxprobe.faults import labprep
from fxprobe.tools import dmesg, mdadm

LOAD_TOOLS = ("fio", "ib_read_bw", "iperf3")     # a load or a measurement left running skews the next test


def problems(lab) -> list[str]:
    """What is not whole, one line each (empty: the lab is whole). Reads the guests once (~1 s)."""
    lab.reload()
    found = []
    for drive, device, active in _array_drives(lab):
        if not drive.present:
            found.append(f"drive slot {drive.slot} pulled")
        elif device is None:
            found.append(f"drive slot {drive.slot} missing in the array guest (the state holds it present)")
        elif not active:
            found.append(f"drive slot {drive.slot} ({device}) not an active member of md {drive.export}")
    for link in lab.state.links:
        if not link.up:
            found.append(f"link {link.n} of {link.host} down")
        if link.rate:
            found.append(f"link {link.n} of {link.host} throttled to {link.rate}")
    main = lab.main_export
    found += [f"export {e.name} left" for e in lab.state.exports if e.name != main.name]
    for host in lab.hosts:
        paths = [p for p in labprep.controllers_of(lab, host, main.nqn) if p["state"] == "live"]
        if len(paths) != len(lab.links(host)):
            found.append(f"{host}: {len(paths)} live paths to {main.name}, {len(lab.links(host))} links")
    for guest in ["array", *lab.hosts]:
        found += [f"{guest}: {name} still running ({line[:80]})" for name, line in _left_running(lab, guest)]
    return found


def _array_drives(lab):
    """(drive, its device in the array guest or None, whether it is an active member of its export's md (True
    when it has no export)) for each drive of the first array (a second one is a module fixture's: test_lab_fleet
    removes it), from one read of the guest."""
    view = labprep.array_view(lab)
    seen = {c["serial"]: (c["namespaces"] or [None])[0] for c in view["nvme_controllers"]}
    members = {m["device"]: m for md in view["md"] for m in md["members"]}
    for drive in [d for d in lab.state.drives if d.array == "array"]:
        device = seen.get(drive.serial)
        active = not drive.export or (device in members and not members[device]["faulty"])
        yield drive, device, active


def _left_running(lab, guest: str) -> list[tuple[str, str]]:
    """(program, its pgrep line) of each of LOAD_TOOLS running in ``guest``."""
    lines = lab.exec(guest, ["pgrep", "-a", "-x", "|".join(LOAD_TOOLS)], timeout=30).stdout.splitlines()
    return [(line.split()[1] if len(line.split()) > 1 else "?", line) for line in lines]


def mend(lab, rounds: int = 3) -> list[str]:
    """Mend what ``problems`` finds, again while something is found (a stalling drive is lost a minute after its
    first timeout: after the first round); returns what was done (empty: nothing was broken). Raises if still
    broken after ``rounds``."""
    done = []
    for _ in range(rounds):
        broken = problems(lab)
        if not broken:
            return done
        done += [f"found: {line}" for line in broken] + _mend_once(lab)
    still = problems(lab)
    if still:
        raise AssertionError(f"lab {lab.name} still broken after mending: {'; '.join(still)} (did: {done})")
    return done


def _mend_once(lab) -> list[str]:
    done = []
    for guest in ["array", *lab.hosts]:
        names = sorted({name for name, _ in _left_running(lab, guest)})
        if names and lab.exec(guest, ["pkill", "-KILL", "-x", "|".join(LOAD_TOOLS)], timeout=30).returncode == 0:
            done.append(f"{guest}: {', '.join(names)} killed")
    for link in list(lab.state.links):
        if link.rate:
            lab.throttle(link.n, "off", host=link.host)
        if not link.up:
            lab.link_up(link.n, host=link.host)
    main = lab.main_export
    for export in [e for e in lab.state.exports if e.name != main.name]:
        lab.remove_export(export.name)
        done.append(f"export {export.name} removed")
    drives = _mend_drives(lab)
    for host in lab.hosts:
        lab.wait_paths(host, main.nqn, len(lab.links(host)), timeout=120)
    if drives:            # the next test may need the md's full redundancy: wait for its rebuild
        waited = labprep.wait_md_idle(lab, 900)
        drives.append(f"md idle after {waited:.0f} s" if waited is not None else "md still rebuilding after 900 s")
    return done + drives


def _mend_drives(lab) -> list[str]:
    """Plug back pulled drives; unplug and plug back a drive its guest lost (QEMU still holds it); add a drive
    that is present but not an active member back to its md."""
    done = []
    for drive, device, active in list(_array_drives(lab)):
        if drive.present and device is None:
            try:
                lab.drive_pull(drive.slot)      # QEMU still holds it: device_del, md fails the detached member
            except ToolError as exc:            # QEMU let it go already: only plug it back
                if "DeviceNotFound" not in str(exc):
                    raise
                drive.present = False
                lab.save()
                if drive.export:
                    lab.exec(drive.array, ["mdadm", f"/dev/md/{drive.export}", "--fail", "detached", "--remove",
                                           "detached"], timeout=60)
            done.append(f"drive slot {drive.slot} unplugged (its guest had lost it)")
        if not drive.present:
            restored = lab.drive_restore(drive.slot)
            done.append(f"drive slot {drive.slot} plugged back as {restored['device']} "
                        f"({restored.get('md_action', 'no md')})")
        elif not active:
            md = f"/dev/md/{drive.export}"
            lab.exec(drive.array, ["mdadm", md, "--remove", "failed"], timeout=60)
            mdadm.add_back(lab.runner, md, f"/dev/{device}", host=lab.guest(drive.array))
            done.append(f"drive slot {drive.slot} ({device}) added back to {md}")
    return done


@dataclass(frozen=True)
class Stalls:
    """The array guest's messages of an emulated drive timing out (a QEMU NVMe drive that stopped completing I/O
    under load: the cause of the hung loads seen in CI-like runs), and the guest's clock when they were read."""
    lines: tuple[dmesg.DriveTimeout, ...]
    uptime: float

    def since(self, seconds: float) -> Stalls:
        """The messages of the last ``seconds`` (2 s of slack for the two clocks)."""
        return Stalls(tuple(t for t in self.lines if t.uptime_s >= self.uptime - seconds - 2), self.uptime)

    @property
    def controllers(self) -> list[str]:
        return sorted({t.controller for t in self.lines}, key=lambda name: (len(name), name))

    def summary(self, count: int = 3) -> list[str]:
        return [t.line for t in self.lines[-count:]] + [f"array guest uptime now {self.uptime:.2f} s"]


def read_stalls(lab) -> Stalls:
    """Every emulated drive timeout in the array guest's kernel log, and its clock after reading it."""
    log = lab.exec("array", ["dmesg"], timeout=60).stdout
    uptime = dmesg.parse_uptime(lab.exec("array", ["cat", "/proc/uptime"], timeout=60).stdout)
    return Stalls(dmesg.parse_nvme_timeouts(log), uptime)


def drive_stalls(lab, count: int = 3) -> list[str]:
    """The array guest's last ``count`` messages of an emulated drive timing out, and its clock now (empty: none)."""
    stalls = read_stalls(lab)
    return stalls.summary(count) if stalls.lines else []


def replace_stalled(lab, controllers: list[str]) -> list[str]:
    """Unplug and plug back (a fresh QEMU device, re-added to its md) each drive whose controller timed out and is
    still in the array guest; a drive its guest does not let go of is left to ``mend`` (it finds it lost later)."""
    serials = {c["name"]: c["serial"] for c in labprep.array_view(lab)["nvme_controllers"]}
    done = []
    for controller in controllers:
        drive = next((d for d in lab.state.drives if d.array == "array" and d.present
                      and d.serial == serials.get(controller)), None)
        if drive is None:
            continue
        try:
            lab.drive_pull(drive.slot)
        except ToolError as exc:
            done.append(f"drive slot {drive.slot} ({controller}) not released: {exc}")
            continue
        restored = lab.drive_restore(drive.slot)
        done.append(f"drive slot {drive.slot} ({controller}, stalled) replaced by a fresh device "
                    f"{restored['device']} ({restored.get('md_action', 'no md')})")
    return done
