"""``fault run``: start the load, wait for steady state, inject, keep loading, restore, wait for
recovery; then analyse the fio logs against the criteria, draw the timeline and give advice.

Safety first: the plan is built and checked (method available, allow-list, only path, RAID
redundancy, root device) before anything is touched; every undo is journaled (fsync) before the
change it undoes; Ctrl-C / SIGTERM restore before exiting; ``fault restore`` replays the journal.
"""

from __future__ import annotations

import datetime as dt
import shlex
import signal
import sys
import time
import uuid
from dataclasses import dataclass, field

from fxprobe.core.errors import BadInput, FxprobeError, ToolError, UnsafeTarget
from fxprobe.faults import advice as advice_mod
from fxprobe.faults import analysis, labprep, methods, orphans, overrun, plot, timeline
from fxprobe.faults import rebuild as rebuild_mod
from fxprobe.faults import seen as seen_mod
from fxprobe.faults import verify as verify_mod
from fxprobe.faults.completions import Completions, longest_gap
from fxprobe.faults.journal import Journal
from fxprobe.faults.live import LoadWatch
from fxprobe.faults.scenario import LINK_KINDS, Scenario
from fxprobe.core.hosts import LOCAL
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.tools import dmesg, dpkg, fio_status, nvme_sysfs, procs
from fxprobe.tools.nvme import parse_address
from fxprobe.tools.fio import parse_fio_hist_log, parse_fio_log
from fxprobe.core.verdict import Outcome
from fxprobe.host.safety import TargetCheck, check_load_target

FIRST_REPORT_S = 180.0     # for the load's first status report (the device opened, I/O completing) before the fault


@dataclass
class Options:
    lab: str | None = None            # lab name, or None for this Linux host
    dry_run: bool = False
    yes: bool = False
    allow: tuple[str, ...] = ()
    allow_visible: bool = False
    sample_s: float = 2.0
    progress: object = print
    status: object = None             # fxprobe.core.status.Status: the live line and metrics


@dataclass
class Plan:
    scenario: Scenario
    method: methods.Method
    lines: list[str]
    refusals: list[str]
    env: methods.Env
    unsafe: list[str] = field(default_factory=list)   # of the refusals, those no option allows (in use)
    load_check: TargetCheck | None = None     # host/safety.check_load_target of the load, made once
    allow_visible: bool = False
    refusals_after_prepare: bool = False      # lab: the refusals are decided (once) by the prepare step

    def to_dict(self) -> dict:
        return {"scenario": self.scenario.name, "kind": self.scenario.kind, "via": self.method.via,
                "target": self.method.target, "lines": self.lines, "refusals": self.refusals,
                "unsafe": self.unsafe,
                "load_check": self.load_check.to_dict() if self.load_check else None}

    def require_safe_load(self) -> None:
        """Raise the load check's refusal (exit 2): a real run before it touches anything, a dry run after
        showing its plan - the same check either way."""
        if self.load_check is not None:
            self.load_check.require_safe()

    def require_allowed(self) -> None:
        """Raise the redundancy refusal (exit 2) unless --allow-visible: the one place a refusal stops a run -
        a real run before it touches anything (or once the lab is prepared, when only then it is known), a dry
        run after showing its plan."""
        if self.unsafe:
            raise UnsafeTarget(f"refusing {self.scenario.kind} on {self.method.target}: {self.unsafe[0]}; "
                               "nothing injected", hint="pick a device that nothing uses (--allow-visible does "
                               "not allow touching one in use)")
        if self.refusals and not self.allow_visible:
            raise UnsafeTarget(f"refusing {self.scenario.kind} on {self.method.target}: {self.refusals[0]}; "
                               f"nothing injected", hint="for a planted negative test add --allow-visible")


def _iso_ms(stamp: str) -> float:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc).timestamp()


def load_argv(scenario: Scenario, device: str, log_dir: str, output: str = "json") -> list[str]:
    load = scenario.load
    runtime = int(round(scenario.planned_s + 2))
    prefix = f"{log_dir}/load"
    filename = verify_mod.load_filename(verify_mod.plan_for(load), device)
    return ["fio", "--name=fault-load", f"--filename={filename}", f"--rw={load['rw']}", f"--bs={load['bs']}",
            f"--iodepth={load['iodepth']}", f"--numjobs={load['numjobs']}", "--ioengine=libaio", "--direct=1",
            *([f"--rate_iops={load['rate_iops']}"] if load["rate_iops"] else []),
            "--time_based", f"--runtime={runtime}",
            # one line per successful completion (epoch ms): exact stalls and counts (faults.completions)
            f"--write_lat_log={prefix}", "--log_avg_msec=0", "--disable_lat=1", "--disable_slat=1",
            f"--write_hist_log={prefix}", f"--log_hist_msec={load['log_msec']}", "--log_unix_epoch=1",
            "--continue_on_error=all",
            f"--output-format={output}", "--status-interval=1", "--eta=never",
            *verify_mod.load_flags(verify_mod.plan_for(load))]


def build_plan(scenario: Scenario, runner: Runner, options: Options) -> Plan:
    """Choose the method and check it; touches nothing. Raises NotRunnable / UnsafeTarget / BadInput."""
    lab = None
    if options.lab:
        from fxprobe.lab.vm import Lab
        lab = Lab.load(options.lab, runner)
    env = methods.Env(runner, lab, load_host=scenario.load["host"], say=options.progress,
                      export=scenario.lab["export"],
                      export_level=scenario.lab["twin_level"] if scenario.lab["export"] == labprep.TWIN else None)
    if lab is not None:
        lab.guest_name(env.load_host)
        if scenario.lab["export"] == "main" or lab.state.export_named(labprep.TWIN):
            env.nqn = labprep.export_nqn(lab, scenario.lab["export"])
    elif not scenario.load["target"]:
        raise BadInput(f"{scenario.source}: key 'load.target': required on a Linux host (the device the load reads)")
    method = methods.choose(env, scenario.fault)
    refusals = method.refusals()
    # the lab's prepare step may build the export or drop paths first: what else it would refuse is known then
    after_prepare = lab is not None and not refusals and (env.nqn is None or bool(scenario.lab["paths"]))
    lines = []
    if lab is not None:
        lines.append(f"lab {lab.name}: load on {env.load_host} against export {scenario.lab['export']}"
                     + (f" ({env.nqn})" if env.nqn else " (built first)"))
    else:
        lines.append(f"this host: load against {scenario.load['target']}")
    t = scenario.timing
    rate = f" rate_iops={scenario.load['rate_iops']} per job" if scenario.load["rate_iops"] else ""
    lines.append(f"load: fio {scenario.load['rw']} bs={scenario.load['bs']} iodepth={scenario.load['iodepth']}{rate} "
                 f"for {scenario.total_s + 2:g} s, logs every {scenario.load['log_msec']} ms")
    vplan = verify_mod.plan_for(scenario.load)
    lines += vplan.lines(scenario.load["target"] or f"export {scenario.lab['export']}")
    lines.append(f"at +{t['steady_s']:g} s inject {scenario.kind} via {method.via} on {method.target}; "
                 f"restore at +{t['steady_s'] + t['fault_s']:g} s; keep loading {t['recover_s']:g} s")
    lines += [f"  {line}" for line in method.plan()]
    if scenario.rebuild_bound_s > t["recover_s"]:
        lines.append(f"md rebuild: the load runs on until md is clean again, at most {scenario.rebuild_bound_s:g} s "
                     f"after the restore (timing.rebuild_s, the bound); degraded and rebuilding shown as information")
    load_check = None
    if lab is None:
        if not options.yes and not options.dry_run:
            options.dry_run = True
        # the verify layout writes the region: checked as a write load
        load_check = check_load_target(scenario.load["target"], "write" if vplan.enabled else scenario.load["rw"],
                                       allow=options.allow)
        lines += load_check.lines() if load_check else []
        if not options.dry_run and load_check:
            load_check.require_safe()
        if not options.dry_run and method.target not in options.allow:
            raise UnsafeTarget(f"{scenario.kind} target {method.target} is not on the allow-list: nothing injected",
                               hint=f"check it is the device you mean, then add --allow {method.target}")
    unsafe = method.unsafe()
    lines += [f"REFUSED{' (allowed by --allow-visible)' if options.allow_visible and r not in unsafe else ''}: {r}"
              for r in refusals]
    if after_prepare:
        lines.append("safety refusals (only path, RAID redundancy): checked once the lab is prepared")
    plan = Plan(scenario, method, lines, refusals, env, unsafe, load_check, allow_visible=options.allow_visible,
                refusals_after_prepare=after_prepare)
    if not options.dry_run:
        plan.require_allowed()
    return plan


def clock_offset(runner: Runner, host, tries: int = 3) -> tuple[float, float]:
    """(node clock - local clock, uncertainty) in seconds, from the quickest of a few round trips."""
    if host is LOCAL:
        return 0.0, 0.0
    best = None
    for _ in range(tries):
        before = time.time()
        result = runner.run(["date", "+%s.%N"], timeout=30, host=host, check=True, label="clock")
        after = time.time()
        node = float(result.stdout.strip())
        rtt = after - before
        if best is None or rtt < best[1]:
            best = (node - (before + after) / 2, rtt)
    return best[0], best[1] / 2


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


class Site:
    """Where the load runs and the fault lands, seen by the steps: this Linux host (here) or the lab's
    guests (``LabSite``). Each step of ``FaultRun`` asks its site; the steps themselves are one code path."""

    def __init__(self, env: methods.Env):
        self.env = env
        self.host, self.array_host = LOCAL, LOCAL     # the node running the load, the array's node
        self.device = ""                               # what the load reads
        self.nqn = ""                                  # the load's NVMe subsystem (host: "" when it has none)
        self.live: list[dict] = []                     # live paths of the load's subsystem before the fault
        self.timeouts: dict = {}
        self.prepared: list[str] = []                  # what preparing the site did
        self._sampler = None

    def prepare(self, scenario: Scenario, remember) -> None:
        self.device = scenario.load["target"]
        # the load's NVMe subsystem (fault.nqn, else the one holding the load's device; "" for none): its paths
        # are sampled and must show a link fault (faults.seen)
        self.nqn = scenario.fault.get("nqn") or nvme_sysfs.subsystem_of(self.device) or ""
        self.live = [c.to_dict() for c in nvme_sysfs.controllers() if self.nqn and c.subsysnqn == self.nqn
                     and c.state == "live"]

    def read_timeouts(self, scenario: Scenario) -> None:
        self.timeouts = advice_mod.read_timeouts(scenario.fault.get("nqn"))

    def array_seen(self, node: str) -> list[dict]:
        """What array the load reads (the gates' ``array_seen``): its NVMe subsystem and the addresses of its live
        paths before the fault; only the target when it has no subsystem."""
        nqn = self.nqn or self.env.nqn or ""
        if not nqn:
            return [{"node": node, "target": self.device}]
        addresses = {parse_address(p.get("address") or "").get("traddr", "") for p in self.live}
        transports = {p.get("transport") or "" for p in self.live}
        return [{"node": node, "target": self.device, "nqn": nqn, "transport": ",".join(sorted(transports - {""})),
                 "addresses": sorted(addresses - {""})}]

    def start_sampling(self, runner: Runner, scenario: Scenario, sample_s: float, background: list) -> None:
        self._sampler = timeline.Sampler(timeline.local_snapshot(self.nqn), sample_s).start()

    def stop_sampling(self) -> list:
        """Stop the sampler (at once, also when a step failed); returns what it saw."""
        sampler, self._sampler = self._sampler, None
        return sampler.stop() if sampler is not None else []

    def md_now(self) -> dict | None:
        """{md name: md text} of the last sample so far (None: none yet)."""
        done = [s for s in (self._sampler.samples if self._sampler else []) if not s.error]
        return done[-1].md if done else None

    def array_offset(self, runner: Runner) -> float:
        return 0.0

    def samples(self, local: list, offset: float, array_offset: float) -> list:
        return local

    def live_count(self) -> int:
        return len([c for c in self.timeouts["controllers"].values() if c.get("state") == "live"])

    def note_clock(self, runner: Runner) -> None:
        """Before the load: what ``drive_timeouts`` counts from (a host: nothing)."""

    def drive_timeouts(self, runner: Runner) -> list[dict]:
        """The array's drive timeouts logged since ``note_clock`` (a host cannot read the array's kernel: none)."""
        return []


class LabSite(Site):
    """The lab: the load on a host guest, the array guest beside it, both sampled by loops in the guests."""

    def __init__(self, env: methods.Env):
        super().__init__(env)
        self.lab = env.lab
        self._loops: dict[str, object] = {}
        self.uptime_before: float | None = None        # the array guest's kernel clock before the load

    def prepare(self, scenario: Scenario, remember) -> None:
        lab, name = self.lab, self.env.load_host
        self.env.nqn, self.prepared = labprep.prepare(lab, scenario.lab, name, remember)
        self.live = methods.live_paths_lab(lab, name, self.env.nqn)
        self.device = _lab_device(lab, name, self.env.nqn)
        self.host, self.array_host = lab.guest(name), lab.guest("array")

    def read_timeouts(self, scenario: Scenario) -> None:
        self.timeouts = labprep.timeouts_view(self.lab, self.env.load_host, self.env.nqn)

    def start_sampling(self, runner: Runner, scenario: Scenario, sample_s: float, background: list) -> None:
        # sampling loops in the guests: no SSH round trip per sample
        for view, node in (("host", self.host), ("array", self.array_host)):
            argv = labprep.view_loop(view, scenario.planned_s + 90, sample_s / 2)
            label = f"sample-{self.env.load_host}" if view == "host" else "sample-array"
            self._loops[view] = runner.start(argv, host=node, label=label)
            background.append(self._loops[view])

    def stop_sampling(self) -> list:
        return []

    def md_now(self) -> dict | None:
        """{md name: md text} of the array's last complete sample so far (None: none yet)."""
        text = self._loops["array"].output()[0] if "array" in self._loops else ""
        cut = text.rfind("\nT ", 0, max(0, text.rfind("\nT ")))
        blocks = labprep.parse_view_loop("array", text[cut + 1:] if cut >= 0 else text)
        return {m["name"]: timeline.md_text(m) for m in blocks[-1][1]["md"]} if blocks else None

    def array_offset(self, runner: Runner) -> float:
        return clock_offset(runner, self.array_host)[0]

    def samples(self, local: list, offset: float, array_offset: float) -> list:
        return timeline.merge_node_samples(labprep.parse_view_loop("host", self._loops["host"].output()[0]),
                                           labprep.parse_view_loop("array", self._loops["array"].output()[0]),
                                           self.env.nqn, offset, array_offset)

    def live_count(self) -> int:
        return len(self.live)

    def note_clock(self, runner: Runner) -> None:
        """The array guest's kernel clock before the load (drive timeouts logged from then on are this run's)."""
        done = runner.run(list(dmesg.UPTIME_ARGV), timeout=30, host=self.array_host, check=True, label="array-uptime")
        self.uptime_before = dmesg.parse_uptime(done.stdout, "the array guest's uptime")

    def drive_timeouts(self, runner: Runner) -> list[dict]:
        """The array guest's emulated drive timeouts (QEMU's NVMe controller completing no I/O for the driver's
        30 s) logged since ``note_clock``: the lab's emulator stalled, not the fault; the run measured it."""
        if self.uptime_before is None:
            return []
        log = runner.run(["dmesg"], timeout=60, host=self.array_host, label="array-kernel-log")
        if not log.ok:
            return []
        return [t.to_dict() for t in dmesg.parse_nvme_timeouts(log.stdout) if t.uptime_s >= self.uptime_before]


class FaultRun:
    """One ``fault run`` as steps: prepare, start the load, inject, restore, collect, analyse; ``cleanup``
    undoes whatever is still journaled, whichever step stopped. State lives here, not in one function's locals."""

    def __init__(self, plan: Plan, run: RunDir, journal: Journal, options: Options):
        self.plan, self.run, self.journal, self.options = plan, run, journal, options
        self.scenario, self.method, self.env = plan.scenario, plan.method, plan.env
        self.runner, self.say = self.env.runner, options.progress
        self.site = LabSite(self.env) if self.env.lab is not None else Site(self.env)
        self.entry_id = f"{run.path.name}-{uuid.uuid4().hex[:6]}"
        self.undo: list[dict] = []
        self.background: list = []
        self.restore_log: list[str] = []          # what each undo did
        self.restore_failed: list[str] = []       # each undo that failed (method: why), kept in the journal
        self.flaps: list[tuple[float, bool]] = []
        self.deleted_t: float | None = None
        self.fio = self.load = None                    # the load and its orphan record (faults.orphans)
        self.overrun: overrun.Overrun | None = None    # the load hung past its planned end (faults.overrun)
        self.rebuilt = None                            # the md rebuild after a drive pull (faults.rebuild)
        self.md_before: set[str] = set()               # md arrays degraded or rebuilding when the fault came
        self.seen: seen_mod.Seen | None = None         # the fault's effect observed in its window (faults.seen)
        self.lab_timeouts: list[dict] = []             # the lab's emulated drives that timed out meanwhile
        self.watch = LoadWatch(options.status)         # the live status line and metrics of the load

    def remember(self, record: dict) -> None:
        """Journal (fsync) an undo before the change it undoes."""
        self.undo.append(record)
        self.journal.open(self.entry_id, self.scenario.name, self.undo, str(self.run.path))

    def prepare(self) -> None:
        """Shape the site (lab: twin export, paths, timeouts); then the refusals, if they waited for it."""
        self.site.prepare(self.scenario, self.remember)
        self.run.note(array_seen=self.site.array_seen(self.env.load_host if self.env.lab is not None else "local"))
        for line in self.site.prepared:
            self.say(f"prepared: {line}")
        if self.env.lab is not None:
            getattr(self.method, "before_load", lambda: None)()   # e.g. corrupt: find the member while nothing runs
        if self.plan.refusals_after_prepare:
            self.plan.refusals = self.method.refusals()
            self.plan.require_allowed()
        self.site.read_timeouts(self.scenario)
        self.site.note_clock(self.runner)

    def start_load(self) -> None:
        """Listeners and samplers first, then fio; returns once the load has run ``steady_s``."""
        scenario, runner, site = self.scenario, self.runner, self.site
        self.offset, self.offset_err = clock_offset(runner, site.host)
        self.log_dir = f"/tmp/fxprobe-fault-{self.entry_id}"
        runner.run(["mkdir", "-p", self.log_dir], timeout=30, host=site.host, check=True, label="logdir")
        self.listeners = start_listeners(runner, self.env.lab, site.host, site.array_host, self.env.load_host,
                                         scenario.planned_s + 90, self.background, self.say)
        site.start_sampling(runner, scenario, self.options.sample_s, self.background)
        self.vplan = vplan = verify_mod.plan_for(scenario.load)
        dpkg.witness(runner, site.host, "fio")        # the fio that measures on the load's node: its origin
        if vplan.enabled:
            self.say(f"layout: {vplan.region_bytes / 2**20:g} MiB of {site.device} with verify={vplan.method} headers")
            laid = runner.run(verify_mod.layout_argv(vplan, site.device), timeout=1800, host=site.host,
                              label="fio-layout")
            if not laid.ok:
                raise ToolError(laid.failure("fio layout"))
        argv = load_argv(scenario, site.device, self.log_dir, "json+" if self.watch.status.active else "json")
        shown = shlex.join(argv).replace(":".join([site.device] * verify_mod.PASSES),
                                         f"{site.device}:... ({verify_mod.PASSES} x)")
        self.say(f"load: {shown}")    # json+: the live p99
        self.fio = runner.start(procs.with_start_line(argv), host=site.host, label="fio-load")
        self.background.append(self.fio)
        self.watch = LoadWatch(self.options.status, self.fio, scenario.planned_s + 2,
                               self.env.load_host if self.env.lab is not None else "local").start()
        wait_started(self.fio, 120)
        self.load = orphans.record_load(self.journal, self.entry_id, self.env.lab, self.env.load_host,
                                        orphans.start_line_pid(self.fio), argv, scenario.name, str(self.run.path))
        started = wait_first_status(self.fio, FIRST_REPORT_S)
        if started is None:     # I/O that never completes before the fault: keep what it waits on, then say so
            processes, kernel = overrun.hang_evidence(runner, site.host, self.hang_nodes(), "load-silent")
            raise ToolError(overrun.silent_load_line(FIRST_REPORT_S, processes, kernel),
                            hint=f"see load-silent-* in {self.run.path / 'commands.jsonl'}")
        self.load_started = started
        self.load_end_t = started + scenario.planned_s + 2     # planned; earlier once md has rebuilt (rebuild)
        time.sleep(max(0.0, self.load_started + scenario.timing["steady_s"] - time.time()))

    def inject(self) -> None:
        """Journal the undo, then break it (a flap breaks and mends it through the fault window)."""
        method = self.method
        self.remember(method.restore_record())     # journaled (fsync) before the fault happens
        self.md_before = rebuild_mod.unclean(self.site.md_now() or {})   # an earlier fault's, not waited for
        self.say(f"inject: {self.scenario.kind} via {method.via} on {method.target}")
        self.inject_t = self.env.note(f"inject {self.scenario.kind}")
        self.watch.fault(self.scenario.kind, f"via {method.via} on {method.target}")
        if isinstance(method, methods.LabLinkFlap):
            self.flaps = method.flap(self.scenario.timing["fault_s"])
            return
        method.inject()
        if isinstance(method, methods.LabDrivePull):
            pulled = self.env.lab.drive(method.slot).pulled
            self.deleted_t = _iso_ms(pulled) if pulled else None   # QMP DEVICE_DELETED (after the guest let go)

    def restore(self) -> None:
        """At the end of the fault window undo the fault from its journal record; the entry is updated."""
        if isinstance(self.method, methods.LabLinkFlap):
            self.restore_t = self.flaps[-1][0] if self.flaps else time.time()
            self.restore_log.append(f"link {self.method.n} left up after flapping")
        else:
            time.sleep(max(0.0, self.scenario.timing["fault_s"] - (time.time() - self.inject_t)))
            self.say("restore")
            self.restore_t = time.time()
            self.restore_log.append(methods.restore_from_record(self.undo[-1], self.env))
        self.watch.restored(self.restore_log[-1] if self.restore_log else "restored")
        self.undo.pop()
        self.journal.open(self.entry_id, self.scenario.name, self.undo, str(self.run.path))

    def rebuild(self) -> None:
        """After a drive pull the load runs on while md rebuilds: it is stopped once every md array is clean
        again (after recover_s), else it ends at its planned end, the bound timing.rebuild_s after the restore."""
        scenario = self.scenario
        if scenario.rebuild_bound_s <= scenario.timing["recover_s"]:
            return
        earliest = self.restore_t + scenario.timing["recover_s"]
        self.say(f"md rebuild: loading on until md is clean, at most {scenario.rebuild_bound_s:g} s after the restore")
        self.watch.status.phase("md rebuild (after the restore)")
        while self.fio.alive() and time.time() < self.load_end_t - 2:
            md = self.site.md_now()
            if time.time() >= earliest and md is not None and not rebuild_mod.unclean(md) - self.md_before:
                self.stop_load("md clean again")
                return
            time.sleep(1.0)

    def stop_load(self, why: str) -> None:
        """End the load now (TERM to fio's main process: it reaps its I/O, writes its report and logs)."""
        pid = orphans.start_line_pid(self.fio)
        if pid is None or not self.fio.alive():
            return
        self.load_end_t = time.time()
        self.say(f"{why}: stopping the load {self.load_end_t - self.restore_t:.0f} s after the restore")
        self.runner.run(["kill", "-TERM", str(pid)], timeout=30, host=self.site.host, label="load-stop")

    def hang_nodes(self) -> dict:
        """The nodes whose kernel messages a hung load keeps: the load's and the array's."""
        if self.env.lab is None:
            return {"local": LOCAL}
        return {self.env.load_host: self.site.host, "array": self.site.array_host}

    def collect(self) -> None:
        """Let the load finish; fetch its logs, the events and the samples onto one clock."""
        runner, site = self.runner, self.site
        self.overrun = overrun.wait_or_declare_hung(self.fio, self.load_end_t, runner,
                                                    site.host, self.hang_nodes(), lambda: orphans.stop_now(self.load, runner),
                                                    self.say)
        local = site.stop_sampling()
        for bg in self.background:
            bg.stop(timeout=5)
        self.fio_out, self.fio_err = self.fio.output()
        self.verified = self.read_back()
        early = verify_mod.ended_early(self.vplan, analysis.load_runtime_ms(self.fio_out), self.planned_load_s)
        if early and self.overrun is None:
            raise ToolError(early, hint=f"see {self.run.raw}")
        self.logs = _fetch_logs(runner, site.host, self.log_dir, self.run)
        runner.run(["rm", "-rf", self.log_dir], timeout=30, host=site.host, label="logdir-rm")
        timing = self.scenario.timing
        uncovered = analysis.uncovered_windows(self.scenario.planned_s + 2, self.inject_t - self.load_started,
                                               self.restore_t - self.load_started, timing["recover_s"],
                                               timing["steady_s"])
        if uncovered and self.overrun is None:
            raise ToolError(uncovered, hint=f"the restore came {self.restore_t - self.inject_t:.1f} s after the inject "
                                            f"request, timing.fault_s is {timing['fault_s']:g} s: give the scenario a "
                                            "fault_s longer than the injection takes (the load runs steady_s + fault_s + "
                                            "recover_s; a longer recover_s moves the window's end with it), or find why "
                                            "the fault was slow to inject")
        array_offset = site.array_offset(runner)
        events = []
        for name, bg in self.listeners.items():
            node_offset = self.offset if name in (self.env.load_host, "local") else array_offset
            events += [{**e, "node": name} for e in timeline.parse_event_lines(bg.output()[0], node_offset)]
        self.events = sorted(events, key=lambda e: e["t"])
        self.samples = site.samples(local, self.offset, array_offset)
        self.inject_requested_t = self.inject_t
        if isinstance(self.method, methods.LabDrivePull):
            self.inject_t = drive_gone_instant(self.events, self.inject_t, self.deleted_t)
        self.seen = self.observe_fault()
        self.lab_timeouts = site.drive_timeouts(runner)

    def observe_fault(self) -> "seen_mod.Seen | None":
        """Whether the fault's effect was observed in its window (faults.seen); said when it was not."""
        lab = self.env.lab is not None
        seen = seen_mod.observe(self.scenario.kind, self.inject_requested_t, self.restore_t, self.samples,
                                self.events, "array" if lab else "local", self.env.load_host if lab else "local",
                                self.method.load_nics(self.site.live), list(self.method.observed),
                                early_s=self.offset_err or 0.0)
        if seen is not None:
            self.say(f"fault seen: {'; '.join(seen.evidence)}" if seen.seen else seen.criterion().detail)
        return seen

    def read_back(self) -> "verify_mod.VerifyResult":
        """The load's own verify pass; when it wrote, the whole region read back after the restore (and, after a
        lab drive pull, once more when md has resynced). A read-back that fails or does not run is a problem."""
        vplan = self.vplan
        passes = [verify_mod.make_pass(verify_mod.LOAD, fio_status.last_json(self.fio_out), self.fio_err)] if vplan.enabled else []
        problems: list[str] = []
        if vplan.enabled and self.overrun is not None:
            return verify_mod.VerifyResult(vplan, tuple(passes), (), "the load hung: no read-back (it would wait "
                                           "on the same I/O)" if vplan.writes else "")
        if vplan.enabled and vplan.writes:
            passes.append(self.read_pass("read-back after restore", "fault-readback"))
            # a lab drive pull, by QMP or through a target-control hook: the drive went back into the lab's md
            if self.env.lab is not None and self.scenario.kind == "drive-pull":
                waited = labprep.wait_md_idle(self.env.lab, verify_mod.RESYNC_WAIT_S)
                if waited is None:
                    problems.append(f"md still resyncing after {verify_mod.RESYNC_WAIT_S} s: "
                                    "no read-back after the resync")
                else:
                    self.say(f"md idle after {waited:.0f} s: reading the region back again")
                    passes.append(self.read_pass(f"read-back after md resync ({waited:.0f} s)",
                                                 "fault-readback-resynced"))
        return verify_mod.VerifyResult(vplan, tuple(passes), tuple(problems))

    def read_pass(self, name: str, job: str) -> "verify_mod.Pass":
        """One read-verify pass over the whole region (fio's exit and its errors counted, see verify.make_pass)."""
        back = self.runner.run(verify_mod.readback_argv(self.vplan, self.site.device, job), timeout=1800,
                               host=self.site.host, label=job.replace("fault-", "fio-"))
        return verify_mod.make_pass(name, fio_status.last_json(back.stdout), back.stderr,
                                    "" if back.ok else back.failure("fio read-back"))

    def cleanup(self) -> None:
        """Whatever step stopped: stop the sampler and every background command, undo what is journaled
        (the failures stay in the journal for ``fault restore``)."""
        self.watch.stop()
        self.site.stop_sampling()
        orphans.finish_load(self.journal, self.entry_id, self.load, self.runner,
                            self.fio is not None and self.fio.alive(), self.say)
        for bg in self.background:
            if bg.alive():
                bg.stop(timeout=5)
        failures = undo_all(self.undo, self.env, self.restore_log, self.say, self.restore_failed)
        if failures:
            self.journal.open(self.entry_id, self.scenario.name, failures, str(self.run.path))
        else:
            self.journal.close(self.entry_id)

    def to_node_ms(self, t: float) -> int:
        return int(round((t + self.offset) * 1000))

    def analyse(self) -> dict:
        """The fio logs against the criteria (everything restored by now); the timeline plot and advice."""
        scenario, log_msec = self.scenario, self.scenario.load["log_msec"]
        done = Completions.from_logs(self.logs["clat"])
        iops, bw = done.windows(log_msec)
        if iops.empty and self.overrun is not None:
            return self.hung_results()
        if iops.empty:
            raise ToolError(f"the load completed no I/O: {(self.fio_err.strip().splitlines() or ['?'])[-1]}",
                            hint=f"see {self.run.raw}")
        self.load_start_ms = done.first_issue_ms
        impact = analysis.analyse(iops=iops, bw=bw, hist=self.logs["hist"], fio_json=self.fio_out,
                                  log_msec=log_msec, load_start_ms=self.load_start_ms,
                                  settle_s=scenario.timing["settle_s"], inject_ms=self.to_node_ms(self.inject_t),
                                  restore_ms=self.to_node_ms(self.restore_t),
                                  min_throughput_pct=scenario.criteria["min_throughput_pct"], completions=done,
                                  planned_s=self.planned_load_s,
                                  judged_end_ms=self.to_node_ms(self.restore_t + scenario.timing["recover_s"] + 2))
        self.rebuilt = self.observe_rebuild(done, impact)
        criteria = analysis.criteria(impact, scenario.criteria) + [verify_mod.criterion(self.verified)]
        criteria += [self.seen.criterion()] if self.seen is not None else []
        criteria += rebuild_mod.criteria(self.rebuilt, scenario.criteria) if self.rebuilt else []
        if self.overrun is not None:
            criteria.append(self.overrun.criterion())
        link_advice = None
        if scenario.kind in LINK_KINDS:
            link_advice = advice_mod.advise(self.site.timeouts, impact.longest_stall_s, self.site.live_count(),
                                            scenario.kind)
        png = self.plot(iops, impact, analysis.verdict_word(criteria))
        return self.results(impact, criteria, link_advice, png)

    @property
    def planned_load_s(self) -> float:
        """How long the load was meant to run: its planned runtime, or until it was stopped (md clean)."""
        return self.load_end_t - self.load_started

    def observe_rebuild(self, done: Completions, impact) -> "rebuild_mod.Rebuild | None":
        """The degraded and rebuilding bands of a drive pull (None for other faults)."""
        scenario = self.scenario
        if scenario.kind != "drive-pull":
            return None
        if scenario.rebuild_bound_s <= 0:
            return rebuild_mod.not_observed(0.0, "timing.rebuild_s = 0")
        samples = [{"t_ms": self.to_node_ms(s.t), "md": s.md} for s in self.samples if not s.error]
        hist, base_iops, base_p99 = self.logs["hist"], impact.baseline_iops, impact.baseline_p99_ns

        def measure(start: int, end: int) -> tuple:
            seconds = (end - start) / 1000.0
            count = done.count_between(start, end)
            iops = count / seconds if seconds > 0 else 0.0
            p99 = analysis.p99_between(hist, start, end)
            return (count, iops, 100.0 * iops / base_iops if base_iops else None,
                    done.bytes_between(start, end) / 1e6 / seconds if seconds > 0 else 0.0,
                    p99, p99 / base_p99 if p99 and base_p99 else None, longest_gap(done.t_ms, start, end)[0] / 1000.0)
        end_ms = impact.load_end_ms or (int(done.t_ms[-1]) if len(done) else impact.restore_ms)
        return rebuild_mod.observe(samples, inject_ms=impact.inject_ms, restore_ms=impact.restore_ms,
                                   load_end_ms=end_ms, bound_s=scenario.rebuild_bound_s, measure=measure,
                                   resolution_s=self.options.sample_s / 2 if self.env.lab else self.options.sample_s)

    def hung_results(self) -> dict:
        """The load hung and logged no completion: the hang is the verdict (visible), the rest is not measured."""
        errors, first = analysis.fio_errors(self.fio_out)
        none = dict.fromkeys(("end_ms", "baseline_iops", "window_iops", "baseline_bw_kib", "window_bw_kib",
                              "throughput_pct", "longest_stall_s", "stall_start_ms", "baseline_p99_ns",
                              "window_p99_ns", "p99_ratio", "recover_s", "first_affected_ms"))
        impact = analysis.Impact(log_msec=self.scenario.load["log_msec"], inject_ms=self.to_node_ms(self.inject_t),
                                 restore_ms=self.to_node_ms(self.restore_t), errors=errors, first_error=first,
                                 source="no completion log: the load hung and was stopped", **none)
        self.load_start_ms = None
        self.rebuilt = None
        criteria = analysis.criteria(impact, self.scenario.criteria) + [verify_mod.criterion(self.verified),
                                                                         self.overrun.criterion()]
        criteria += [self.seen.criterion()] if self.seen is not None else []
        return self.results(impact, criteria, None, None)

    def plot(self, iops, impact, word: str):
        log_msec, method = self.scenario.load["log_msec"], self.method
        node_samples = [{"t": s.t + self.offset, "paths": s.paths, "md": s.md} for s in self.samples if not s.error]
        node_events = [{**e, "t": e["t"] + self.offset} for e in self.events]
        return plot.plot_timeline(self.run.path / "timeline.png",
                                  title=f"{self.scenario.name}: {self.scenario.kind} via {method.via} "
                                  f"on {method.target} - {word.upper()}", iops=analysis.dense(iops, log_msec),
                                  hist=self.logs["hist"], start_ms=self.load_start_ms, inject_ms=impact.inject_ms,
                                  restore_ms=impact.restore_ms,
                                  flaps=[(self.to_node_ms(t), up) for t, up in self.flaps],
                                  samples=node_samples, events=node_events,
                                  stall=(impact.longest_stall_s or 0, impact.stall_start_ms),
                                  errors=analysis.error_series(self.fio_out),
                                  bands=rebuild_mod.plot_bands(self.rebuilt))

    def results(self, impact, criteria, link_advice, png) -> dict:
        lab = self.env.lab
        return {
            "dry_run": False, "scenario": self.scenario.to_dict(), "mode": "lab" if lab is not None else "host",
            "lab": lab.name if lab is not None else None, "plan": self.plan.to_dict(),
            "prepared": self.site.prepared, "verdict": analysis.verdict_word(criteria),
            "failed_criteria": [c.name for c in criteria if c.outcome == Outcome.FAIL],
            "criteria": [c.to_dict() for c in criteria],
            "impact": impact.to_dict(), "verify": self.verified.to_dict(),
            "fault_seen": self.seen.to_dict() if self.seen is not None else None,
            "errors_timeline": [list(p) for p in analysis.error_series(self.fio_out)],
            "clock": {"offset_s": self.offset, "uncertainty_s": self.offset_err},
            "instants": {"load_start_ms": self.load_start_ms,
                         "inject_requested_ms": self.to_node_ms(self.inject_requested_t),
                         "inject_ms": impact.inject_ms, "restore_ms": impact.restore_ms,
                         "first_affected_ms": impact.first_affected_ms,
                         "inject_to_first_affected_ms": (impact.first_affected_ms - impact.inject_ms
                                                         if impact.first_affected_ms else None)},
            "flaps": [{"t_ms": self.to_node_ms(t), "up": up} for t, up in self.flaps],
            "timeline": {"changes": timeline.changes(self.samples), "samples": len(self.samples),
                         "events": self.events, "actions": [{"t": t, "text": text} for t, text in self.env.events]},
            "live_paths_before": len(self.site.live), "timeouts": self.site.timeouts,
            "advice": link_advice.to_dict() if link_advice else None,
            "restore_log": self.restore_log, "restore_failed": self.restore_failed,
            "png": str(png) if png else None, "fio_stderr_tail": self.fio_err[-2000:],
            "load_hung": self.overrun.to_dict() if self.overrun else None,
            "rebuild": self.rebuilt.to_dict() if self.rebuilt else None,
            "lab_drive_timeouts": self.lab_timeouts,
            "load_stopped_local": self.load_end_t if self.load_end_t < self.load_started + self.scenario.planned_s + 2
            else None,
            "load_started_local": self.load_started,
        }


STEPS = ("prepare", "start_load", "inject", "restore", "rebuild", "collect")


def execute(plan: Plan, run: RunDir, journal: Journal, options: Options) -> dict:
    """Run the plan step by step (``STEPS``, then ``analyse`` once everything is restored); returns the
    results (verdict, impact, timeline, advice, png). SIGTERM and Ctrl-C restore before exiting."""
    fault_run = FaultRun(plan, run, journal, options)
    old_handlers = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGTERM,)}
    try:
        for step in STEPS:
            getattr(fault_run, step)()
    except KeyboardInterrupt:
        options.progress("interrupted: restoring before exit")
        raise
    finally:
        fault_run.cleanup()
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
    return fault_run.analyse()


def drive_gone_instant(events: list[dict], requested_t: float, deleted_t: float | None) -> float:
    """When a hot-removed drive really went: the array's first block 'remove' uevent after the
    request, else QMP's DEVICE_DELETED instant, else the request itself."""
    gone = [e["t"] for e in events if e.get("node") == "array" and e.get("source") == "uevent"
            and e.get("action") == "remove" and e.get("subsystem") == "block" and e["t"] >= requested_t - 0.5]
    if gone:
        return max(requested_t, min(gone))
    return deleted_t or requested_t


def _lab_device(lab, host: str, nqn: str) -> str:
    for subsys in labprep.host_view(lab, host):
        if subsys["nqn"] == nqn and subsys["namespaces"]:
            return f"/dev/{subsys['namespaces'][0]}"
    raise ToolError(f"{host} has no namespace of {nqn}", hint="is the host connected? fxprobe lab status")


def wait_started(background, timeout: float) -> float:
    """The node's epoch time printed as the first stdout line of a background command."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        first = background.output()[0].split("\n", 1)[0].strip()
        if first and "\n" in background.output()[0]:
            try:
                return float(first.split()[0])
            except ValueError:
                raise ToolError(f"the load did not start: {first[:200]}") from None
        if not background.alive():
            raise ToolError("the load exited at once: " + (background.output()[1].strip().splitlines() or ["?"])[-1])
        time.sleep(0.1)
    raise ToolError(f"the load did not start within {timeout:.0f} s")


def wait_first_status(background, timeout: float) -> float | None:
    """Local time the load really started: the first fio --status-interval dump whose job has run,
    minus that runtime (opening the device and starting the job can take seconds on a slow node);
    None when it has not reported within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = time.time()
        for document in fio_status.json_documents(background.output()[0]):
            runtime_ms = max((job.get(d, {}).get("runtime", 0) or 0 for job in document.get("jobs", [])
                              for d in ("read", "write")), default=0)
            if runtime_ms > 0:
                return now - runtime_ms / 1000.0
        if not background.alive():
            raise ToolError("the load exited at once: " + (background.output()[1].strip().splitlines() or ["?"])[-1])
        time.sleep(0.1)
    return None


def start_listeners(runner: Runner, lab, host, array_host, load_host: str, seconds: float, background: list,
                    say) -> dict:
    """uevent/netlink listeners on the load node (and the array); waits (bounded) until they listen."""
    nodes = [("array", array_host), (load_host, host)] if lab is not None else [("local", LOCAL)]
    argv = ["fxprobe.tools.kernel_events", "--seconds", str(int(seconds))]
    argv = lab.python(*argv) if lab is not None else [sys.executable, "-m", *argv]
    listeners = {}
    for name, node in nodes:
        listeners[name] = runner.start(argv, host=node, label=f"events-{name}")
        background.append(listeners[name])
    deadline = time.monotonic() + 120
    for name, bg in listeners.items():
        while '"started"' not in bg.output()[0] and bg.alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        if '"started"' not in bg.output()[0]:
            say(f"events: the listener on {name} did not start; the timeline has no events from it")
    return listeners


def _fetch_logs(runner: Runner, host, log_dir: str, run: RunDir) -> dict:
    listing = runner.run(["ls", "-1", log_dir], timeout=30, host=host, check=True, label="logs-ls")
    out = {"clat": [], "hist": None}
    for name in sorted(listing.stdout.split()):
        text = runner.run(["cat", f"{log_dir}/{name}"], timeout=120, host=host, check=True, label="log-cat").stdout
        run.write_raw(f"fio-{name}", text)
        if not text.strip():
            continue
        if "_clat." in name:
            out["clat"].append(parse_fio_log(text, name))
        elif "_clat_hist." in name:
            out["hist"] = merge_hist(out["hist"], parse_fio_hist_log(text, name))
    return out


def merge_hist(a, b):
    """One histogram log from several jobs' (rows side by side in time; same coarseness)."""
    if a is None:
        return b
    if a.coarseness != b.coarseness or a.counts.shape[1] != b.counts.shape[1]:
        raise ToolError(f"fio histogram logs {a.source} and {b.source} have different bin layouts")
    import numpy as np
    from fxprobe.tools.fio import FioHistLog
    return FioHistLog(f"{a.source}+{b.source}", np.concatenate([a.time_ms, b.time_ms]),
                      np.concatenate([a.ddir, b.ddir]), np.concatenate([a.bs, b.bs]),
                      np.concatenate([a.counts, b.counts]), a.coarseness)


def undo_all(undo: list[dict], env, restore_log: list[str], say, failed: list[str]) -> list[dict]:
    """Undo every record, last first; a failing step does not stop the others. Returns the failed records; what
    each undo did goes to ``restore_log``, each failure (method: why) to ``failed``."""
    failures = []
    for record in reversed(list(undo)):
        try:
            restore_log.append(methods.restore_from_record(record, env))
        except FxprobeError as exc:
            failures.insert(0, record)
            failed.append(f"{record.get('method')}: {exc}")
            say(f"could not undo {record.get('method')}: {exc} (kept in the journal: fxprobe fault restore)")
        undo.remove(record)
    return failures


def replay_journal(journal: Journal, runner: Runner, progress=print, failed: list[str] | None = None) -> list[str]:
    """``fault restore``: stop orphaned loads first, then undo every open entry, last change first.
    An entry is closed once all of it is undone; a step that fails is kept in the journal, the others
    still run, and what is still broken goes to ``failed``."""
    done = orphans.stop_orphans(journal, runner, progress)
    failed = [] if failed is None else failed
    for entry in journal.entries():
        records = list(entry.get("restores", []))
        kept = []
        for record in reversed(records):
            progress(f"undoing {record.get('method')} (from {entry.get('scenario', '?')}, written {entry.get('written')})")
            try:
                done.append(methods.restore_from_record(record, None, runner))
            except FxprobeError as exc:
                kept.insert(0, record)
                failed.append(f"{record.get('method')} (from {entry.get('scenario', '?')}): {exc}")
                progress(f"FAILED: {failed[-1]}")
            records.remove(record)
            journal.open(entry["id"], entry.get("scenario", "?"), kept + records, entry.get("run_dir", ""))
        if not kept:
            journal.close(entry["id"])
    return done
