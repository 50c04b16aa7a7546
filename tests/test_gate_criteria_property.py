"""For every gate criterion (issue 13, Must-show 2): generated measured/threshold pairs, written into a run
folder through the real envelope and judged by the gate, agree with an independent decimal comparison -
including values exactly at the threshold. The figures are decimals; the oracle is Python's Decimal/Fraction
on the decimal strings, not fxprobe's comparison (core.verdict.decide)."""

from __future__ import annotations

import tempfile
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import annotated_types
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fxprobe.core.verdict import Outcome
from fxprobe.gates.catalog import GATES, LINE_RATE_NAME, PORT_SPEED_NAME
from fxprobe.gates.config import DEFAULTS, GateConfig, GatesFile
from fxprobe.gates.engine import Check, Evidence
from gate_helpers import fake_run, produced_multi_node

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
WORK = Path(tempfile.mkdtemp(prefix="fxprobe-criteria-"))
CHECKS = [(key, check) for key, gate in GATES.items() for check in gate.checks if isinstance(check, Check)]
TRUTH = {">=": lambda m, t: m >= t, "<=": lambda m, t: m <= t, ">": lambda m, t: m > t, "<": lambda m, t: m < t,
         "==": lambda m, t: m == t}


def decimals(low: str, high: str, places: int = 4):
    return st.decimals(min_value=Decimal(low), max_value=Decimal(high), places=places, allow_nan=False,
                       allow_infinity=False)


def threshold(gate: str, key: str):
    """A threshold the gates file allows for ``gate.key`` (its type and bounds read from the schema)."""
    info = GatesFile.model_fields[gate].annotation.model_fields[key]
    low = next((m.ge for m in info.metadata if isinstance(m, annotated_types.Ge)), None)
    low = low if low is not None else next((m.gt for m in info.metadata if isinstance(m, annotated_types.Gt)), 0)
    high = next((m.le for m in info.metadata if isinstance(m, annotated_types.Le)), 10_000)
    if info.annotation is int:
        return st.integers(max(int(low), 0 if low == 0 else 1), min(int(high), 60)).map(Decimal)
    return decimals(str(low), str(high), 2).filter(lambda d: d > 0 or low == 0)


def config(gate: str, key: str, value: Decimal) -> GateConfig:
    values = {g: dict(v) for g, v in DEFAULTS.items()}
    values[gate][key] = int(value) if value == value.to_integral_value() and isinstance(DEFAULTS[gate][key], int) \
        else float(value)
    return GateConfig(values, "generated")


def put(data: dict, dotted: str, value) -> None:
    *path, last = dotted.split(".")
    for key in path:
        data = data.setdefault(key, {})
    data[last] = value


def evidence_for(check: Check, raw) -> Path:
    """A run folder the check's requirement matches, its field holding ``raw``."""
    requirement, results = check.requirement, {}
    for key, value in requirement.where:
        put(results, key, value[0] if isinstance(value, tuple) else value)
    for key, value in requirement.unless:
        put(results, key, not value)
    for key, least in requirement.at_least:
        put(results, key, [f"node{i}" for i in range(least)])
    put(results, check.field.split("|")[0], raw)
    return fake_run(Path(tempfile.mkdtemp(dir=WORK)), requirement.commands[0], results)


def judged(gate: str, cfg: GateConfig, folder: Path, name: str):
    criteria = {c.name: c for c in GATES[gate].evaluate(Evidence.from_paths([folder]), cfg).criteria}
    return criteria[name]


@pytest.mark.parametrize("gate, check", CHECKS, ids=[c.name for _, c in CHECKS])
@SETTINGS
@given(data=st.data())
def test_every_declared_criterion_agrees_with_decimal(gate, check, data):
    t = data.draw(threshold(gate, check.threshold))
    least = dict(check.requirement.at_least).get(check.field, 0)
    if check.count:
        m = Decimal(data.draw(st.integers(least, 60)))
    else:
        m = data.draw(decimals("-10000", "10000"))
    if data.draw(st.booleans()) and (not check.count or t >= least):
        m = t                                                       # exactly at the threshold
    raw = [{"n": i} for i in range(int(m))] if check.count else float(Fraction(m) / Fraction(check.scale))
    criterion = judged(gate, config(gate, check.threshold, t), evidence_for(check, raw), check.name)
    expected = Outcome.PASS if TRUTH[check.comparator](m, t) else Outcome.FAIL
    assert criterion.outcome is expected, (m, t, criterion.line())


@SETTINGS
@given(measured=decimals("0.0001", "1000"), reference=decimals("0.0001", "1000"),
       tolerance=decimals("0", "100", 2), at=st.booleans())
def test_g2_baseline_deviation_agrees_with_decimal(measured, reference, tolerance, at):
    if at:                                    # a deviation exactly at the tolerance: measured = ref * (1 + tol)
        measured = reference * (1 + tolerance / 100)
    folder = fake_run(Path(tempfile.mkdtemp(dir=WORK)), "gate g2", {"baseline_comparison": {
        "c8 TTFT p50": {"measured": float(measured), "reference": float(reference), "unit": "s",
                        "reference_file": "reference-r2.toml", "column": "array_ttft_s"}}})
    criterion = judged("g2", config("g2", "baseline_tolerance_pct", tolerance), folder, "baseline c8 TTFT p50 deviation")
    deviation = abs(Fraction(Decimal(repr(float(measured)))) / Fraction(reference) - 1) * 100
    expected = Outcome.PASS if deviation <= Fraction(tolerance) else Outcome.FAIL
    assert criterion.outcome is expected, (measured, reference, tolerance, criterion.line())


@SETTINGS
@given(goodput_gbps=decimals("0.001", "400", 3), port_gbps=st.sampled_from([Decimal(10), Decimal(25), Decimal(100),
                                                                             Decimal(200), Decimal(400)]),
       rate=st.sampled_from([Decimal(25), Decimal(100), Decimal("0.02")]), least=decimals("1", "100", 1),
       at=st.booleans())
def test_g2_line_rate_criteria_agree_with_decimal(goodput_gbps, port_gbps, rate, least, at):
    if at:
        goodput_gbps = rate * least / 100
    folder = fake_run(Path(tempfile.mkdtemp(dir=WORK)), "line-efficiency", {
        "summary": {"mean_bps": float(goodput_gbps * 10**9), "line_efficiency": 0.5}, "interface": "eth0",
        "port_speed_bps": int(port_gbps * 10**9), "label": "RDMA"})
    cfg = config("g2", "line_efficiency_min_pct", least)
    cfg.values["g2"]["line_rate_gbps"] = float(rate)
    efficiency = Fraction(Decimal(repr(float(goodput_gbps * 10**9)))) / (Fraction(rate) * 10**9) * 100
    line = judged("g2", cfg, folder, LINE_RATE_NAME)
    assert line.outcome is (Outcome.PASS if efficiency >= Fraction(least) else Outcome.FAIL), line.line()
    port = judged("g2", cfg, folder, PORT_SPEED_NAME)
    assert port.outcome is (Outcome.PASS if port_gbps >= rate else Outcome.FAIL), port.line()


@SETTINGS
@given(baseline=decimals("0.01", "200", 2), candidate=decimals("0.01", "200", 2),
       ttft_min=decimals("0", "100", 1), band=st.tuples(decimals("0", "100", 1), decimals("0", "100", 1)),
       at=st.sampled_from([None, "ttft", "low", "high"]))
def test_g3_ttft_reduction_and_throughput_band_agree_with_decimal(baseline, candidate, ttft_min, band, at):
    low, high = sorted(band)
    if at == "ttft":
        candidate = baseline * (1 - ttft_min / 100)
    elif at in ("low", "high"):
        candidate = baseline * (1 + (low if at == "low" else high) / 100)
    entries = [{"label": "c8", "metric": metric, "kind": kind, "candidate": float(candidate),
                "baseline": float(baseline), "unit": unit, "candidate_file": "a.json", "baseline_file": "b.json"}
               for metric, kind, unit in (("TTFT p50", "ttft", "s"), ("throughput", "throughput", "tok/s"))]
    folder = fake_run(Path(tempfile.mkdtemp(dir=WORK)), "gate g3", {"g3": {"comparisons": entries, "unpaired": []}})
    cfg = config("g3", "ttft_reduction_min_pct", ttft_min)
    cfg.values["g3"].update(throughput_gain_min_pct=float(low), throughput_gain_max_pct=float(high))
    c, b = Fraction(Decimal(repr(float(candidate)))), Fraction(Decimal(repr(float(baseline))))
    reduction, gain = (b - c) / b * 100, (c / b - 1) * 100
    for name, truth in (("c8 TTFT p50 reduction", reduction >= Fraction(ttft_min)),
                        ("c8 throughput gain (band low)", gain >= Fraction(low)),
                        ("c8 throughput gain (band high)", gain <= Fraction(high))):
        criterion = judged("g3", cfg, folder, name)
        assert criterion.outcome is (Outcome.PASS if truth else Outcome.FAIL), criterion.line()


@SETTINGS
@given(data=st.data())
def test_g3_multi_node_read_back_vs_ceiling_agrees_with_decimal(data):
    """What the nodes moved while all ran (workload.concurrent.aggregate_bps) x 8 / the configured ceiling
    (g3.nic_ceiling_gbps, 100 Gb/s) x 100, exact; above 100 % it is an error, never judged. The fraction the run
    recorded is not used (here it says 0)."""
    t = data.draw(threshold("g3", "nic_ceiling_min_pct"))
    fraction = t / 100 if data.draw(st.booleans()) else data.draw(decimals("0", "2", 6))
    results = produced_multi_node(8, float(fraction))
    results["workload"]["concurrent"]["aggregate_bps"] = aggregate = float(fraction * Decimal(100e9) / 8)
    results["workload"]["concurrent"]["fraction_of_ceiling"] = 0.0
    folder = fake_run(Path(tempfile.mkdtemp(dir=WORK)), "run", results)
    criterion = judged("g3", config("g3", "nic_ceiling_min_pct", t), folder, "multi-node read-back vs NIC ceiling")
    measured = Fraction(Decimal(repr(aggregate))) * 8 / 10 ** 9
    truth = Outcome.ERROR if measured > 100 else Outcome.PASS if measured >= Fraction(t) else Outcome.FAIL
    assert criterion.outcome is truth, (fraction, t, criterion.line())
