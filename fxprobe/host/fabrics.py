"""Discover and connect NVMe-oF subsystems with nvme-cli: every path of a subsystem, with rollback.

Retries (tenacity) only on transient errors; a failure part-way disconnects what this call
connected, so nothing is left half-connected. Runs on the node whose kernel connects
(this host, or a node reached over SSH).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, asdict

import tenacity

from fxprobe.core import kernel
from fxprobe.core.data import AsDict
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
IFACE = re.compile(r"^[^/\s]{1,15}$")
DHCHAP = re.compile(r"^DHHC-1:0[0-3]:[A-Za-z0-9+/]+={0,2}:$")


@dataclass(frozen=True)
class ConnectOptions:
    nr_io_queues: int | None = None
    ctrl_loss_tmo: int | None = None
    reconnect_delay: int | None = None
    keep_alive_tmo: int | None = None
    fast_io_fail_tmo: int | None = None     # written to sysfs after connecting (nvme-cli 2.3 has no flag)
    hostnqn: str | None = None
    hostid: str | None = None
    queue_size: int | None = None
    hdr_digest: bool = False
    data_digest: bool = False
    dhchap_secret: str | None = None         # DHHC-1:..: host key; shown as <secret> in every record
    dhchap_ctrl_secret: str | None = None    # controller key (bidirectional authentication)

    def connect_kwargs(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "fast_io_fail_tmo" and v not in (None, False)}

    def to_dict(self) -> dict:
        """What was asked, for results.json: secrets only as 'given'."""
        shown = {k: v for k, v in asdict(self).items() if v not in (None, False)}
        return {k: ("<secret>" if k.startswith("dhchap") else v) for k, v in shown.items()}


@dataclass(frozen=True)
class PathSpec:
    """One path as the user names it: the target address and, on a multipath host, the local end it must
    leave from (``host_iface`` for TCP, SO_BINDTODEVICE; ``host_traddr``, the local address)."""
    traddr: str
    trsvcid: str = "4420"
    host_iface: str | None = None
    host_traddr: str | None = None

    @property
    def binding(self) -> dict:
        return {k: v for k, v in (("host_iface", self.host_iface), ("host_traddr", self.host_traddr)) if v}


def path_specs(traddrs, trsvcid: str, host_ifaces=(), host_traddrs=()) -> list[PathSpec]:
    """``-a`` addresses paired in order with ``-f``/``-w`` (one value: every path; else one per ``-a``)."""
    def spread(values, flag: str) -> list:
        values = list(values)
        if len(values) in (0, 1):
            return values * len(traddrs) or [None] * len(traddrs)
        if len(values) != len(traddrs):
            raise BadInput(f"connect: {len(values)} {flag} for {len(traddrs)} -a/--traddr: give one {flag} per "
                           f"path, in the order of the -a addresses (or one for every path)")
        return values
    for iface in host_ifaces:
        if not IFACE.match(iface):
            raise BadInput(f"--host-iface {iface!r}: not a network interface name (1-15 characters, no / or space)")
    return [PathSpec(a, trsvcid, f, w) for a, f, w in zip(traddrs, spread(host_ifaces, "-f/--host-iface"),
                                                          spread(host_traddrs, "-w/--host-traddr"))]


def check_secret(value: str | None, option: str) -> None:
    """A DH-CHAP key as nvme gen-dhchap-key writes it (DHHC-1:<hash 00-03>:<base64>:); the key is never echoed."""
    if value is not None and not DHCHAP.match(value):
        raise BadInput(f"{option}: not a DH-CHAP key in the form DHHC-1:00:<base64>: (the value is not shown)",
                       hint="make one with: nvme gen-dhchap-key --nqn HOSTNQN")


@dataclass(frozen=True)
class Connected(AsDict):
    nqn: str
    transport: str
    traddr: str
    trsvcid: str
    controller: str
    already: bool = False
    host_iface: str | None = None      # the binding asked for this path
    host_traddr: str | None = None
    address: str = ""                  # /sys/class/nvme/<controller>/address as the kernel reports it
    skipped: str = ""                  # why a discovered path was not connected


def validate_nqn(nqn: str) -> None:
    if not NQN.match(nqn):
        raise BadInput(f"--nqn {nqn!r}: not an NVMe Qualified Name (expected nqn.YYYY-MM.reverse.domain:...)")


def _retrying(attempts: int) -> tenacity.Retrying:
    return tenacity.Retrying(
        stop=tenacity.stop_after_attempt(attempts), wait=tenacity.wait_exponential(multiplier=1, max=10),
        retry=tenacity.retry_if_exception(lambda e: isinstance(e, ToolError) and bool(TRANSIENT.search(str(e)))),
        reraise=True)


def require_fabrics(runner: Runner, transport: str, host: Host = LOCAL) -> None:
    """NotRunnable unless the node's kernel has the NVMe-oF host for this transport."""
    reason = nvme.probe_nvme_fabrics(runner, host)
    if reason:
        raise NotRunnable(reason, hint=f"modprobe nvme-{transport}, or run inside the lab: fxprobe lab up")


def discover(runner: Runner, transport: str, traddr: str, trsvcid: str = "4420", host: Host = LOCAL,
             attempts: int = 3, binding: dict | None = None) -> nvme.DiscoveryLog:
    """The discovery log of one discovery controller (retried on transient errors only); ``binding``
    (host_iface / host_traddr) makes the discovery leave from that local end too."""
    if transport not in TRANSPORTS:
        raise BadInput(f"--transport {transport!r}: choose one of {', '.join(TRANSPORTS)}")
    require_fabrics(runner, transport, host)
    try:
        return _retrying(attempts)(nvme.run_discover, runner, transport=transport, traddr=traddr,
                                   trsvcid=trsvcid, host=host, **(binding or {}))
    except ToolError as exc:
        raise ToolError(f"discovery at {transport}://{traddr}:{trsvcid} failed: {exc.message}",
                        hint="check the address and port (fxprobe netcheck --peer ADDR) and that the target listens") from None


def _sys_controller(nqn: str, transport: str, traddr: str, trsvcid: str):
    for ctrl in nvme_sysfs.controllers():
        fields = dict(part.split("=", 1) for part in (ctrl.address or "").split(",") if "=" in part)
        if ctrl.subsysnqn == nqn and ctrl.transport == transport and fields.get("traddr") == traddr \
                and fields.get("trsvcid") == str(trsvcid) and ctrl.state != "deleting":
            return ctrl
    return None


def _connect_one(runner: Runner, transport: str, path: PathSpec, nqn: str,
                 options: ConnectOptions, host: Host) -> nvme.ConnectResult:
    result = nvme.run_connect(runner, host=host, timeout=90, transport=transport, traddr=path.traddr,
                              trsvcid=path.trsvcid, nqn=nqn, **path.binding, **options.connect_kwargs())
    if not result.ok and not result.already_connected:
        via = f" from {', '.join(path.binding.values())}" if path.binding else ""
        raise ToolError(f"connecting {nqn} at {transport}://{path.traddr}:{path.trsvcid}{via}: {result.message}")
    return result


def _wanted_paths(runner: Runner, transport: str, specs: list[PathSpec], nqn: str | None, host: Host,
                  attempts: int) -> tuple[list[tuple[str, PathSpec]], list[Connected]]:
    """(subsystem NQN, path) to connect from every discovery log, and the discovered paths left out: with
    paths bound per interface, a path at an address no -a named has no binding of its own."""
    named = {s.traddr: s for s in specs}
    bindings = {tuple(sorted(s.binding.items())) for s in specs}
    shared = specs[0].binding if len(bindings) == 1 else None      # one binding (or none) for every path
    wanted: list[tuple[str, PathSpec]] = []
    skipped: list[Connected] = []
    for spec in specs:
        for record in discover(runner, transport, spec.traddr, spec.trsvcid, host, attempts, spec.binding).subsystems():
            if (nqn and record.subnqn != nqn) or record.trtype != transport:
                continue
            if any(n == record.subnqn and (p.traddr, p.trsvcid) == (record.traddr, record.trsvcid) for n, p in wanted) \
                    or any((c.nqn, c.traddr, c.trsvcid) == (record.subnqn, record.traddr, record.trsvcid) for c in skipped):
                continue
            own = named.get(record.traddr)
            binding = own.binding if own else shared
            if binding is None:
                skipped.append(Connected(record.subnqn, transport, record.traddr, record.trsvcid, "",
                                         skipped="offered at an address no -a named, and paths are bound per "
                                                 "interface: name it with -a and its own -f/-w"))
                continue
            wanted.append((record.subnqn, PathSpec(record.traddr, record.trsvcid, **binding)))
    return wanted, skipped


def _connect_path(runner: Runner, transport: str, subnqn: str, path: PathSpec, options: ConnectOptions,
                  host: Host, attempts: int) -> Connected:
    bound = {"host_iface": path.host_iface, "host_traddr": path.host_traddr}
    existing = _sys_controller(subnqn, transport, path.traddr, path.trsvcid) if host is LOCAL else None
    if existing:
        return Connected(subnqn, transport, path.traddr, path.trsvcid, existing.name, already=True,
                         address=existing.address or "", **bound)
    result = _retrying(attempts)(_connect_one, runner, transport, path, subnqn, options, host)
    found = _sys_controller(subnqn, transport, path.traddr, path.trsvcid) if host is LOCAL else None
    controller = result.device or (found.name if found else "")
    if options.fast_io_fail_tmo is not None and controller:
        set_controller_attribute(runner, controller, "fast_io_fail_tmo", options.fast_io_fail_tmo, host)
    return Connected(subnqn, transport, path.traddr, path.trsvcid, controller, already=result.already_connected,
                     address=(found.address or "") if found else "", **bound)


def connect_paths(runner: Runner, transport: str, addresses: list, nqn: str | None = None,
                  options: ConnectOptions = ConnectOptions(), host: Host = LOCAL,
                  attempts: int = 3) -> list[Connected]:
    """Discover at each address (a PathSpec, or (traddr, trsvcid)) and connect every path of the subsystem(s)
    offered there, each from its own interface when the PathSpec binds one. Paths left out come last, with
    ``skipped`` saying why."""
    specs = [a if isinstance(a, PathSpec) else PathSpec(*a) for a in addresses]
    if nqn:
        validate_nqn(nqn)
    if transport != "tcp" and any(s.host_iface for s in specs):
        raise BadInput(f"--host-iface binds NVMe/TCP paths; over {transport} give the local address with "
                       f"-w/--host-traddr")
    check_secret(options.dhchap_secret, "--dhchap-secret")
    check_secret(options.dhchap_ctrl_secret, "--dhchap-ctrl-secret")
    wanted, skipped = _wanted_paths(runner, transport, specs, nqn, host, attempts)
    if not wanted:
        raise BadInput(f"no subsystem {nqn + ' ' if nqn else ''}is offered at "
                       + ", ".join(f"{transport}://{s.traddr}:{s.trsvcid}" for s in specs),
                       hint="list what is offered: fxprobe discover --transport T --traddr A")
    connected: list[Connected] = []
    try:
        for subnqn, path in wanted:
            connected.append(_connect_path(runner, transport, subnqn, path, options, host, attempts))
    except BaseException:
        for path in reversed(connected):
            if not path.already and path.controller:
                try:
                    nvme.run_disconnect(runner, device=path.controller, host=host)
                except ToolError:
                    pass  # the failure that stopped us is the one to report; this one is in commands.jsonl
        raise
    return connected + skipped


def set_controller_attribute(runner: Runner, controller: str, name: str, value, host: Host = LOCAL) -> None:
    """Write /sys/class/nvme/<ctrl>/<name> here, or on a remote node with tee."""
    if host is LOCAL:
        nvme_sysfs.write_attribute(kernel.controller_attribute(controller, name), str(value))
        return
    runner.run(["tee", kernel.controller_attribute(controller, name)], input=str(value), timeout=15, host=host,
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
