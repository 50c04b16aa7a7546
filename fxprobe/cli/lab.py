"""``fxprobe lab``: bring the QEMU (or native) NVMe-oF lab up, look at it, run commands in it, break it."""

from __future__ import annotations

import sys

import click

from fxprobe.cli.app import App, finish, pass_app
from fxprobe.cli.options import TC_RATE, duration, rate
from fxprobe.core.errors import BadInput
from fxprobe.core.verdict import Outcome

name_option = click.option("--lab", "name", default="default", metavar="NAME", envvar="FXPROBE_LAB", show_default=True,
                           help="Lab name (several labs can run side by side).")


@click.group()
def lab():
    """A miniature NVMe-oF deployment: an array guest and host guests under QEMU (or --native)."""


@lab.command()
@name_option
@click.option("--drives", default=24, show_default=True, help="Emulated NVMe drives in the array guest.")
@click.option("--raid", default="raid6", show_default=True,
              help="md level of the main array: raid6, raid10, raid5, raid1, raid0 or none.")
@click.option("--raid-drives", type=int, default=None,
              help="Only the first K drives form the main array (the rest stay free for add-export).")
@click.option("--hosts", default=1, show_default=True, help="Host guests (host1..hostN).")
@click.option("--arrays", default=1, show_default=True,
              help="Array guests: array, then array2..arrayN, each with --drives drives of its own (the extra "
                   "ones without data links or exports: for selftest/inventory --nodes over a fleet).")
@click.option("--links", default=1, show_default=True, help="Data links per host (1 or 2).")
@click.option("--transport", default="tcp", show_default=True, help="tcp or rdma (soft-RoCE on the data links).")
@click.option("--link-speed", type=rate(to="Mb/s", kind=int, ge=10, le=800_000), default="100G", show_default=True,
              help="Advertised data link speed (10M to 800G).")
@click.option("--drive-mb", default=256, show_default=True, help="Size of each emulated drive, MiB.")
@click.option("--port-base", type=int, default=None, help="Use loopback ports from here (default: free ports).")
@click.option("--accel", default="auto", show_default=True, help="auto (KVM if it boots here, else TCG), kvm or tcg.")
@click.option("--no-connect", is_flag=True, help="Do not connect the hosts to the array.")
@click.option("--native", is_flag=True, help="Build the array on this machine (null_blk or files, md, nvmet on loopback).")
@pass_app
def up(app: App, name, drives, raid, raid_drives, hosts, arrays, links, transport, link_speed, drive_mb, port_base,
       accel, no_connect, native):
    """Start the lab and wait until every host is connected to the array."""
    if native:
        from fxprobe.lab.native import NativeSpec, native_up
        spec = NativeSpec(name=name, drives=drives, raid=raid, port=port_base or 4420).validate()
        run = app.new_run("lab up", folder="lab-up")
        state = native_up(spec, app.runner(run), app.progress)
        human = [f"native lab {name}: {state.level} over {len(state.devices)} {state.source} devices, "
                 f"{state.nqn} on 127.0.0.1:{state.port} ({state.connected_as or 'not connected'})"]
        return finish(app, run, "lab up", {"native": state.model_dump(mode="json")}, human, Outcome.PASS)
    from fxprobe.lab.spec import LabSpec
    from fxprobe.lab.vm import Lab
    spec = LabSpec(name=name, drives=drives, raid=raid, raid_drives=raid_drives, hosts=hosts, links=links,
                   transport=transport, link_speed=link_speed, drive_mb=drive_mb, port_base=port_base,
                   accel=accel, connect=not no_connect, arrays=arrays).validate()
    run = app.new_run("lab up", folder="lab-up")
    handle = Lab.up(spec, app.runner(run), app.progress)
    guests = ", ".join(f"{g} ssh 127.0.0.1:{v.ssh_port}" for g, v in handle.state.guests.items())
    human = [f"lab {name} is up in {handle.state.timings['ready_s']} s ({handle.state.accel}): {guests}",
             f"export {spec.subsystem_nqn}: {spec.raid} over {spec.array_drives} of {spec.drives} drives, "
             f"{spec.transport}, {spec.links} link(s) per host"]
    return finish(app, run, "lab up", {"lab": handle.state.model_dump(
        mode="json", include={"spec", "accel", "kernel", "guests", "drives", "links", "exports", "timings"})},
        human, Outcome.PASS)


@lab.command()
@name_option
@click.option("--native", is_flag=True, help="The native lab on this machine.")
@pass_app
def status(app: App, name, native):
    """Guests, drives (slot, serial, state), RAID, links and NVMe paths."""
    if native:
        from fxprobe.lab.native import native_status
        run = app.new_run("lab status", folder="lab-status")
        data = native_status(name, app.runner(run))
        return finish(app, run, "lab status", {"native": data}, [str(data.get("mdstat", ""))], Outcome.PASS)
    from fxprobe.lab.vm import Lab
    run = app.new_run("lab status", folder="lab-status")
    handle = Lab.load(name, app.runner(run))
    data = handle.status()
    human = [f"lab {name} ({data['accel']}, kernel {data['kernel']})"]
    for guest, info in data["guests"].items():
        human.append(f"  guest {guest}: {'running' if info['running'] else 'STOPPED'} ssh {info['ssh']}")
    for md in data["md"]:
        human.append(f"  md {md['name']} {md['level']} [{md.get('raid_disks')}/{md.get('working_disks')}] "
                     f"[{md['health']}]" + (f" {md['action']} {md['progress']}%" if md.get("action") else ""))
    pulled = [str(d["slot"]) for d in data["drives"] if d["state"] != "present"]
    human.append(f"  drives: {len(data['drives']) - len(pulled)}/{len(data['drives'])} present"
                 + (f", not present: slots {', '.join(pulled)}" if pulled else ""))
    for drive in data["drives"]:
        human.append(f"    slot {drive['slot']:2d} {drive['serial']} {drive['state']:8} {drive['device'] or '-':10} "
                     f"{drive['export'] or 'free'}" + (f" md {drive['md_state']}" if drive["md_state"] else ""))
    for link in data["links"]:
        human.append(f"  link {link['host']}/{link['n']} {link['array_ip']}<->{link['host_ip']}: "
                     f"{'up' if link['up'] else 'DOWN'} ({link['host_operstate']}, {link['speed_mbps']} Mb/s"
                     + (f", throttled {link['rate']}" if link["rate"] else "") + ")")
    for host, subsystems in data["nvme"].items():
        for subsys in subsystems:
            states = ", ".join(f"{p['controller']} {p['transport']} {p['state']}" for p in subsys["paths"])
            human.append(f"  {host} {subsys['nqn']}: {states}")
    return finish(app, run, "lab status", {"lab": data}, human, Outcome.PASS)


@lab.command(name="exec", context_settings={"ignore_unknown_options": True})
@name_option
@click.option("--timeout", type=duration(gt=0), default=600.0, show_default=True, help="Time before the command is stopped.")
@click.argument("guest")
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
@pass_app
def exec_(app: App, name, timeout, guest, argv):
    """Run ARGV in GUEST (array, host, host1...); prints its output, exits with its code. Options of this
    command go before GUEST; everything after it (an optional -- first) is the guest's."""
    from fxprobe.lab.vm import Lab
    argv = argv[1:] if argv[:1] == ("--",) else argv
    run = app.new_run("lab exec", folder="lab-exec")
    handle = Lab.load(name, app.runner(run))
    result = handle.exec(guest, list(argv), timeout=timeout)
    outcome = Outcome.PASS if result.returncode == 0 else Outcome.ERROR
    written = run.finish(outcome, {"guest": guest, "guest_argv": list(argv), "guest_exit_code": result.returncode,
                                   **({"stdout": result.stdout, "stderr": result.stderr} if app.json_output else {})},
                         reason="" if result.returncode == 0 else f"exit {result.returncode} in {guest}",
                         exit_code=result.returncode)
    if app.json_output:
        app.emit(written, [])
    else:
        sys.stdout.write(result.stdout)
        sys.stderr.write(result.stderr)
    if result.timed_out:
        raise BadInput(f"`{' '.join(argv)}` in {guest} did not finish within {timeout:.0f} s", hint="raise --timeout")
    return result.returncode


@lab.command()
@name_option
@click.option("--native", is_flag=True, help="The native lab on this machine.")
@pass_app
def down(app: App, name, native):
    """Stop the guests and remove every process, socket and file of the lab."""
    run = app.new_run("lab down", folder="lab-down")
    if native:
        from fxprobe.lab.native import native_down
        done = native_down(name, app.runner(run))
    else:
        from fxprobe.lab.vm import down_by_name
        done = down_by_name(name, app.runner(run))
    return finish(app, run, "lab down", {"done": done}, done or [f"lab {name}: nothing to do"], Outcome.PASS)


@lab.command(name="add-export")
@name_option
@click.argument("level")
@click.argument("slots", nargs=-1, type=int, required=True)
@click.option("--export-name", default="twin", show_default=True)
@click.option("--no-connect", is_flag=True)
@pass_app
def add_export(app: App, name, level, slots, export_name, no_connect):
    """Build md LEVEL over free drive SLOTS and export it as a second subsystem (no reboot)."""
    from fxprobe.lab.vm import Lab
    run = app.new_run("lab add-export", folder="lab-add-export")
    export = Lab.load(name, app.runner(run)).add_export(level, list(slots), export_name, not no_connect)
    return finish(app, run, "lab add-export", {"export": export.model_dump(mode="json")},
                  [f"export {export.nqn}: {level} over slots {', '.join(map(str, slots))}"], Outcome.PASS)


@lab.group()
def fault():
    """Lab faults through QMP and tc: drives, links, throttling."""


def _fault(app: App, name: str, action: str, call) -> int:
    from fxprobe.lab.vm import Lab
    run = app.new_run(f"lab fault {action}", folder=f"lab-fault-{action}")
    result = call(Lab.load(name, app.runner(run)))
    return finish(app, run, f"lab fault {action}", {"fault": {"action": action, **result}},
                  [f"{action}: " + ", ".join(f"{k}={v}" for k, v in result.items())], Outcome.PASS)


force_option = click.option("--force", is_flag=True,
                            help="Break it even beyond the RAID's redundancy / on the only live path (a planted "
                                 "negative test), as fault run --allow-visible.")


def _refuse(refusals: list[str], what: str) -> None:
    from fxprobe.core.errors import UnsafeTarget
    if refusals:
        raise UnsafeTarget(f"refusing {what}: {refusals[0]}; nothing changed",
                           hint="for a planted negative test add --force")


@fault.command(name="drive-pull")
@name_option
@force_option
@click.argument("slot", type=int)
@pass_app
def drive_pull(app, name, force, slot):
    """Hot-remove drive SLOT from the array guest (refused beyond its RAID's redundancy unless --force)."""
    from fxprobe.faults import methods

    def pull(l):
        if not force:
            _refuse(methods.LabDrivePull(methods.Env(l.runner, l), {"slot": slot}).refusals(),
                    f"drive-pull of slot {slot}")
        return l.drive_pull(slot)
    return _fault(app, name, "drive-pull", pull)


@fault.command(name="drive-restore")
@name_option
@click.argument("slot", type=int)
@pass_app
def drive_restore(app, name, slot):
    """Put drive SLOT back and add it back to its md array (starts recovery); exit 4 if md did not take it."""
    from fxprobe.faults.restored import check_lab_drive

    def restore(l):
        result = l.drive_restore(slot)
        export = l.state.export_named(l.drive(slot).export) if l.drive(slot).export else None
        return {**result, "checked": check_lab_drive(l, slot, bool(export) and export.level != "raid0")}
    return _fault(app, name, "drive-restore", restore)


@fault.command(name="link-down")
@name_option
@force_option
@click.option("--host", default="host1", show_default=True)
@click.argument("n", type=int)
@pass_app
def link_down(app, name, force, host, n):
    """Cut data link N of a host (refused when it carries the only live path unless --force)."""
    from fxprobe.faults import methods

    def cut(l):
        if not force:
            env = methods.Env(l.runner, l, load_host=host, nqn=l.spec.subsystem_nqn)
            _refuse(methods.LabLink(env, {"link": n}).refusals(), f"link-down of link {n} of {host}")
        return l.link_down(n, host)
    return _fault(app, name, "link-down", cut)


@fault.command(name="link-up")
@name_option
@click.option("--host", default="host1", show_default=True)
@click.argument("n", type=int)
@pass_app
def link_up(app, name, host, n):
    """Restore data link N of a host; exit 4 unless its NICs are up and its paths live again."""
    from fxprobe.faults.restored import check_lab_link
    return _fault(app, name, "link-up", lambda l: {**l.link_up(n, host), "checked": check_lab_link(l, n, host)})


@fault.command()
@name_option
@click.option("--host", default="host1", show_default=True)
@click.argument("n", type=int)
@click.argument("rate", type=TC_RATE)
@pass_app
def throttle(app, name, host, n, rate):
    """Limit data link N to RATE (20M, 0.2G, 200mbit; bare numbers Gb/s; "off" removes the limit)."""
    return _fault(app, name, "throttle", lambda l: l.throttle(n, rate, host))
