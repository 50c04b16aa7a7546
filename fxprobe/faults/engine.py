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
from dataclasses import dataclass

from fxprobe.core.errors import BadInput, FxprobeError, ToolError, UnsafeTarget
from fxprobe.faults import advice as advice_mod
from fxprobe.faults import analysis, labprep, methods, orphans, plot, timeline
from fxprobe.faults import verify as verify_mod
from fxprobe.faults.completions import Completions
from fxprobe.faults.journal import Journal
from fxprobe.faults.live import LoadWatch
from fxprobe.faults.scenario import Scenario
from fxprobe.core.hosts import LOCAL
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.tools.fio import parse_fio_hist_log, parse_fio_log
from fxprobe.core.verdict import Outcome
from fxprobe.host.safety import TargetCheck, check_load_target

LINK_KINDS = ("link-down", "link-flap", "path-loss", "port-disable")


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
    load_check: TargetCheck | None = None     # host/safety.check_load_target of the load, made once
    allow_visible: bool = False

    def to_dict(self) -> dict:
        return {"scenario": self.scenario.name, "kind": self.scenario.kind, "via": self.method.via,
                "target": self.method.target, "lines": self.lines, "refusals": self.refusals,
                "load_check": self.load_check.to_dict() if self.load_check else None}

    def require_safe_load(self) -> None:
        """Raise the load check's refusal (exit 2): a real run before it touches anything, a dry run after
        showing its plan - the same check either way."""
        if self.load_check is not None:
            self.load_check.require_safe()

    def require_allowed(self) -> None:
        """Raise the redundancy refusal (exit 2) unless --allow-visible: a real run before it touches
        anything, a dry run after showing its plan - the same check either way."""
        if self.refusals and not self.allow_visible:
            raise UnsafeTarget(f"refusing {self.scenario.kind} on {self.method.target}: {self.refusals[0]}; "
                               f"nothing injected", hint="for a planted negative test add --allow-visible")


def _iso_ms(stamp: str) -> float:
    return dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc).timestamp()


def load_argv(scenario: Scenario, device: str, log_dir: str, output: str = "json") -> list[str]:
    load = scenario.load
    runtime = int(round(scenario.total_s + 2))
    prefix = f"{log_dir}/load"
    filename = verify_mod.load_filename(verify_mod.plan_for(load), device)
    return ["fio", "--name=fault-load", f"--filename={filename}", f"--rw={load['rw']}", f"--bs={load['bs']}",
            f"--iodepth={load['iodepth']}", f"--numjobs={load['numjobs']}", "--ioengine=libaio", "--direct=1",
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
    refusals = [] if scenario.lab["paths"] == 1 and lab is not None and scenario.kind in LINK_KINDS else method.refusals()
    lines = []
    if lab is not None:
        lines.append(f"lab {lab.name}: load on {env.load_host} against export {scenario.lab['export']}"
                     + (f" ({env.nqn})" if env.nqn else " (built first)"))
    else:
        lines.append(f"this host: load against {scenario.load['target']}")
    t = scenario.timing
    lines.append(f"load: fio {scenario.load['rw']} bs={scenario.load['bs']} iodepth={scenario.load['iodepth']} "
                 f"for {scenario.total_s + 2:g} s, logs every {scenario.load['log_msec']} ms")
    vplan = verify_mod.plan_for(scenario.load)
    lines += vplan.lines(scenario.load["target"] or f"export {scenario.lab['export']}")
    lines.append(f"at +{t['steady_s']:g} s inject {scenario.kind} via {method.via} on {method.target}; "
                 f"restore at +{t['steady_s'] + t['fault_s']:g} s; keep loading {t['recover_s']:g} s")
    lines += [f"  {line}" for line in method.plan()]
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
    lines += [f"REFUSED{' (allowed by --allow-visible)' if options.allow_visible else ''}: {r}" for r in refusals]
    plan = Plan(scenario, method, lines, refusals, env, load_check, allow_visible=options.allow_visible)
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


def execute(plan: Plan, run: RunDir, journal: Journal, options: Options) -> dict:
    """Run the plan; returns the results (verdict, impact, timeline, advice, png)."""
    scenario, method, env = plan.scenario, plan.method, plan.env
    runner, lab, say = env.runner, env.lab, options.progress
    entry_id = f"{run.path.name}-{uuid.uuid4().hex[:6]}"
    undo: list[dict] = []

    def remember(record: dict) -> None:
        undo.append(record)
        journal.open(entry_id, scenario.name, undo, str(run.path))

    old_handlers = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGTERM,)}
    restore_log: list[str] = []
    background = []
    sampler = None
    watch = LoadWatch(options.status)
    fio = load = None
    try:
        prep_lines: list[str] = []
        if lab is not None:
            env.nqn, prep_lines = labprep.prepare(lab, scenario.lab, env.load_host, remember)
            for line in prep_lines:
                say(f"prepared: {line}")
            live = methods.live_paths_lab(lab, env.load_host, env.nqn)
            device = _lab_device(lab, env.load_host, env.nqn)
            getattr(method, "before_load", lambda: None)()   # e.g. corrupt: find the member while nothing runs
            if not plan.refusals and not options.allow_visible:
                refusals = method.refusals()
                if refusals:
                    raise UnsafeTarget(f"refusing {scenario.kind} on {method.target}: {refusals[0]}; nothing injected",
                                       hint="for a planted negative test add --allow-visible")
            timeouts = _remote_timeouts(lab, env.load_host, env.nqn)
        else:
            host, device = LOCAL, scenario.load["target"]
            live = []
            timeouts = advice_mod.read_timeouts(scenario.fault.get("nqn"))
        if lab is not None:
            host, array_host = labprep.fast_guest(lab, env.load_host), labprep.fast_guest(lab, "array")
        else:
            array_host = LOCAL
        offset, offset_err = clock_offset(runner, host)
        log_dir = f"/tmp/fxprobe-fault-{entry_id}"
        runner.run(["mkdir", "-p", log_dir], timeout=30, host=host, check=True, label="logdir")
        listeners = start_listeners(runner, lab, host, array_host, env.load_host, scenario.total_s + 90, background, say)
        loops = {}
        if lab is not None:   # sampling loops in the guests: no SSH round trip per sample
            for name, node, script in ((env.load_host, host, labprep._HOST_SCRIPT),
                                       ("array", array_host, labprep._ARRAY_SCRIPT)):
                loops[name] = runner.start(labprep.sampling_loop(script, scenario.total_s + 90, options.sample_s / 2),
                                           host=node, label=f"sample-{name}")
                background.append(loops[name])
        else:
            sampler = timeline.Sampler(timeline.local_snapshot(scenario.fault.get("nqn")), options.sample_s).start()
        vplan = verify_mod.plan_for(scenario.load)
        if vplan.enabled:
            say(f"layout: {vplan.region_bytes / 2**20:g} MiB of {device} with verify={vplan.method} headers")
            laid = runner.run(verify_mod.layout_argv(vplan, device), timeout=1800, host=host, label="fio-layout")
            if not laid.ok:
                raise ToolError(laid.failure("fio layout"))
        argv = load_argv(scenario, device, log_dir, "json+" if watch.status.active else "json")   # json+: live p99
        say(f"load: {shlex.join(argv).replace(':'.join([device] * verify_mod.PASSES), f'{device}:... ({verify_mod.PASSES} x)')}")
        fio = runner.start(["sh", "-c", 'echo "$(date +%s.%N) $$"; exec "$@"', "fxprobe-load", *argv], host=host,
                           label="fio-load")
        background.append(fio)
        watch = LoadWatch(options.status, fio, scenario.total_s + 2, env.load_host if lab is not None else "local").start()
        wait_started(fio, 120)
        load = orphans.record_load(journal, entry_id, lab, env.load_host, orphans.start_line_pid(fio), argv,
                                   scenario.name, str(run.path))
        load_started = wait_first_status(fio, 180)
        time.sleep(max(0.0, load_started + scenario.timing["steady_s"] - time.time()))
        remember(method.restore_record())     # journaled (fsync) before the fault happens
        say(f"inject: {scenario.kind} via {method.via} on {method.target}")
        inject_t = env.note(f"inject {scenario.kind}")
        watch.fault(scenario.kind, f"via {method.via} on {method.target}")
        flaps: list[tuple[float, bool]] = []
        if isinstance(method, methods.LabLinkFlap):
            flaps = method.flap(scenario.timing["fault_s"])
            restore_t = flaps[-1][0] if flaps else time.time()
            restore_log.append(f"link {method.n} left up after flapping")
        else:
            method.inject()
            if isinstance(method, methods.LabDrivePull):
                pulled = lab.drive(method.slot).pulled
                deleted_t = _iso_ms(pulled) if pulled else None   # QMP DEVICE_DELETED (after the guest let go)
            time.sleep(max(0.0, scenario.timing["fault_s"] - (time.time() - inject_t)))
            say("restore")
            restore_t = time.time()
            restore_log.append(methods.restore_from_record(undo[-1], env))
        watch.restored(restore_log[-1] if restore_log else "restored")
        undo.pop()
        journal.open(entry_id, scenario.name, undo, str(run.path))
        fio.wait(timeout=scenario.timing["recover_s"] + scenario.total_s + 120)
        samples = sampler.stop() if sampler is not None else []
        sampler = None
        for bg in background:
            bg.stop(timeout=5)
        fio_out, fio_err = fio.output()
        passes = [verify_mod.make_pass("load", analysis.last_json(fio_out), fio_err)] if vplan.enabled else []
        verify_problems: list[str] = []
        if vplan.enabled and vplan.writes:   # the load wrote: read the whole region back after the restore
            back = runner.run(verify_mod.readback_argv(vplan, device), timeout=1800, host=host, label="fio-readback")
            passes.append(verify_mod.make_pass("read-back after restore", analysis.last_json(back.stdout),
                                               back.stderr))
            if lab is not None and isinstance(method, methods.LabDrivePull):   # and once md has resynced
                waited = labprep.wait_md_idle(lab, verify_mod.RESYNC_WAIT_S)
                if waited is None:
                    verify_problems.append(f"md still resyncing after {verify_mod.RESYNC_WAIT_S} s: "
                                           "no read-back after the resync")
                else:
                    say(f"md idle after {waited:.0f} s: reading the region back again")
                    back = runner.run(verify_mod.readback_argv(vplan, device, "fault-readback-resynced"),
                                      timeout=1800, host=host, label="fio-readback-resynced")
                    passes.append(verify_mod.make_pass(f"read-back after md resync ({waited:.0f} s)",
                                                       analysis.last_json(back.stdout), back.stderr))
        verified = verify_mod.VerifyResult(vplan, tuple(passes), tuple(verify_problems))
        early = verify_mod.ended_early(vplan, analysis.load_runtime_ms(fio_out), scenario.total_s + 2)
        if early:
            raise ToolError(early, hint=f"see {run.raw}")
        logs = _fetch_logs(runner, host, log_dir, run)
        runner.run(["rm", "-rf", log_dir], timeout=30, host=host, label="logdir-rm")
        events = []
        array_offset = clock_offset(runner, array_host)[0] if lab is not None else 0.0
        for name, bg in listeners.items():
            node_offset = offset if name in (env.load_host, "local") else array_offset
            events += [{**e, "node": name} for e in timeline.parse_event_lines(bg.output()[0], node_offset)]
        events.sort(key=lambda e: e["t"])
        if loops:
            samples = timeline.merge_node_samples(
                labprep.parse_sampling(loops[env.load_host].output()[0], labprep.parse_host_view),
                labprep.parse_sampling(loops["array"].output()[0], labprep.parse_array_view),
                env.nqn, offset, array_offset)
        inject_requested_t = inject_t
        if isinstance(method, methods.LabDrivePull):
            inject_t = drive_gone_instant(events, inject_t, deleted_t)
    except KeyboardInterrupt:
        say("interrupted: restoring before exit")
        raise
    finally:
        watch.stop()
        if sampler is not None:
            sampler.stop()
        orphans.finish_load(journal, entry_id, load, runner, fio is not None and fio.alive(), say)
        for bg in background:
            if bg.alive():
                bg.stop(timeout=5)
        failures = undo_all(undo, env, restore_log, say)
        if failures:
            journal.open(entry_id, scenario.name, failures, str(run.path))
        else:
            journal.close(entry_id)
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
    # -- analysis (everything restored by now) --
    log_msec = scenario.load["log_msec"]
    to_node_ms = lambda t: int(round((t + offset) * 1000))
    done = Completions.from_logs(logs["clat"])
    iops, bw = done.windows(log_msec)
    if iops.empty:
        raise ToolError(f"the load completed no I/O: {(fio_err.strip().splitlines() or ['?'])[-1]}",
                        hint=f"see {run.raw}")
    load_start_ms = done.first_issue_ms
    impact = analysis.analyse(iops=iops, bw=bw, hist=logs["hist"], fio_json=fio_out, log_msec=log_msec,
                              load_start_ms=load_start_ms, settle_s=scenario.timing["settle_s"],
                              inject_ms=to_node_ms(inject_t), restore_ms=to_node_ms(restore_t),
                              min_throughput_pct=scenario.criteria["min_throughput_pct"], completions=done,
                              planned_s=int(round(scenario.total_s + 2)))
    criteria = analysis.criteria(impact, scenario.criteria) + [verify_mod.criterion(verified)]
    word = analysis.verdict_word(criteria)
    failed = [c.name for c in criteria if c.outcome == Outcome.FAIL]
    link_advice = None
    if scenario.kind in LINK_KINDS:
        link_advice = advice_mod.advise(timeouts, impact.longest_stall_s, len(live) if lab else
                                        len([c for c in timeouts["controllers"].values() if c.get("state") == "live"]),
                                        scenario.kind)
    node_samples = [{"t": s.t + offset, "paths": s.paths, "md": s.md} for s in samples if not s.error]
    node_events = [{**e, "t": e["t"] + offset} for e in events]
    png = plot.plot_timeline(run.path / "timeline.png", title=f"{scenario.name}: {scenario.kind} via {method.via} "
                             f"on {method.target} - {word.upper()}", iops=analysis.dense(iops, log_msec),
                             hist=logs["hist"], start_ms=load_start_ms, inject_ms=impact.inject_ms,
                             restore_ms=impact.restore_ms, flaps=[(to_node_ms(t), up) for t, up in flaps],
                             samples=node_samples, events=node_events,
                             stall=(impact.longest_stall_s or 0, impact.stall_start_ms),
                             errors=analysis.error_series(fio_out))
    return {
        "dry_run": False, "scenario": scenario.to_dict(), "mode": "lab" if lab is not None else "host",
        "lab": lab.name if lab is not None else None, "plan": plan.to_dict(), "prepared": prep_lines,
        "verdict": word, "failed_criteria": failed, "criteria": [c.to_dict() for c in criteria],
        "impact": impact.to_dict(), "verify": verified.to_dict(),
        "errors_timeline": [list(p) for p in analysis.error_series(fio_out)], "clock": {"offset_s": offset, "uncertainty_s": offset_err},
        "instants": {"load_start_ms": load_start_ms, "inject_requested_ms": to_node_ms(inject_requested_t),
                     "inject_ms": impact.inject_ms, "restore_ms": impact.restore_ms,
                     "first_affected_ms": impact.first_affected_ms,
                     "inject_to_first_affected_ms": (impact.first_affected_ms - impact.inject_ms
                                                     if impact.first_affected_ms else None)},
        "flaps": [{"t_ms": to_node_ms(t), "up": up} for t, up in flaps],
        "timeline": {"changes": timeline.changes(samples), "samples": len(samples), "events": events,
                     "actions": [{"t": t, "text": text} for t, text in env.events]},
        "live_paths_before": len(live), "timeouts": timeouts,
        "advice": link_advice.to_dict() if link_advice else None,
        "restore_log": restore_log, "png": str(png), "fio_stderr_tail": fio_err[-2000:],
        "load_started_local": load_started,
    }


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


def _remote_timeouts(lab, host: str, nqn: str) -> dict:
    import json
    result = lab.runner.run(lab.python("fxprobe.faults.advice", nqn), timeout=60, host=labprep.fast_guest(lab, host),
                            check=True, label="timeouts")
    return json.loads(result.stdout)




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


def wait_first_status(background, timeout: float) -> float:
    """Local time the load really started: the first fio --status-interval dump whose job has run,
    minus that runtime (opening the device and starting the job can take seconds on a slow node)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = time.time()
        for document in analysis.json_documents(background.output()[0]):
            runtime_ms = max((job.get(d, {}).get("runtime", 0) or 0 for job in document.get("jobs", [])
                              for d in ("read", "write")), default=0)
            if runtime_ms > 0:
                return now - runtime_ms / 1000.0
        if not background.alive():
            raise ToolError("the load exited at once: " + (background.output()[1].strip().splitlines() or ["?"])[-1])
        time.sleep(0.1)
    raise ToolError(f"the load did not report within {timeout:.0f} s")


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


def undo_all(undo: list[dict], env, restore_log: list[str], say) -> list[dict]:
    """Undo every record, last first; a failing step does not stop the others. Returns the failures."""
    failures = []
    for record in reversed(list(undo)):
        try:
            restore_log.append(methods.restore_from_record(record, env))
        except FxprobeError as exc:
            failures.insert(0, record)
            restore_log.append(f"FAILED to undo {record.get('method')}: {exc}")
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
