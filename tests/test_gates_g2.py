"""G2's benchmark comparison against the reference table: what it compares, with what, and what it keeps."""

from __future__ import annotations

import json
from pathlib import Path

from gate_helpers import BENCH, fxprobe, r2, results_of, runs_of

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = str(ROOT / "examples" / "claims" / "reference-r2.toml")


def test_copies_of_files_with_one_name_never_overwrite_each_other(tmp_path, capsys):
    """a/x.json (c8), a/03-x.json (c16), b/x.json (c32): the third copy went to raw/measured/03-x.json over the
    second, and the c16 criteria cited a file that held the c32 result."""
    for folder, name, level in (("a", "x.json", 8), ("a", "03-x.json", 16), ("b", "x.json", 32)):
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / name).write_bytes((BENCH / f"r2-array-c{level}.json").read_bytes())
    args = ["gate", "g2", "--reference", REFERENCE, "--measured", str(tmp_path / "a" / "x.json"),
            str(tmp_path / "a" / "03-x.json"), str(tmp_path / "b" / "x.json")]
    fxprobe(tmp_path, *args)
    (run,) = runs_of(tmp_path, "gate g2")
    table = results_of(run)["baseline_comparison"]
    files = {entry["file"] for entry in table.values()}
    assert len(files) == 3, table
    for metric, entry in table.items():
        level = int(metric.split()[0][1:])
        assert json.loads((run / entry["file"]).read_text())["max_concurrency"] == level, (metric, entry["file"])
    assert sorted(p.name for p in (run / "raw" / "measured").iterdir()) == ["03-2-x.json", "03-x.json", "x.json"]


def test_two_results_at_one_level_are_bad_input_before_anything_is_written(tmp_path, capsys):
    """The second c8 result silently replaced the first in the comparison table (G3 refuses the same)."""
    folder = tmp_path / "twoc8"
    folder.mkdir()
    (folder / "a-run1.json").write_bytes((BENCH / "r2-array-c8.json").read_bytes())
    slow = json.loads((BENCH / "r2-array-c8.json").read_text())
    slow["output_throughput"] = 40.0
    (folder / "b-run2.json").write_text(json.dumps(slow))
    assert fxprobe(tmp_path, "gate", "g2", "--reference", REFERENCE, "--measured", str(folder)) == 2
    err = capsys.readouterr().err
    assert "gate g2: two measured results at concurrency 8" in err and err.count("\n") == 1 and "Traceback" not in err
    assert runs_of(tmp_path, "gate g2") == []
    assert fxprobe(tmp_path, "gate", "g2", "--reference", REFERENCE, "--measured", r2("array")[0]) in (0, 1, 3)


def test_the_goodput_beside_a_line_efficiency_verdict_is_printed_so_that_it_decides(tmp_path):
    """FAIL at 82.99996 % printed '- goodput 83 Gb/s' beside it: a number that passes (proof border.py)."""
    from fxprobe.gates.catalog import G2
    from fxprobe.gates.config import GateConfig
    from fxprobe.gates.engine import Evidence
    from gate_helpers import fake_run
    for bps, outcome, shown in ((82.99996e9, "fail", "goodput 82.99996 Gb/s"), (84.12e9, "pass", "goodput 84.12 Gb/s")):
        run = fake_run(tmp_path / shown, "line-efficiency", {
            "transport": "rdma", "label": "RDMA READ (ib_read_bw)", "port_speed_bps": 100e9, "interface": "eth0",
            "summary": {"mean_bps": bps, "line_efficiency": bps / 100e9}})
        criterion = G2.evaluate(Evidence.from_paths([run]), GateConfig()).criteria[0]
        assert criterion.outcome.value == outcome and f"- {shown} against" in criterion.line(), criterion.line()


def test_only_the_array_s_reference_columns_are_compared_and_every_criterion_names_file_and_column(tmp_path, capsys):
    """Review proof runs2: `--ttft-column local_ttft_s --throughput-column local_tok_s` compared the array with the
    local NVMe drive's figures, printed nowhere; the slower array passed. Now refused (exit 2, one line); with the
    array's columns every criterion names the reference file and column, and the run records them."""
    slow = {"model_id": "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "max_concurrency": 8, "output_throughput": 44.5,
            "median_ttft_ms": 10200.0}
    (tmp_path / "slow-c8.json").write_text(json.dumps(slow))
    for option, column in (("--ttft-column", "local_ttft_s"), ("--throughput-column", "local_tok_s")):
        assert fxprobe(tmp_path, "gate", "g2", "--reference", REFERENCE, "--measured", str(tmp_path / "slow-c8.json"),
                       option, column) == 2
        err = capsys.readouterr().err
        assert f"{option} {column}: G2 compares the measured array with the reference's figures for the array" in err
        assert "array_tok_s, array_ttft_s" in err and err.count("\n") == 1 and "Traceback" not in err
    assert runs_of(tmp_path, "gate g2") == []
    assert fxprobe(tmp_path, "gate", "g2", "--reference", REFERENCE, "--measured", str(tmp_path / "slow-c8.json")) == 1
    out = capsys.readouterr().out
    assert "FAIL    baseline c8 TTFT p50 deviation: 35.5 % (need <= 10.0 %, margin -25.5 %) - measured 10.2 s vs " \
           f"reference 7.53 s ({REFERENCE} array_ttft_s at concurrency 8)" in out
    assert f"vs reference 56.6 output tok/s ({REFERENCE} array_tok_s at concurrency 8)" in out
    (run,) = runs_of(tmp_path, "gate g2")
    g2 = results_of(run)["g2"]
    assert (g2["ttft_column"], g2["throughput_column"]) == ("array_ttft_s", "array_tok_s")
    assert {e["column"] for e in results_of(run)["baseline_comparison"].values()} == {"array_ttft_s", "array_tok_s"}
    capsys.readouterr()
    assert fxprobe(tmp_path, "gate", "g2", "--evidence", str(run)) == 1               # re-judged: named again
    assert f"({REFERENCE} array_ttft_s at concurrency 8)" in capsys.readouterr().out


def test_a_recorded_comparison_with_another_column_or_none_is_not_run(tmp_path, capsys):
    from gate_helpers import fake_run
    for column, code in (("local_ttft_s", 3), (None, 3), ("array_ttft_s", 0)):
        entry = {"measured": 10.2, "reference": 10.17, "unit": "s", "reference_file": "r2.toml", "column": column}
        run = fake_run(tmp_path / str(column), "gate g2", {"baseline_comparison": {"c8 TTFT p50": entry}})
        line_eff = fake_run(tmp_path / str(column), "line-efficiency", {
            "summary": {"line_efficiency": 0.9, "mean_bps": 90e9}, "port_speed_bps": 100e9})
        assert fxprobe(tmp_path, "gate", "g2", "--evidence", str(run), str(line_eff)) == code
        out = capsys.readouterr().out
        if code:
            assert f"NOT RUN baseline c8 TTFT p50 deviation: - (need <= 10.0 %) - measured 10.2 s vs reference 10.17 s: " \
                   f"compared with column {column or '(not recorded)'} of r2.toml, not shown to be the array's" in out
        else:
            assert "PASS    baseline c8 TTFT p50 deviation: 0.3 %" in out and "(r2.toml array_ttft_s)" in out


def test_another_unit_or_another_model_is_not_compared_naming_both(tmp_path, capsys):
    """Review proof runs: a file with only request_throughput 56.6 req/s passed against 56.6 tok/s, and its model
    (some-other-7B-model) was never checked. Each is NOT RUN naming both sides; the array's own result is compared."""
    model = "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8"
    cases = {"other-model": ({"model_id": "some-other-7B-model"}, "model some-other-7B-model vs the reference's " + model),
             "no-model": ({"model_id": None}, "model not recorded vs the reference's " + model),
             "req-s": ({"model_id": model}, "throughput 56.6 req/s vs " + f"{REFERENCE} array_tok_s at concurrency 8 "
                                           "in output tok/s: not the same unit")}
    for name, (fields, words) in cases.items():
        data = {"max_concurrency": 8, "request_throughput": 56.6, "median_ttft_ms": 7530.0, **fields}
        (tmp_path / f"{name}.json").write_text(json.dumps({k: v for k, v in data.items() if v is not None}))
        fxprobe(tmp_path, "gate", "g2", "--reference", REFERENCE, "--measured", str(tmp_path / f"{name}.json"))
        out = capsys.readouterr().out
        assert "NOT RUN baseline comparison" in out and words in out, (name, out)
        assert "PASS    baseline c8 throughput" not in out, (name, out)
    fxprobe(tmp_path, "gate", "g2", "--reference", REFERENCE, "--measured", r2("array")[0])
    assert "PASS    baseline c8 throughput deviation: 0.0 %" in capsys.readouterr().out


def test_what_a_comparison_could_not_compare_stays_not_run_when_re_judged_and_every_level_is_required(tmp_path, capsys):
    """Review proof runs3: a run with 'no reference row for concurrency 64' NOT RUN showed only its PASS lines when
    re-judged from evidence, and c16/c32 were never asked for."""
    c64 = {"model_id": "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8", "max_concurrency": 64, "output_throughput": 20.0,
           "median_ttft_ms": 90000.0}
    (tmp_path / "c64.json").write_text(json.dumps(c64))
    assert fxprobe(tmp_path, "gate", "g2", "--reference", REFERENCE, "--measured", r2("array")[0],
                   str(tmp_path / "c64.json")) == 3
    live = capsys.readouterr().out
    (run,) = runs_of(tmp_path, "gate g2")
    assert fxprobe(tmp_path, "gate", "g2", "--evidence", str(run)) == 3
    again = capsys.readouterr().out
    for out in (live, again):
        assert "no reference row for concurrency 64" in out
        for level in (16, 32):
            assert f"NOT RUN baseline comparison: - (need <= 10.0 %) - no measured result at concurrency {level}, a " \
                   f"level of the reference {REFERENCE}" in out
    assert [l.split(":")[0].strip() for l in live.splitlines()[1:] if l.startswith("  ")] == \
        [l.split(":")[0].strip() for l in again.splitlines()[1:] if l.startswith("  ")]
    assert fxprobe(tmp_path, "gate", "g2", "--reference", REFERENCE, "--measured", *r2("array")) == 3   # the twin
    assert "NOT RUN baseline comparison" not in capsys.readouterr().out
