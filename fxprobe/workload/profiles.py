"""Workload profiles: a TOML schema a person writes, validated with errors that name the
file, the key and the allowed values; and the derivation of the fio shape (block size,
file size, file count, jobs, iodepth) from what the person knows (model, TP, chunk,
context, concurrency, threads, backend, cold/warm), shown as lines one can check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, asdict, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, model_validator

from fxprobe.core.data import AsDict
from fxprobe.workload import models
from fxprobe.core.errors import BadInput
from fxprobe.core.schema import (ByteSize, InputModel, NonEmptyStr, NonNegativeSeconds, PositiveFloat, PositiveInt,
                                 Seconds, VerifyMethod, size_bytes, validate)
from fxprobe.core.tomlfile import read_toml

PROFILE_DIR = Path(__file__).resolve().parent.parent.parent / "profiles"

WRITE_KINDS = ("kv-write", "checkpoint-write")
FS_HEADER_BYTES = 28      # LMCache fs:// connector metadata header
FIO_MAX_JOBS = 4096       # fio's own limit on job threads/processes
ALIGN = 4096

Kind = Literal["kv-read", "kv-write", "checkpoint-write", "model-load", "small-files"]
Backend = Literal["localdisk", "fs", "block"]
CacheState = Literal["cold", "warm"]
KINDS, BACKENDS, CACHE_STATES = get_args(Kind), get_args(Backend), get_args(CacheState)


class ModelTable(InputModel):
    """[model]: a built-in model by name, or its geometry (layers, kv_heads, head_dim)."""

    name: NonEmptyStr | None = None
    layers: PositiveInt | None = None
    kv_heads: PositiveInt | None = None
    head_dim: PositiveInt | None = None
    kv_dtype: NonEmptyStr | None = None
    weights_bytes: ByteSize | None = None

    @model_validator(mode="after")
    def _known(self):
        for key, check in (("name", models.lookup), ("kv_dtype", models.dtype_bytes)):
            value = getattr(self, key)
            if value is not None:
                try:
                    check(value, source=key)
                except BadInput as exc:
                    raise ValueError(str(exc).partition(": ")[2]) from None
        return self


class KvTable(InputModel):
    """[kv]: how the LMCache deployment reads or writes its KV chunks."""

    tp: PositiveInt | None = None
    instances: PositiveInt | None = None
    shared_pool: bool | None = None
    chunk_tokens: PositiveInt | None = None
    context_tokens: PositiveInt | None = None
    concurrency: PositiveInt | None = None
    threads: PositiveInt | None = None
    backend: Backend | None = None
    cache: CacheState | None = None
    zipf_theta: PositiveFloat | None = None
    odirect: bool | None = None


class IoTable(InputModel):
    """[io]: the fio shape of a bulk profile (checkpoint, model load, small files), or a KV profile's iodepth."""

    total_bytes: ByteSize | None = None
    jobs: PositiveInt | None = None
    block_size: ByteSize | None = None
    file_size: ByteSize | None = None
    file_count: PositiveInt | None = None
    iodepth: PositiveInt | None = None
    direct: bool | None = None
    cache: CacheState | None = None


class RunTable(InputModel):
    """[run]: timing of each repeat."""

    runtime: Seconds | None = None
    ramp: NonNegativeSeconds | None = None
    repeats: PositiveInt | None = None
    steady_tolerance_pct: Annotated[float, Field(gt=0, le=100)] | None = None


class VerifyTable(InputModel):
    """[verify]: how a soak checks that what it reads back is what was written (fio verify headers with their
    offset in every block); "off" only with a reason, which the soak prints."""

    method: VerifyMethod = "crc32c"
    no_verify_reason: str = ""

    @model_validator(mode="after")
    def _reason_to_opt_out(self):
        if self.method == "off" and not self.no_verify_reason.strip():
            raise ValueError('no_verify_reason is required with method = "off": say why the soak does not '
                             "verify its data")
        return self


class ProfileFile(InputModel):
    """A workload profile (profiles/*.toml)."""

    name: NonEmptyStr | None = None
    description: str = ""
    kind: Kind
    model: ModelTable = ModelTable()
    kv: KvTable = KvTable()
    io: IoTable = IoTable()
    run: RunTable = RunTable()
    verify: VerifyTable = VerifyTable()

    @model_validator(mode="after")
    def _enough_to_derive(self):
        model = self.model
        if self.kind.startswith("kv-") and model.name is None and None in (model.layers, model.kv_heads,
                                                                           model.head_dim):
            raise ValueError(f"[model] needs 'name' (one of {', '.join(models.known_names())}) "
                             "or all of 'layers', 'kv_heads', 'head_dim'")
        if self.kind == "model-load" and self.io.total_bytes is None and model.weights_bytes is None \
                and model.name is None:
            raise ValueError("model-load needs 'io.total_bytes' or a [model] name/weights_bytes")
        return self


OVERRIDABLE = {**{key: IoTable for key in IoTable.model_fields}, **{key: KvTable for key in KvTable.model_fields}}


def parse_size(value: Any, *, source: str = "size") -> int:
    """Bytes from 4096, "160K", "64MiB", "65.6GB" (K/M/G and KiB... are binary, kB/MB/GB decimal)."""
    try:
        return size_bytes(value)
    except ValueError as exc:
        raise BadInput(f"{source}: {exc}") from None


def human_bytes(n: float) -> str:
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            value = n / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.2f} {unit}"
    return f"{int(n)} B"


@dataclass(frozen=True)
class Profile(AsDict):
    """A validated profile, as written (nothing derived yet)."""

    name: str
    kind: str
    source: str
    description: str = ""
    model: dict = field(default_factory=dict)
    kv: dict = field(default_factory=dict)
    io: dict = field(default_factory=dict)
    run: dict = field(default_factory=dict)
    verify: dict = field(default_factory=dict)

    @property
    def writes(self) -> bool:
        return self.kind in WRITE_KINDS


@dataclass(frozen=True)
class Derivation:
    """The fio shape of a profile, and the arithmetic that led to it."""

    profile: str
    kind: str
    rw: str
    block_size: int
    file_size: int
    file_count: int          # total files (chunk slots for a raw-block region)
    files_per_job: int
    jobs: int
    iodepth: int
    direct: bool
    ioengine: str
    offset: int
    file_service: str
    total_bytes: int
    cold: bool
    writes: bool
    block_target: bool
    runtime: float
    ramp: float
    repeats: int
    steady_tolerance_pct: float
    chunk_bytes: int | None = None
    scaled: bool = False
    lines: tuple[str, ...] = ()
    verify: str = "crc32c"          # [verify] method: how a soak checks the data it reads back ("off": not)
    no_verify_reason: str = ""

    def to_dict(self) -> dict:
        data = asdict(self)
        data["lines"] = list(self.lines)
        return data


# --------------------------------------------------------------------------- loading
def _set_keys(table: InputModel) -> dict:
    return table.model_dump(exclude_none=True)


def profile_from_dict(data: Any, source: str) -> Profile:
    """A Profile from parsed TOML; BadInput names the file and the field (pydantic's loc)."""
    parsed = validate(ProfileFile, data, source)
    return Profile(name=parsed.name or Path(source).stem, kind=parsed.kind, source=source,
                   description=parsed.description, model=_set_keys(parsed.model), kv=_set_keys(parsed.kv),
                   io=_set_keys(parsed.io), run=_set_keys(parsed.run), verify=_set_keys(parsed.verify))


def check_overrides(overrides: dict) -> dict:
    """``--set KEY=VALUE`` overrides checked like the profile's own keys (text converts: "8" is 8, "true" is
    true; "abc" is refused, and so is -1 where a count must be >= 1); returns the typed values."""
    checked = {}
    for key, value in overrides.items():
        table = OVERRIDABLE.get(key)
        if table is None:
            raise BadInput(f"--set {key}={value}: {key!r} is not a profile key; allowed: "
                           f"{', '.join(sorted(OVERRIDABLE))}")
        checked[key] = getattr(validate(table, {key: value}, f"--set {key}={value}", strict=False), key)
    return checked


def apply_overrides(kv: dict, io: dict, overrides: dict) -> None:
    for key, value in check_overrides(overrides).items():
        for table, model in ((kv, KvTable), (io, IoTable)):
            if key in model.model_fields:      # 'cache' is in both: a KV profile reads kv, a bulk one io
                table[key] = value


def load_profile_file(path: Path) -> Profile:
    return profile_from_dict(read_toml(path, "profile file"), str(path))


def available(directory: Path = PROFILE_DIR) -> dict[str, Path]:
    return {p.stem: p for p in sorted(Path(directory).glob("*.toml"))}


def load_profile(name_or_path: str, directory: Path = PROFILE_DIR) -> Profile:
    """A profile by shipped name (profiles/NAME.toml) or by a path to a TOML file."""
    candidate = Path(name_or_path)
    if candidate.suffix == ".toml" or candidate.exists():
        return load_profile_file(candidate)
    known = available(directory)
    if name_or_path not in known:
        raise BadInput(f"unknown profile {name_or_path!r}; shipped: {', '.join(known) or 'none'}",
                       hint="or pass the path of a .toml file")
    return load_profile_file(known[name_or_path])


# --------------------------------------------------------------------------- derivation
def _align_down(n: float, align: int = ALIGN) -> int:
    return max(align, int(n) // align * align)


def derive(profile: Profile, *, scale: float = 1.0, max_bytes: int | None = None,
           runtime: float | None = None, ramp: float | None = None,
           repeats: int | None = None, overrides: dict | None = None) -> Derivation:
    """Block size, file size, file count, jobs and iodepth from the profile, with the lines
    that show how. ``scale`` (0 < s <= 1) and ``max_bytes`` shrink the working set for tests."""
    src = profile.source
    if not (0 < scale <= 1):
        raise BadInput(f"--scale must be in (0, 1] (got {scale})")
    kv, io, model, run = dict(profile.kv), dict(profile.io), dict(profile.model), dict(profile.run)
    apply_overrides(kv, io, overrides or {})
    lines: list[str] = [f"profile {profile.name} ({profile.kind}) from {src}"]
    chunk = None
    if profile.kind.startswith("kv-"):
        shape = _derive_kv(profile, model, kv, io, lines)
        chunk = shape["chunk"]
    else:
        shape = _derive_bulk(profile, model, io, lines)
    jobs, file_size, files = shape["jobs"], shape["file_size"], shape["files"]
    if jobs < 1:
        raise BadInput(f"{src}: jobs/threads must be >= 1 (got {jobs})")
    if jobs > FIO_MAX_JOBS:
        raise BadInput(f"{src}: {jobs} jobs do not fit: fio runs at most {FIO_MAX_JOBS} jobs",
                       hint="lower threads, writers or instances")
    block_target = shape.get("block", False)
    if not block_target and files < jobs:
        raise BadInput(f"{src}: {jobs} jobs do not fit in {files} files: each job needs at least one file",
                       hint="lower threads/jobs or raise concurrency/context/file_count")
    scaled = False
    if scale < 1 or (max_bytes and files * file_size > max_bytes):
        budget = files * file_size * scale
        if max_bytes:
            budget = min(budget, max_bytes)
        min_files = 1 if block_target else jobs
        new_files = max(min_files, int(budget // file_size))
        new_size = file_size
        if new_files * file_size > budget:
            offset = shape.get("offset", 0)
            new_size = _align_down(budget / new_files - offset) + offset
        lines.append(f"scaled for a small target: {files} files x {human_bytes(file_size)} -> "
                     f"{new_files} files x {human_bytes(new_size)} (budget {human_bytes(budget)})")
        if new_size < file_size:
            shape["bs"] = new_size - shape.get("offset", 0) if shape.get("whole_file") \
                else min(shape["bs"], new_size)
        files, file_size, scaled = new_files, new_size, True
    files_per_job = 0 if block_target else math.ceil(files / jobs)
    if not block_target and files_per_job * jobs != files:
        lines.append(f"files per job = ceil({files} / {jobs}) = {files_per_job} "
                     f"(each job reads/writes its own files; {files_per_job * jobs} laid out)")
        files = files_per_job * jobs
    elif not block_target:
        lines.append(f"files per job = {files} / {jobs} = {files_per_job}")
    total = files * file_size
    lines.append(f"working set = {files} x {human_bytes(file_size)} = {human_bytes(total)} ({total:,} B)")
    the_runtime = float(runtime if runtime is not None else run.get("runtime", 30))
    the_ramp = float(ramp if ramp is not None else run.get("ramp", 5))
    the_repeats = int(repeats if repeats is not None else run.get("repeats", 3))
    if the_runtime <= 0 or the_ramp < 0 or the_repeats < 1:
        raise BadInput(f"{src}: runtime must be > 0, ramp >= 0, repeats >= 1 "
                       f"(got {the_runtime}, {the_ramp}, {the_repeats})")
    ioengine = "libaio" if shape["direct"] and shape["iodepth"] > 1 else "psync"
    lines.append(f"fio: rw={shape['rw']} bs={shape['bs']:,} numjobs={jobs} iodepth={shape['iodepth']} "
                 f"direct={int(shape['direct'])} ioengine={ioengine}"
                 + (f" offset={shape['offset']}" if shape.get("offset") else "")
                 + f" file_service_type={shape['service']}")
    lines.append(f"timing: ramp {the_ramp:g} s discarded, {the_runtime:g} s measured, {the_repeats} repeats"
                 + ("; page cache dropped before each repeat" if shape["cold"] else ""))
    return Derivation(
        profile=profile.name, kind=profile.kind, rw=shape["rw"], block_size=shape["bs"],
        file_size=file_size, file_count=files,
        files_per_job=files_per_job, jobs=jobs, iodepth=shape["iodepth"], direct=shape["direct"],
        ioengine=ioengine, offset=shape.get("offset", 0), file_service=shape["service"],
        total_bytes=total, cold=shape["cold"], writes=profile.writes, block_target=block_target,
        runtime=the_runtime, ramp=the_ramp, repeats=the_repeats,
        steady_tolerance_pct=float(run.get("steady_tolerance_pct", 10)), chunk_bytes=chunk,
        scaled=scaled, lines=tuple(lines), verify=profile.verify.get("method", "crc32c"),
        no_verify_reason=profile.verify.get("no_verify_reason", ""))


def _derive_kv(profile: Profile, model: dict, kv: dict, io: dict, lines: list[str]) -> dict:
    src = profile.source
    if "name" in model:
        geo = models.lookup(model["name"], source=f"{src}: key 'model.name'")
        layers = model.get("layers", geo.layers)
        kv_heads = model.get("kv_heads", geo.kv_heads)
        head_dim = model.get("head_dim", geo.head_dim)
        label = geo.name
    else:
        layers, kv_heads, head_dim = model["layers"], model["kv_heads"], model["head_dim"]
        label = "custom geometry"
    dtype = model.get("kv_dtype", "bf16")
    dsize = models.dtype_bytes(dtype, source=f"{src}: key 'model.kv_dtype'")
    tp = kv.get("tp", 1)
    models.check_tp(kv_heads, tp, source=f"{src}: key 'kv.tp'")
    tokens = kv.get("chunk_tokens", 256)
    if not isinstance(tokens, int) or tokens <= 0:
        raise BadInput(f"{src}: key 'kv.chunk_tokens' must be > 0 (got {tokens!r})")
    context = kv.get("context_tokens", 32768)
    concurrency = kv.get("concurrency", 1)
    threads = kv.get("threads", 4)
    instances = kv.get("instances", 1)
    shared = kv.get("shared_pool", True)
    backend = kv.get("backend", "localdisk")
    cache = kv.get("cache", "cold")
    theta = kv.get("zipf_theta", 1.2)
    h_rank = models.kv_heads_per_rank(kv_heads, tp)
    chunk = models.chunk_bytes(layers, tokens, kv_heads, head_dim, dsize, tp)
    lines.append(f"model {label}: L={layers} H_kv={kv_heads} D={head_dim} kv_dtype={dtype} ({dsize} B)")
    lines.append(f"H_kv per rank = max(1, {kv_heads} / TP {tp}) = {h_rank}")
    lines.append(f"chunk per rank = 2 x L {layers} x T {tokens} x H_kv_rank {h_rank} x D {head_dim} x {dsize} B"
                 f" = {chunk:,} B ({human_bytes(chunk)})")
    per_request = math.ceil(context / tokens)
    lines.append(f"chunks per request = ceil(context {context} / {tokens}) = {per_request}")
    pool_copies = 1 if shared else instances
    files = concurrency * per_request * tp * pool_copies
    lines.append(f"files = concurrency {concurrency} x chunks {per_request} x TP ranks {tp}"
                 + (f" x instances {instances} (separate pools)" if not shared else
                    (f" (the {instances} instances share one pool)" if instances > 1 else ""))
                 + f" = {files:,}")
    jobs = threads * instances
    lines.append(f"jobs = reader threads {threads} x instances {instances} = {jobs}"
                 if profile.kind == "kv-read" else
                 f"jobs = writer threads {threads} x instances {instances} = {jobs}")
    offset = FS_HEADER_BYTES if backend == "fs" else 0
    file_size = chunk + offset
    if backend == "fs":
        lines.append(f"fs:// backend: file = {FS_HEADER_BYTES} B header + chunk = {file_size:,} B; "
                     f"read at offset {FS_HEADER_BYTES}, so buffered (no O_DIRECT)")
    elif backend == "localdisk":
        lines.append("LocalDisk backend: one file per chunk, one read of the whole file"
                     + (" with O_DIRECT" if kv.get("odirect") else " (buffered)"))
    else:
        lines.append("raw block: chunks back to back on the device, O_DIRECT")
    direct = backend == "block" or (backend == "localdisk" and bool(kv.get("odirect", False)))
    cold = cache == "cold"
    writes = profile.kind == "kv-write"
    if writes:
        rw, service = ("randwrite" if backend == "block" else "write"), "sequential"
        lines.append("write-back: each thread writes whole chunk files (fs:// writes .tmp then renames; "
                     "fio writes in place)")
    else:
        rw = "randread"
        service = "random" if cold else f"zipf:{theta:g}"
        lines.append("cold: every chunk read once from storage, uniform over the working set"
                     if cold else f"warm: Zipf(theta={theta:g}) reuse over chunks, page cache kept")
    return {"chunk": chunk, "jobs": jobs, "file_size": file_size, "files": files, "bs": chunk,
            "offset": offset, "whole_file": True, "rw": rw, "service": service,
            "iodepth": io.get("iodepth", 1), "direct": direct, "cold": cold and not writes,
            "block": backend == "block"}


def _derive_bulk(profile: Profile, model: dict, io: dict, lines: list[str]) -> dict:
    src = profile.source
    kind = profile.kind
    cache = io.get("cache", "cold")
    bs = parse_size(io.get("block_size", "1M"), source=f"{src}: key 'io.block_size'")
    iodepth = io.get("iodepth", 1)
    if kind == "small-files":
        file_size = parse_size(io.get("file_size", "160K"), source=f"{src}: key 'io.file_size'")
        files = io.get("file_count", 100_000)
        jobs = io.get("jobs", 16)
        lines.append(f"small files: {files:,} files of {human_bytes(file_size)}, each read whole, "
                     f"random order, {jobs} reader threads")
        return {"jobs": jobs, "file_size": file_size, "files": files, "bs": file_size,
                "whole_file": True, "rw": "randread", "service": "random", "iodepth": iodepth,
                "direct": bool(io.get("direct", False)), "cold": cache == "cold"}
    if "total_bytes" in io:
        total = parse_size(io["total_bytes"], source=f"{src}: key 'io.total_bytes'")
        origin = "io.total_bytes"
    elif "weights_bytes" in model:
        total = parse_size(model["weights_bytes"], source=f"{src}: key 'model.weights_bytes'")
        origin = "model.weights_bytes"
    else:
        geo = models.lookup(model["name"], source=f"{src}: key 'model.name'")
        if not geo.weights_bytes:
            raise BadInput(f"{src}: model {geo.name} has no known weight size; set io.total_bytes")
        total, origin = geo.weights_bytes, f"weights of {geo.name}"
    jobs = io.get("jobs", 8)
    if total < jobs * bs:
        raise BadInput(f"{src}: {jobs} jobs do not fit in {human_bytes(total)} at block size "
                       f"{human_bytes(bs)} (each job needs at least one block)")
    shard = _align_down(total / jobs, max(bs, ALIGN)) if bs % ALIGN == 0 else int(total // jobs)
    writes = kind == "checkpoint-write"
    what = "writers" if writes else "readers"
    lines.append(f"total = {total:,} B ({human_bytes(total)}) from {origin}")
    lines.append(f"{jobs} {what}, one shard each: {total:,} / {jobs} = {shard:,} B "
                 f"(rounded down to whole {human_bytes(max(bs, ALIGN))} blocks)")
    lines.append(f"block size {human_bytes(bs)}, sequential, iodepth {iodepth}")
    return {"jobs": jobs, "file_size": shard, "files": jobs, "bs": bs, "rw": "write" if writes else "read",
            "service": "sequential", "iodepth": iodepth, "direct": bool(io.get("direct", writes)),
            "cold": cache == "cold" and not writes}
