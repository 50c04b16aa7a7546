"""Verified data in a soak: what the load reads back is what was written, at the place it was written.

Per profile (the plan is decided before anything runs and printed):

- reads (kv-read, model-load, small-files): the layout writes the working set with fio verify headers
  (``verify=crc32c`` by default, a header with its own offset every 4 KiB, so misplaced data fails on the
  offset, not only flipped bits on the checksum); the load checks every block it reads, for the whole soak
  (a time-based psync job goes over its files or region pass after pass); a final pass reads the whole
  working set back once after the load.
- writes (kv-write, checkpoint-write): the load writes with verify headers and reads back what it wrote,
  ``BACKLOG`` blocks at a time (``verify_backlog``); on a block device the region is laid out with headers
  first and read back whole after the load; on a directory the profile's files are fresh each run and
  unlinked at its end, so there is nothing left to read back (said so in the plan).

fio 3.33 ends a verifying read job with an async engine (libaio, io_uring) after one pass over its files,
time-based or not (measured; psync goes on), so a verifying read soak with iodepth > 1 is refused with what
to do instead. Mismatches come from fio's stderr (:class:`fxprobe.tools.fio.VerifyErrorParser`, read as it
grows); each load segment and the final pass end in one ``verify`` record: bytes verified, bad reads, bad
blocks and the first ``SHOWN`` of them. Opting out takes the profile's ``[verify] method = "off"`` with
``no_verify_reason`` (or ``soak --no-verify REASON``); the reason is printed, and the criterion is NOT RUN.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from fxprobe.core.data import AsDict
from fxprobe.core.errors import BadInput
from fxprobe.core.verdict import Criterion, Outcome
from fxprobe.tools.fio import VerifyErrorParser, VerifyMismatch, describe_mismatches
from fxprobe.workload.jobfile import JobVerify, Target, engine, job_text, verify_interval
from fxprobe.workload.profiles import Derivation

BACKLOG = 256           # write loads: written blocks read back and checked this many at a time (at most)
BACKLOG_BYTES = 16 << 20   # ... and no more than this much per job (a short soak of large blocks verifies too)
SHOWN = 20              # bad blocks a verify record keeps (their first report each)
TRACKED = 100_000       # bad blocks counted one by one; beyond this the count is a lower bound
NAME = "data verified (mismatches)"


@dataclass(frozen=True)
class SoakVerifyPlan(AsDict):
    method: str             # fio verify= (crc32c, md5, sha256...) or "off"
    interval: int = 0       # verify_interval: a header every this many bytes
    how: str = ""           # how the load checks what it reads or writes
    layout: bool = False    # the working set is written with verify headers before the load
    readback: bool = False  # one pass reads the whole working set back after the load
    reason: str = ""        # why off (or why there is no read-back pass)

    @property
    def enabled(self) -> bool:
        return self.method != "off"

    backlog: int = 0        # verify_backlog of a write load (blocks)

    def job_verify(self) -> JobVerify | None:
        return JobVerify(self.method, self.interval, self.backlog) if self.enabled else None

    def describe(self) -> str:
        return (f"fio verify={self.method}, offset header per {self.interval} B, {self.how}"
                + (", read back whole after the load" if self.readback else ""))

    def lines(self, target: str) -> list[str]:
        if not self.enabled:
            return [f"data NOT verified: {self.reason}"]
        out = [f"data verified: {self.describe()}"]
        if self.layout:
            out.append(f"layout: the working set on {target} is written with verify headers first (not timed)")
        if self.reason:
            out.append(self.reason)
        return out


def plan_for(d: Derivation, target: Target, no_verify_reason: str = "") -> SoakVerifyPlan:
    """How a soak of ``d`` on ``target`` verifies its data; BadInput when fio cannot verify that load."""
    if no_verify_reason.strip() or d.verify == "off":
        return SoakVerifyPlan("off", reason=no_verify_reason.strip() or d.no_verify_reason)
    _, ioengine = engine(d, target)
    if not d.writes and ioengine != "psync":
        raise BadInput(f"profile {d.profile}: a verifying read soak at iodepth {d.iodepth} ({ioengine}) cannot run: "
                       f"fio 3.33 ends a verifying read job with an async engine after one pass over its data",
                       hint="--set iodepth=1 (psync, the same jobs), or --no-verify REASON to opt out")
    interval = verify_interval(d)
    if not d.writes:
        return SoakVerifyPlan(d.verify, interval, "every block the load reads is checked", True, True)
    backlog = max(1, min(BACKLOG, BACKLOG_BYTES // d.block_size))
    how = f"verify_backlog={backlog}: every written block is read back and checked during the load"
    if target.block:
        return SoakVerifyPlan(d.verify, interval, how, True, True,
                              "" if d.rw == "write" or d.jobs == 1 else
                              f"each of the {d.jobs} writers has its own part of the region (writers sharing blocks "
                              "would overwrite each other's verify headers)", backlog)
    return SoakVerifyPlan(d.verify, interval, how, False, False,
                          "no read-back pass after the load: the profile writes fresh files and unlinks them at "
                          "the end of each run", backlog)


def layout_job(d: Derivation, target: Target, plan: SoakVerifyPlan, unverified: str | None) -> str | None:
    """The layout job file: the working set with verify headers, or the profile's own layout when not
    verifying (``unverified``: None for a write profile, which lays out nothing)."""
    return job_text(d, target, mode="layout", verify=plan.job_verify()) if plan.layout else unverified


def measure_job(d: Derivation, target: Target, plan: SoakVerifyPlan) -> str:
    """The load's job file; a verify failure must not stop a job (continue_on_error=all: io and verify)."""
    text = job_text(d, target, verify=plan.job_verify())
    keep_going = "all" if plan.enabled else "io"
    return text.replace("[global]\n", f"[global]\ncontinue_on_error={keep_going}\ngroup_reporting=1\n", 1)


def readback_job(d: Derivation, target: Target, plan: SoakVerifyPlan) -> str:
    return job_text(d, target, mode="verify", verify=plan.job_verify())


class StderrTail:
    """A segment's fio stderr file read as it grows: how many verify failures fio printed, on how many blocks,
    and the first ``SHOWN`` of those blocks."""

    def __init__(self, path: Path | None):
        self.path, self.pos = path, 0
        self.parser = VerifyErrorParser()
        self.bad_reads = 0
        self.blocks: dict[tuple[str, int], VerifyMismatch] = {}
        self.more_blocks = False          # past TRACKED: the block count is a lower bound

    def feed(self, text: str) -> int:
        for mismatch in self.parser.feed(text):
            self._count(mismatch)
        return self.bad_reads

    def poll(self) -> int:
        """Read what fio wrote since the last call; returns the bad reads so far."""
        if self.path is None or not self.path.exists():
            return self.bad_reads
        with open(self.path, "rb") as handle:
            handle.seek(self.pos)
            data = handle.read()
        self.pos += len(data)
        return self.feed(data.decode("utf-8", errors="replace"))

    def finish(self) -> "StderrTail":
        self.poll()
        for mismatch in self.parser.finish():
            self._count(mismatch)
        return self

    def _count(self, mismatch: VerifyMismatch) -> None:
        self.bad_reads += 1
        key = (mismatch.file, mismatch.offset)
        if key not in self.blocks and len(self.blocks) < TRACKED:
            self.blocks[key] = mismatch
        elif key not in self.blocks:
            self.more_blocks = True

    def record(self, ts: float, stamp: str, source: str, verified_bytes: int, seg: int | None = None) -> dict:
        """The ``verify`` record of a load segment or of the read-back pass."""
        shown = [self.blocks[key].to_dict() for key in sorted(self.blocks)[:SHOWN]]
        record = {"type": "verify", "t": stamp, "ts": ts, "source": source, "verified_bytes": int(verified_bytes),
                  "mismatches": self.bad_reads, "bad_blocks": len(self.blocks), "bad_blocks_more": self.more_blocks,
                  "shown": shown}
        return record if seg is None else {**record, "seg": seg}


def job_bytes(text: str) -> int:
    """Bytes a read-back job file reads: its ``size`` (per job) times its ``numjobs``."""
    values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith(";"))
    return int(values.get("size", 0)) * int(values.get("numjobs", 1))


def readback_outcome(stdout: str, stderr: str, failure: str | None, bad_reads: int, expected: int) -> dict:
    """The read-back pass's figures for its verify record: bytes read, unreadable blocks (fio's errors beyond its
    verify failures: EIO...), the bytes it had to read, and ``problem`` when it gave no whole result."""
    from fxprobe.tools.fio_status import last_json
    doc = last_json(stdout)
    if not doc:
        why = failure or ((stderr or "").strip().splitlines() or ["fio printed nothing"])[-1][:200]
        return {"verified_bytes": 0, "expected_bytes": expected, "problem": f"the read-back pass gave no result: {why}"}
    jobs = doc.get("jobs") or []
    done = sum(int((job.get("read") or {}).get("io_bytes", 0) or 0) for job in jobs)
    unreadable = max(0, sum(int(job.get("total_err", 0) or 0) for job in jobs) - bad_reads)
    out = {"verified_bytes": done, "expected_bytes": expected, "unreadable": unreadable}
    if failure and not unreadable and not bad_reads:
        out["problem"] = f"the read-back pass failed: {failure}"
    elif done < expected and not unreadable:
        out["problem"] = f"the read-back pass read {done} of the {expected} B working set, no error counted"
    return out


def criterion(plan: dict | None, verified_bytes: int, mismatches: int, bad_blocks: int,
              shown: list[dict], problems: list[str], unreadable: int = 0, coverage: str = "") -> Criterion:
    """'data verified': 0 mismatches and 0 unreadable blocks over N GiB (method); a mismatch names offset, found
    and expected; a read-back that failed or is missing (``problems``) is an ERROR, never a note."""
    if not plan:
        return Criterion(NAME, Outcome.NOT_RUN, None, 0, "<=", "", "the soak's records carry no verification "
                         "(written by an fxprobe that did not verify soak data)", "")
    the_plan = SoakVerifyPlan(**plan)
    if not the_plan.enabled:
        return Criterion(NAME, Outcome.NOT_RUN, None, 0, "<=", "", f"not verified: {the_plan.reason}", "")
    errors = "; ERROR: " + "; ".join(problems) if problems else ""
    if not verified_bytes and not mismatches and not unreadable:
        return Criterion(NAME, Outcome.ERROR if problems else Outcome.NOT_RUN, 0, 0, "<=", "",
                         "nothing was read back and checked "
                         f"({the_plan.describe()}; a write load may overwrite its blocks before verify_backlog "
                         "reads them: give it a larger working set)" + errors, "soak.jsonl verify records")
    how = f"over {verified_bytes / 2**30:.3f} GiB ({the_plan.describe()})"
    if mismatches:
        blocks = [VerifyMismatch(**m) for m in shown]
        detail = f"{describe_mismatches(blocks, mismatches, 5, bad_blocks)}; {how}"
    else:
        detail = f"0 mismatches {how}"
    if the_plan.readback or unreadable:
        detail += f"; unreadable blocks (read errors) {unreadable}" + (f"; {coverage}" if coverage else "")
    judged = Criterion.compare(NAME, mismatches + unreadable, "<=", 0, detail=detail + errors,
                               evidence="soak.jsonl verify records")
    return replace(judged, outcome=Outcome.ERROR) if problems else judged
