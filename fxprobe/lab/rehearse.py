"""The main job: rehearse acceptance G1-G4 in the QEMU lab, quickly, and write a signed report.

Every step is one of fxprobe's own commands with its own run directory (commands that
belong on a node run inside the lab guest, their run directory on the guest's share and
copied out), so the rehearsal's evidence is exactly what a user's manual run would leave.
Gate verdicts use the configured thresholds: an emulated lab cannot reach 83 % of
100 GbE or hold load for 72 h, and the gate table says so. The rehearsal itself passes when
every step produced its evidence.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from fxprobe.core.errors import BadInput, FxprobeError
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.core.status import Status
from fxprobe.core.verdict import Criterion, Outcome, Verdict

# 8 host guests by default: G3's "8 nodes sharing one array" (scripts/bench_lab_hosts.py: 354.7 s from lab up to
# signed report, ready in 103 s, 6.4 GiB used at the peak, alone on the 2-core 24 GiB machine)
LAB_SPEC = dict(drives=24, raid="raid6", raid_drives=22, hosts=8, links=2, transport="tcp", drive_mb=128)
EMULATED_LINE_MBPS = 20       # what soft-RoCE under TCG sustains with room to spare
LOAD_PROFILE = "qwen25-32b-cold-restore"
G3_STREAMS = 16               # reader threads over all nodes in G3's read-back: the same load on the array for any --hosts
G3_CHUNK_TOKENS = 16          # 4 MiB KV chunks: G3's 64 MiB working set is 16 of them (the profile's 256
                              # tokens make one 64 MiB chunk, a few reads in a 5 s run)
FAULT_SCENARIOS = ("drive-pull", "link-down-tuned")   # the link cut with the timeouts fxprobe advises (fault tune)
OTHER_STEPS = 4 + 5           # G1, G2, G3, soak; joint report, verify, 2 judgements, report (and a step per fault)


@dataclass
class Step:
    name: str
    gate: str
    run_dir: Path | None = None
    code: int | None = None
    seconds: float = 0.0
    error: str = ""
    run_outcome: str = "none"   # the step's own verdict as its results.json records it (a lab step may rightly fail)

    def measured(self) -> str:
        if self.code is not None:
            return f"its verdict {self.run_outcome.upper()}, exit {self.code}"
        return f"its verdict {self.run_outcome.upper()}, the step raised" if self.produced else "not run"

    @property
    def produced(self) -> bool:
        return self.run_dir is not None and (self.run_dir / "results.json").exists()

    def to_dict(self) -> dict:
        return {"name": self.name, "gate": self.gate, "run_dir": str(self.run_dir) if self.run_dir else None,
                "exit_code": self.code, "seconds": round(self.seconds, 1), "error": self.error,
                "produced": self.produced, "run_outcome": self.run_outcome}


@dataclass
class Rehearsal:
    base: Path
    lab_name: str
    steps: list[Step] = field(default_factory=list)
    report: Path | None = None
    gate_table: list[str] = field(default_factory=list)          # with the buyer's thresholds (gates.toml)
    lab_gate_table: list[str] = field(default_factory=list)      # with the lab-scaled gates-lab.toml
    lab_scale: list[str] = field(default_factory=list)           # its SCALED values and NOT JUDGED criteria, why

    def verdict(self) -> Verdict:
        criteria = [Criterion(f"{s.gate} {s.name}: evidence written", Outcome.PASS if s.produced else Outcome.ERROR,
                              s.measured(), detail=s.error or (str(s.run_dir) if s.run_dir else ""))
                    for s in self.steps]
        return Verdict("rehearsal: every step left its evidence", tuple(criteria))

    def to_dict(self) -> dict:
        return {"lab": self.lab_name, "steps": [s.to_dict() for s in self.steps],
                "report": str(self.report) if self.report else None, "gate_table": self.gate_table,
                "lab_gate_table": self.lab_gate_table, "lab_scale": self.lab_scale}

    def side_by_side(self) -> list[str]:
        """The two gate tables row by row: the buyer's thresholds, then the lab-scaled ones (printed scaled)."""
        width = max([len(r) for r in self.gate_table] + [40])
        head = [f"{'with the buyer gates.toml':<{width}} | with the lab-scaled gates-lab.toml"]
        rows = [f"{b:<{width}} | {lab}" for b, lab in zip(self.gate_table, self.lab_gate_table)]
        return head + rows


class Rehearse:
    def __init__(self, runner: Runner, base: Path, progress: Callable[[str], None], key: Path | None,
                 soak_seconds: int = 60, lab_name: str | None = None, config: Path | None = None,
                 status: Status | None = None, hosts: int | None = None, runs_base: Path | None = None,
                 faults: tuple[str, ...] = FAULT_SCENARIOS):
        self.runner, self.base, self.progress = runner, base, progress
        self.runs_base = runs_base or base.parent     # where `fault tune` runs are found for the link-cut advice
        self.hosts = hosts or LAB_SPEC["hosts"]      # host guests of a lab the rehearsal boots (G3's nodes)
        self.status = status or Status("rehearse")      # the live line (no sinks: nothing shown)
        self.key, self.soak_seconds, self.reuse = key, soak_seconds, lab_name
        self.config = config          # the buyer's thresholds (None: ./gates.toml, else the built-in defaults)
        self.faults = faults          # G4's fault runs: scenario names (faults/) or .toml paths
        self.planned_steps = OTHER_STEPS + len(faults)
        self.lab = None
        self.result = Rehearsal(base, lab_name or "rehearse")

    # -- plumbing ----------------------------------------------------------------
    def step(self, name: str, gate: str, action: Callable[[Path], int]) -> Step:
        step = Step(name, gate)
        self.result.steps.append(step)
        self.status.phase(f"[{gate}] {name}", planned_s=self.planned_steps, done_s=len(self.result.steps) - 1,
                          unit="steps")
        if name.startswith("fault "):
            self.status.event("fault", name.split(" ", 1)[1], f"fxprobe fault run {name.split(' ', 1)[1]} (step "
                              f"{len(self.result.steps)})")
        self.progress(f"[{gate}] {name} ...")
        start = time.monotonic()
        target = self.base / "steps" / f"{len(self.result.steps):02d}-{slug(name)}"
        try:
            step.code = action(target)
        except FxprobeError as exc:
            step.error = str(exc)
        # an action that raised after its command wrote an error envelope still leaves that evidence
        step.run_dir = target if (target / "results.json").exists() else None
        if step.run_dir is not None:
            step.run_outcome = str(self.results_of(step).get("outcome", "?"))
        step.seconds = time.monotonic() - start
        self.status.progress(len(self.result.steps))
        self.progress(f"[{gate}] {name}: exit {step.code} in {step.seconds:.0f} s" + (f" ({step.error})" if step.error else ""))
        return step

    @staticmethod
    def results_of(step: Step) -> dict:
        try:
            return RunDir.open(step.run_dir).results()
        except BadInput:
            return {"outcome": "unreadable"}

    def in_guest(self, guest: str, argv: list[str], target: Path, timeout: float = 900) -> int:
        """fxprobe inside a guest, run directory on the guest's writable share, copied here."""
        share_name = f"rehearse-{target.name}"
        result = self.lab.exec(guest, self.lab.python("fxprobe.cli.main", "-q", "--run-dir", f"/fxlab/{share_name}",
                                                      *argv), timeout=timeout, label=f"{guest}-{argv[0]}")
        source = self.lab.folder / guest / share_name
        if source.exists():
            shutil.copytree(source, target)
            shutil.rmtree(source, ignore_errors=True)
        if not result.ok and not (target / "results.json").exists():
            raise FxprobeError(result.failure(f"{argv[0]} in {guest}"))
        return result.returncode

    # -- the steps ------------------------------------------------------------------
    def bring_up_lab(self) -> None:
        from fxprobe.lab.spec import LabSpec
        from fxprobe.lab.vm import Lab
        if self.reuse:
            self.lab = Lab.load(self.reuse, self.runner)
            return
        self.status.phase("lab: booting", planned_s=self.planned_steps, done_s=0, unit="steps")
        self.progress(f"lab: booting an array with 24 drives (raid6) and {self.hosts} hosts on 2 links each")
        self.lab = Lab.up(LabSpec(name=self.result.lab_name, **{**LAB_SPEC, "hosts": self.hosts}), self.runner,
                          progress=self.progress)

    def g1(self) -> None:
        drives = len(self.lab.state.drives)
        from fxprobe.lab.qemu import EMULATED_MODEL      # QEMU's drives report 0 % spare with threshold 0 %: said
        self.step("selftest", "G1", lambda t: self.in_guest("array", ["selftest", "--expect-drives", str(drives),
                                                                      "--emulated-drives", EMULATED_MODEL], t))

    def g2(self) -> None:
        link = self.lab.link(1, "host1")
        nic = link.host_nic

        def measure(target: Path) -> int:
            self.lab.exec("host1", ["ethtool", "-s", nic, "speed", str(EMULATED_LINE_MBPS), "duplex", "full"], check=True)
            self.lab.throttle(1, f"{EMULATED_LINE_MBPS}mbit", "host1")
            try:
                return self.line_efficiency(target, link.array_ip)
            finally:
                self.lab.throttle(1, "off", "host1")
                self.lab.exec("host1", ["ethtool", "-s", nic, "speed", str(self.lab.spec.link_speed), "duplex", "full"])
        self.step("line-efficiency (emulated 20 Mb/s link)", "G2", measure)

    def line_efficiency(self, target: Path, peer: str) -> int:
        from fxprobe.network import line_efficiency as le
        settings = le.Settings(peer=peer, size=64 * 1024, qps=1, duration=6, outstanding=2)
        argv = ["line-efficiency", "--lab", self.lab.name, "--client-node", "host1", "--server-node", "array",
                "--peer", peer, "--duration", "6", "--qps", "1", "--outs", "2", "--size", "64K"]

        def body(run: RunDir):
            outcome = le.run(Runner(run), settings, client=self.lab.guest("host1"), server_host=self.lab.guest("array"))
            return outcome.verdict, outcome.to_dict()
        return self.measured(target, "line-efficiency", argv, body)

    def g3(self) -> None:
        hosts = self.lab.hosts
        ceiling_gbps = self.lab.spec.link_speed / 1000
        threads = max(1, G3_STREAMS // len(hosts))
        argv = ["run", LOAD_PROFILE, "--target", "/dev/nvme0n1", "--lab", self.lab.name, "--nodes", ",".join(hosts),
                "--repeats", "1", "--runtime", "5", "--ramp", "1", "--size", "64M", "--ceiling", str(ceiling_gbps),
                "--no-layout", "--set", f"threads={threads}", "--set", f"chunk_tokens={G3_CHUNK_TOKENS}"]

        def body(run: RunDir):
            from fxprobe.lab.forward import guest_nodes
            from fxprobe.tools.fio import FIO_PORT
            from fxprobe.workload import run as workload
            run.note(workload={"profile": LOAD_PROFILE, "nodes": list(hosts)})
            with guest_nodes(self.lab, list(hosts), FIO_PORT) as nodes:
                result = workload.run_profile(LOAD_PROFILE, "/dev/nvme0n1", runner=Runner(run), nodes=nodes,
                                              repeats=1, runtime=5, ramp=1, max_bytes=64 * 2**20, layout=False,
                                              overrides={"threads": threads, "chunk_tokens": G3_CHUNK_TOKENS},
                                              ceiling_bps=ceiling_gbps * 1e9, progress=self.progress,
                                              status=Status("run"))
            return workload.run_verdict(result), {"workload": result.to_dict(), "array_seen": list(result.array_seen)}
        self.step("multi-node read-back", "G3", lambda t: self.measured(t, "run", argv, body))

    def g4(self) -> None:
        self.step("soak", "G4", lambda t: self.in_guest(
            "host1", ["soak", LOAD_PROFILE, "--target", "/dev/nvme0n1", "--duration", f"{self.soak_seconds}s",
                      "--size", "64M", "--sample", "5", "--allow-serial", self.namespace_serial()], t,
            timeout=self.soak_seconds + 600))
        for scenario in self.faults:
            self.step(f"fault {Path(scenario).stem}", "G4", lambda t, s=scenario: self.fault_run(t, s))

    def fault_run(self, target: Path, name: str) -> int:
        """``fxprobe fault run NAME --lab LAB``, through faults.command as the CLI runs it."""
        from fxprobe.faults import engine
        from fxprobe.faults.command import run_fault
        from fxprobe.faults.scenario import load_scenario
        scenario = load_scenario(name)
        options = engine.Options(lab=self.lab.name, progress=self.progress, status=Status("fault run"))
        run = self.begin(target, "fault run", ["fault", "run", name, "--lab", self.lab.name])
        with run.recording():
            run.note(dry_run=False, plan={"scenario": scenario.name, "kind": scenario.kind})
            done = run_fault(engine.build_plan(scenario, Runner(run), options), run, options, self.runs_base)
            run.finish(done.outcome, done.results, reason=done.reason)
        return done.outcome.exit_code

    def namespace_serial(self) -> str:
        """The lab's own exported namespace (disposable emulated drives), allow-listed for the soak's layout."""
        from fxprobe.lab.vm import MAIN_MD
        return f"FXLAB{MAIN_MD[:8].upper()}"

    @staticmethod
    def begin(target: Path, command: str, argv: list[str]) -> RunDir:
        """A measuring step's run folder, begun with the command line a person would have typed and the
        environment.json every fxprobe command writes."""
        from fxprobe.host import environment
        run = RunDir.start(command, ["fxprobe", *argv], path=target)
        environment.record(run)
        return run

    def measured(self, target: Path, command: str, argv: list[str],
                 body: Callable[[RunDir], tuple[Verdict, dict]]) -> int:
        """A measuring step through the library: ``body`` returns the verdict and its results; the envelope
        is the one the command writes (an error inside is the step's error outcome). Nothing is printed: the
        rehearsal ran its steps quietly (-q) when they went through the CLI, and still does."""
        run = self.begin(target, command, argv)
        with run.recording():
            verdict, results = body(run)
            run.finish(verdict.outcome, {"verdict": verdict.to_dict(), **results}, reason=verdict.reason)
        return verdict.outcome.exit_code

    def library_step(self, name: str, gate: str, command: str, argv: list[str],
                     body: Callable[[RunDir], tuple[Outcome, dict, str]]) -> Step:
        """A step run through the library (no CLI): its run folder, begun, with the envelope of the command a
        person would have typed (``argv``); an error inside is recorded as the step's error outcome."""
        def action(target: Path) -> int:
            run = RunDir.start(command, ["fxprobe", *argv], path=target)
            with run.recording():
                outcome, results, reason = body(run)
                run.finish(outcome, results, reason=reason)
            return outcome.exit_code
        return self.step(name, gate, action)

    def report_step(self, name: str, gate: str, evidence: list[Path], out: Path, key: Path, title: str) -> Step:
        from fxprobe.report.build import build_report
        argv = ["report", "build", *map(str, evidence), "--out", str(out), "--key", str(key), "--title", title]
        return self.library_step(name, gate, "report", argv, lambda run: (
            Outcome.PASS, {"report": build_report(evidence, out, key, title).to_dict()}, ""))

    def verify_step(self, bundle: Path, public: Path) -> Step:
        from fxprobe.report.bundle import verify_bundle

        def verify(run: RunDir) -> tuple[Outcome, dict, str]:
            result = verify_bundle(bundle, public)
            return result.outcome, {"verification": result.to_dict()}, result.reason
        argv = ["report", "verify", str(bundle), "--public-key", str(public)]
        return self.library_step("report verify", "G4", "report verify", argv, verify)

    def judge_step(self, name: str, evidence: list[Path], config_path: Path | None) -> Step:
        from fxprobe.gates import load_config
        from fxprobe.gates.catalog import judge_all
        config = load_config(config_path)
        argv = ["gate", "all", *[a for e in evidence for a in ("--evidence", str(e))]]
        argv += ["--config", str(config_path)] if config_path else []
        return self.library_step(name, "gates", "gate all", argv, lambda run: (
            lambda outcome, results, _: (outcome, results, ""))(*judge_all(evidence, config)))

    def signing_key(self) -> Path:
        from fxprobe.report.signing import generate_keypair
        key = self.key or self.base / "signing" / "fxprobe-signing.pem"
        if not key.exists():
            generate_keypair(key, key.with_suffix(".pub"))
        return key

    def lab_thresholds(self, shipped: Path, key: Path) -> Path:
        """gates-lab.toml as shipped, trusting the rehearsal's own signing key ([g4] trusted_signers: G4's sign-off
        trusts only a signer the gates file names) and naming the lab's array guest by its data ports ([array]
        addresses: every G2-G4 run must have measured it), written beside the rehearsal's steps."""
        from fxprobe.report.signing import fingerprint, load_private_key
        signer = fingerprint(load_private_key(key).public_key())
        text, found = re.subn(r"(?m)^trusted_signers = \[\]", f'trusted_signers = ["{signer}"]', shipped.read_text())
        if found != 1:
            raise BadInput(f"{shipped}: no 'trusted_signers = []' line to name the rehearsal's signer in")
        if self.lab is not None:
            ports = ", ".join(json.dumps(ip) for ip in sorted({link.array_ip for link in self.lab.links()}))
            text += (f"\n[array]  # written by the rehearsal: the lab {self.lab.name}'s array guest, by its data ports\n"
                     f'name = "lab {self.lab.name} array guest"\naddresses = [{ports}]\n')
        target = self.base / "thresholds" / shipped.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        return target

    def gates_and_report(self) -> None:
        """Sign the joint-test evidence, verify it against the pinned key (G4's sign-off), judge all gates twice -
        with the buyer's thresholds and with the lab-scaled gates-lab.toml - then the final signed report."""
        from fxprobe.gates.config import LAB_FILE
        evidence = [s.run_dir for s in self.result.steps if s.produced]
        key = self.signing_key()
        joint = self.base / "joint-test-report"
        built = self.report_step("joint-test report", "G4", evidence, joint, key,
                                 "fxprobe joint test in the QEMU lab (evidence before the gates)")
        if built.produced:
            verified = self.verify_step(joint, key.with_suffix(".pub"))
            if verified.produced:
                evidence.append(verified.run_dir)
        judged = []
        lab_file = self.lab_thresholds(LAB_FILE, key)
        for name, config in (("gate all (buyer's thresholds)", self.config), ("gate all (lab-scaled)", lab_file)):
            step = self.judge_step(name, evidence, config)
            if step.produced:
                judged.append(step.run_dir)
                results = self.results_of(step)
                table = gate_lines(results)
                if config is lab_file:
                    self.result.lab_gate_table = table
                    self.result.lab_scale = [str(n) for n in (results.get("thresholds") or {}).get("notes") or []]
                else:
                    self.result.gate_table = table
        self.result.report = self.base / "report"
        self.report_step("report", "report", evidence + judged, self.result.report, key,
                         "fxprobe rehearsal in the QEMU lab (emulated array)")

    def run(self) -> Rehearsal:
        try:
            self.bring_up_lab()
            for stage in (self.g1, self.g2, self.g3, self.g4):
                stage()
        finally:
            if self.lab is not None and not self.reuse:
                self.progress("lab: shutting down")
                self.lab.down()
        self.gates_and_report()
        self.status.close()
        return self.result


def slug(name: str) -> str:
    """A step's folder name: "line-efficiency (emulated 20 Mb/s link)" -> "line-efficiency-emulated-20-Mb-s-link"."""
    return re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")


def gate_lines(gates: dict) -> list[str]:
    """The gate table from `gate all` results, row for row the one the report shows."""
    from fxprobe.report.collect import verdict_from_dict
    from fxprobe.report.render import gate_table
    rows = gate_table([verdict_from_dict(v) for v in gates.get("gates") or [] if isinstance(v, dict)])
    return [f"{name:<40} {outcome:<8} {counts}" + (f" - {reason}" if reason else "")
            for name, outcome, counts, reason in rows]
