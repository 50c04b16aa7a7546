"""Verified data through a fault: what was read back is what was written, at the place it was written.

- Layout: before the load, fio writes the load's region with verify headers (``verify=crc32c`` by
  default; each ``verify_interval`` = the load's block size carries a header holding its own offset, so
  misplaced data fails on the offset, not only flipped bits on the checksum).
- Read loads verify every block they read (fio verifies reads of a read-only job against the header).
- Write and mixed loads verify with ``verify_backlog`` during the run, and a read-verify pass over the
  whole region runs after the restore.
- A mismatch is parsed from fio's stderr (tools.fio.parse_fio_verify_errors): offset, the header field
  or checksum, found and expected. Any mismatch makes the verdict visible.

Opting out takes ``load.verify = "off"`` with ``load.no_verify_reason``; the reason is printed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from fxprobe.core.errors import BadInput
from fxprobe.core.schema import size_bytes
from fxprobe.core.verdict import Criterion, Outcome
from fxprobe.tools.fio import VerifyMismatch, describe_mismatches, first_reports, parse_fio_verify_errors

BACKLOG = 256           # verify_backlog of write loads: written blocks verified in batches of this many
PASSES = 256            # the region listed this many times: passes one after another (see load_flags)
RESYNC_WAIT_S = 600     # write loads through a drive pull: how long to wait for md's resync before reading back
SHOWN = 5               # mismatches named in the criterion's detail


@dataclass(frozen=True)
class VerifyPlan:
    method: str             # fio verify= (crc32c, md5, sha256...) or "off"
    region_bytes: int       # the load's region from offset 0: laid out, loaded, read back
    interval: str           # verify_interval (the load's block size as written)
    writes: bool            # the load writes: verify_backlog during the run, read-back after restore
    reason: str = ""        # why off

    @property
    def enabled(self) -> bool:
        return self.method != "off"

    def lines(self, device: str = "the export") -> list[str]:
        if not self.enabled:
            return [f"data NOT verified: {self.reason}"]
        mib = self.region_bytes / 2**20
        out = [f"layout: fio writes the first {mib:g} MiB of {device} with verify={self.method} headers "
               f"(offset in every {self.interval} header) before the load"]
        out.append("load: verify_backlog during the run, a full read-verify pass after the restore" if self.writes
                   else "load: every block read is verified (header offset, checksum)")
        return out

    def to_dict(self) -> dict:
        return asdict(self)


def plan_for(load: dict) -> VerifyPlan:
    """From a scenario's [load] table; BadInput when the region is not a whole number of blocks."""
    writes = load["rw"] not in ("randread", "read")
    plan = VerifyPlan(load["verify"], size_bytes(load["region"]), str(load["bs"]), writes,
                      load.get("no_verify_reason", ""))
    if plan.enabled and plan.region_bytes % size_bytes(load["bs"]):
        raise BadInput(f"load.region: {load['region']} is not a whole number of load.bs ({load['bs']}) blocks")
    return plan


def _common(plan: VerifyPlan, device: str) -> list[str]:
    return [f"--filename={device}", f"--size={plan.region_bytes}", f"--verify={plan.method}",
            f"--verify_interval={plan.interval}", "--verify_state_save=0", "--ioengine=libaio", "--direct=1",
            "--output-format=json", "--eta=never"]


def layout_argv(plan: VerifyPlan, device: str) -> list[str]:
    """Write the region sequentially with verify headers (no read-back: the load and the pass verify)."""
    bs = next(size for size in (4 << 20, 1 << 20, 256 << 10, 64 << 10, 16 << 10, 4 << 10, 512)
              if plan.region_bytes % size == 0)      # large writes (full md stripes), none past the region
    return ["fio", "--name=fault-layout", *_common(plan, device), "--rw=write", f"--bs={bs}", "--iodepth=2",
            "--do_verify=0"]


def load_filename(plan: VerifyPlan, device: str) -> str:
    """fio --filename of the load. A verifying job reads its region once and stops, even time_based
    (fio 3.33, measured); the device listed PASSES times as files served one after another
    (file_service_type=sequential) keeps one job going over the region pass after pass, with no gap."""
    if not plan.enabled:
        return device
    return ":".join([device] * PASSES)


def load_flags(plan: VerifyPlan) -> list[str]:
    """Flags added to the fault load: confine it to the region (each pass) and verify."""
    if not plan.enabled:
        return []
    flags = [f"--filesize={plan.region_bytes}", f"--size={plan.region_bytes * PASSES}",
             "--file_service_type=sequential", f"--verify={plan.method}", f"--verify_interval={plan.interval}",
             "--verify_state_save=0"]
    if plan.writes:
        flags += [f"--verify_backlog={BACKLOG}"]
    return flags


def ended_early(plan: VerifyPlan, runtime_ms: int | None, planned_s: float) -> str | None:
    """Why the verifying load stopped before its planned end (it read its region PASSES times), or None."""
    if not plan.enabled or runtime_ms is None or runtime_ms >= (planned_s - 1) * 1000:
        return None
    return (f"the verifying load read its {plan.region_bytes / 2**20:g} MiB region {PASSES} times in "
            f"{runtime_ms / 1000:.1f} s, before the planned {planned_s:g} s: make load.region larger")


def readback_argv(plan: VerifyPlan, device: str, name: str = "fault-readback") -> list[str]:
    """Read the whole region once and verify every block (a read-only job takes each header's own seed)."""
    return ["fio", f"--name={name}", *_common(plan, device), "--rw=read", f"--bs={plan.interval}", "--iodepth=8",
            "--continue_on_error=all"]


LOAD = "load"            # the name of the load's own pass; every other pass is a read-back of the whole region


@dataclass(frozen=True)
class Pass:
    name: str               # LOAD or "read-back after restore"
    bytes_verified: int     # read (and checked) by fio: its read io_bytes
    mismatches: tuple[VerifyMismatch, ...]
    unreadable: int = 0     # reads fio counted as errors beyond its verify failures (EIO...): total_err - mismatches
    first_error: str = ""   # fio's first such error line
    problem: str = ""       # a read-back gave no result: why (no JSON, fio failed)

    @property
    def readback(self) -> bool:
        """A read-back reads the whole region once after the load: judged on its unreadable blocks and coverage
        (the load's own errors are the I/O errors the workload saw, judged beside it)."""
        return self.name != LOAD

    def to_dict(self) -> dict:
        return {"name": self.name, "bytes_verified": self.bytes_verified,
                "mismatches": [m.to_dict() for m in self.mismatches], "unreadable": self.unreadable,
                "first_error": self.first_error, "problem": self.problem}


@dataclass(frozen=True)
class VerifyResult:
    plan: VerifyPlan
    passes: tuple[Pass, ...] = ()
    problems: tuple[str, ...] = field(default_factory=tuple)   # a pass that should have run and did not, and why
    skipped: str = ""       # why the read-back was not run on purpose (the load hung: that is the verdict)

    @property
    def mismatches(self) -> list[VerifyMismatch]:
        return [m for p in self.passes for m in p.mismatches]

    @property
    def unreadable(self) -> int:
        return sum(p.unreadable for p in self.passes if p.readback)

    @property
    def bytes_verified(self) -> int:
        return sum(p.bytes_verified for p in self.passes)

    def coverage(self) -> list[str]:
        """'read-back after restore read 32 of 32 MiB (0 unreadable)' for each read-back."""
        mib = self.plan.region_bytes / 2**20
        return [f"{p.name} read {p.bytes_verified / 2**20:g} of {mib:g} MiB ({p.unreadable} unreadable)"
                for p in self.passes if p.readback]

    def all_problems(self) -> list[str]:
        """Why the verification is not whole: a read-back missing, without a result, or short of the region."""
        out = list(self.problems)
        backs = [p for p in self.passes if p.readback]
        if self.plan.enabled and self.plan.writes and not backs and not self.skipped and not out:
            out.append("no read-back after the restore")
        for p in backs:
            if p.problem:
                out.append(f"{p.name}: {p.problem}")
            elif p.bytes_verified < self.plan.region_bytes and not p.unreadable:
                out.append(f"{p.name}: read {p.bytes_verified} of the {self.plan.region_bytes} B region, no error "
                           "counted")
        return out

    def to_dict(self) -> dict:
        return {"plan": self.plan.to_dict(), "passes": [p.to_dict() for p in self.passes],
                "mismatches": len(self.mismatches), "unreadable": self.unreadable,
                "bytes_verified": self.bytes_verified, "problems": self.all_problems(), "skipped": self.skipped}


def read_bytes(fio_json: dict | None) -> int:
    """Bytes fio read (and so verified) in a run, every job."""
    if not fio_json:
        return 0
    return sum(int(job.get("read", {}).get("io_bytes", 0) or 0) for job in fio_json.get("jobs", []))


def _total_err(fio_json: dict | None) -> int:
    return sum(int(job.get("total_err", 0) or 0) for job in (fio_json or {}).get("jobs", []))


def make_pass(name: str, fio_json: dict | None, stderr: str, failure: str = "") -> Pass:
    """One verify pass: fio's read bytes, its verify failures, its other errors (``total_err`` beyond the verify
    failures: unreadable blocks) and, for a read-back, why it gave no whole result (``failure``: how fio failed)."""
    mismatches = tuple(parse_fio_verify_errors(stderr))
    unreadable = max(0, _total_err(fio_json) - len(mismatches))
    first = next((line.strip()[:200] for line in (stderr or "").splitlines() if "io_u error" in line), "")
    problem = ""
    if name != LOAD and not fio_json:
        problem = "no result: " + (failure or ((stderr or "").strip().splitlines() or ["fio printed nothing"])[-1][:200])
    elif name != LOAD and failure and not unreadable and not mismatches:
        problem = failure
    return Pass(name, read_bytes(fio_json), mismatches, unreadable, first, problem)


def criterion(result: VerifyResult) -> Criterion:
    """'data verified': 0 mismatches and 0 unreadable blocks over N GiB (method), every read-back over the whole
    region; a mismatch names offset, found and expected; a read-back that failed or is missing is an ERROR."""
    name = "data verified (mismatches)"
    plan = result.plan
    if not plan.enabled:
        return Criterion(name, Outcome.NOT_RUN, None, 0, "<=", "", f"not verified: {plan.reason}", "")
    gib = result.bytes_verified / 2**30
    how = (f"fio verify={plan.method}, offset header per {plan.interval}"
           + (", verify_backlog + read-back after restore" if plan.writes else ", every block read"))
    found = result.mismatches
    if found:
        detail = f"{describe_mismatches(first_reports(found), len(found), SHOWN)}; over {gib:.3f} GiB ({how})"
    else:
        detail = f"0 mismatches over {gib:.3f} GiB ({how})"
    backs = [p for p in result.passes if p.readback]
    if backs:
        first = next((p.first_error for p in backs if p.first_error), "")
        detail += (f"; unreadable blocks (read errors) {result.unreadable}" + (f" (first: {first})" if first else "")
                   + "; " + ", ".join(result.coverage()))
    problems = result.all_problems()
    if problems:
        detail += "; ERROR: " + "; ".join(problems)
    if result.skipped:
        detail += f"; {result.skipped}"
    judged = Criterion.compare(name, len(found) + result.unreadable, "<=", 0, detail=detail,
                               evidence="fio verify (stderr, JSON)")
    if problems:
        return replace(judged, outcome=Outcome.ERROR)
    if result.skipped and judged.outcome is Outcome.PASS:
        return replace(judged, outcome=Outcome.NOT_RUN)
    return judged
