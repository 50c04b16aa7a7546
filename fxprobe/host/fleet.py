"""One command on many nodes at once: ``selftest``, ``inventory``, ``preflight``, ``netcheck`` with ``--nodes``.

Each node runs the same fxprobe command itself (over SSH, or in a lab guest), writing its own run folder
there; that folder comes back as ``nodes/<node>/`` of the one fleet run folder (a tar stream over the same
SSH connection, recorded like every subprocess). The fleet's verdict has one criterion per node: that
node's own outcome. A node that cannot be reached, or whose fxprobe fails, is an ERROR criterion naming
it; the other nodes still run.
"""

from __future__ import annotations

import io
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from fxprobe.core.errors import BadInput, FxprobeError
from fxprobe.core.hosts import Host, never_connected
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.core.verdict import Criterion, Outcome, Verdict

NODES_DIR = "nodes"
REMOTE_BASE = "/tmp/fxprobe-fleet"
FXPROBE_EXITS = (0, 1, 2, 3, 4, 130)      # fxprobe's own exit codes (130: interrupted)


@dataclass(frozen=True)
class NodeCall:
    """What one node runs: ``fxprobe`` there (argv prefix), the command's own arguments, its stdin."""

    host: Host
    fxprobe: tuple[str, ...]
    args: tuple[str, ...]
    input: str | None = None


@dataclass
class NodeResult:
    node: str
    host: dict
    run_dir: str | None = None              # relative to the fleet run folder
    outcome: str = Outcome.ERROR.value
    exit_code: int | None = None
    reason: str = ""
    results: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"node": self.node, "host": self.host, "run_dir": self.run_dir, "outcome": self.outcome,
                "exit_code": self.exit_code, "reason": self.reason, "results": self.results}


def node_name(host: Host) -> str:
    return host.name


def check_names(calls: list[NodeCall]) -> None:
    names = [node_name(c.host) for c in calls]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise BadInput(f"--nodes: {', '.join(dupes)} listed twice")
    for name in names:
        if not name or "/" in name or name.startswith("."):
            raise BadInput(f"--nodes: {name!r} cannot name a sub-run folder")


def extract(tar_bytes: bytes, into: Path) -> None:
    """Unpack a node's run folder: regular files and folders only, every path inside ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    root = into.resolve()
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as archive:
        for member in archive.getmembers():
            target = (into / member.name).resolve()
            if not (target == root or root in target.parents) or not (member.isfile() or member.isdir()):
                raise BadInput(f"{into.name}: the node's run folder holds {member.name!r}: not unpacked")
        archive.extractall(into, filter="data")


def run_node(runner: Runner, run: RunDir, call: NodeCall, command: str, timeout: float) -> NodeResult:
    name = node_name(call.host)
    result = NodeResult(name, call.host.to_dict())
    remote = f"{REMOTE_BASE}/{run.path.name}-{name}"
    argv = [*call.fxprobe, "--json", "--run-dir", remote, *command.split(), *call.args]
    try:
        done = runner.run(argv, timeout=timeout, host=call.host, input=call.input, label=f"{command}-{name}",
                          retry_if=never_connected, attempts=3)
    except FxprobeError as exc:
        result.reason = f"{name}: {exc}"
        return result
    result.exit_code = done.returncode
    if done.returncode is None:
        result.reason = f"{name}: `fxprobe {command}` did not finish within {timeout:.0f} s"
        return result
    last = (done.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1][-240:]
    if done.returncode == 255:
        result.reason = f"{name}: ssh failed: {last}"
        return result
    if done.returncode not in FXPROBE_EXITS:
        result.reason = f"{name}: `{' '.join(call.fxprobe)} {command}` exited {done.returncode}: {last}" + \
            (" (is fxprobe installed there? --remote-fxprobe names it)" if done.returncode in (126, 127) else "")
        return result
    folder = run.path / NODES_DIR / name
    tar_path = run.raw_path(f"{name}.tar")
    try:
        pack = runner.start(["tar", "-C", remote, "-cf", "-", "."], host=call.host, label=f"fetch-{name}",
                            stdout_path=tar_path)
        code = pack.wait(timeout=120)
        if code != 0 and done.returncode != 0:      # it stopped before it made a run folder (bad input)
            result.reason = f"{name}: `fxprobe {command}` exited {done.returncode}: {last}"
            return result
        if code != 0:
            raise BadInput(f"tar of {remote} exited {code}: {pack.output()[1].strip()[-200:]}")
        extract(tar_path.read_bytes(), folder)
        runner.run(["rm", "-rf", remote], timeout=60, host=call.host, label=f"clean-{name}")
    except FxprobeError as exc:
        result.reason = f"{name}: its run folder could not be fetched: {exc}"
        return result
    finally:
        tar_path.unlink(missing_ok=True)
    result.run_dir = f"{NODES_DIR}/{name}"
    try:
        result.results = RunDir.open(folder).results()
    except FxprobeError as exc:
        result.reason = f"{name}: {exc}"
        return result
    result.outcome = str(result.results.get("outcome") or Outcome.ERROR.value)
    result.reason = str(result.results.get("reason") or "")
    if result.outcome == Outcome.ERROR.value and not result.reason:
        result.reason = (done.stderr.strip().splitlines() or ["fxprobe failed"])[-1]
    return result


def run_fleet(runner: Runner, run: RunDir, calls: list[NodeCall], command: str,
              timeout: float = 900) -> list[NodeResult]:
    """Every node's command at the same time; results in the order the nodes were named."""
    check_names(calls)
    with ThreadPoolExecutor(max_workers=min(16, len(calls))) as pool:
        return list(pool.map(lambda call: run_node(runner, run, call, command, timeout), calls))


def _failing(results: dict) -> str:
    verdict = results.get("verdict") if isinstance(results.get("verdict"), dict) else {}
    bad = [c for c in verdict.get("criteria") or [] if isinstance(c, dict) and c.get("outcome") not in ("pass", None)]
    return "; ".join(f"{c.get('name')}: {c.get('outcome')} ({c.get('detail') or c.get('measured')})"[:300]
                     for c in bad)


def verdict(command: str, nodes: list[NodeResult]) -> Verdict:
    """One verdict: a criterion per node, its own outcome (pass only when every node passes)."""
    criteria = []
    for node in nodes:
        try:
            outcome = Outcome(node.outcome)
        except ValueError:
            outcome = Outcome.ERROR
        detail = "; ".join(filter(None, [node.reason, _failing(node.results)]))
        evidence = f"{node.run_dir}/results.json" if node.run_dir else ""
        criteria.append(Criterion(f"{node.node}: {command}", outcome, outcome.value, "pass", "==",
                                  detail=detail, evidence=evidence))
    bad = [c.name.split(":")[0] + f" {c.outcome.value}" for c in criteria if c.outcome is not Outcome.PASS]
    return Verdict(f"{command} on {len(nodes)} node(s)", tuple(criteria),
                   reason=("not passed on: " + ", ".join(bad)) if bad else "")


def summary(results: dict) -> str:
    """The few words a per-node table row shows for a sub-run."""
    command = results.get("command")
    if command == "selftest":
        return f"{results.get('drives_recognized', '?')} drives"
    if command == "inventory":
        inv = results.get("inventory") or {}
        return f"{len(inv.get('controllers') or [])} controllers, {len(inv.get('namespaces') or [])} namespaces"
    if command == "netcheck":
        return f"{len(results.get('interfaces') or [])} interface(s)"
    if command == "preflight":
        return f"{len(results.get('warnings') or [])} warning(s), {len(results.get('missing') or [])} missing"
    return ""


def table(nodes: list[NodeResult]) -> list[str]:
    width = max([4] + [len(n.node) for n in nodes])
    lines = [f"{'node':<{width}}  {'outcome':<8}  summary"]
    for node in nodes:
        text = summary(node.results) if node.results else ""
        why = node.reason if node.outcome != Outcome.PASS.value else ""
        lines.append(f"{node.node:<{width}}  {node.outcome:<8}  " + "; ".join(filter(None, [text, why]))[:160])
    return lines


def expected_input(expected) -> str:
    """An expected-drives list as the lines of a serials file (sent to a node on stdin)."""
    return "".join(f"{e.slot} {e.serial}\n" if e.slot else f"{e.serial}\n" for e in expected)


