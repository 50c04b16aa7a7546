"""Faults through a target-control executable (``via = "command"``): the array's own management interface.

fxprobe calls the executable the scenario names (``[fault] command = ["path", "arg"...]``) with one of

    drive-pull SLOT|SERIAL     drive-restore SLOT|SERIAL     port-down PORT     port-up PORT     status

and reads ``status``'s JSON on stdout (docs/target-control.md is the contract). Every call goes through the
runner, so it is in the run's commands.jsonl with its output, like any subprocess. The undo call is
journaled before the fault, so ``fxprobe fault restore`` can replay it in a new process.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from fxprobe.core.errors import BadInput, FxprobeError, ToolError
from fxprobe.faults.base import Method

REPO = Path(__file__).resolve().parent.parent.parent
UNDO = {"drive-pull": "drive-restore", "link-down": "port-up"}
DO = {"drive-pull": "drive-pull", "link-down": "port-down"}
TIMEOUT_S = 180


def resolve_executable(argv0: str) -> str | None:
    """The executable: a name on PATH, an absolute path, or a relative path from here or from the repo."""
    if "/" not in argv0:
        return shutil.which(argv0)
    for base in (Path.cwd(), REPO):
        candidate = Path(argv0) if Path(argv0).is_absolute() else base / argv0
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def hook_env(lab_name: str | None) -> dict:
    """What the executable is told about where it runs (recorded with each call)."""
    env = {"FXPROBE_PYTHON": sys.executable}
    if lab_name:
        env["FXPROBE_LAB"] = lab_name
    return env


def call(runner, argv: list[str], env: dict, what: str, timeout: float = TIMEOUT_S):
    """One call of the executable; a non-zero exit is a ToolError naming the call and its last stderr line."""
    result = runner.run(argv, timeout=timeout, env=env, label="target-control")
    if not result.ok:
        last = (result.stderr.strip().splitlines() or result.stdout.strip().splitlines() or ["no output"])[-1]
        code = "timed out" if result.timed_out else f"exit {result.returncode}"
        raise ToolError(f"target-control {what} failed ({code}): {last[-300:]}", hint=f"the call: {' '.join(argv)}")
    return result


def parse_status(text: str) -> dict:
    """``status``'s stdout: a JSON object with ``drives`` (and ``ports``) lists; BadInput otherwise."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadInput(f"target-control status: not JSON ({exc.msg})") from None
    if not isinstance(data, dict) or not isinstance(data.get("drives", []), list) \
            or not isinstance(data.get("ports", []), list):
        raise BadInput("target-control status: expected an object with 'drives' and 'ports' lists")
    return data


def find_drive(status: dict, target: str) -> dict | None:
    return next((d for d in status.get("drives", []) if isinstance(d, dict)
                 and target in (str(d.get("slot")), str(d.get("serial")))), None)


class TargetControl(Method):
    """drive-pull or link-down through the user's executable."""

    via = "command"
    record = "command"

    def __init__(self, env, fault: dict):
        super().__init__(env, fault)
        self.kind = fault["kind"]

    @property
    def base(self) -> list[str]:
        command = self.fault.get("command") or []
        found = resolve_executable(command[0]) if command else None
        return [found or (command[0] if command else "?"), *command[1:]]

    @property
    def lab_name(self) -> str | None:
        return getattr(self.env.lab, "name", None)

    @property
    def target(self) -> str:
        if self.kind == "drive-pull":
            if self.fault.get("serial"):
                return str(self.fault["serial"])
            slot = self._lab_slot()
            return str(slot) if slot is not None else "?"
        if self.fault.get("target_port"):
            return str(self.fault["target_port"])
        if self.env.lab is not None and self.fault.get("link") is not None:
            return f"{self.env.load_host}:{self.fault['link']}"
        return "?"

    def _lab_slot(self) -> int | None:
        if self.fault.get("slot") is not None:
            return int(self.fault["slot"])
        lab = self.env.lab
        if lab is None:
            return None
        export = lab.main_export if self.env.export == "main" else lab.state.export_named(self.env.export)
        return export.slots[0] if export and export.slots else None

    def argv(self, verb: str) -> list[str]:
        return [*self.base, verb, self.target]

    def plan(self) -> list[str]:
        return [f"target-control: {' '.join(self.argv(DO[self.kind]))} (status JSON checked first)",
                f"restore: {' '.join(self.argv(UNDO[self.kind]))}"]

    def probe(self) -> str | None:
        command = self.fault.get("command")
        if not command:
            return "no fault.command (the target-control executable and its arguments)"
        if self.kind not in DO:
            return f"{self.kind} is not in the target-control contract (drive-pull, link-down)"
        if resolve_executable(command[0]) is None:
            return f"{command[0]} is not an executable file (nor on PATH)"
        if self.kind == "link-down" and self.target == "?":
            return "no fault.target_port (the PORT the executable takes down)"
        if self.kind == "drive-pull" and self.target == "?" and self.env.lab is None:
            return "no fault.serial or fault.slot (the drive the executable pulls)"
        return None

    def status(self) -> dict:
        result = call(self.env.runner, [*self.base, "status"], hook_env(self.lab_name), "status")
        return parse_status(result.stdout)

    def refusals(self) -> list[str]:
        if self.kind != "drive-pull" or self.target == "?":
            return []
        drive = find_drive(self.status(), self.target)
        if drive is None:
            return [f"drive {self.target} is not in the target's status"]
        if drive.get("present") is False:
            return [f"drive {self.target} is already pulled (status)"]
        left = drive.get("redundancy_left")
        if isinstance(left, int) and not isinstance(left, bool) and left < 1:
            return [f"drive {self.target} is in {drive.get('md') or 'an array'} ({drive.get('level') or '?'}): "
                    "losing it exceeds the RAID's redundancy (data loss / I/O errors) (target-control status)"]
        return []

    @classmethod
    def undo(cls, record: dict, ctx) -> str:
        return restore(record, ctx.runner, ctx.env)

    def restore_record(self) -> dict:
        return {"method": self.record, "kind": self.kind, "target": self.target, "argv": self.argv(UNDO[self.kind]),
                "env": hook_env(self.lab_name)}

    def inject(self) -> None:
        target = self.target
        try:
            call(self.env.runner, self.argv(DO[self.kind]), hook_env(self.lab_name), f"{DO[self.kind]} {target}")
        finally:
            reread(self.env)
        if self.env.lab is not None:
            # the lab sees the drive go (uevent, md) and the link drop on its own; one more hook call under TCG
            # takes seconds out of the fault window (a 5 s window was restored 8.3 s after the request)
            return
        try:
            self.observed = self.effect(self.status())
        except FxprobeError as exc:             # the fault is judged on what else was seen (faults.seen)
            self.env.say(f"target-control status after {DO[self.kind]} {target}: {exc}")

    def effect(self, status: dict) -> list[str]:
        """What the executable's status says the fault did (an exit 0 alone is not proof): the drive absent, the
        port down; [] when its status shows neither (faults.seen then looks for other evidence)."""
        if self.kind == "drive-pull":
            drive = find_drive(status, self.target)
            return [f"target-control status after the pull: drive {self.target} present false"] \
                if drive is not None and drive.get("present") is False else []
        port = next((p for p in status.get("ports", []) if isinstance(p, dict)
                     and str(p.get("port")) == self.target), None)
        return [f"target-control status after port-down: port {self.target} up false"] \
            if port is not None and port.get("up") is False else []


def reread(env) -> None:
    """The lab hook runs in another process and writes the lab's state file: read it again."""
    if env is not None and getattr(env, "lab", None) is not None:
        env.lab.reload()


def restore(record: dict, runner, env=None) -> str:
    try:
        result = call(runner, list(record["argv"]), dict(record.get("env") or {}), " ".join(record["argv"][-2:]))
    finally:
        reread(env)
    said = (result.stdout.strip().splitlines() or ["done"])[-1]
    return f"target-control {' '.join(record['argv'][-2:])}: {said[:200]}"
