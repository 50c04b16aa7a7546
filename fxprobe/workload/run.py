"""Run a profile with fio: lay data out (not timed), drop caches for cold profiles, discard
the ramp, check steady state, repeat, and report honest statistics.

One node or many: several nodes run through fio's own client/server mode (``fio --server``
on each node, started through its ``fxprobe.core.hosts`` host; ``fio --client`` here). Percentiles
always come from json+ bins merged across jobs, repeats and hosts.
"""

from __future__ import annotations

import math
import socket
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field, asdict, replace
from pathlib import Path
from typing import Callable, Sequence

from fxprobe.core.data import AsDict
from fxprobe.core.errors import BadInput, NotRunnable, ToolError
from fxprobe.core.hosts import LocalHost
from fxprobe.workload.jobfile import engine, job_text, region_bytes
from fxprobe.workload.profiles import Derivation, Profile, human_bytes
from fxprobe.core.runner import Background, Runner
from fxprobe.core.status import Figures, Status
from fxprobe.core.verdict import Criterion, Verdict
from fxprobe.host.safety import TargetCheck
from fxprobe.tools.blockdev import SystemView
from fxprobe.tools import dpkg, fio, fio_logs, procs
from fxprobe.tools.fio import Node
from fxprobe.workload import cache, common_span, fleet
from fxprobe.workload.cache import CacheDrop
from fxprobe.workload.plan import plan_run

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
REPEAT_DIFF_LIMIT_PCT = 5.0


@dataclass(frozen=True)
class SteadyCheck(AsDict):
    attained: bool
    tolerance_pct: float
    max_deviation_pct: float | None
    slope_pct_per_s: float | None
    window_s: float
    samples: int
    detail: str


@dataclass(frozen=True)
class Spread(AsDict):
    """Mean, spread and coefficient of variation over repeats."""

    values: tuple[float, ...]
    mean: float
    stdev: float
    minimum: float
    maximum: float
    spread_pct: float         # (max - min) / mean
    cv_pct: float             # stdev / mean
    max_pair_diff_pct: float  # the largest |a - b| / min(a, b) over pairs of repeats
    flagged: bool             # two repeats differ by more than REPEAT_DIFF_LIMIT_PCT


def spread(values: Sequence[float], limit_pct: float = REPEAT_DIFF_LIMIT_PCT) -> Spread:
    values = tuple(float(v) for v in values)
    if not values:
        raise ValueError("no values")
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if len(values) > 1 else 0.0
    low, high = min(values), max(values)
    pair = (high - low) / low * 100 if low > 0 else (0.0 if high == 0 else math.inf)
    return Spread(values, mean, stdev, low, high, (high - low) / mean * 100 if mean else 0.0,
                  stdev / mean * 100 if mean else 0.0, pair, pair > limit_pct)


@dataclass(frozen=True)
class RepeatResult:
    index: int
    bw_bytes: float
    iops: float
    io_bytes: int
    per_node_bw: dict
    steady: SteadyCheck
    percentiles_ns: dict
    series: tuple[tuple[int, float], ...]   # (epoch ms, bytes/s) summed over jobs and nodes
    iops_series: tuple[tuple[int, float], ...]
    job_file: str
    cache: str
    cache_drops: tuple[CacheDrop, ...] = ()                 # a cold profile: each node's drop before it
    bins: dict = field(default_factory=dict, repr=False)
    per_node_iops: dict = field(default_factory=dict)
    node_bins: dict = field(default_factory=dict, repr=False)     # node -> its json+ bins
    stragglers: fleet.Stragglers | None = None                    # two or more nodes
    common_span: common_span.CommonSpan | None = None             # two or more nodes (written in the run's concurrent)

    def to_dict(self) -> dict:
        data = asdict(self)
        data.pop("bins")
        data.pop("node_bins")
        data.pop("common_span")
        data["series"] = [list(p) for p in self.series]
        data["iops_series"] = [list(p) for p in self.iops_series]
        data["percentiles_ns"] = {f"p{k:g}": v for k, v in self.percentiles_ns.items()}
        return data


@dataclass(frozen=True)
class WorkloadResult:
    profile: str
    target: str
    direction: str
    derivation: Derivation
    target_check: TargetCheck
    nodes: tuple[str, ...]
    layout: str
    repeats: tuple[RepeatResult, ...]
    bandwidth: Spread
    iops: Spread
    percentiles_ns: dict            # from bins merged over jobs, repeats and nodes
    latency_samples: int
    steady_attained: int            # repeats whose steady state was attained
    per_node_bw: dict               # node -> mean bytes/s over repeats
    slowest_node: str | None
    ceiling_bps: float | None
    fraction_of_ceiling: float | None   # two or more nodes: the common-span aggregate's (concurrent), else bandwidth's
    job_file: str
    notes: tuple[str, ...] = ()
    node_figures: dict = field(default_factory=dict)          # node -> fleet.NodeFigures (two or more nodes)
    hist_logs: fleet.HistLogs | None = None                   # client/server runs: the raw clat_hist logs merged
    concurrent: common_span.Concurrent | None = None          # two or more nodes: what they moved while all ran
    array_seen: tuple[dict, ...] = ()                          # per node: the target's NVMe subsystem (the gates')
    reads_through_cache: bool = False                          # the measure job reads without O_DIRECT
    node_kinds: dict = field(default_factory=dict)             # node -> its host's kind (local, ssh): G3 counts
                                                               # only nodes that are other machines than this one

    def to_dict(self) -> dict:
        return {"profile": self.profile, "target": self.target, "direction": self.direction,
                "derivation": self.derivation.to_dict(), "target_check": self.target_check.to_dict(),
                "nodes": list(self.nodes), "layout": self.layout,
                "repeats": [r.to_dict() for r in self.repeats],
                "bandwidth_bytes": self.bandwidth.to_dict(), "iops": self.iops.to_dict(),
                "percentiles_ns": {f"p{k:g}": v for k, v in self.percentiles_ns.items()},
                "latency_samples": self.latency_samples, "steady_attained": self.steady_attained,
                "per_node_bw_bytes": self.per_node_bw, "slowest_node": self.slowest_node,
                "ceiling_bps": self.ceiling_bps, "fraction_of_ceiling": self.fraction_of_ceiling,
                "job_file": self.job_file, "notes": list(self.notes),
                "reads_through_cache": self.reads_through_cache, "node_kinds": self.node_kinds,
                "node_figures": {k: v.to_dict() for k, v in self.node_figures.items()},
                "hist_logs": self.hist_logs.to_dict() if self.hist_logs else None,
                "concurrent": self.concurrent.to_dict() if self.concurrent else None}

    def lines(self) -> list[str]:
        bw = self.bandwidth
        out = [f"profile {self.profile} on {self.target} ({', '.join(self.nodes)}): {self.direction}",
               f"  layout: {self.layout}"]
        for r in self.repeats:
            out.append(f"  repeat {r.index}: {r.bw_bytes / 1e6:,.1f} MB/s, {r.iops:,.1f} IOPS, "
                       f"p99 {_ms(r.percentiles_ns.get(99.0))}, steady state "
                       f"{'attained' if r.steady.attained else 'NOT attained'} ({r.steady.detail}); cache: {r.cache}")
        what = "bandwidth (the nodes' own rates added)" if self.concurrent else "bandwidth"
        out.append(f"  {what}: mean {bw.mean / 1e6:,.1f} MB/s, spread {bw.spread_pct:.2f} %, "
                   f"CV {bw.cv_pct:.2f} % over {len(bw.values)} repeats"
                   + (f"; FLAG: two repeats differ by {bw.max_pair_diff_pct:.1f} % (> {REPEAT_DIFF_LIMIT_PCT:g} %)"
                      if bw.flagged else f"; repeats within {bw.max_pair_diff_pct:.2f} %"))
        out.append("  latency (merged json+ bins, " + f"{self.latency_samples:,} samples): "
                   + ", ".join(f"p{k:g} {_ms(v)}" for k, v in self.percentiles_ns.items()))
        if self.hist_logs:
            out.append("  " + self.hist_logs.line())
        out.append(f"  steady state attained in {self.steady_attained} of {len(self.repeats)} repeats")
        if len(self.per_node_bw) > 1:
            for node, value in self.per_node_bw.items():
                own = self.node_figures.get(node)
                out.append(f"  node {node}: {value / 1e6:,.1f} MB/s" + (
                    f", {own.iops:,.1f} IOPS, p50 {_ms(own.p50_ns)}, p99 {_ms(own.p99_ns)}" if own else ""))
            out.append(f"  slowest node: {self.slowest_node}")
            out += [f"  repeat {r.index}: {r.stragglers.line()}" for r in self.repeats if r.stragglers]
        if self.concurrent:
            out += [f"  repeat {i}: {s.line()}" for i, s in enumerate(self.concurrent.spans, start=1)]
            out.append(f"  {self.concurrent.line()}")
        elif self.fraction_of_ceiling is not None:
            out.append(f"  aggregate {bw.mean * 8 / 1e9:.2f} Gb/s = {self.fraction_of_ceiling * 100:.1f} % "
                       f"of the {self.ceiling_bps / 1e9:g} Gb/s ceiling")
        out += [f"  note: {n}" for n in self.notes]
        return out


def _ms(ns) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f} ms"


# --------------------------------------------------------------------------- steady state
def steady_state(series: Sequence[tuple[int, float]], tolerance_pct: float, log_msec: int,
                 ios_per_s: float | None = None, min_ios_per_window: int = 20) -> SteadyCheck:
    """Own test on the bw series (fio's ss= would stop the job): the first and last (possibly
    partial) log windows are dropped; windows are merged until each holds about
    ``min_ios_per_window`` I/Os (big chunks complete a few at a time, which is not instability);
    over the last half of the merged windows, every window lies within ``tolerance_pct`` of their mean."""
    values = [v for _, v in series][1:-1]
    group = 1
    if ios_per_s and ios_per_s > 0:
        group = max(1, math.ceil(min_ios_per_window / (ios_per_s * log_msec / 1000)))
        group = min(group, max(1, len(values) // 6))
    merged = [statistics.fmean(values[i:i + group]) for i in range(0, len(values) - group + 1, group)]
    window_ms = log_msec * group
    window = merged[len(merged) // 2:] if len(merged) >= 6 else merged
    span = len(window) * window_ms / 1000
    if len(window) < 3:
        return SteadyCheck(False, tolerance_pct, None, None, span, len(window),
                           f"too few log windows ({len(window)} of {window_ms} ms) to judge; run longer")
    mean = statistics.fmean(window)
    if mean <= 0:
        return SteadyCheck(False, tolerance_pct, None, None, span, len(window), "no bandwidth in the final window")
    deviation = max(abs(v - mean) for v in window) / mean * 100
    xs = [i * window_ms / 1000 for i in range(len(window))]
    slope = statistics.linear_regression(xs, window).slope / mean * 100
    ok = deviation <= tolerance_pct
    return SteadyCheck(ok, tolerance_pct, deviation, slope, span, len(window),
                       f"max deviation {deviation:.1f} % (limit {tolerance_pct:g} %), slope {slope:+.2f} %/s "
                       f"over the last {len(window)} windows of {window_ms} ms")


def ceiling_from_netcheck(results: dict, iface: str | None = None, source: str = "netcheck") -> tuple[float, str]:
    """The line rate (bit/s) of a port in a ``fxprobe netcheck`` results.json: the named
    interface, or the only one that reports a speed."""
    rates = {i.get("name"): i.get("speed_mbps") for i in results.get("interfaces", []) if isinstance(i, dict)}
    known = {name: mbps for name, mbps in rates.items() if isinstance(mbps, int) and mbps > 0}
    if iface is not None:
        if iface not in rates:
            raise BadInput(f"{source}: no interface {iface!r}; checked: {', '.join(map(str, rates)) or 'none'}")
        if iface not in known:
            raise BadInput(f"{source}: interface {iface} reported no speed; give --ceiling in Gb/s")
        name = iface
    elif len(known) == 1:
        name = next(iter(known))
    else:
        raise BadInput(f"{source}: {len(known)} interfaces report a speed "
                       f"({', '.join(f'{n} {m} Mb/s' for n, m in known.items()) or 'none'}); "
                       "name one with --ceiling-iface or give --ceiling")
    return known[name] * 1e6, f"{name} line rate {known[name]:,} Mb/s from {source}"


# --------------------------------------------------------------------------- the run
def _wait_server(address: str, port: int, timeout: float) -> bool:
    """True once something listens at address:port and keeps the connection open. A forwarded
    port (QEMU hostfwd) accepts at once and closes when nothing listens in the guest, so a bare
    connect is not enough: fio's server sends nothing until the client speaks, a dead end closes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=1) as sock:
                sock.settimeout(0.5)
                if sock.recv(1):
                    return True
        except socket.timeout:
            return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


class FioServers:
    """``fio --server`` on every node for the duration of a run (a ``timeout`` guards against leaks).

    A remote server is stopped by its exact command line (``pkill -f -x``: the node needs fio and procps, not
    fxprobe): killing the local ``ssh`` alone would leave it running until the timeout."""

    def __init__(self, runner: Runner, nodes: Sequence[Node], lifetime_s: float):
        self.runner, self.nodes, self.lifetime_s = runner, list(nodes), lifetime_s
        self.servers: list[tuple[Node, list[str], Background]] = []
        dial = [(n.address, n.port) for n in self.nodes]
        if len(set(a for a, _ in dial)) != len(dial):
            raise BadInput("fio client/server: every node needs its own address (fio names the logs it "
                           f"brings back after the address): {', '.join(f'{a}:{p}' for a, p in dial)}")

    def __enter__(self) -> "FioServers":
        try:
            for node in self.nodes:
                dpkg.witness(self.runner, node.host, "fio")       # the fio that measures there: its origin
                server = ["timeout", str(int(self.lifetime_s)), "fio", f"--server={node.listen}"]
                self.servers.append((node, server, self.runner.start(server, host=node.host,
                                                                     label=f"fio-server-{node.name}")))
            if not self.runner.dry_run:
                for node, _, server in self.servers:
                    if not _wait_server(node.address, node.port, 20):
                        out, err = server.output()
                        raise ToolError(f"fio --server on {node.name} ({node.listen}) did not answer at "
                                        f"{node.address}:{node.port}: {(err or out).strip()[-200:] or 'no output'}")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        def stop(entry: tuple) -> None:
            node, argv, server = entry
            if not isinstance(node.host, LocalHost):
                self.runner.run(procs.pkill_argv(argv), timeout=30, host=node.host,
                                label=f"fio-server-stop-{node.name}")
            server.stop(timeout=5)

        with ThreadPoolExecutor(max_workers=max(1, min(len(self.servers), 8))) as pool:   # every node at once
            list(pool.map(stop, self.servers))

    def client_args(self, job_path: str) -> list[str]:
        args: list[str] = []
        for node in self.nodes:
            args += [f"--client=ip:{node.address},{node.port}", job_path]
        return args


def _fio(runner: Runner, job: Path, servers: FioServers | None, timeout: float, label: str) -> fio.FioResult:
    args = servers.client_args(str(job)) if servers else [str(job)]
    result = fio.run_fio(runner, args, timeout=timeout, label=label)
    if not result.jobs:
        raise ToolError(f"{label}: fio reported no jobs (see {job})")
    failed = result.failed_jobs()
    if failed:
        job0 = failed[0]
        where = f" on {job0.hostname}" if job0.hostname else ""
        raise ToolError(f"{label}: fio job {job0.jobname}{where} failed with error {job0.error} "
                        f"({_errno_name(job0.error)})", hint=f"job file {job}")
    return result


def _errno_name(code: int) -> str:
    import errno
    import os
    return f"{errno.errorcode.get(code, '?')}: {os.strerror(code)}"


def run_profile(profile: Profile | str, target: str, *, runner: Runner,
                nodes: Sequence[Node] | None = None, repeats: int | None = None,
                scale: float = 1.0, max_bytes: int | None = None, runtime: float | None = None,
                ramp: float | None = None, overrides: dict | None = None,
                allow: tuple[str, ...] = (), ceiling_bps: float | None = None,
                view: SystemView | None = None, log_msec: int | None = None, layout: bool = True,
                progress: Callable[[str], None] = lambda text: None, status=None,
                status_prefix: str = "") -> WorkloadResult:
    """Run a profile on a target (a directory or a block device) from one or many nodes.

    nodes=None runs fio here directly; a list of Node runs ``fio --client`` against
    ``fio --server`` on each node (one LocalHost node also goes through client/server).
    The target is checked first (safety.check_target); a refused target raises before
    anything is written.
    """
    plan = plan_run(profile, target, nodes=nodes, repeats=repeats, scale=scale, max_bytes=max_bytes,
                    runtime=runtime, ramp=ramp, overrides=overrides, allow=allow, view=view, runner=runner,
                    layout=layout)
    if runner.dry_run:
        raise BadInput("run_profile needs a real runner; use plan_run for a dry run")
    d, the_target, check, node_list = plan.derivation, plan.target, plan.check, list(plan.nodes)
    reason = fio.probe_fio(runner)
    if reason:
        raise NotRunnable(reason)
    log_msec = log_msec or (1000 if d.runtime >= 20 else 250)
    workdir = runner.rundir.raw if runner.rundir else Path(tempfile.mkdtemp(prefix="fxprobe-run-"))
    workdir.mkdir(parents=True, exist_ok=True)
    layout_job = workdir / f"{d.profile}.layout.fio"
    if plan.layout_job:
        layout_job.write_text(plan.layout_job)
    measure_job = workdir / f"{d.profile}.fio"
    measure_job.write_text(plan.measure_job)
    notes: list[str] = []
    per_run = d.ramp + d.runtime
    timeout = per_run * 3 + 120
    status = status or Status("run")
    status.phase(f"{status_prefix}starting", planned_s=per_run * d.repeats, done_s=0.0)
    layout_timeout = 120 + d.total_bytes / 20e6
    servers = None
    if nodes:
        lifetime = layout_timeout + d.repeats * (timeout + 300)
        servers = FioServers(runner, node_list, lifetime)
    results: list[RepeatResult] = []
    direct = engine(d, the_target)[0]
    with servers if servers else nullcontext():
        if d.writes:
            layout = ("none (write profile on a device: the region is overwritten)" if the_target.block else
                      "none (write profile: fio creates fresh files before timing starts and unlinks them after)")
        elif not plan.layout_job:
            layout = "none (reads the data already on the device; nothing is written)"
        else:
            progress(f"laying out {human_bytes(d.total_bytes)} on {target} (not timed)")
            status.phase(f"{status_prefix}layout (not timed)")
            started = time.monotonic()
            _fio(runner, layout_job, servers, layout_timeout, "fio-layout")
            layout = f"{human_bytes(region_bytes(d) if the_target.block else d.total_bytes)} written " \
                     f"in {time.monotonic() - started:.1f} s (not timed)"
        for index in range(1, d.repeats + 1):
            drops = cache.drop_everywhere(runner, node_list) if d.cold else ()
            if drops:
                cache_line = cache.summary(drops, direct)
            elif d.writes:
                cache_line = "write profile: cache not dropped"
            else:
                cache_line = "warm: cache kept"
            notes += [t for t in (x.text() for x in drops if not x.dropped) if t not in notes]
            prefix = f"{d.profile}.r{index}"
            job = workdir / f"{prefix}.fio"
            job.write_text(job_text(d, the_target, log_prefix=str(workdir / prefix), log_msec=log_msec,
                                    hist_log=servers is not None))
            progress(f"repeat {index}/{d.repeats}: {d.ramp:g} s ramp + {d.runtime:g} s")
            status.timed(f"{status_prefix}repeat {index}/{d.repeats}", (index - 1) * per_run, per_run)
            result = _fio(runner, job, servers, timeout, f"fio-{prefix}")
            results.append(replace(_repeat(index, result, d, workdir, prefix, log_msec, cache_line, job, node_list),
                                   cache_drops=drops))
            repeat_figures(status, results[-1])
    hists = sorted(workdir.glob(f"{d.profile}.r*_clat_hist.*.log*")) if servers else []
    return replace(_summarise(d, target, check, node_list, layout, results, ceiling_bps, measure_job, notes, hists),
                   array_seen=plan.array_seen, reads_through_cache=not direct,
                   node_kinds={n.name: n.host.to_dict().get("kind", "?") for n in node_list})


def repeat_figures(status, repeat: RepeatResult) -> None:
    """A finished repeat's figures on the live line: bandwidth per node, IOPS and p99 over the repeat
    (fio's client/server run reports them only at its end)."""
    total = repeat.bw_bytes or 0.0
    for node, bw in repeat.per_node_bw.items():
        status.interval(Figures(node, time.time(), bw=bw, iops=repeat.iops * (bw / total if total else 0.0),
                                p99_ns=repeat.percentiles_ns.get(99.0), p50_ns=repeat.percentiles_ns.get(50.0),
                                p999_ns=repeat.percentiles_ns.get(99.9)))


def _direction(d: Derivation) -> str:
    return "write" if d.writes else "read"


def _repeat(index: int, result: fio.FioResult, d: Derivation, workdir: Path, prefix: str,
            log_msec: int, cache: str, job: Path, nodes: Sequence[Node] = ()) -> RepeatResult:
    direction = _direction(d)
    bins = result.merged_bins(direction)
    labels = {(n.address, n.port): n.label for n in nodes if n.label}
    per_node: dict[str, float] = {}
    per_node_iops: dict[str, float] = {}
    node_bins: dict[str, dict] = {}
    node_io: dict[str, fleet.NodeIO] = {}
    for j in result.jobs:
        stats = j.direction(direction)
        if stats is not None:
            key = (labels.get((j.hostname, j.port)) or f"{j.hostname}:{j.port}") if j.hostname else "local"
            per_node[key] = per_node.get(key, 0.0) + stats.bw_bytes
            per_node_iops[key] = per_node_iops.get(key, 0.0) + stats.iops
            node_bins[key] = fio.merge_bins(node_bins.get(key, {}), stats.clat.bins)
            had = node_io.get(key, fleet.NodeIO(0, 0, 0))
            node_io[key] = fleet.NodeIO(had.io_bytes + stats.io_bytes, had.ios + stats.total_ios,
                                        max(had.runtime_ms, stats.runtime_ms))
    bw_logs = _job_logs(workdir, f"{prefix}_bw")
    series = fio_logs.fleet_series(bw_logs, log_msec).pairs()
    iops_series = fio_logs.fleet_series(_job_logs(workdir, f"{prefix}_iops"), log_msec, factor=1).pairs()
    runtime_s = max((j.direction(direction).runtime_ms for j in result.jobs if j.direction(direction)), default=0) / 1000
    ios = result.total(direction, "total_ios")
    steady = steady_state(series, d.steady_tolerance_pct, log_msec, ios / runtime_s if runtime_s else None)
    io_bytes = int(result.total(direction, "io_bytes"))
    stragglers = span = None
    if len(nodes) > 1:          # per node: the straggler view, and the span in which all nodes ran
        log_labels = _log_labels(nodes)
        bw_by_node = fleet.by_node(bw_logs, log_labels)
        stragglers = fleet.stragglers(node_io, fleet.by_node(_job_logs(workdir, f"{prefix}_clat_hist"), log_labels),
                                      bw_by_node, direction)
        span = common_span.common_span(bw_by_node, list(log_labels.values()), log_msec, direction, io_bytes)
    return RepeatResult(
        index=index, bw_bytes=result.total(direction, "bw_bytes"), iops=result.total(direction, "iops"),
        io_bytes=io_bytes, per_node_bw=per_node, steady=steady,
        percentiles_ns={p: fio.percentile_from_bins(bins, p) for p in PERCENTILES}, series=series,
        iops_series=iops_series,
        job_file=str(job), cache=cache, bins=bins, per_node_iops=per_node_iops, node_bins=node_bins,
        stragglers=stragglers, common_span=span)


def _log_labels(nodes: Sequence[Node]) -> dict[str, str]:
    """The dialed address fio appends to a node's log names -> the node's key in per_node_bw."""
    return {n.address: n.label or f"{n.address}:{n.port}" for n in nodes}


def _job_logs(workdir: Path, stem: str) -> list[Path]:
    """Every job's log (``stem.N.log``, ``stem.N.log.ADDRESS`` from a client/server run), streamed by
    ``fio_logs.fleet_series``. An empty file is a job that completed no I/O inside a log window (a
    big chunk on a slow link): it adds no samples, and the steady-state test then says there were
    too few windows to judge."""
    return sorted(workdir.glob(f"{stem}.*.log*"))


def _summarise(d: Derivation, target: str, check: TargetCheck, nodes: Sequence[Node], layout: str,
               results: list[RepeatResult], ceiling_bps: float | None, job: Path,
               notes: list[str], hists: Sequence[Path] = ()) -> WorkloadResult:
    bins = fio.merge_bins(*(r.bins for r in results))
    percentiles = {p: fio.percentile_from_bins(bins, p) for p in PERCENTILES}
    node_names = sorted({k for r in results for k in r.per_node_bw})
    per_node = {n: statistics.fmean(r.per_node_bw.get(n, 0.0) for r in results) for n in node_names}
    slowest = min(per_node, key=per_node.get) if len(per_node) > 1 else None
    bw = spread([r.bw_bytes for r in results])
    concurrent = common_span.concurrent([r.common_span for r in results], bw.mean, ceiling_bps) \
        if len(nodes) > 1 else None
    fraction = concurrent.fraction_of_ceiling if concurrent else (bw.mean * 8 / ceiling_bps if ceiling_bps else None)
    if bw.flagged:
        notes.append(f"repeats differ by {bw.max_pair_diff_pct:.1f} % (> {REPEAT_DIFF_LIMIT_PCT:g} %): "
                     "the result is not reproducible at the promised 5 %")
    if d.scaled:
        notes.append("working set scaled down: not a full-size run")
    return WorkloadResult(
        profile=d.profile, target=target, direction=_direction(d), derivation=d, target_check=check,
        nodes=tuple(n.name for n in nodes), layout=layout, repeats=tuple(results), bandwidth=bw,
        iops=spread([r.iops for r in results]), percentiles_ns=percentiles,
        latency_samples=sum(bins.values()), steady_attained=sum(r.steady.attained for r in results),
        per_node_bw=per_node, slowest_node=slowest, ceiling_bps=ceiling_bps, fraction_of_ceiling=fraction,
        job_file=str(job), notes=tuple(notes),
        node_figures=fleet.node_figures({n: [r.per_node_bw.get(n, 0.0) for r in results] for n in node_names},
                                        {n: [r.per_node_iops.get(n, 0.0) for r in results] for n in node_names},
                                        {n: [r.node_bins.get(n, {}) for r in results] for n in node_names})
        if len(node_names) > 1 else {},
        hist_logs=fleet.hist_logs(list(hists), _log_labels(nodes), _direction(d), sum(bins.values())),
        concurrent=concurrent)


def run_verdict(result: WorkloadResult) -> Verdict:
    """A run's own verdict: its repeats agree within REPEAT_DIFF_LIMIT_PCT and each reached steady state; a cold
    run read through the page cache also had it dropped on every node before every repeat (:mod:`.cache`)."""
    bw = result.bandwidth
    criteria = [
        Criterion.compare("repeats agree (largest pairwise difference)", bw.max_pair_diff_pct, "<=",
                          REPEAT_DIFF_LIMIT_PCT, unit="%", detail=f"CV {bw.cv_pct:.2f} %"),
        Criterion.compare("steady state attained (repeats)", result.steady_attained, "==", len(result.repeats)),
    ]
    if result.derivation.cold and result.reads_through_cache:
        criteria.append(cache.criterion([r.cache_drops for r in result.repeats]))
    return Verdict(f"run {result.profile}", tuple(criteria))
