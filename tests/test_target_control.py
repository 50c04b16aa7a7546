"""Issue 17.3: the target-control hook (via = "command") against a real executable written by the test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fxprobe.core.errors import BadInput, NotRunnable, ToolError
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.faults import methods
from fxprobe.faults.control import TargetControl, parse_status
from fxprobe.faults.scenario import parse_scenario

STATUS = {"drives": [{"slot": "3", "serial": "SAFE1", "present": True, "redundancy_left": 2},
                     {"slot": "4", "serial": "LAST1", "present": True, "redundancy_left": 0}],
          "ports": [{"port": "1", "up": True}]}


def hook(tmp_path: Path, status: dict = STATUS, fail: str = "") -> Path:
    """An executable that logs each call and prints JSON, as the contract says."""
    path = tmp_path / "hook"
    path.write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path}/calls
[ "$1" = "{fail}" ] && {{ echo "management API said no" >&2; exit 1; }}
[ "$1" = status ] && {{ cat <<'J'
{json.dumps(status)}
J
exit 0; }}
echo '{{"ok": true}}'
""")
    path.chmod(0o755)
    return path


def method(tmp_path, runner, **fault) -> TargetControl:
    env = methods.Env(runner)
    return methods.choose(env, {"kind": "drive-pull", "via": "command", "command": [str(hook(tmp_path))], **fault})


def test_pull_and_restore_call_the_executable_and_are_recorded(tmp_path):
    run = RunDir.start("fault run", ["fxprobe"], base=tmp_path / "runs")
    runner = Runner(run)
    m = method(tmp_path, runner, serial="SAFE1")
    assert isinstance(m, TargetControl) and m.target == "SAFE1" and m.refusals() == []
    record = m.restore_record()
    m.inject()
    said = methods.restore_from_record(record, methods.Env(runner))
    assert "drive-restore SAFE1" in said
    assert (tmp_path / "calls").read_text().splitlines() == ["status", "drive-pull SAFE1", "status",
                                                            "drive-restore SAFE1"]
    names = [json.loads(line)["name"] for line in (run.path / "commands.jsonl").read_text().splitlines()]
    assert len([n for n in names if n.endswith("target-control")]) == 4


def test_a_drive_without_redundancy_left_is_refused_from_status(tmp_path):
    m = method(tmp_path, Runner(), serial="LAST1")
    assert "exceeds the RAID's redundancy" in m.refusals()[0]
    assert method(tmp_path, Runner(), slot=9).refusals() == ["drive 9 is not in the target's status"]


def test_a_failing_call_names_the_verb_and_what_the_target_said(tmp_path):
    env = methods.Env(Runner())
    m = methods.choose(env, {"kind": "drive-pull", "via": "command", "serial": "SAFE1",
                             "command": [str(hook(tmp_path, fail="drive-pull"))]})
    with pytest.raises(ToolError, match="drive-pull SAFE1 failed .exit 1.: management API said no"):
        m.inject()


def test_link_down_uses_port_down_and_port_up(tmp_path):
    env = methods.Env(Runner())
    m = methods.choose(env, {"kind": "link-down", "via": "command", "target_port": "eth4",
                             "command": [str(hook(tmp_path)), "--switch", "leaf1"]})
    assert m.plan()[0].endswith("--switch leaf1 port-down eth4 (status JSON checked first)")
    m.inject()
    methods.restore_from_record(m.restore_record(), env)
    assert (tmp_path / "calls").read_text().splitlines() == ["--switch leaf1 port-down eth4", "--switch leaf1 status",
                                                            "--switch leaf1 port-up eth4"]


def test_an_exit_0_is_not_proof_the_status_after_the_call_must_show_the_drive_absent_or_the_port_down(tmp_path):
    # the review's noop-hook: says yes to everything, changes nothing - its pull was taken as done
    noop = method(tmp_path, Runner(), serial="SAFE1")
    noop.inject()
    assert noop.observed == []
    pulled = {**STATUS, "drives": [{**STATUS["drives"][0], "present": False}], "ports": [{"port": "eth4", "up": False}]}
    real = method(tmp_path, Runner(), serial="SAFE1")
    assert real.effect(pulled) == ["target-control status after the pull: drive SAFE1 present false"]
    link = methods.choose(methods.Env(Runner()), {"kind": "link-down", "via": "command", "target_port": "eth4",
                                                 "command": [str(hook(tmp_path))]})
    assert link.effect(STATUS) == [] and link.effect(pulled) == ["target-control status after port-down: port eth4 "
                                                                 "up false"]


def test_missing_executable_or_argument_is_not_runnable(tmp_path):
    env = methods.Env(Runner())
    with pytest.raises(NotRunnable, match="not an executable"):
        methods.choose(env, {"kind": "drive-pull", "via": "command", "command": ["/nope/hook"], "serial": "A"})
    with pytest.raises(NotRunnable, match="target_port"):
        methods.choose(env, {"kind": "link-down", "via": "command", "command": [str(hook(tmp_path))]})


@pytest.mark.parametrize("text", ["", "[]", '{"drives": 3}', "not json"])
def test_status_that_breaks_the_contract_is_one_line(text):
    with pytest.raises(BadInput, match="target-control status"):
        parse_status(text)


def test_shipped_example_scenario_parses():
    root = Path(__file__).resolve().parent.parent
    scenario = parse_scenario((root / "examples/target-control/drive-pull-command.toml").read_text(), "x.toml")
    assert scenario.fault["via"] == "command" and scenario.fault["command"][0] == "examples/target-control/lab"
