"""fault tune (issue 18 item 1): the table, the best setting and the advice that quotes the latest tune."""

import json

import pytest

from fxprobe.core.errors import BadInput
from fxprobe.faults import tune
from fxprobe.faults.scenario import load_scenario


def trial(transport, setting, repeat, verdict, stall, errors=0, thr=80.0):
    return tune.Trial(transport, setting, repeat, verdict, stall, errors, thr, f"/runs/{transport}-{repeat}")


ADVISED = tune.SETTINGS[1]


def test_table_best_and_lines():
    trials = [trial("tcp", {}, 1, "visible", 14.5), trial("tcp", {}, 2, "visible", 15.0),
              trial("tcp", ADVISED, 1, "visible", 8.0), trial("tcp", ADVISED, 2, "visible", 7.5),
              trial("rdma", ADVISED, 1, "invisible", 1.5), trial("rdma", ADVISED, 2, "invisible", 1.0, thr=60.0)]
    rows = tune.table(trials)
    assert [(r.transport, r.trials, r.stall_max) for r in rows] == [("tcp", 2, 15.0), ("tcp", 2, 8.0),
                                                                    ("rdma", 2, 1.5)]
    assert tune.best(rows).transport == "rdma"
    data = tune.summary(rows, 2.0)
    assert data["meets_criteria"] and data["best"]["stall_max_s"] == 1.5
    text = tune.lines(data)
    assert text[0].startswith("tcp  as connected (defaults)") and "stall 14.5/15.0 s" in text[0]
    assert "invisible 0/2" in text[0]
    assert text[-1] == ("best: rdma kato 2, reconnect_delay 1, ctrl_loss_tmo 60, fast_io_fail_tmo 5: longest stall "
                        "1.5 s (need <= 2 s), invisible 2/2")


def test_a_failed_run_keeps_its_setting_out_of_best():
    rows = tune.table([trial("tcp", {}, 1, "visible", 9.0),
                       tune.Trial("tcp", ADVISED, 1, "error", None, None, None, "/x", "boom")])
    assert rows[1].failed_runs == 1 and tune.best(rows).setting == {}
    data = tune.summary(rows, 2.0)
    assert not data["meets_criteria"] and "no setting met" in tune.lines(data)[-1]


def test_variant_sets_transport_and_resets_unnamed_timeouts():
    base = load_scenario("link-down-tuned")
    v = tune.variant(base, "rdma", {"keep_alive_tmo": 1})
    assert v.lab["transport"] == "rdma" and v.lab["keep_alive_tmo"] == 1
    assert v.lab["reconnect_delay"] == 0 and v.lab["fast_io_fail_tmo"] == -2 and v.lab["paths"] == base.lab["paths"]


def test_parse_setting():
    assert tune.parse_setting("kato=2,fast_io_fail_tmo=-1") == {"keep_alive_tmo": 2, "fast_io_fail_tmo": -1}
    assert tune.parse_setting("defaults") == {}
    with pytest.raises(BadInput):
        tune.parse_setting("kato=fast")


def test_advice_quotes_the_latest_tune_or_says_none(tmp_path):
    assert "no fault tune in" in tune.tune_advice(tmp_path)[0]
    for stamp, stall in (("20261204T010000.000000Z", 9.0), ("20261204T020000.000000Z", 7.5)):
        folder = tmp_path / f"{stamp}-fault-tune"
        folder.mkdir()
        data = tune.summary(tune.table([trial("tcp", ADVISED, 1, "visible", stall)]), 2.0)
        (folder / "results.json").write_text(json.dumps({"command": "fault tune", "finished": stamp, "tune": data}))
    line = tune.tune_advice(tmp_path)[0]
    assert "20261204T020000" in line and "longest stall 7.5 s" in line and "no measured setting met" in line
