"""fio job files from a profile's derivation: plain text a person can run by hand.

A directory target gets one file per chunk (or shard); a raw block device gets the same
bytes back to back (whole-chunk reads over one region, or one region per job for
sequential shards and write-back).
"""

from __future__ import annotations

from dataclasses import dataclass

from fxprobe.core.data import AsDict
from fxprobe.workload.profiles import Derivation

FILENAME_FORMAT = "kv.$jobnum.$filenum"


@dataclass(frozen=True)
class Target(AsDict):
    path: str
    block: bool   # a block device (raw region) rather than a directory


def region_bytes(d: Derivation) -> int:
    """Bytes a raw-device run touches (all jobs together): chunks back to back, no headers."""
    if _per_job_regions(d):
        return d.total_bytes // d.jobs * d.jobs
    return d.file_count * d.block_size


def _per_job_regions(d: Derivation) -> bool:
    """Shards and write-back: each job owns its part; reads of chunks share one region."""
    return d.rw in ("read", "write")


def job_options(d: Derivation, target: Target, *, mode: str = "measure",
                log_prefix: str | None = None, log_msec: int = 1000, hist_log: bool = False) -> list[tuple[str, str]]:
    """The [global] options as (key, value) pairs. ``mode`` is "measure" or "layout". With ``log_prefix``
    the measured job writes bandwidth and IOPS logs of ``log_msec`` windows, and with ``hist_log`` also
    its completion-latency histograms (``PREFIX_clat_hist.N.log``, fio's full bin layout) per window."""
    if mode not in ("measure", "layout"):
        raise ValueError(f"mode must be measure or layout, not {mode!r}")
    opts: list[tuple[str, str]] = []
    layout = mode == "layout"
    if target.block:
        opts.append(("filename", target.path))
        if _per_job_regions(d):
            opts += [("size", str(region_bytes(d) // d.jobs)), ("offset_increment", str(region_bytes(d) // d.jobs))]
        else:
            opts.append(("size", str(region_bytes(d))))
        opts.append(("bs", str(d.block_size)))
        direct = layout or d.writes or d.cold or d.direct
        rw = "write" if layout else d.rw
        if not layout and d.rw == "randread" and d.file_service.startswith("zipf"):
            opts.append(("random_distribution", d.file_service))
    else:
        opts += [("directory", target.path), ("filename_format", FILENAME_FORMAT),
                 ("nrfiles", str(d.files_per_job)), ("filesize", str(d.file_size))]
        if layout:
            opts += [("size", str(d.files_per_job * d.file_size)),
                     ("bs", str(d.file_size if d.rw in ("randread", "randwrite") else d.block_size))]
        else:
            opts.append(("size", str(d.files_per_job * (d.file_size - d.offset))))
            if d.offset:
                opts.append(("offset", str(d.offset)))
            opts.append(("bs", str(d.block_size)))
            opts.append(("file_service_type", d.file_service))
        direct = d.direct and not d.offset
        rw = "write" if layout else d.rw
    opts += [("rw", rw), ("direct", str(int(direct)))]
    if layout:
        opts += [("ioengine", "psync"), ("iodepth", "1"), ("end_fsync", "1")]
    else:
        engine = "libaio" if direct and d.iodepth > 1 else "psync"
        opts += [("ioengine", engine), ("iodepth", str(d.iodepth if engine == "libaio" else 1)),
                 ("time_based", "1"), ("runtime", f"{d.runtime:g}"), ("ramp_time", f"{d.ramp:g}")]
        if d.writes and not target.block:
            # fresh files every repeat, as a checkpoint or a KV write-back makes them
            opts += [("fallocate", "none"), ("unlink", "1")]
    if log_prefix and not layout:
        opts += [("write_bw_log", log_prefix), ("write_iops_log", log_prefix),
                 ("log_avg_msec", str(log_msec)), ("log_unix_epoch", "1")]
        if hist_log:
            opts += [("write_hist_log", log_prefix), ("log_hist_msec", str(log_msec))]
    return opts


def job_text(d: Derivation, target: Target, *, mode: str = "measure", log_prefix: str | None = None,
             log_msec: int = 1000, jobs: int | None = None, hist_log: bool = False) -> str:
    """A complete fio job file; the derivation is repeated as comments at the top."""
    if jobs is None:
        jobs = 1 if (mode == "layout" and target.block and not _per_job_regions(d)) else d.jobs
    head = [f"; fxprobe {mode} job for profile {d.profile} ({d.kind})"]
    head += [f"; {line}" for line in d.lines]
    if target.block:
        head.append(f"; raw device {target.path}: {region_bytes(d):,} B region, chunks back to back")
    body = ["[global]"] + [f"{k}={v}" for k, v in job_options(d, target, mode=mode, log_prefix=log_prefix,
                                                              log_msec=log_msec, hist_log=hist_log)]
    body += ["", f"[{d.profile if mode == 'measure' else d.profile + '-layout'}]", f"numjobs={jobs}"]
    return "\n".join(head + [""] + body) + "\n"
