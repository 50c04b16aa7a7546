"""Sweeps: run a profile at several loads and find the knee, the highest load whose p99
stays under a limit (and every lighter load did too)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from fxprobe.core.data import AsDict
from fxprobe.core.errors import BadInput
from fxprobe.workload.profiles import Profile, load_profile
from fxprobe.workload.run import WorkloadResult, run_profile

VARY_KEYS = ("jobs", "threads", "iodepth", "concurrency")


@dataclass(frozen=True)
class SweepPoint(AsDict):
    value: int
    bw_bytes: float
    iops: float
    p99_ns: int | None
    cv_pct: float
    steady_attained: int
    repeats: int
    under_limit: bool


@dataclass(frozen=True)
class SweepResult(AsDict):
    profile: str
    key: str
    p99_limit_ns: int
    points: tuple[SweepPoint, ...]
    knee: int | None
    detail: str

    def lines(self) -> list[str]:
        out = [f"sweep of {self.profile} over {self.key} (p99 limit {self.p99_limit_ns / 1e6:g} ms)",
               f"  {self.key:>10} {'MB/s':>12} {'IOPS':>12} {'p99 ms':>10} {'CV %':>7}  steady"]
        for p in self.points:
            p99 = f"{p.p99_ns / 1e6:.3f}" if p.p99_ns is not None else "-"
            out.append(f"  {p.value:>10} {p.bw_bytes / 1e6:>12,.1f} {p.iops:>12,.1f} {p99:>10} {p.cv_pct:>7.2f}  "
                       f"{p.steady_attained}/{p.repeats}{'' if p.under_limit else '  over the limit'}")
        out.append(f"  knee: {self.detail}")
        return out


def parse_vary(text: str) -> tuple[str, list[int]]:
    """``jobs=1,2,4,8`` -> ("jobs", [1, 2, 4, 8])."""
    key, sep, values = str(text).partition("=")
    key = key.strip()
    if not sep or key not in VARY_KEYS:
        raise BadInput(f"--vary {text!r}: expected KEY=V1,V2,... with KEY one of {', '.join(VARY_KEYS)}")
    try:
        numbers = [int(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise BadInput(f"--vary {text!r}: values must be whole numbers separated by commas") from None
    if not numbers or any(n < 1 for n in numbers):
        raise BadInput(f"--vary {text!r}: give at least one value, each >= 1")
    return key, sorted(set(numbers))


def override_key(profile: Profile, key: str) -> str:
    """``jobs`` means reader/writer threads in a KV profile."""
    if profile.kind.startswith("kv-"):
        return {"jobs": "threads"}.get(key, key)
    if key in ("threads", "concurrency"):
        if key == "threads":
            return "jobs"
        raise BadInput(f"--vary concurrency applies to KV profiles, not {profile.kind}")
    return key


def find_knee(points: Sequence[SweepPoint]) -> tuple[int | None, str]:
    knee = None
    for point in points:
        if not point.under_limit:
            break
        knee = point.value
    if knee is None:
        return None, "even the lightest load exceeds the p99 limit"
    later = [p.value for p in points if p.value > knee and p.under_limit]
    text = f"{knee} (highest load whose p99 stays under the limit)"
    if knee == points[-1].value:
        text += "; the limit was not reached: sweep further"
    if later:
        text += f"; note {', '.join(map(str, later))} came back under the limit (noisy curve)"
    return knee, text


def point_of(value: int, result: WorkloadResult, limit_ns: int) -> SweepPoint:
    p99 = result.percentiles_ns.get(99.0)
    return SweepPoint(value, result.bandwidth.mean, result.iops.mean, p99, result.bandwidth.cv_pct,
                      result.steady_attained, len(result.repeats), p99 is not None and p99 < limit_ns)


def run_sweep(profile: Profile | str, target: str, key: str, values: Sequence[int], *, p99_limit_ns: int,
              progress: Callable[[str], None] = lambda text: None, **run_args) -> SweepResult:
    """Run the profile once per value (each with its repeats) and find the knee."""
    if isinstance(profile, str):
        profile = load_profile(profile)
    if p99_limit_ns <= 0:
        raise BadInput("--p99-limit must be > 0")
    field = override_key(profile, key)
    points = []
    for i, value in enumerate(values, 1):
        progress(f"{key}={value}")
        result = run_profile(profile, target, overrides={field: value}, progress=progress,
                             status_prefix=f"{key}={value} ({i}/{len(values)}) ", **run_args)
        points.append(point_of(value, result, p99_limit_ns))
    knee, detail = find_knee(points)
    return SweepResult(profile.name, key, p99_limit_ns, tuple(points), knee, detail)
