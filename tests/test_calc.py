"""Calculators: model-switch utilization and storage cost share."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from fxprobe.gates import calc
from fxprobe.core.errors import BadInput
from gate_helpers import fxprobe


def test_r1_model_switch_figures_and_the_load_times_they_imply():
    assert calc.switch_time_for(0.467, 20) == pytest.approx(95.94)
    assert calc.switch_time_for(0.628, 20) == pytest.approx(66.96)
    t_before = calc.load_time(65.6, 0.98)
    assert t_before == pytest.approx(66.94, abs=0.01)
    assert round(calc.utilization(20, t_before) * 100, 1) == 62.8
    assert round(calc.utilization(20, calc.load_time(65.6, 5.23)) * 100, 1) == 93.0


@given(st.floats(0.1, 120), st.floats(0.001, 0.999))
def test_switch_time_inverts_utilization(switches, u):
    assert calc.utilization(switches, calc.switch_time_for(u, switches)) == pytest.approx(u)


def test_utilization_never_negative():
    assert calc.utilization(60, 120) == 0.0


def test_cost_share():
    share = calc.storage_cost_share(nodes=9, node_price=250_000, array_price=120_000, nodes_per_array=8,
                                    per_node_storage_price=2_000)
    assert share.arrays == 2
    assert share.share_pct == pytest.approx((2 * 120_000 + 9 * 2_000) / (9 * 250_000) * 100)


@pytest.mark.parametrize("kwargs", [dict(nodes=0, node_price=1, array_price=1),
                                    dict(nodes=8, node_price=0, array_price=1),
                                    dict(nodes=8, node_price=1, array_price=-1)])
def test_cost_bad_input(kwargs):
    with pytest.raises(BadInput):
        calc.storage_cost_share(**kwargs)


def test_cli(tmp_path, capsys):
    assert fxprobe(tmp_path, "model-switch", "--switches", "20", "--model-gb", "65.6", "--read-gbps", "0.98",
                   "--utilization", "46.7") == 0
    out = capsys.readouterr().out
    assert "utilization 62.8 %" in out and "utilization 46.7 % implies t = 95.94 s" in out
    assert fxprobe(tmp_path, "cost", "--nodes", "8", "--node-price", "200000", "--array-price", "250000") == 1
    assert "FAIL    storage share of GPU budget: 15.6 %" in capsys.readouterr().out
    assert fxprobe(tmp_path, "model-switch", "--switches", "20") == 2
