"""Issue 17.2: one command on many nodes (sub-run per node, one verdict) and G1 over a fleet of arrays."""

from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

import pytest

from fxprobe.cli.fleet import forwarded_args
from fxprobe.core.errors import BadInput
from fxprobe.core.hosts import LocalHost
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.core.verdict import Outcome
from fxprobe.gates import GATES, Evidence, load_config
from fxprobe.host import fleet
from gate_helpers import fxprobe

FXPROBE = (sys.executable, "-m", "fxprobe.cli.main")


def test_forwarded_args_keep_the_command_s_own_options_as_typed():
    given = ["--nodes", "a,b", "--lab=x", "--min-speed", "25G", "--iface", "l1", "--ssh-port", "2", "--strict"]
    assert forwarded_args(given) == ["--min-speed", "25G", "--iface", "l1", "--strict"]
    assert forwarded_args(["--serials", "f", "--expect-from=r", "--min-spare", "5"],
                          ("--serials", "--expect-from")) == ["--min-spare", "5"]


def test_two_nodes_run_at_once_each_leaves_a_sub_run_and_one_verdict(tmp_path):
    """Real subprocesses: fxprobe preflight on two 'nodes' (this machine under two names), folders fetched by tar."""
    run = RunDir.start("preflight", ["fxprobe", "preflight"], base=tmp_path)
    calls = [fleet.NodeCall(LocalHost(name), FXPROBE, ()) for name in ("n1", "n2")]
    results = fleet.run_fleet(Runner(run), run, calls, "preflight", timeout=300)
    assert [r.node for r in results] == ["n1", "n2"]
    for r in results:
        assert r.outcome == "pass", r.reason
        sub = run.path / r.run_dir
        assert (sub / "results.json").is_file() and (sub / "environment.json").is_file()
        assert RunDir.open(sub).results()["command"] == "preflight"
        assert RunDir(sub).integrity() == []          # fetched whole: the gates read it against its own manifest
    records = [json.loads(line) for line in (run.path / "commands.jsonl").read_text().splitlines()]
    assert sum(r["name"].endswith(("-fetch-n1", "-fetch-n2")) for r in records) == 2
    verdict = fleet.verdict("preflight", results)
    assert verdict.outcome is Outcome.PASS and [c.name for c in verdict.criteria] == ["n1: preflight", "n2: preflight"]


def test_a_node_whose_fxprobe_is_missing_is_an_error_naming_it(tmp_path):
    run = RunDir.start("inventory", ["fxprobe", "inventory"], base=tmp_path)
    calls = [fleet.NodeCall(LocalHost("good"), FXPROBE, ()),
             fleet.NodeCall(LocalHost("bad"), ("/nonexistent/fxprobe",), ())]
    results = fleet.run_fleet(Runner(run), run, calls, "inventory", timeout=300)
    bad = {r.node: r for r in results}["bad"]
    assert bad.outcome == "error" and "bad" in bad.reason
    verdict = fleet.verdict("inventory", results)
    assert verdict.outcome is Outcome.ERROR and "bad error" in verdict.reason


def test_names_listed_twice_are_refused():
    with pytest.raises(BadInput, match="listed twice"):
        fleet.check_names([fleet.NodeCall(LocalHost("a"), FXPROBE, ())] * 2)


def test_a_tar_that_climbs_out_is_refused(tmp_path):
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as archive:
        info = tarfile.TarInfo("../evil")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(BadInput, match="not unpacked"):
        fleet.extract(data.getvalue(), tmp_path / "node")


def fleet_selftest(base: Path, nodes: dict[str, tuple[str, int]]) -> Path:
    """A fleet selftest folder as `selftest --nodes` writes it: sub-runs nodes/<node>/ and the node list."""
    run = RunDir.start("selftest", ["fxprobe", "selftest", "--nodes", ",".join(nodes)], base=base)
    entries = []
    for node, (outcome, drives) in nodes.items():
        sub = RunDir.start("selftest", ["fxprobe", "selftest"], path=run.path / "nodes" / node)
        criteria = [{"name": "drives recognized", "outcome": outcome, "measured": drives, "threshold": 24,
                     "comparator": "=="}]
        written = sub.finish(Outcome(outcome), {"drives_recognized": drives, "node": "x",
                                                "verdict": {"name": "G1 self-test", "criteria": criteria}},
                             reason="" if outcome == "pass" else "drives recognized 23")
        entries.append({"node": node, "run_dir": f"nodes/{node}", "outcome": outcome, "results": written})
    entries.append({"node": "gone", "run_dir": None, "outcome": "error", "reason": "gone: ssh failed"})
    run.finish(Outcome.FAIL, {"nodes": entries})
    return run.path


def test_gate_g1_judges_each_array_of_a_fleet_run_and_names_the_failed_and_missing_ones(tmp_path):
    path = fleet_selftest(tmp_path, {"array": ("pass", 24), "array2": ("fail", 23)})
    evidence = Evidence.from_paths([path])
    assert sorted(r.node for r in evidence.runs) == ["array", "array2", "gone"]
    config = load_config(None).with_arrays(["array", "array2", "array3"])
    verdict = GATES["g1"].evaluate(evidence, config)
    c = {x.name: x for x in verdict.criteria}
    assert c["drives recognized [array]"].outcome is Outcome.PASS
    assert c["drives recognized [array2]"].outcome is Outcome.FAIL
    assert c["self-test passed [array2]"].outcome is Outcome.FAIL
    assert c["self-test passed [gone]"].outcome is Outcome.ERROR and "ssh failed" in c["self-test passed [gone]"].detail
    every = c["every array self-tested"]
    assert every.outcome is Outcome.NOT_RUN and "no selftest of array3" in every.detail
    assert verdict.outcome is Outcome.ERROR      # an unreachable array outranks a failed one


def test_gate_g1_arrays_option_and_file(tmp_path, capsys):
    path = fleet_selftest(tmp_path, {"array": ("pass", 24)})
    (tmp_path / "g.toml").write_text('[g1]\narrays = ["array", "array9"]\n')
    assert fxprobe(tmp_path, "gate", "g1", "--config", str(tmp_path / "g.toml"), "--evidence", str(path)) != 0
    assert "no selftest of array9" in capsys.readouterr().out
    assert fxprobe(tmp_path, "gate", "g1", "--arrays", "array", "--evidence", str(path)) == 4   # 'gone' errored
    assert "every array self-tested" in capsys.readouterr().out


def test_expect_from_a_fleet_run_sends_each_node_its_own_list(tmp_path):
    from fxprobe.cli.selftest import fleet_expected
    path = fleet_selftest(tmp_path, {"array": ("pass", 24)})
    sub = path / "nodes" / "array" / "results.json"
    data = json.loads(sub.read_text())
    data["drives"] = [{"serial": "SN2", "slot": "4"}, {"serial": "SN1", "slot": "3"}]
    sub.write_text(json.dumps(data))
    whole = json.loads((path / "results.json").read_text())
    whole["nodes"][0]["results"] = data
    (path / "results.json").write_text(json.dumps(whole))
    args, stdin = fleet_expected(None, path)("array")
    assert args == ["--serials", "/proc/self/fd/0"] and stdin == "3 SN1\n4 SN2\n"


def test_a_node_refusing_its_input_is_named_with_its_own_line_and_stdin_carries_the_list(tmp_path):
    """A node's fxprobe that stops on bad input makes no run folder: the reason is its own stderr line."""
    run = RunDir.start("selftest", ["fxprobe", "selftest"], base=tmp_path)
    calls = [fleet.NodeCall(LocalHost("n1"), FXPROBE, ("--serials", "-"), "# no serials\n")]
    (result,) = fleet.run_fleet(Runner(run), run, calls, "selftest", timeout=120)
    assert result.outcome == "error" and result.exit_code == 2
    assert "exited 2" in result.reason and "stdin: no serial numbers" in result.reason
