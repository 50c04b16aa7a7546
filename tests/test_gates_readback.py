"""G3's multi-node read-back: judged against the gates config's NIC ceiling, only for a run that stands for distinct
nodes reading the array's block device direct (review items 2 and 9)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Outcome
from fxprobe.gates import Evidence, load_config
from fxprobe.gates.config import LAB_FILE, GateConfig
from fxprobe.gates.g3 import G3
from gate_helpers import fake_run, fxprobe, produced_multi_node

FIXTURES = Path(__file__).parent / "fixtures"
CEILING = "multi-node read-back vs NIC ceiling"
NODES = "nodes sharing one array"


def judged(folder: Path, config=None) -> dict:
    verdict = G3.evaluate(Evidence.from_paths([folder]), config or GateConfig())
    return {c.name: c for c in verdict.criteria}


def test_the_review_s_eight_loopback_nodes_on_a_warm_directory_are_not_run_never_134_8_percent(tmp_path, capsys):
    """Review proof warm8: a real run of 8 loopback 'nodes' on one host, a local directory through the page cache,
    --size 64M and --ceiling 10G passed at 134.8 % of the ceiling."""
    run = tmp_path / "warm8"
    run.mkdir()
    shutil.copy(FIXTURES / "readback" / "warm8-loopback.json", run / "results.json")
    RunDir(run).finalize()
    criteria = judged(run)
    ceiling, nodes = criteria[CEILING], criteria[NODES]
    assert ceiling.outcome is Outcome.NOT_RUN and ceiling.measured is None, ceiling.line()
    for words in ("target /tmp/review-g23/warm8/pool is a directory, not a block device",
                  "reads not direct: cache=warm", "nodes 127.0.0.1, 127.0.0.2, 127.0.0.3, 127.0.0.4, 127.0.0.5, "
                  "127.0.0.6, 127.0.0.7, 127.0.0.8 are this machine", "working set scaled down"):
        assert words in ceiling.detail, (words, ceiling.detail)
    assert nodes.outcome is Outcome.FAIL and nodes.measured == 0 and "not counted: 127.0.0.1" in nodes.detail
    assert fxprobe(tmp_path, "gate", "g3", "--evidence", str(run)) == 1
    assert "134.8" not in capsys.readouterr().out


def honest() -> dict:
    return produced_multi_node(8, 0.93)


def bent(change) -> dict:
    data = honest()
    change(data["workload"], data)
    return data


BENT = {
    "directory": (lambda w, d: w.update(target="/tmp/pool", target_check={"path": "/tmp/pool", "kind": "directory"}),
                  "target /tmp/pool is a directory, not a block device"),
    "warm": (lambda w, d: w["derivation"].update(cold=False), "reads not direct: cache=warm"),
    "no derivation": (lambda w, d: w.pop("derivation"), "the run records no derivation"),
    "local nodes": (lambda w, d: w.update(nodes=[f"local:127.0.0.{i}" for i in range(1, 9)]),
                    "nodes local:127.0.0.1, local:127.0.0.2"),
    "loopback": (lambda w, d: w.update(nodes=[f"127.0.0.{i}" for i in range(1, 9)]), "127.0.0.8 are this machine"),
    "recorded local": (lambda w, d: w.update(nodes=[f"10.0.0.{i}" for i in range(1, 9)],
                                             node_kinds={f"10.0.0.{i}": "local" for i in range(1, 9)}),
                       "nodes 10.0.0.1, 10.0.0.2"),
    "twice": (lambda w, d: w.update(nodes=["host1"] * 2 + [f"host{i}" for i in range(2, 8)]), "nodes host1 are this "),
    "scaled": (lambda w, d: w["derivation"].update(scaled=True), "working set scaled down (--size/--scale)"),
    "scaled note": (lambda w, d: w.update(notes=["working set scaled down: not a full-size run"]),
                    "working set scaled down"),
    # a full-size run of a profile written small: 16 GiB that the array's DRAM serves to all 8 nodes
    "cache-sized": (lambda w, d: w["derivation"].update(total_bytes=16 * 2 ** 30),
                    "working set 16 GiB (17,179,869,184 B) < 248 GiB (g3.readback_working_set_min_gib, built-in "
                    "defaults): an array's DRAM cache can hold it, so the read-back measures the cache"),
    "no working set": (lambda w, d: w["derivation"].pop("total_bytes"),
                       "the run records no working set (workload.derivation.total_bytes: None; need >= 248 GiB"),
}


@pytest.mark.parametrize("name", sorted(BENT))
def test_a_run_that_cannot_stand_for_nodes_sharing_the_array_is_not_run_and_its_honest_twin_passes(tmp_path, name):
    change, words = BENT[name]
    ceiling = judged(fake_run(tmp_path / "bent", "run", bent(change)))[CEILING]
    assert ceiling.outcome is Outcome.NOT_RUN and words in ceiling.detail, ceiling.line()
    twin = judged(fake_run(tmp_path / "honest", "run", honest()))
    assert twin[CEILING].outcome is Outcome.PASS and twin[NODES].outcome is Outcome.PASS, twin[CEILING].line()
    assert "93.0 %" in twin[CEILING].line() and "against the NIC ceiling 100 Gb/s (g3.nic_ceiling_gbps" in \
        twin[CEILING].detail


def test_the_run_s_own_fail_is_not_ignored(tmp_path):
    """Review proof g3fail: repeats 31 % apart (the run's own verdict FAIL) and a scaled working set passed at 93 %."""
    data = honest()
    data["verdict"] = {"name": "run p", "outcome": "fail", "criteria": [
        {"name": "repeats agree (largest pairwise difference)", "outcome": "fail", "measured": 31.0}]}
    ceiling = judged(fake_run(tmp_path, "run", data, outcome="fail"))[CEILING]
    assert ceiling.outcome is Outcome.NOT_RUN, ceiling.line()
    assert "the run's own verdict is FAIL (repeats agree (largest pairwise difference))" in ceiling.detail


def test_the_ceiling_is_the_gates_config_s_and_the_recorded_fraction_is_not_used(tmp_path):
    """Review proof g3ceil: an operator's --ceiling 10G made 9.5 Gb/s '95 %'; a fraction_of_ceiling edited to 0.95
    beside 50 Gb/s passed. Both are judged from the aggregate against g3.nic_ceiling_gbps (100 Gb/s)."""
    understated = judged(fake_run(tmp_path, "run", produced_multi_node(8, 0.95, ceiling_bps=10e9)))[CEILING]
    assert understated.outcome is Outcome.FAIL and understated.measured == pytest.approx(9.5), understated.line()
    assert "the run's own --ceiling 10 Gb/s is not used" in understated.detail
    edited = produced_multi_node(8, 0.50)
    edited["workload"]["concurrent"]["fraction_of_ceiling"] = 0.95
    edited = judged(fake_run(tmp_path, "run", edited))[CEILING]
    assert edited.outcome is Outcome.FAIL and edited.measured == pytest.approx(50.0), edited.line()
    config = tmp_path / "ten.toml"
    config.write_text("[g3]\nnic_ceiling_gbps = 10.0\n")          # a 10 GbE array port, stated in the gates file
    ten = judged(fake_run(tmp_path, "run", produced_multi_node(8, 0.95, ceiling_bps=10e9)), load_config(config))
    assert ten[CEILING].outcome is Outcome.PASS and "NIC ceiling 10 Gb/s (g3.nic_ceiling_gbps, " in ten[CEILING].detail


def test_more_than_the_ceiling_is_an_error(tmp_path):
    over = judged(fake_run(tmp_path, "run", produced_multi_node(8, 1.348, ceiling_bps=100e9)))[CEILING]
    assert over.outcome is Outcome.ERROR and "134.8 % of the NIC ceiling 100 Gb/s" in over.detail, over.line()
    assert "more than the NIC can carry" in over.detail
    at = judged(fake_run(tmp_path, "run", produced_multi_node(8, 1.0)))[CEILING]
    assert at.outcome is Outcome.PASS and at.measured == 100


def test_a_lab_scaled_file_accepts_a_scaled_or_failed_run_and_prints_it(tmp_path):
    """The QEMU lab's read-back is scaled down (--size 64M) and its short run may miss its own steady state: with
    gates-lab.toml it is judged, and why it was accepted is printed; with the buyer's file it is NOT RUN."""
    data = produced_multi_node(2, 0.004)
    data["workload"]["derivation"]["scaled"] = True
    data["verdict"] = {"name": "run p", "outcome": "fail", "criteria": [
        {"name": "steady state attained (repeats)", "outcome": "fail", "measured": 0}]}
    run = fake_run(tmp_path, "run", data, outcome="fail")
    lab = judged(run, load_config(LAB_FILE))[CEILING]
    assert lab.outcome is Outcome.PASS, lab.line()
    assert "accepted at lab scale only (" in lab.detail and "working set scaled down" in lab.detail
    assert "the run's own verdict is FAIL (steady state attained (repeats))" in lab.detail
    assert judged(run)[CEILING].outcome is Outcome.NOT_RUN


def test_the_captured_rehearsal_read_back_is_judged_at_lab_scale_and_not_run_with_the_buyer_s(tmp_path):
    """The lab's own captured multi-node read-back (2 guests, /dev/nvme0n1 over NVMe-oF, cold, --size 64M)."""
    source = FIXTURES / "report" / "rehearsal" / "03-multi-node-read-back"
    run = tmp_path / "03"
    shutil.copytree(source, run)
    lab = judged(run, load_config(LAB_FILE))
    buyer = judged(run)
    assert lab[CEILING].outcome in (Outcome.PASS, Outcome.FAIL) and lab[CEILING].measured is not None
    assert "accepted at lab scale only" in lab[CEILING].detail
    assert lab[NODES].outcome is Outcome.PASS and lab[NODES].measured == 2
    assert buyer[CEILING].outcome is Outcome.NOT_RUN and "working set scaled down" in buyer[CEILING].detail
    assert "nodes" not in buyer[CEILING].detail.split("not a read-back of distinct nodes sharing the array")[1]


def test_the_working_set_minimum_is_met_exactly_at_it_and_printed_to_the_byte_that_decides(tmp_path):
    at, below = bent(lambda w, d: w["derivation"].update(total_bytes=248 * 2 ** 30)), \
        bent(lambda w, d: w["derivation"].update(total_bytes=248 * 2 ** 30 - 2 ** 20))
    assert judged(fake_run(tmp_path / "at", "run", at))[CEILING].outcome is Outcome.PASS
    short = judged(fake_run(tmp_path / "below", "run", below))[CEILING]
    assert short.outcome is Outcome.NOT_RUN, short.line()
    assert "working set 247.999 GiB (266,286,923,776 B) < 248 GiB" in short.detail     # never "248.00 < 248"
    lab = judged(fake_run(tmp_path / "lab", "run", below), load_config(LAB_FILE))[CEILING]
    assert lab.outcome is Outcome.PASS, lab.line()
    assert "accepted at lab scale only" in lab.detail and "working set 247.999 GiB" in lab.detail
