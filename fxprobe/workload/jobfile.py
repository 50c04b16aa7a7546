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


@dataclass(frozen=True)
class JobVerify(AsDict):
    """fio verify options of a soak's jobs: the layout (and a write load) writes verify headers holding each
    block's offset every ``interval`` bytes; every read checks them (``backlog``: a write load reads back its
    written blocks this many at a time)."""

    method: str
    interval: int
    backlog: int = 0


MODES = ("measure", "layout", "verify")   # the load; writing the working set; reading it all back once


def engine(d: Derivation, target: Target, mode: str = "measure") -> tuple[bool, str]:
    """(O_DIRECT, ioengine) of a job: psync unless direct with iodepth > 1 (libaio); the layout writes with
    psync, the read-back pass reads direct with libaio."""
    if target.block:
        direct = mode != "measure" or d.writes or d.cold or d.direct
    else:
        direct = d.direct and not d.offset
    if mode == "layout":
        return direct, "psync"
    if mode == "verify":
        return direct, "libaio" if direct else "psync"
    return direct, "libaio" if direct and d.iodepth > 1 else "psync"


def _set_geometry(d: Derivation, verify: JobVerify | None) -> list[tuple[str, str]]:
    """Where the layout and the read-back pass go over a directory's files: whole files, or - when the reads
    begin after a header (fs:// offset) and are verified - from that offset on, block by block, so the verify
    headers sit where the load's reads begin."""
    if verify is not None and d.offset:
        return [("size", str(d.files_per_job * (d.file_size - d.offset))), ("offset", str(d.offset)),
                ("bs", str(d.block_size))]
    return [("size", str(d.files_per_job * d.file_size)),
            ("bs", str(d.file_size if d.rw in ("randread", "randwrite") else d.block_size))]


def verify_interval(d: Derivation) -> int:
    """The verify header spacing: 4 KiB (or 512 B) when every I/O of the layout and the load is a whole number
    of them, else one header per block."""
    sizes = {d.block_size, d.file_size if not d.offset and d.rw in ("randread", "randwrite") else d.block_size}
    return next((size for size in (4096, 512) if all(s % size == 0 for s in sizes)), d.block_size)


def _verify_options(verify: JobVerify, mode: str, writes: bool) -> list[tuple[str, str]]:
    opts = [("verify", verify.method), ("verify_interval", str(verify.interval)), ("verify_state_save", "0")]
    if mode == "layout":
        opts.append(("do_verify", "0"))          # the load and the read-back pass verify
    elif mode == "verify":
        opts.append(("continue_on_error", "all"))
    elif writes and verify.backlog:
        opts.append(("verify_backlog", str(verify.backlog)))
    return opts


def job_options(d: Derivation, target: Target, *, mode: str = "measure",
                log_prefix: str | None = None, log_msec: int = 1000, hist_log: bool = False,
                verify: JobVerify | None = None) -> list[tuple[str, str]]:
    """The [global] options as (key, value) pairs. ``mode`` is "measure", "layout" or "verify" (one pass
    reading the laid-out working set back, checking every verify header: needs ``verify``). With ``log_prefix``
    the measured job writes bandwidth and IOPS logs of ``log_msec`` windows, and with ``hist_log`` also
    its completion-latency histograms (``PREFIX_clat_hist.N.log``, fio's full bin layout) per window."""
    if mode not in MODES or (mode == "verify" and verify is None):
        raise ValueError(f"mode must be one of {', '.join(MODES)} (verify needs a JobVerify), not {mode!r}")
    opts: list[tuple[str, str]] = []
    whole = mode != "measure"      # the layout and the read-back pass cover the working set once
    if target.block:
        opts.append(("filename", target.path))
        if _per_job_regions(d):
            opts += [("size", str(region_bytes(d) // d.jobs)), ("offset_increment", str(region_bytes(d) // d.jobs))]
        elif verify is not None and d.writes:
            # writers sharing one region overwrite each other's blocks, which verify cannot tell from corruption:
            # each writer gets its own part (whole blocks), laid out, loaded and read back alike
            part = region_bytes(d) // d.jobs // d.block_size * d.block_size
            opts += [("size", str(part)), ("offset_increment", str(part))]
        else:
            opts.append(("size", str(region_bytes(d))))
        opts.append(("bs", str(d.block_size)))
        if not whole and d.rw == "randread" and d.file_service.startswith("zipf"):
            opts.append(("random_distribution", d.file_service))
    else:
        opts += [("directory", target.path), ("filename_format", FILENAME_FORMAT),
                 ("nrfiles", str(d.files_per_job)), ("filesize", str(d.file_size))]
        if whole:
            opts += _set_geometry(d, verify)
        else:
            opts.append(("size", str(d.files_per_job * (d.file_size - d.offset))))
            if d.offset:
                opts.append(("offset", str(d.offset)))
            opts.append(("bs", str(d.block_size)))
            opts.append(("file_service_type", d.file_service))
    direct, ioengine = engine(d, target, mode)
    rw = {"layout": "write", "verify": "read"}.get(mode, d.rw)
    opts += [("rw", rw), ("direct", str(int(direct)))]
    if mode == "layout":
        opts += [("ioengine", ioengine), ("iodepth", "1"), ("end_fsync", "1")]
    elif mode == "verify":
        opts += [("ioengine", ioengine), ("iodepth", "8" if ioengine == "libaio" else "1")]
    else:
        opts += [("ioengine", ioengine), ("iodepth", str(d.iodepth if ioengine == "libaio" else 1)),
                 ("time_based", "1"), ("runtime", f"{d.runtime:g}"), ("ramp_time", f"{d.ramp:g}")]
        if d.writes and not target.block:
            # fresh files every repeat, as a checkpoint or a KV write-back makes them
            opts += [("fallocate", "none"), ("unlink", "1")]
    if verify is not None:
        opts += _verify_options(verify, mode, d.writes)
    if log_prefix and mode == "measure":
        opts += [("write_bw_log", log_prefix), ("write_iops_log", log_prefix),
                 ("log_avg_msec", str(log_msec)), ("log_unix_epoch", "1")]
        if hist_log:
            opts += [("write_hist_log", log_prefix), ("log_hist_msec", str(log_msec))]
    return opts


def job_text(d: Derivation, target: Target, *, mode: str = "measure", log_prefix: str | None = None,
             log_msec: int = 1000, jobs: int | None = None, hist_log: bool = False,
             verify: JobVerify | None = None) -> str:
    """A complete fio job file; the derivation is repeated as comments at the top."""
    if jobs is None:
        jobs = 1 if (mode != "measure" and target.block and not _per_job_regions(d)
                     and not (verify is not None and d.writes)) else d.jobs
    head = [f"; fxprobe {mode} job for profile {d.profile} ({d.kind})"]
    head += [f"; {line}" for line in d.lines]
    if target.block:
        head.append(f"; raw device {target.path}: {region_bytes(d):,} B region, chunks back to back")
    body = ["[global]"] + [f"{k}={v}" for k, v in job_options(d, target, mode=mode, log_prefix=log_prefix,
                                                              log_msec=log_msec, hist_log=hist_log, verify=verify)]
    body += ["", f"[{d.profile if mode == 'measure' else d.profile + '-' + mode}]", f"numjobs={jobs}"]
    return "\n".join(head + [""] + body) + "\n"
