"""G3 from the R2 reference table, and bad benchmark input."""

from __future__ import annotations

import pytest

from fxprobe.workload.benchmarks import load_benchmark
from fxprobe.gates.config import GateConfig, parse_config
from fxprobe.gates.g3 import comparisons_for, criteria_for
from fxprobe.core.verdict import Outcome, combine, format_number
from gate_helpers import BENCH, fxprobe, g3_args, r2, results_of, runs_of

EXPECTED_TTFT = {"c8": "26.0 %", "c16": "31.5 %", "c32": "26.3 %"}
EXPECTED_GAIN = {"c8": "28.9 %", "c16": "39.7 %", "c32": "32.8 %"}


def r2_comparisons():
    cand = [load_benchmark(p) for p in r2("array")]
    base = [load_benchmark(p) for p in r2("local-nvme")]
    return comparisons_for(cand, base)


def test_r2_figures_give_the_reference_reductions_and_gains():
    comparisons, unpaired = r2_comparisons()
    assert unpaired == []
    ttft = {c.label: format_number(c.change_pct, "%") for c in comparisons if c.kind == "ttft"}
    gain = {c.label: format_number(c.change_pct, "%") for c in comparisons if c.kind == "throughput"}
    print("\nR2 TTFT p50 reduction:", ttft, "\nR2 throughput gain:", gain)
    assert ttft == EXPECTED_TTFT
    assert gain == EXPECTED_GAIN


def test_r2_verdicts_follow_the_band_and_28_9_is_not_29():
    comparisons, unpaired = r2_comparisons()
    criteria = criteria_for(comparisons, unpaired, GateConfig())
    outcomes = {c.name: c.outcome for c in criteria}
    assert outcomes["c8 throughput gain (band low)"] is Outcome.FAIL
    low = next(c for c in criteria if c.name == "c8 throughput gain (band low)")
    assert "28.9 %" in low.line() and "need >= 29.0 %" in low.line() and "margin -0.1 %" in low.line()
    failing = [name for name, outcome in outcomes.items() if outcome is not Outcome.PASS]
    assert failing == ["c8 throughput gain (band low)"]
    assert combine([c.outcome for c in criteria]) is Outcome.FAIL


def test_a_wider_band_from_config_passes_c8():
    config = parse_config("[g3]\nthroughput_gain_min_pct = 28.5\n", "test.toml")
    comparisons, unpaired = r2_comparisons()
    assert all(c.outcome is Outcome.PASS for c in criteria_for(comparisons, unpaired, config))


def test_gate_g3_cli_prints_each_criterion_and_keeps_copies(tmp_path, capsys):
    code = fxprobe(tmp_path, *g3_args())
    out = capsys.readouterr().out
    assert code == 1                                    # c8 fails the band
    line = next(l for l in out.splitlines() if "c8 throughput gain (band low)" in l)
    assert line.strip().startswith("FAIL")
    for part in ("28.9 %", "need >= 29.0 %", "margin -0.1 %", "raw/candidate/r2-array-c8.json vs "):
        assert part in line
    for label, value in EXPECTED_TTFT.items():
        assert f"{label} TTFT p50 reduction: {value}" in out
    assert "NOT RUN multi-node read-back vs NIC ceiling" in out
    (run,) = runs_of(tmp_path, "gate g3")
    assert sorted(p.name for p in (run / "raw" / "candidate").iterdir()) == sorted(
        f"r2-array-c{c}.json" for c in (8, 16, 32))
    assert (run / "raw" / "baseline" / "r2-local-nvme-c8.json").read_bytes() == \
        (BENCH / "r2-local-nvme-c8.json").read_bytes()
    results = results_of(run)
    assert results["outcome"] == "fail"
    assert len(results["g3"]["comparisons"]) == 6
    assert (run / "manifest.json").exists()


@pytest.mark.parametrize("name, words", [
    ("foreign.json", ["foreign.json", "'median_ttft_ms'", "not a known benchmark result"]),
    ("truncated.json", ["truncated.json", "not valid JSON", "truncated?"]),
])
def test_foreign_or_truncated_benchmark_is_one_clear_line(tmp_path, capsys, name, words):
    code = fxprobe(tmp_path, "gate", "g3", "--candidate", str(BENCH / name),
                   "--baseline", str(BENCH / "r2-local-nvme-c8.json"))
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err
    for word in words:
        assert word in lines[0]
    assert runs_of(tmp_path, "gate g3") == []           # nothing written for bad input


def test_candidate_without_baseline_at_that_level_is_not_run(tmp_path, capsys):
    code = fxprobe(tmp_path, "gate", "g3", "--candidate", r2("array")[0], "--candidate", r2("array")[1],
                   "--baseline", r2("local-nvme")[0])
    out = capsys.readouterr().out
    assert code == 1
    assert "NOT RUN c16 comparison" in out and "no baseline at concurrency 16" in out


def test_g3_from_a_run_directory_and_rejudged_by_gate_all(tmp_path, capsys):
    assert fxprobe(tmp_path, *g3_args()) == 1
    (g3_run,) = runs_of(tmp_path, "gate g3")
    capsys.readouterr()
    config = tmp_path / "wide.toml"
    config.write_text("[g3]\nthroughput_gain_min_pct = 28.0\n")
    code = fxprobe(tmp_path, "gate", "all", "--evidence", str(g3_run), "--config", str(config))
    out = capsys.readouterr().out
    assert code == 3                                    # G1/G2/G4 have no evidence: not run
    assert "c8 throughput gain (band low): 28.9 % (need >= 28.0 %" in out
    assert "G1 delivery acceptance (custom thresholds): NOT RUN - no selftest run among the evidence" in out
    assert "CUSTOM g3.throughput_gain_min_pct = 28 (the buyer's 29)" in out            # each departure named


def test_g3_with_only_a_candidate_is_bad_input(tmp_path, capsys):
    assert fxprobe(tmp_path, "gate", "g3", "--candidate", r2("array")[0]) == 2
    assert "--baseline is missing" in capsys.readouterr().err


def test_g3_reads_benchmark_files_from_folders(tmp_path):
    cand, base = tmp_path / "cand", tmp_path / "base"
    (cand / "raw").mkdir(parents=True)
    base.mkdir()
    for path in r2("array"):
        (cand / "raw" / path.rsplit("/", 1)[1]).write_bytes(open(path, "rb").read())
    for path in r2("local-nvme"):
        (base / path.rsplit("/", 1)[1]).write_bytes(open(path, "rb").read())
    assert fxprobe(tmp_path, "gate", "g3", "--candidate", str(cand), "--baseline", str(base)) == 1
    (run,) = runs_of(tmp_path, "gate g3")
    assert len(results_of(run)["g3"]["comparisons"]) == 6


def _vllm(path, **fields):
    import json
    data = {"max_concurrency": 8, "median_ttft_ms": 1000, "output_throughput": 100, **fields}
    path.write_text(json.dumps(data))
    return str(path)


def test_different_models_are_not_compared(tmp_path, capsys):
    cand = _vllm(tmp_path / "a.json", model_id="Qwen/A")
    base = _vllm(tmp_path / "b.json", model_id="Qwen/B")
    assert fxprobe(tmp_path, "gate", "g3", "--candidate", cand, "--baseline", base) == 3
    assert "not comparable: model Qwen/A" in capsys.readouterr().out


def test_input_sizes_beyond_the_tolerance_are_not_run_and_failures_refused(tmp_path, capsys):
    """100,000 vs 80,000 input tokens was compared with a WARNING beside a PASS; now it is NOT RUN, the tolerance
    printed, and 100,000 vs 98,000 (2 %) is compared with both figures printed."""
    cand = _vllm(tmp_path / "a.json", model_id="Qwen/A", total_input_tokens=100000, median_ttft_ms=700,
                 output_throughput=130)
    base = _vllm(tmp_path / "b.json", model_id="Qwen/A", total_input_tokens=80000)
    assert fxprobe(tmp_path, "gate", "g3", "--candidate", cand, "--baseline", base) == 3
    out = capsys.readouterr().out
    assert "NOT RUN c8 comparison: - - not the same workload: input tokens 100,000 vs 80,000: 20.0 % apart " \
           "(tolerance 5 %)" in out and "c8 TTFT p50 reduction" not in out
    near = _vllm(tmp_path / "n.json", model_id="Qwen/A", total_input_tokens=98000)
    assert fxprobe(tmp_path, "gate", "g3", "--candidate", cand, "--baseline", near) == 3
    out = capsys.readouterr().out
    assert "PASS    c8 TTFT p50 reduction: 30.0 %" in out and "input tokens 100,000 vs 98,000: 2.0 % apart " \
           "(tolerance 5 %)" in out
    failed = _vllm(tmp_path / "f.json", total_input_tokens=100000, failed=3, median_ttft_ms=700, output_throughput=130)
    assert fxprobe(tmp_path, "gate", "g3", "--candidate", failed, "--baseline", base) == 2
    err = capsys.readouterr().err
    assert f"{failed}: field 'failed': 3 requests failed" in err and err.count("\n") == 1


def test_results_that_are_not_one_workload_are_not_compared(tmp_path, capsys):
    """Review proof runs5: a candidate of 3 requests at c16 against a baseline with no max_concurrency and no model and
    30,000 x the input tokens gave PASS with a WARNING. Each such pair is NOT RUN, naming what differs or is unknown;
    the honest twin (the same files, the same workload) is compared."""
    import json
    honest = {"model_id": "Qwen/Q", "max_concurrency": 16, "completed": 1000, "total_input_tokens": 90_000_000,
              "output_throughput": 53.6, "median_ttft_ms": 17310.0}
    cand = {**honest, "output_throughput": 74.9, "median_ttft_ms": 11850.0}
    cases = {"no concurrency, no model": ({k: v for k, v in honest.items() if k not in ("model_id", "max_concurrency")},
                                          "records no concurrency level"),
             "no model": ({k: v for k, v in honest.items() if k != "model_id"}, "not comparable: model unknown in"),
             "other model": ({**honest, "model_id": "Qwen/Other"}, "not comparable: model Qwen/Q in"),
             "3 requests": ({**honest, "completed": 3, "total_input_tokens": 3000},
                            "not the same workload: input tokens 90,000,000 vs 3,000: 100.0 % apart (tolerance 5 %)"),
             "requests only": ({**honest, "completed": 900}, "completed requests 1,000 vs 900: 10.0 % apart")}
    (tmp_path / "cand.json").write_text(json.dumps(cand))
    for name, (base, words) in cases.items():
        (tmp_path / "base.json").write_text(json.dumps(base))
        fxprobe(tmp_path, "gate", "g3", "--candidate", str(tmp_path / "cand.json"), "--baseline",
                str(tmp_path / "base.json"), "--config", str(_one_level(tmp_path, 16)))
        out = capsys.readouterr().out
        assert "G3 main joint test (custom thresholds): NOT RUN" in out and words in out, (name, out)
        assert "PASS    c16" not in out and "TTFT p50 reduction" not in out, (name, out)
    (tmp_path / "base.json").write_text(json.dumps(honest))
    fxprobe(tmp_path, "gate", "g3", "--candidate", str(tmp_path / "cand.json"), "--baseline",
            str(tmp_path / "base.json"), "--config", str(_one_level(tmp_path, 16)))
    out = capsys.readouterr().out
    assert "PASS    c16 TTFT p50 reduction: 31.5 %" in out and "model Qwen/Q at concurrency 16; input tokens " \
           "90,000,000 vs 90,000,000: 0.0 % apart (tolerance 5 %); completed requests 1,000 vs 1,000" in out


def _one_level(tmp_path, level):
    config = tmp_path / "one-level.toml"
    config.write_text(f"[g3]\nconcurrency_levels = [{level}]\n")
    return config


def test_a_required_level_left_out_is_not_run(tmp_path, capsys):
    """Review proof runs4: only c16 and c32 given (c8 fails the band at 28.9 %): every criterion passed and c8 was
    silently missing. Now c8 is NOT RUN, naming g3.concurrency_levels; all three levels given judge c8 (FAIL)."""
    args = ["gate", "g3", "--candidate", *r2("array", (16, 32)), "--baseline", *r2("local-nvme", (16, 32))]
    assert fxprobe(tmp_path, *args) == 3
    out = capsys.readouterr().out
    assert "NOT RUN c8 comparison: - - no candidate and baseline at concurrency 8, a required level " \
           "(g3.concurrency_levels = [8, 16, 32] (" in out
    assert "c16 throughput gain (band low): 39.7 %" in out and "FAIL" not in out
    (run,) = runs_of(tmp_path, "gate g3")
    capsys.readouterr()
    assert fxprobe(tmp_path, "gate", "g3", "--evidence", str(run)) == 3           # re-judged: the same
    assert "NOT RUN c8 comparison" in capsys.readouterr().out
    assert fxprobe(tmp_path, *g3_args()) == 1                                     # the twin: c8 judged, and fails
    assert "FAIL    c8 throughput gain (band low): 28.9 %" in capsys.readouterr().out
    assert fxprobe(tmp_path, *args, "--config", str(_one_level(tmp_path, 16))) == 3   # only c16 required: c32 extra
    assert "NOT RUN c8" not in capsys.readouterr().out


def test_four_outcomes_from_g3_evidence(tmp_path, capsys):
    """pass and fail from a good comparison, not run for the missing multi-node run, error for a broken one."""
    from gate_helpers import fake_run
    assert fxprobe(tmp_path, *g3_args()) == 1
    (good,) = runs_of(tmp_path, "gate g3")
    broken = fake_run(tmp_path / "ev", "gate g3", {"g3": {"comparisons": [{"label": "c8"}]}})
    capsys.readouterr()
    assert fxprobe(tmp_path, "gate", "g3", "--evidence", str(good), "--evidence", str(broken)) == 4
    out = capsys.readouterr().out
    assert out.startswith("G3 main joint test: ERROR")
    for word in ("\n  PASS ", "\n  FAIL ", "\n  NOT RUN ", "\n  ERROR   G3 benchmark comparison"):
        assert word in out


def test_pairing_rules():
    from dataclasses import replace
    from fxprobe.gates.g3 import pair_results
    from fxprobe.core.errors import BadInput
    a8, a16 = (load_benchmark(p) for p in r2("array", (8, 16)))
    b8, b16 = (load_benchmark(p) for p in r2("local-nvme", (8, 16)))
    loose = replace(b8, concurrency=None, source="loose.json")
    pairs, unpaired = pair_results([a8], [loose])       # a level unknown pairs with nothing, even one against one
    assert pairs == [] and [u.label for u in unpaired] == ["c8", "loose"]
    pairs, unpaired = pair_results([a8], [b16])
    assert pairs == [] and {u.label for u in unpaired} == {"c8", "c16"}
    pairs, unpaired = pair_results([a8, a16], [b8, loose])
    assert pairs == [(a8, b8)] and len(unpaired) == 2
    with pytest.raises(BadInput, match="two candidate results at concurrency 8"):
        pair_results([a8, a8], [b8])


def test_two_results_at_one_level_is_bad_input_before_anything_is_written(tmp_path, capsys):
    folder = tmp_path / "again"
    folder.mkdir()
    (folder / "repeat.json").write_bytes((BENCH / "r2-array-c8.json").read_bytes())
    args = ["gate", "g3", "--candidate", r2("array")[0], "--candidate", str(folder), "--baseline", r2("local-nvme")[0]]
    assert fxprobe(tmp_path, *args) == 2
    assert "two candidate results at concurrency 8" in capsys.readouterr().err
    assert runs_of(tmp_path, "gate g3") == []


def test_a_gate_g3_run_without_candidates_is_no_comparison_and_never_passes_g3_later(tmp_path, capsys):
    """`gate g3 --evidence RUN` with no --candidate/--baseline recorded g3: {comparisons: [], unpaired: []}; given
    as evidence later it gave zero benchmark criteria and G3 PASS on the two multi-node criteria alone."""
    from gate_helpers import fake_run, produced_multi_node
    multi = fake_run(tmp_path / "ev", "run", produced_multi_node(8, 0.95))
    assert fxprobe(tmp_path, "gate", "g3", "--evidence", str(multi)) == 3
    (empty,) = runs_of(tmp_path, "gate g3")
    assert "g3" not in results_of(empty)
    capsys.readouterr()
    assert fxprobe(tmp_path, "gate", "g3", "--evidence", str(multi), "--evidence", str(empty)) == 3
    assert "NOT RUN TTFT reduction and throughput gain: - - no G3 benchmark comparison among the evidence" in \
        capsys.readouterr().out
    old = fake_run(tmp_path / "ev", "gate g3", {"g3": {"comparisons": [], "unpaired": []}})   # an older fxprobe's
    assert fxprobe(tmp_path, "gate", "g3", "--evidence", str(multi), "--evidence", str(old)) == 3
    assert "NOT RUN TTFT reduction and throughput gain: - - " + f"{old}/results.json compares nothing" in \
        capsys.readouterr().out
    assert fxprobe(tmp_path, *g3_args("--config", str(_wide(tmp_path)), "--evidence", str(multi))) == 0   # the twin


def _wide(tmp_path):
    config = tmp_path / "wide.toml"
    config.write_text("[g3]\nthroughput_gain_min_pct = 28.0\n")
    return config


def test_a_baseline_of_zero_in_recorded_evidence_is_an_error_naming_the_file(tmp_path, capsys):
    """Comparison.change divided by a recorded baseline of 0: ZeroDivisionError, a traceback."""
    from gate_helpers import fake_run
    entry = {"label": "c8", "metric": "TTFT p50", "kind": "ttft", "candidate": 7.53, "baseline": 0.0, "unit": "s",
             "candidate_file": "raw/candidate/a.json", "baseline_file": "raw/baseline/b.json"}
    good = {**entry, "baseline": 10.17}
    for name, record, code in (("zero", entry, 4), ("good", good, 3)):
        run = fake_run(tmp_path / name, "gate g3", {"g3": {"comparisons": [record], "unpaired": []}})
        assert fxprobe(tmp_path, "gate", "g3", "--evidence", str(run)) == code
        out = capsys.readouterr().out
        if name == "zero":
            assert f"ERROR   c8 TTFT p50 reduction: - - {run}/raw/baseline/b.json: the baseline TTFT p50 is 0" in out
        else:
            assert "PASS    c8 TTFT p50 reduction: 26.0 %" in out


def test_the_aggregate_beside_a_ceiling_verdict_is_printed_so_that_it_decides(tmp_path):
    """FAIL at 89.996 % printed '- aggregate 90.00 Gb/s = 90.0 %' beside it (proof border.py)."""
    from fxprobe.gates.engine import Evidence
    from gate_helpers import fake_run, produced_multi_node
    from fxprobe.gates.g3 import G3
    for fraction, outcome, shown in ((0.89996, "fail", "aggregate 89.996 Gb/s over"), (0.93, "pass", "aggregate 93")):
        run = fake_run(tmp_path / outcome, "run", produced_multi_node(8, fraction))
        criterion = G3.evaluate(Evidence.from_paths([run]), GateConfig()).criteria[0]
        assert criterion.outcome.value == outcome and shown in criterion.line(), criterion.line()
        assert "90.0 %" not in criterion.detail and "90.00 Gb/s" not in criterion.detail
