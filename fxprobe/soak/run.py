"""A soak run: configuration, state for --resume, orphan handling, and the monitoring loop."""

from __future__ import annotations

import math
import os
import selectors
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import psutil

from fxprobe.host import telemetry
from fxprobe.core.errors import BadInput, NotRunnable, ToolError
from fxprobe.core.rundir import RESULTS, RunDir
from fxprobe.core.runner import Runner
from fxprobe.soak.common import (END_TOLERANCE_S, MAX_RESTARTS, RECORDS, STATE, STATUS_INTERVAL_S, end_tolerance_s,
                                 hms, stamp)
from fxprobe.core.status import Status
from fxprobe.soak.live import ObservedLog
from fxprobe.soak.monitor import Monitor
import fxprobe.soak.verify as soak_verify
from fxprobe.soak.records import (InterruptionRecord, RecordLog, SampleRecord, StartRecord, VerifyRecord, load_records,
                                  repair_tail)
from fxprobe.soak.state import FioJob, FioState, SoakConfig, SoakState
from fxprobe.soak.stream import parse_status_doc
from fxprobe.tools.fio_status import JsonStream
from fxprobe.soak.summary import SoakSummary, summarize
from fxprobe.tools import fio, nvme
from fxprobe.tools.fio_status import LiveFio


def load_state(path: Path) -> tuple[RunDir, SoakState]:
    """Open RUNDIR for --resume; BadInput (one line) when it is not a resumable soak run."""
    run = RunDir.open(path)
    state_path = run.path / STATE
    records = run.path / RECORDS
    if not state_path.exists() or not records.exists():
        raise BadInput(f"{path}: not a soak run (no {STATE} and {RECORDS})",
                       hint="pass the run directory a `fxprobe soak` made")
    state = SoakState.read(state_path)
    if (run.path / RESULTS).exists() and run.results().get("outcome") != "error":   # error: did not finish
        raise BadInput(f"{path}: this soak has finished already (results.json exists)",
                       hint="start a new soak instead of resuming this one")
    owner = _same_process(state.fxprobe_pid, None, None)
    if owner is not None and owner.pid != os.getpid() and "soak" in " ".join(owner.cmdline()):
        raise BadInput(f"{path}: the soak is still running (fxprobe pid {owner.pid})",
                       hint="resume only after it stopped")
    return run, state


def plan_soak(config: SoakConfig, runtime: float | None = None):
    """The profile's job for ``runtime`` (default: the whole period), the target checked before
    anything is written, and a load fio cannot verify refused (BadInput/UnsafeTarget)."""
    from fxprobe.workload.plan import plan_run
    config.validate()
    plan = plan_run(config.profile, config.target, repeats=1, ramp=0, runtime=runtime or config.planned_s,
                    scale=config.scale, max_bytes=config.max_bytes, overrides=config.overrides, allow=config.allow)
    soak_verify.plan_for(plan.derivation, plan.target, config.no_verify_reason)
    return plan


def _same_process(pid: int | None, argv: list[str] | None, create_time: float | None) -> psutil.Process | None:
    """The process ``pid`` if it is still the one recorded (same command line and start time)."""
    if not pid:
        return None
    try:
        process = psutil.Process(pid)
        if argv is not None and process.cmdline() != argv:
            return None
        if create_time is not None and abs(process.create_time() - create_time) > 1.0:
            return None
        return process if process.status() != psutil.STATUS_ZOMBIE else None
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def _stop(process: psutil.Process, group: bool) -> None:
    from fxprobe.tools.procs import wait_gone
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig) if group else process.send_signal(sig)
        except (ProcessLookupError, psutil.NoSuchProcess):
            return
        if not wait_gone([process], 10):
            return


def kill_orphan(fio_state: FioState) -> str:
    """Stop an fio left running by a crashed soak: the main process (its process group) and its
    job processes (fio forks each job into a session of its own), each checked by command line
    and start time before it is signalled."""
    argv = fio_state.argv or None
    stopped = []
    main = _same_process(fio_state.pid, argv, fio_state.create_time)
    if main is not None:
        _stop(main, group=True)
        stopped.append(main.pid)
    for job in fio_state.jobs:
        process = _same_process(job.pid, argv, job.create_time)
        if process is not None:
            _stop(process, group=False)
            stopped.append(process.pid)
    if argv:    # job processes the state did not list yet: every process running exactly this run's fio argv
        from fxprobe.tools.procs import stop_load
        stopped += [pid for pid in stop_load(list(argv))["stopped"] if pid not in stopped]
    if not stopped:
        return "no orphaned fio (it had ended or its pid now belongs to another program)"
    return f"orphaned fio stopped (pids {', '.join(map(str, stopped))})"


def fio_jobs(pid: int) -> list[FioJob]:
    """fio's job processes (children of the main process): pid and start time, for kill_orphan."""
    from fxprobe.tools.procs import children, start_time
    started = [(child, start_time(child)) for child in children(pid)]
    return [FioJob(pid=child, create_time=when) for child, when in started if when is not None]


def _drain(fd: int) -> tuple[bytes, bool]:
    """Everything readable now on a non-blocking pipe, and whether it reached its end."""
    chunks = []
    while True:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return b"".join(chunks), False
        if not data:
            return b"".join(chunks), True
        chunks.append(data)


class Soak:
    """One soak run in a run directory: fresh (``start``) or continued (``resume``)."""

    def __init__(self, run: RunDir, runner: Runner, config: SoakConfig,
                 progress: Callable[[str], None] = lambda text: None, state: SoakState | None = None,
                 status: Status | None = None):
        self.run, self.runner, self.config, self.progress = run, runner, config.validate(), progress
        self.status = status or Status("soak")      # the live line and metrics (no sinks: nothing shown)
        self.live = LiveFio(self.status)
        self.state = state or SoakState(config=config)
        self.log: RecordLog | None = None
        self.monitor = Monitor(config.stall_s)
        self.vplan = soak_verify.SoakVerifyPlan("off", reason="not planned yet")
        self.read_bytes = 0             # read (and verified, when verifying) by the segment's fio so far
        self.started_mono = time.monotonic()    # the segment's start and its last report, on the monotonic clock
        self.last_mono: float | None = None
        self.covered_before = 0.0
        # side readings run in worker threads: reading an NVMe temperature or smart-log sends an
        # admin command, which waits (up to the admin timeout) while a controller reconnects
        self._side = ThreadPoolExecutor(max_workers=2, thread_name_prefix="soak-side")
        self._pending: dict[str, object] = {}

    # -- entry points ------------------------------------------------------------
    def start(self) -> SoakSummary:
        plan = plan_soak(self.config)
        reason = fio.probe_fio(self.runner)
        if reason:
            raise NotRunnable(reason)
        self._verifying(soak_verify.plan_for(plan.derivation, plan.target, self.config.no_verify_reason))
        self.state.baseline_paths = {k: v for k, v in telemetry.path_states().items() if v["state"] == "live"}
        self._save_state()
        self.log = ObservedLog(RecordLog(self.run.path / RECORDS), self.status)
        now = time.time()
        self.log.append({"type": "start", "t": stamp(now), "ts": now, "profile": plan.derivation.profile,
                         "target": self.config.target, "planned_s": self.config.planned_s,
                         "stall_s": self.config.stall_s, "sample_s": self.config.sample_s,
                         "health_s": self.config.health_s, "pid": os.getpid(),
                         "paths": self.state.baseline_paths, "md": telemetry.md_states(),
                         "target_check": plan.check.to_dict(), "verify": self.vplan.to_dict()})
        for line in self.vplan.lines(self.config.target):
            self.progress(line)
        layout = soak_verify.layout_job(plan.derivation, plan.target, self.vplan, plan.layout_job)
        if layout:
            self.status.phase("layout (not timed)", planned_s=self.config.planned_s)
            self.progress(f"laying out the working set on {self.config.target} (not timed)")
            job = self.run.raw_path(f"{plan.derivation.profile}.layout.fio")
            job.write_text(layout)
            fio.run_fio(self.runner, [str(job)], timeout=600 + plan.derivation.total_bytes / 20e6,
                        output_format="json", label="fio-layout")
        return self._loop(0.0)

    def resume(self, orphan: str) -> SoakSummary:
        """Go on after a crash or kill; ``orphan`` is what kill_orphan said (the caller runs it first of all:
        the crashed soak's fio is still loading the target)."""
        path = self.run.path / RECORDS
        repair_tail(path)
        records = load_records(path)
        done = summarize(records)
        start = next((r for r in records if isinstance(r, StartRecord)), None)
        self._verifying(soak_verify.SoakVerifyPlan(**start.verify) if start is not None and start.verify else
                        soak_verify.SoakVerifyPlan("off", reason="the soak was started without data verification"))
        self.monitor.next_id = max([r.id for r in records if isinstance(r, InterruptionRecord)] + [0]) + 1
        self.log = ObservedLog(RecordLog(path), self.status)
        last_ts = max((getattr(r, "end_ts", None) or r.ts or getattr(r, "start_ts", None) or 0) for r in records)
        now = time.time()
        self.log.append({"type": "resume", "t": stamp(now), "ts": now, "pid": os.getpid(), "orphan": orphan,
                         "covered_s": done.duration_s})
        self._verify_stopped_segment(records)
        for item in done.interruptions:
            if item.end is None:
                self.log.append({"type": "interruption-end", "id": item.id, "end": stamp(last_ts), "end_ts": last_ts,
                                 "seconds": None, "detail": "end not observed: fxprobe stopped"})
        self.monitor.count = len(done.interruptions)
        self.log.append(self.monitor.instant("gap", last_ts, now,
                                             f"fxprobe was not running for {now - last_ts:.1f} s (crash or kill); "
                                             f"no load was monitored; {orphan}"))
        self.progress(f"resuming: {hms(done.duration_s)} of {hms(self.config.planned_s)} covered, "
                      f"{orphan}")
        return self._loop(done.duration_s)

    # -- the loop ------------------------------------------------------------------
    def _loop(self, covered: float) -> SoakSummary:
        self.state.fxprobe_pid = os.getpid()
        self._save_state()
        restarts = early = 0
        reason = "planned time covered"
        self.status.phase("load", planned_s=self.config.planned_s, done_s=covered)
        try:
            tolerance = end_tolerance_s(self.config.planned_s)
            while self.config.planned_s - covered > tolerance:
                segment = self.state.segments + 1
                self.covered_before = covered
                ended_early = self._segment(segment, self.config.planned_s - covered)
                # covered as the summary counts it (from the first report showing I/O: opening fio's jobs on a
                # slow node is no load), so the loop never stops short of what the verdict then judges
                covered = summarize(load_records(self.run.path / RECORDS)).duration_s
                left = self.config.planned_s - covered
                if left <= tolerance:
                    break
                restarts += 1                    # fio ended early, or ran its time but opened slowly: topped up
                early += ended_early
                if restarts > MAX_RESTARTS:
                    reason = (f"fio restarted {restarts} times ({early} after it ended early); gave up with "
                              f"{left:.0f} s left")
                    break
                time.sleep(1.0)
            self._collect_side_readings()
            if self.vplan.readback:
                self._read_back()
            now = time.time()
            for key in list(self.monitor.open):
                self.log.append(self.monitor.closed(key, now, "soak ended"))
            self.log.append({"type": "end", "t": stamp(now), "ts": now, "reason": reason})
        finally:
            self._side.shutdown(wait=False, cancel_futures=True)
            self.log.close()
            self.status.close()
        return summarize(load_records(self.run.path / RECORDS))

    def _segment(self, segment: int, remaining_s: float) -> bool:
        """Run fio for ``remaining_s``; returns whether fio ended early (an interruption)."""
        runtime = max(1, math.ceil(remaining_s))
        plan = plan_soak(self.config, runtime)
        job = self.run.raw_path(f"soak.seg{segment}.fio")
        job.write_text(soak_verify.measure_job(plan.derivation, plan.target, self.vplan))
        # json+ gives the live line the interval's p99 (bins); plain JSON when nobody watches
        argv = ["fio", f"--output-format={'json+' if self.status.active else 'json'}",
                f"--status-interval={STATUS_INTERVAL_S:g}", str(job)]
        self.live.reset()
        background = self.runner.start(argv, label=f"fio-soak-seg{segment}", stdout_pipe=True)
        started, self.started_mono = time.time(), time.monotonic()
        try:
            create_time = psutil.Process(background.pid).create_time()
        except psutil.NoSuchProcess:
            create_time = None
        self.state.segments = segment
        self.state.fio = FioState(pid=background.pid, argv=argv, create_time=create_time, segment=segment,
                                  stderr=background.stderr_path.name if background.stderr_path else None)
        self._save_state()
        for record in self.monitor.new_segment(segment, started, self.started_mono):
            self.log.append(record)
        self.log.append({"type": "segment", "seg": segment, "t": stamp(started), "ts": started,
                         "mono": round(self.started_mono, 3), "planned_s": runtime, "pid": background.pid,
                         "argv": argv})
        first_ts = last_ts = None
        verify_tail = soak_verify.StderrTail(background.stderr_path if self.vplan.enabled else None)
        self.read_bytes, self.last_mono = 0, None
        try:
            first_ts, last_ts = self._watch(background, started, runtime, verify_tail)
        finally:
            if background.alive():
                background.stop(timeout=10)
            background.process.stdout.close()
        code = background.finish()
        ended = time.time()
        if self.vplan.enabled:
            self.log.append(verify_tail.finish().record(ended, stamp(ended), "load", self.read_bytes, segment))
        # fio ended early when its reports (from its start to the last one received, on the monotonic clock: a
        # wall-clock step is not load) cover less than the segment's time
        ran = (self.last_mono - self.started_mono) if last_ts and self.last_mono is not None else 0.0
        ended_early = runtime - ran > min(END_TOLERANCE_S, runtime / 2)
        if ended_early:                                             # an interruption
            _, err = background.output()
            tail = (err.strip().splitlines() or ["no message"])[-1][:200]
            for record in self.monitor.fio_ended(last_ts or started,
                                                 f"fio exited with code {code} after {ended - started:.1f} s; its "
                                                 f"reports cover {ran:.1f} of {runtime} s: {tail}"):
                self.log.append(record)
            if segment == 1 and first_ts is None and code:
                raise ToolError(f"fio could not run the soak load (exit {code}): {tail}",
                                hint=f"job file {job}")
        elif code:
            self.log.append({"type": "note", "t": stamp(ended), "ts": ended,
                             "detail": f"fio exited with code {code} at the end of segment {segment}"})
        return ended_early

    def _watch(self, background, started: float, runtime: float,
               verify_tail: "soak_verify.StderrTail") -> tuple[float | None, float | None]:
        fd = background.process.stdout.fileno()
        os.set_blocking(fd, False)
        stream = JsonStream()
        selector = selectors.DefaultSelector()
        selector.register(fd, selectors.EVENT_READ)
        deadline = started + runtime + max(60.0, runtime * 0.05)
        next_path = next_telemetry = next_jobs = started
        main_gone = None
        next_health = started + min(self.config.health_s, 60.0)
        next_progress = started + 1.0
        first_ts = last_ts = None
        eof = False
        try:
            while not eof:
                selector.select(timeout=0.5)
                data, eof = _drain(fd)
                for point in self._observe(stream.feed(data) if data else [], verify_tail):
                    first_ts = first_ts or point.ts
                    last_ts = point.ts
                now = time.time()
                for record in self.monitor.tick(now, time.monotonic()):
                    self.log.append(record)
                if now >= next_jobs and background.alive():
                    next_jobs = now + (10.0 if self._track_jobs(background.pid) else 0.5)
                if not background.alive() and not eof:
                    # fio's main process is gone; job processes holding the pipe are stopped
                    main_gone = main_gone or now
                    if now - main_gone > 2.0:
                        kill_orphan(FioState(argv=self.state.fio.argv, jobs=self.state.fio.jobs))
                if now >= next_path:
                    next_path = now + 1.0
                    self._check_paths(now)
                self._collect_side_readings()
                if now >= next_telemetry and "telemetry" not in self._pending:
                    next_telemetry = now + self.config.sample_s
                    self._pending["telemetry"] = self._side.submit(self._telemetry, now)
                if now >= next_health and "health" not in self._pending:
                    next_health = now + self.config.health_s
                    self._pending["health"] = self._side.submit(self._health)
                if now >= next_progress:
                    next_progress = now + min(60.0, max(1.0, self.config.planned_s / 100))
                    self._progress(started, last_ts)
                if now > deadline:
                    self.log.append({"type": "note", "t": stamp(now), "ts": now,
                                     "detail": f"fio still running {now - started - runtime:.0f} s after its "
                                               "runtime: stopped"})
                    break
        finally:
            selector.close()
        for text in stream.skipped:
            self.log.append({"type": "note", "t": stamp(time.time()), "ts": time.time(),
                             "detail": f"not JSON on fio's stdout: {text}"})
        return first_ts, last_ts

    def _observe(self, docs: list, verify_tail: "soak_verify.StderrTail") -> list:
        """fio's status documents as samples (and interruptions); the verify failures fio printed so far are
        read after the documents, so they hold at least those the documents count as errors."""
        mismatches = verify_tail.poll() if docs else verify_tail.bad_reads
        points = []
        for doc in docs:
            point = parse_status_doc(doc)
            self.live.doc(doc)
            self.read_bytes = point.read_bytes
            self.last_mono = time.monotonic()
            for record in self.monitor.observe(point, time.time(), mismatches, self.last_mono):
                self.log.append(record)
            points.append(point)
        return points

    # -- verification --------------------------------------------------------------
    def _verifying(self, plan: "soak_verify.SoakVerifyPlan") -> None:
        self.vplan = plan
        self.monitor.verifying = plan.enabled

    def _verify_stopped_segment(self, records: list) -> None:
        """After a crash: the verify record of the segment whose fxprobe was killed, from that fio's stderr file
        (complete: the orphaned fio was stopped first) and its last sample - verification goes on from there."""
        seg, name = self.state.fio.segment, self.state.fio.stderr
        if not self.vplan.enabled or not seg or not name:
            return
        if any(isinstance(r, VerifyRecord) and r.seg == seg for r in records):
            return
        samples = [r for r in records if isinstance(r, SampleRecord) and r.seg == seg]
        verified = (samples[-1].verified or 0) if samples else 0
        tail = soak_verify.StderrTail(self.run.raw / name).finish()
        now = time.time()
        self.log.append(tail.record(now, stamp(now), "load (read after the restart)", verified, seg))

    def _read_back(self) -> None:
        """One pass reading the whole working set back after the load, every block checked (not timed); its
        unreadable blocks (fio's errors beyond its verify failures) and the bytes it read against the working set
        go into its verify record, and a pass that failed says why (``problem``: the criterion is then an ERROR)."""
        plan = plan_soak(self.config, 1)
        job = self.run.raw_path(f"{plan.derivation.profile}.readback.fio")
        job.write_text(soak_verify.readback_job(plan.derivation, plan.target, self.vplan))
        self.status.phase("read-back (not timed)", planned_s=self.config.planned_s, done_s=self.config.planned_s)
        self.progress(f"reading the working set on {self.config.target} back, every block checked (not timed)")
        done = self.runner.run(["fio", "--output-format=json", str(job)],
                               timeout=600 + plan.derivation.total_bytes / 20e6, label="fio-readback")
        tail = soak_verify.StderrTail(None)
        tail.feed(done.stderr or "")
        tail.finish()
        now = time.time()
        record = tail.record(now, stamp(now), "read-back after the load", 0)
        extra = soak_verify.readback_outcome(done.stdout, done.stderr, None if done.ok else done.failure("fio"),
                                             tail.bad_reads, soak_verify.job_bytes(job.read_text()))
        self.log.append({**record, **extra})

    def _check_paths(self, now: float) -> None:
        """A path lost (or back) since the soak started is an interruption opened (or closed)."""
        states = telemetry.path_states()
        for record in self.monitor.paths(self.state.baseline_paths, states, now):
            self.log.append(record)
        self.status.health(paths={name: path.get("state") for name, path in states.items()})

    def _track_jobs(self, pid: int) -> list[FioJob]:
        """fio's job processes, saved in the state when they changed (kill_orphan finds them after a crash)."""
        jobs = fio_jobs(pid)
        if jobs and jobs != self.state.fio.jobs:
            self.state.fio.jobs = jobs
            self._save_state()
        return jobs

    # -- side readings ----------------------------------------------------------
    def _collect_side_readings(self) -> None:
        for key, future in list(self._pending.items()):
            if future.done():
                del self._pending[key]
                record = future.result()
                if record:
                    self.log.append(record)

    def _telemetry(self, now: float) -> dict:
        return {"type": "telemetry", "t": stamp(now), "ts": now, "host": telemetry.host_counters(),
                "nvme_temp_c": telemetry.nvme_temperatures(), "paths": telemetry.path_states(),
                "md": telemetry.md_states()}

    def _health(self) -> dict | None:
        """``nvme smart-log`` of the live controllers (in a worker thread: a slow controller
        must not hold up stall and path detection)."""
        live = [name for name, path in telemetry.path_states().items() if path["state"] == "live"]
        if not live or nvme.probe_nvme_cli(self.runner):
            return None
        smart = telemetry.smart_logs(self.runner, controllers=live)
        now = time.time()
        return {"type": "health", "t": stamp(now), "ts": now, "smart": smart}

    def _progress(self, started: float, last_ts: float | None) -> None:
        elapsed = self.covered_before + ((self.last_mono - self.started_mono) if last_ts and self.last_mono else 0.0)
        bw = self.monitor.last_bw
        if self.status.active:          # the status line says it (one line per interval off a terminal)
            self.status.progress(elapsed)
            return
        self.progress(f"soak: elapsed {hms(elapsed)}, remaining {hms(self.config.planned_s - elapsed)}, "
                      f"{(bw or 0) / 1e6:,.1f} MB/s, interruptions so far {self.monitor.count}")

    def _save_state(self) -> None:
        self.state.write(self.run.path / STATE)
