"""A vllm bench serve result is checked against its own counts and samples before a gate reads it: a file built by
vLLM's own formulas passes, and each figure edited alone (the throughput G3 judges raised 5 %, the median TTFT
lowered, a count changed, a number written as a string) is refused naming the field and both values."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy
import pytest
from hypothesis import given, settings, strategies as st

from fxprobe.core.errors import BadInput
from fxprobe.workload import benchmark_checks
from fxprobe.workload.benchmarks import parse_benchmark_text


def vllm_result(ttfts: list[float], output_lens: list[int], input_lens: list[int], duration: float,
                detailed: bool = True) -> dict:
    """The fields ``vllm bench serve --save-result`` writes, computed as vllm/benchmarks/serve.py calculate_metrics
    computes them (numpy median, linear percentiles, counts / duration), then through JSON as vLLM writes it."""
    out, inp, done = sum(output_lens), sum(input_lens), len(ttfts)
    data = {"date": "20261207-120000", "backend": "vllm", "model_id": "Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8",
            "max_concurrency": 8, "duration": duration, "completed": done, "failed": 0,
            "total_input_tokens": inp, "total_output_tokens": out, "request_throughput": done / duration,
            "output_throughput": out / duration, "total_token_throughput": (inp + out) / duration,
            "mean_ttft_ms": numpy.mean(ttfts) * 1000, "median_ttft_ms": numpy.median(ttfts) * 1000,
            "std_ttft_ms": numpy.std(ttfts) * 1000,
            **{f"p{p}_ttft_ms": numpy.percentile(ttfts, p) * 1000 for p in (50, 90, 99)}}
    if detailed:
        data.update(ttfts=ttfts, output_lens=output_lens, input_lens=input_lens)
    return json.loads(json.dumps(data, default=float))


@pytest.fixture
def genuine() -> dict:
    rng = numpy.random.default_rng(7)
    return vllm_result([float(x) for x in rng.uniform(0.4, 9.0, 96)],
                       [int(x) for x in rng.integers(64, 512, 96)], [int(x) for x in rng.integers(2000, 9000, 96)],
                       812.3456)


def test_a_file_built_by_vllm_formulas_passes_and_says_what_it_checked(genuine):
    result = parse_benchmark_text(json.dumps(genuine), "c8.json")
    line = result.notes[0]
    assert line.startswith("checked against the file's own counts: request_throughput, output_throughput, "
                           "total_token_throughput = counts / duration; ")
    for part in ("median_ttft_ms", "p99_ttft_ms", "mean_ttft_ms", "completed (number of ttfts)",
                 "total_output_tokens (sum of output_lens)", "relative tolerance 1e-06, counts equal"):
        assert part in line
    assert "not checkable" not in line
    assert result.throughput == genuine["output_throughput"] and result.ttft_s["p50"] == genuine["p50_ttft_ms"] / 1000


@pytest.mark.parametrize("field, change", [
    ("output_throughput", 1.05),      # the G3 throughput gain, 5 % better
    ("request_throughput", 1.05),
    ("total_token_throughput", 0.98),
    ("median_ttft_ms", 0.9),          # the G3 TTFT reduction, 10 % better
    ("p50_ttft_ms", 0.9),
    ("p99_ttft_ms", 0.95),
    ("mean_ttft_ms", 0.97),
])
def test_one_figure_edited_alone_is_refused_naming_it_and_both_values(genuine, field, change):
    edited = dict(genuine, **{field: genuine[field] * change})
    with pytest.raises(BadInput) as refused:
        parse_benchmark_text(json.dumps(edited), "c8.json")
    message = str(refused.value)
    assert message.startswith(f"c8.json: field {field!r} is {edited[field]:.10g}, but the file's own ")
    assert "relative tolerance 1e-06" in message and "edited, rounded or taken from another run" in message


def test_a_count_changed_breaks_its_sum_and_the_rate_computed_from_it(genuine):
    edited = dict(genuine, total_output_tokens=genuine["total_output_tokens"] + 1)
    with pytest.raises(BadInput) as refused:
        parse_benchmark_text(json.dumps(edited), "c8.json")
    message = str(refused.value)
    assert "field 'output_throughput'" in message and "field 'total_output_tokens'" in message
    assert "sum of output_lens" in message and "(equal)" in message


def test_a_headline_figure_written_as_a_string_is_checked_as_the_parser_reads_it(genuine):
    edited = dict(genuine, output_throughput=str(round(genuine["output_throughput"] * 1.05, 2)))
    with pytest.raises(BadInput, match="field 'output_throughput'"):
        parse_benchmark_text(json.dumps(edited), "c8.json")


def test_a_rounded_figure_is_refused_too(genuine):
    edited = dict(genuine, output_throughput=round(genuine["output_throughput"], 2))
    assert edited["output_throughput"] != genuine["output_throughput"]
    with pytest.raises(BadInput, match="field 'output_throughput'"):
        parse_benchmark_text(json.dumps(edited), "c8.json")


def test_without_save_detailed_the_rates_are_checked_and_the_ttft_is_named_not_checkable(genuine):
    plain = {k: v for k, v in genuine.items() if k not in ("ttfts", "output_lens", "input_lens")}
    line = parse_benchmark_text(json.dumps(plain), "c8.json").notes[0]
    assert "output_throughput, total_token_throughput = counts / duration" in line
    assert line.endswith("; not checkable: median_ttft_ms, p50_ttft_ms, p90_ttft_ms, p99_ttft_ms, mean_ttft_ms "
                         "(vllm bench serve --save-result writes duration and token counts, --save-detailed "
                         "per-request ttfts)")
    twin = dict(plain, median_ttft_ms=plain["median_ttft_ms"] * 0.9)     # the median still has p50 beside it
    with pytest.raises(BadInput, match="field 'median_ttft_ms' .* p50_ttft_ms \\(the median is percentile 50\\)"):
        parse_benchmark_text(json.dumps(twin), "c8.json")


def test_headline_figures_alone_are_named_not_checkable_and_percentiles_out_of_order_are_refused():
    line = parse_benchmark_text(json.dumps({"max_concurrency": 8, "output_throughput": 56.6, "p50_ttft_ms": 7530.0,
                                            "p99_ttft_ms": 9100.0}), "r2.json").notes[0]
    assert line == ("not checkable against the file's own counts: output_throughput, p50_ttft_ms, p99_ttft_ms "
                    "(vllm bench serve --save-result writes duration and token counts, --save-detailed "
                    "per-request ttfts)")
    with pytest.raises(BadInput, match="field 'p99_ttft_ms' \\(7000\\) is below 'p50_ttft_ms' \\(7530\\)"):
        parse_benchmark_text(json.dumps({"max_concurrency": 8, "output_throughput": 56.6, "p50_ttft_ms": 7530.0,
                                         "p99_ttft_ms": 7000.0}), "r2.json")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.001, 600.0), min_size=1, max_size=300), st.integers(1, 4096),
       st.floats(0.5, 300000.0), st.booleans())
def test_no_file_vllm_formulas_write_is_refused(ttfts, tokens, duration, detailed):
    n = len(ttfts)
    data = vllm_result(ttfts, [tokens + i % 7 for i in range(n)], [tokens * 3] * n, duration, detailed)
    problems, _ = benchmark_checks.self_check(data)
    assert problems == []


def test_gate_g3_refuses_an_edited_candidate_in_one_line_and_prints_the_checks_of_good_files(genuine, tmp_path):
    rng = numpy.random.default_rng(8)
    base = vllm_result([float(x) for x in rng.uniform(0.8, 12.0, 96)], [200] * 96, [4096] * 96, 1111.0)
    (tmp_path / "cand.json").write_text(json.dumps(genuine))
    (tmp_path / "base.json").write_text(json.dumps(base))
    edited = dict(genuine, output_throughput=genuine["output_throughput"] * 1.05)
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    argv = [sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp_path / "runs"), "gate", "g3"]
    refused = subprocess.run(argv + ["--candidate", str(tmp_path / "edited.json"), "--baseline",
                                     str(tmp_path / "base.json")], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    lines = [line for line in refused.stderr.splitlines() if "edited.json" in line]
    assert len(lines) == 1 and "field 'output_throughput'" in lines[0], refused.stderr
    judged = subprocess.run(argv + ["--candidate", str(tmp_path / "cand.json"), "--baseline",
                                    str(tmp_path / "base.json")], capture_output=True, text=True, timeout=120)
    info = [line for line in judged.stdout.splitlines() if line.startswith("  INFO    raw/") and "own counts" in line]
    assert [line.split(":")[0] for line in info] == ["  INFO    raw/candidate/cand.json",
                                                      "  INFO    raw/baseline/base.json"], judged.stdout
    assert all("checked against the file's own counts" in line for line in info)
