"""Discover and connect NVMe-oF subsystems with nvme-cli: every path of a subsystem, with rollback.

Retries (tenacity) only on transient errors; a failure part-way disconnects what this call
connected, so nothing is left half-connected. Runs on the node whose kernel connects
(this host, or a node reached over SSH).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, asdict

import tenacity

from fxprobe.tools import nvme_sysfs
from fxprobe.core.errors import BadInput, NotRunnable, ToolError
from fxprobe.core.hosts import LOCAL, Host
from fxprobe.core.runner import Runner
from fxprobe.tools import nvme

TRANSPORTS = ("tcp", "rdma")
# errno texts that mean "try again": the target is still setting up, or a link is flapping
TRANSIENT = re.compile(r"resource temporarily unavailable|connection refused|no route to host|timed out|"
                       r"connection reset|device or resource busy|interrupted system call", re.I)
NQN = re.compile(r"^nqn\.\d{4}-\d{2}\.[^:\s]+(:\S+)?$")


@dataclass(frozen=True)
class ConnectOptions:
    nr_io_queues: int | None = None
    ctrl_loss_tmo: int | None = None
    reconnect_delay: int | None = None
    keep_alive_tmo: int | None = None
    fast_io_fail_tmo: int | None = None     # written to sysfs after connecting (nvme-cli 2.3 has no flag)
    hostnqn: str | None = None
    hostid: str | None = None

    def connect_kwargs(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "fast_io_fail_tmo" and v is not None}


@dataclass(frozen=True)
class Connected:
    nqn: str
    transport: str
    traddr: str
    trsvcid: str
    controller: str
    already: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def validate_nqn(nqn: str) -> str:
    if not NQN.match(nqn):
        raise BadInput(f"--nqn {nqn!r}: not an NVMe Qualified Name (expected nqn.YYYY-MM.reverse.domain:...)")
    return nqn


def _retrying(attempts: int) -> tenacity.Retrying:
    return tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts), wait=tenacity.wait_exponential(multiplier=1, max=10),
        retry=tenacity.retry_if_exception(lambda e: isinstance(e, ToolError) and bool(TRANSIENT.search(str(e)))),
        reraise=True)


def require_fabrics(runner: Runner, transport: str, host: Host = LOCAL) -> None:
    """NotRunnable unless the node's kernel has the NVMe-oF host for this transport."""
    result = runner.run(["test", "-c", "/dev/nvme-fabrics"], timeout=15, host=host, label="probe-fabrics",
                        always=True)
    if not result.ok:
        where = f" on {host.name}" if host is not LOCAL else ""
        raise NotRunnable(f"no NVMe over Fabrics host driver{where} (/dev/nvme-fabrics is missing)",
                          hint=f"modprobe nvme-{transport}, or run inside the lab: fxprobe lab up")


def discover(runner: Runner, transport: str, traddr: str, trsvcid: str = "4420", host: Host = LOCAL,
             attempts: int = 3) -> nvme.DiscoveryLog:
    """The discovery log of one discovery controller (retried on transient errors only)."""
    if transport not in TRANSPORTS:
        raise BadInput(f"--transport {transport!r}: choose one of {', '.join(TRANSPORTS)}")
    require_fabrics(runner, transport, host)
    try:
        return _retrying(attempts)(nvme.run_discover, runner, transport=transport, traddr=traddr,
                                   trsvcid=trsvcid, host=host)
    except ToolError as exc:
        raise ToolError(f"discovery at {transport}://{traddr}:{trsvcid} failed: {exc.message}",
                        hint="check the address and port (fxprobe netcheck --peer ADDR) and that the target listens") from None


def _controller_for(nqn: str, transport: str, traddr: str, trsvcid: str) -> str | None:
    for ctrl in nvme_sysfs.controllers():
        fields = dict(part.split("=", 1) for part in (ctrl.address or "").split(",") if "=" in part)
        if ctrl.subsysnqn == nqn and ctrl.transport == transport and fields.get("traddr") == traddr \
                and fields.get("trsvcid") == str(trsvcid) and ctrl.state != "deleting":
            return ctrl.name
    return None


def _connect_one(runner: Runner, transport: str, traddr: str, trsvcid: str, nqn: str,
                 options: ConnectOptions, host: Host) -> nvme.ConnectResult:
    result = nvme.run_connect(runner, host=host, timeout=90, transport=transport, traddr=traddr,
                              trsvcid=trsvcid, nqn=nqn, **options.connect_kwargs())
    if not result.ok and not result.already_connected:
        raise ToolError(f"connecting {nqn} at {transport}://{traddr}:{trsvcid}: {result.message}")
    return result


def connect_paths(runner: Runner, transport: str, addresses: list[tuple[str, str]], nqn: str | None = None,
                  options: ConnectOptions = ConnectOptions(), host: Host = LOCAL,
                  attempts: int = 3) -> list[Connected]:
    """Discover at each (traddr, trsvcid) and connect every path of the subsystem(s) offered there."""
    if nqn:
        validate_nqn(nqn)
    wanted: list[tuple[str, str, str]] = []
    for traddr, trsvcid in addresses:
        for record in discover(runner, transport, traddr, trsvcid, host, attempts).subsystems():
            if (nqn and record.subnqn != nqn) or record.trtype != transport:
                continue
            path = (record.subnqn, record.traddr, record.trsvcid)
            if path not in wanted:
                wanted.append(path)
    if not wanted:
        raise BadInput(f"no subsystem {nqn + ' ' if nqn else ''}is offered at "
                       + ", ".join(f"{transport}://{a}:{p}" for a, p in addresses),
                       hint="list what is offered: fxprobe discover --transport T --traddr A")
    connected: list[Connected] = []
    try:
        for subnqn, traddr, trsvcid in wanted:
            existing = _controller_for(subnqn, transport, traddr, trsvcid) if host is LOCAL else None
            if existing:
                connected.append(Connected(subnqn, transport, traddr, trsvcid, existing, already=True))
                continue
            result = _retrying(attempts)(_connect_one, runner, transport, traddr, trsvcid, subnqn, options, host)
            controller = result.device or (_controller_for(subnqn, transport, traddr, trsvcid)
                                           if host is LOCAL else "") or ""
            connected.append(Connected(subnqn, transport, traddr, trsvcid, controller,
                                       already=result.already_connected))
            if options.fast_io_fail_tmo is not None and controller:
                set_controller_attribute(runner, controller, "fast_io_fail_tmo", options.fast_io_fail_tmo, host)
    except BaseException:
        for path in reversed(connected):
            if not path.already and path.controller:
                try:
                    nvme.run_disconnect(runner, device=path.controller, host=host)
                except ToolError:
                    pass  # the failure that stopped us is the one to report; this one is in commands.jsonl
        raise
    return connected


def set_controller_attribute(runner: Runner, controller: str, name: str, value, host: Host = LOCAL) -> None:
    """Write /sys/class/nvme/<ctrl>/<name> here, or on a remote node with tee."""
    if host is LOCAL:
        nvme_sysfs.write_attribute(f"/sys/class/nvme/{controller}/{name}", str(value))
        return
    runner.run(["tee", f"/sys/class/nvme/{controller}/{name}"], input=str(value), timeout=15, host=host,
               label=f"set-{name}", check=True, what=f"setting {name} of {controller}")


def disconnect(runner: Runner, nqn: str | None = None, controller: str | None = None,
               host: Host = LOCAL) -> int:
    """Disconnect every controller of a subsystem (by NQN) or one controller; returns how many went."""
    if bool(nqn) == bool(controller):
        raise BadInput("say what to disconnect: --nqn NQN or --controller nvmeX (one of them)")
    if nqn:
        validate_nqn(nqn)
    count = nvme.run_disconnect(runner, nqn=nqn, device=f"/dev/{controller}" if controller else None, host=host)
    if count == 0:
        raise BadInput(f"{'--nqn ' + nqn if nqn else '--controller ' + controller}: nothing of that is connected here")
    return count
