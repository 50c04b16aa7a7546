"""Helpers for the gate/report tests: run fxprobe in-process and make fake evidence runs."""

from __future__ import annotations

import json
from pathlib import Path

from fxprobe.cli.main import main
from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Outcome

BENCH = Path(__file__).parent / "fixtures" / "bench"


def fxprobe(tmp_path: Path, *args: str) -> int:
    return main(["--runs", str(tmp_path / "runs"), *args])


def runs_of(tmp_path: Path, command: str) -> list[Path]:
    base = tmp_path / "runs"
    if not base.exists():
        return []
    return sorted(p for p in base.iterdir() if p.name.endswith("-" + command.replace(" ", "-")))


ARRAY_NQN = "nqn.2026-12.io.fxprobe:tests:array"      # the array the fake runs measured (array_seen)
ARRAY_PORTS = ["10.1.0.1", "10.2.0.1"]
TOUCHING = ("line-efficiency", "run", "soak", "fault run")


def array_seen(command: str, nqn: str = ARRAY_NQN, ports: list[str] = ARRAY_PORTS) -> list[dict]:
    """What a producer records of the array it measured: line efficiency its peer, a fio load the target's subsystem."""
    if command == "line-efficiency":
        return [{"addresses": ports[:1]}]
    return [{"node": "local", "target": "/dev/nvme0n1", "nqn": nqn, "serial": "FXLABTEST", "transport": "tcp",
             "addresses": list(ports)}]


def fake_run(base: Path, command: str, results: dict, outcome: str = "pass") -> Path:
    """A finished run directory whose results.json holds ``results`` (what a producer would write),
    in the library's envelope; a command that touches an array records the tests' array (``array_seen``)
    unless ``results`` says otherwise."""
    if command in TOUCHING and "array_seen" not in results:
        results = {**results, "array_seen": array_seen(command)}
    run = RunDir.start(command, ["fxprobe", *command.split()], base=base)
    run.finish(Outcome(outcome), results, reason="" if outcome == "pass" else f"planted {outcome}")
    return run.path


def rewritten(run_path: Path, results: dict | str | None = None) -> Path:
    """A run folder whose results.json (or any file) a test planted as a producer would have written it: with
    ``results`` written, its manifest.json made again over what is there (gates and reports check it)."""
    if results is not None:
        (Path(run_path) / "results.json").write_text(results if isinstance(results, str) else json.dumps(results))
    RunDir(Path(run_path)).finalize()
    return Path(run_path)


def signed_verification(base: Path, runs: list[Path]) -> tuple[Path, str]:
    """The joint-test report over ``runs`` signed with a new key, and `report verify` of it against that key (its
    run folder under ``base``): what G4's sign-off reads. Returns (the verify run, the signer's fingerprint)."""
    from fxprobe.report.build import build_report
    from fxprobe.report.signing import generate_keypair
    keys = Path(base) / "keys"
    fingerprint = generate_keypair(keys / "vendor.pem", keys / "vendor.pub")
    build_report(runs, Path(base) / "joint-test-report", keys / "vendor.pem")
    code = main(["--runs", str(Path(base) / "verified"), "-q", "report", "verify", str(Path(base) / "joint-test-report"),
                 "--public-key", str(keys / "vendor.pub")])
    assert code == 0, code
    (run,) = [p for p in sorted((Path(base) / "verified").iterdir()) if p.is_dir()]
    return run, fingerprint


def trusting(fingerprint: str, text: str = "", source: str = "gates.toml"):
    """A gates config (the buyer's thresholds, or ``text`` before it) that trusts the signer ``fingerprint``."""
    import re
    from fxprobe.gates.config import parse_config
    line = f'trusted_signers = ["{fingerprint}"]'
    if "trusted_signers" in text:
        text = re.sub(r"trusted_signers\s*=\s*\[[^\]]*\]", line, text, count=1)
    else:
        text = text.replace("[g4]", f"[g4]\n{line}", 1) if "[g4]" in text else f"{text}\n[g4]\n{line}\n"
    return parse_config(text, source)


def r2(side: str, levels=(8, 16, 32)) -> list[str]:
    return [str(BENCH / f"r2-{side}-c{c}.json") for c in levels]


def g3_args(*extra: str) -> list[str]:
    args = ["gate", "g3"]
    for path in r2("array"):
        args += ["--candidate", path]
    for path in r2("local-nvme"):
        args += ["--baseline", path]
    return args + list(extra)


def results_of(run_path: Path) -> dict:
    return json.loads((run_path / "results.json").read_text())


def produced_fault(kind: str, *, errors: int = 0, stall_s: float | None = 0.25, throughput_pct: float | None = 90.0,
                   p99_ratio: float | None = 1.5, mismatches: int = 0, verify: str = "crc32c",
                   hung: bool = False, scenario: str = "planted", verdict: str = "invisible",
                   fault_s: float = 30.0, recover_s: float = 30.0, region_bytes: int = 1 << 30,
                   seen: bool | None = True) -> dict:
    """What `fxprobe fault run` records that G4 reads, serialized by the producers' own classes (Impact,
    VerifyResult, Overrun) and criteria functions, with the figures given."""
    from fxprobe.faults import analysis, overrun, seen as seeing, verify as verifying
    from fxprobe.tools.fio import VerifyMismatch
    impact = analysis.Impact(
        log_msec=500, inject_ms=10_000, restore_ms=20_000, end_ms=30_000, errors=errors, first_error="",
        baseline_iops=400.0, window_iops=None if throughput_pct is None else 4 * throughput_pct,
        baseline_bw_kib=1600.0, window_bw_kib=None if throughput_pct is None else 16 * throughput_pct,
        throughput_pct=throughput_pct, longest_stall_s=stall_s, stall_start_ms=None, baseline_p99_ns=1_000_000,
        window_p99_ns=None if p99_ratio is None else int(p99_ratio * 1e6), p99_ratio=p99_ratio, recover_s=0.2,
        first_affected_ms=None, resolution_ms=1, source="fio per-I/O completion log")
    plan = verifying.VerifyPlan(verify, region_bytes, "4k", False, "" if verify != "off" else "the test said so")
    bad = tuple(VerifyMismatch("/dev/nvme0n1", 4096 * i, 4096, 4096 * i, 4096, "data", "0", "acca", verify)
                for i in range(mismatches))
    result = verifying.VerifyResult(plan, (verifying.Pass("load", 2 << 30, bad),) if plan.enabled else ())
    stuck = overrun.Overrun(130.0, "123 D nvme_wait", {}, "TERM, then KILL", True) if hung else None
    limits = {"max_errors": 0, "max_stall_s": 2.0, "min_throughput_pct": 50.0, "max_p99_ratio": 10.0}
    criteria = analysis.criteria(impact, limits) + [verifying.criterion(result)]
    observed = None if seen is None else seeing.Seen(
        seen, ("md127 raid6 [22/21] [_UUUUUUUUUUUUUUUUUUUUU] at +1.2 s",) if seen else (), "md array degraded",
        (0.0, fault_s + 1.0))
    timing = {"steady_s": 10.0, "settle_s": 2.0, "fault_s": fault_s, "recover_s": recover_s, "rebuild_s": 0.0}
    return {"plan": {"kind": kind, "scenario": scenario}, "verdict": verdict, "impact": impact.to_dict(),
            "scenario": {"name": scenario, "kind": kind, "timing": timing},
            "fault_seen": observed.to_dict() if observed else None,
            "verify": result.to_dict(), "load_hung": stuck.to_dict() if stuck else None,
            "criteria": [c.to_dict() for c in criteria]}


def produced_multi_node(nodes: int, fraction: float | None, ceiling_bps: float = 100e9, *,
                        sum_of_rates_pct: float | None = None) -> dict:
    """What `fxprobe run PROFILE --nodes ...` records that G3 reads, serialized by the producer's own classes
    (common_span.CommonSpan, Concurrent): one repeat whose nodes all ran for 4.75 s of 7.25 s and moved
    ``fraction`` of the ceiling meanwhile; None: they never all ran at once. The nodes' own rates added are
    ``sum_of_rates_pct`` of the ceiling (default: the same as the fraction)."""
    from fxprobe.workload import common_span
    names = tuple(f"host{i}" for i in range(1, nodes + 1))
    if fraction is None:
        span = common_span.CommonSpan(names, 250, 7.25, 0, 0.0, None, None, None, None, None,
                                      {"host1": [1_000_000, 1_003_750], "host2": [1_004_000, 1_007_250]}, 0.0, None,
                                      "the nodes never all ran at once: host2's first window starts 4.00 s in, "
                                      "after host1's last window ended (3.75 s in)")
    else:
        rate = fraction * ceiling_bps / 8
        ran = {n: [1_000_000, 1_007_250] for n in names}
        ran[names[0]][1], ran[names[-1]][0] = 1_006_000, 1_001_250       # host1 ends first, the last starts last
        span = common_span.CommonSpan(names, 250, 7.25, 19, 4.75, 1_001_250, 1_006_000, 1.25, names[-1], names[0],
                                      ran, rate * 4.75, rate)
    own = (sum_of_rates_pct / 100 if sum_of_rates_pct is not None else fraction or 0.5) * ceiling_bps / 8
    together = common_span.concurrent([span], own, ceiling_bps)
    return {"workload": {"profile": "qwen25-32b-cold-restore", "direction": "read", "nodes": list(names),
                         "target": "/dev/nvme1n1", "target_check": {"path": "/dev/nvme1n1", "kind": "block"},
                         "derivation": {"cold": True, "direct": False, "scaled": False,
                                        "total_bytes": 266_288_889_856}, "notes": [],     # 248 GiB: the minimum
                         "ceiling_bps": ceiling_bps, "fraction_of_ceiling": together.fraction_of_ceiling,
                         "bandwidth_bytes": {"mean": own}, "concurrent": together.to_dict()}}


def produced_selftest(drives: int = 24, *, emulated: bool = False, sysfs_root: str = "/", **smart) -> dict:
    """What `fxprobe selftest` records that G1 reads, made by the producer's own code (host.selftest: its drive
    records, its verdict, results_of), ``drives`` healthy PCIe drives; ``smart`` overrides the last drive's SMART
    figures; ``emulated``: QEMU's 0 % spare with threshold 0 % on every drive, named with --emulated-drives."""
    from fxprobe.host import selftest
    ok = {"critical_warning": 0, "media_errors": 0, "avail_spare": 0 if emulated else 100,
          "spare_thresh": 0 if emulated else 10, "percent_used": 1}
    records = [selftest.Drive(f"nvme{i}", f"FX{i:04d}", "QEMU NVMe Ctrl" if emulated else "FX Drive", "1.0", "pcie",
                              "live", f"nqn.fx:{i}", {**ok, **(smart if i == drives - 1 else {})}, slot=str(i + 3),
                              namespaces=({"name": f"nvme{i}n1", "size_bytes": 1 << 30, "read_only": False},))
               for i in range(drives)]
    limits = selftest.Limits(drives, emulated_model="QEMU NVMe Ctrl" if emulated else None)
    run = selftest.SelftestRun(records, selftest.evaluate(records, limits), [], [])
    return {**selftest.results_of(run, limits), "sysfs_root": sysfs_root, "verdict": run.verdict.to_dict()}
