"""Prometheus/OpenMetrics export of a command's live status (fxprobe.core.status) while it runs.

``MetricsSink`` is a status sink: every scrape of ``--metrics-port`` and every rewrite of
``--metrics-file`` (node_exporter textfile format, written atomically: temp file + rename) reads the
latest snapshot. Series (every one labelled ``command`` and, where it applies, ``node``):

    fxprobe_bandwidth_bytes_per_second{node}     fio, last status interval
    fxprobe_iops{node}
    fxprobe_latency_seconds{node,quantile}       summary: p50/p99/p99.9 of the last interval;
                                                 _count/_sum: every completed I/O so far
    fxprobe_io_errors_total{node}
    fxprobe_interruptions_total{kind}            stall, path-lost, io-error, fio-exit, gap, ...
    fxprobe_faults_total{kind}                   faults injected (fault run, planted soak faults)
    fxprobe_path_up{path,state}                  1 per NVMe path and its state; live paths have state="live"
    fxprobe_md_degraded{array,state}             1 when the md array misses a member
    fxprobe_drive_temperature_celsius{drive}
    fxprobe_progress_ratio, fxprobe_eta_seconds, fxprobe_phase_info{phase}, fxprobe_up
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server, write_to_textfile
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from fxprobe.core.errors import BadInput
from fxprobe.core.status import Event, Snapshot

# every kind a soak or fault run records, exported from 0 so that increase() sees the first one
INTERRUPTION_KINDS = ("stall", "path-lost", "io-error", "fio-exit", "gap")
QUANTILES = (("0.5", "p50_ns"), ("0.99", "p99_ns"), ("0.999", "p999_ns"))


def parse_listen(text: str | int) -> tuple[str, int]:
    """``9464`` (every address) or ``127.0.0.1:9464`` -> (address, port); BadInput otherwise."""
    raw = str(text).strip()
    address, _, port = raw.rpartition(":")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise BadInput(f"--metrics-port {text!r}: expected PORT or ADDRESS:PORT with a port 1-65535")
    return address.strip("[]") or "0.0.0.0", int(port)


class _Collector:
    def __init__(self, sink: "MetricsSink"):
        self.sink = sink

    def collect(self):
        snap = self.sink.snapshot
        if snap is None:
            return
        yield from families(snap, time.time())


def families(snap: Snapshot, now: float) -> list:
    """The metric families of one snapshot (pure)."""
    command = snap.command
    up = GaugeMetricFamily("fxprobe_up", "1 while the command runs, 0 once it ended", labels=["command"])
    up.add_metric([command], 0.0 if snap.closed else 1.0)
    out = [up]
    bw = GaugeMetricFamily("fxprobe_bandwidth_bytes_per_second", "Bandwidth over the last status interval "
                           "(fio), bytes/s", labels=["command", "node"])
    iops = GaugeMetricFamily("fxprobe_iops", "I/O operations per second over the last status interval (fio)",
                             labels=["command", "node"])
    lat = Metric("fxprobe_latency_seconds", "Completion latency: quantiles of the last status interval "
                 "(fio's histogram bins), count and sum of every I/O so far", "summary")
    errors = CounterMetricFamily("fxprobe_io_errors", "I/O errors fio counted (continue_on_error)",
                                 labels=["command", "node"])
    for name, f in sorted(snap.nodes.items()):
        labels = [command, name]
        if f.bw is not None:
            bw.add_metric(labels, f.bw)
        if f.iops is not None:
            iops.add_metric(labels, f.iops)
        where = {"command": command, "node": name}
        for quantile, attr in QUANTILES:
            if getattr(f, attr) is not None:
                lat.add_sample("fxprobe_latency_seconds", {**where, "quantile": quantile}, getattr(f, attr) / 1e9)
        lat.add_sample("fxprobe_latency_seconds_count", where, f.ios)
        lat.add_sample("fxprobe_latency_seconds_sum", where, f.lat_sum_ns / 1e9)
        errors.add_metric(labels, f.errors)
    out += [bw, iops, lat, errors]
    interruptions = CounterMetricFamily("fxprobe_interruptions", "Interruptions of the load, by kind",
                                        labels=["command", "kind"])
    for kind in sorted(set(INTERRUPTION_KINDS) | set(snap.interruptions)):
        interruptions.add_metric([command, kind], snap.interruptions.get(kind, 0))
    faults = CounterMetricFamily("fxprobe_faults", "Faults injected, by kind", labels=["command", "kind"])
    for kind, n in sorted(snap.faults.items()):
        faults.add_metric([command, kind], n)
    out += [interruptions, faults]
    paths = GaugeMetricFamily("fxprobe_path_up", "1 when the NVMe path is live, 0 otherwise; state is the "
                              "controller state", labels=["command", "path", "state"])
    for name, state in sorted(snap.paths.items()):
        paths.add_metric([command, name, str(state)], 1.0 if state == "live" else 0.0)
    md = GaugeMetricFamily("fxprobe_md_degraded", "1 when the md array misses a member", labels=["command", "array",
                                                                                                 "state"])
    for name, info in sorted(snap.md.items()):
        md.add_metric([command, name, str(info.get("state") or info.get("health") or "?")], 1.0 if info.get("degraded") else 0.0)
    temps = GaugeMetricFamily("fxprobe_drive_temperature_celsius", "NVMe drive temperature",
                              labels=["command", "drive"])
    for name, value in sorted(snap.temps_c.items()):
        if value is not None:
            temps.add_metric([command, name], float(value))
    out += [paths, md, temps]
    progress = GaugeMetricFamily("fxprobe_progress_ratio", "Share of the planned time covered (0-1)",
                                 labels=["command"])
    eta = GaugeMetricFamily("fxprobe_eta_seconds", "Planned time not yet covered", labels=["command"])
    if snap.fraction is not None:
        progress.add_metric([command], snap.fraction)
        eta.add_metric([command], snap.eta_s(now))
    phase = GaugeMetricFamily("fxprobe_phase_info", "The phase the command is in", labels=["command", "phase"])
    phase.add_metric([command, snap.phase or "starting"], 1.0)
    return out + [progress, eta, phase]


class MetricsSink:
    """Serve (``listen``: (address, port)) and/or write (``path``) the status as Prometheus metrics."""

    def __init__(self, listen: tuple[str, int] | None = None, path: Path | None = None,
                 file_every_s: float = 1.0):
        self.snapshot: Snapshot | None = None
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))
        self.path = Path(path) if path is not None else None
        self.file_every_s = file_every_s
        self._last_file = 0.0
        self._lock = threading.Lock()
        self.server = self.thread = None
        if self.path is not None and not self.path.parent.is_dir():
            raise BadInput(f"--metrics-file {self.path}: folder {self.path.parent} does not exist")
        if listen is not None:
            try:
                self.server, self.thread = start_http_server(listen[1], addr=listen[0], registry=self.registry)
            except OSError as exc:
                raise BadInput(f"--metrics-port {listen[0]}:{listen[1]}: cannot listen ({exc.strerror or exc})") \
                    from None

    @property
    def port(self) -> int | None:
        return self.server.server_port if self.server is not None else None

    def update(self, snapshot: Snapshot, event: Event | None) -> None:
        self.snapshot = snapshot
        if self.path is not None and (event is not None or time.time() - self._last_file >= self.file_every_s):
            self._write()

    def _write(self) -> None:
        with self._lock:
            self._last_file = time.time()
            write_to_textfile(str(self.path), self.registry)

    def close(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        if self.path is not None:
            self._write()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
