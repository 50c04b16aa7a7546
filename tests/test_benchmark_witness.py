"""``fxprobe benchmark`` witnesses a benchmark command (here tests/vllm_standin.py, in vLLM's output shapes: vLLM
itself needs torch and a model server) and the gates say of each file whether a run witnessed it. Each check has
its planted twin: a file claiming a longer benchmark than the process ran, a file edited after the summary was
printed, a failing command, a file changed in the run folder afterwards, a result file left from before."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fxprobe.core.verdict import Criterion, Verdict
from fxprobe.gates.config import parse_config
from fxprobe.report.headline import Decision, headline
from fxprobe.report.provenance import Provenance
from fxprobe.tools import vllm_bench

STANDIN = Path(__file__).with_name("vllm_standin.py")


def fxprobe(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp / "runs"), *args],
                          capture_output=True, text=True, timeout=120, cwd=tmp)


def witnessed(tmp: Path, name: str, *standin: str) -> tuple[subprocess.CompletedProcess, Path]:
    done = fxprobe(tmp, "benchmark", "--result", name, "--", sys.executable, str(STANDIN), "--result-filename", name,
                   *standin)
    runs = sorted((tmp / "runs").glob("*-benchmark"), key=lambda p: p.stat().st_mtime)
    return done, runs[-1] if runs else tmp


def criteria(run: Path) -> dict[str, tuple[str, object]]:
    verdict = json.loads((run / "results.json").read_text())["verdict"]
    return {c["name"]: (c["outcome"], c["measured"]) for c in verdict["criteria"]}


def test_a_witnessed_run_passes_and_the_gate_prints_its_file_as_witnessed_and_a_handed_file_as_handed(tmp_path):
    done, run = witnessed(tmp_path, "c8.json", "--seconds", "0.5")
    assert done.returncode == 0, done.stderr
    assert {k: v[0] for k, v in criteria(run).items()} == {
        "benchmark command exit code": "pass", "file duration within the command's lifetime": "pass",
        "printed figures unlike the saved file": "pass"}
    results = json.loads((run / "results.json").read_text())
    assert results["witness"]["kept"] == "raw/c8.json" and results["benchmark"]["source"] == "raw/c8.json"
    assert len(results["witness"]["printed"]) == 11
    (tmp_path / "handed.json").write_bytes((run / "raw" / "c8.json").read_bytes())
    gate = fxprobe(tmp_path, "gate", "g3", "--candidate", str(run), "--baseline", str(tmp_path / "handed.json"))
    info = [line for line in gate.stdout.splitlines() if "witnessed:" in line or "handed over:" in line]
    assert len(info) == 2, gate.stdout
    assert info[0].startswith("  INFO    raw/candidate/c8.json: witnessed: written by `") and run.name in info[0]
    assert info[1].startswith("  INFO    raw/baseline/handed.json: handed over: no fxprobe benchmark run wrote it")
    folders = sorted(str(p) for p in (tmp_path / "runs").iterdir() if p.is_dir())
    report = fxprobe(tmp_path, "report", *folders, "--out", str(tmp_path / "report"))
    assert (tmp_path / "report" / "report.md").is_file(), report.stdout + report.stderr
    text = (tmp_path / "report" / "report.md").read_text()
    assert "compared ([" in text
    assert "- raw/candidate/c8.json: witnessed: written by `" in text
    assert "- raw/baseline/handed.json: handed over: no fxprobe benchmark run wrote it" in text
    assert "- raw/baseline/handed.json: checked against the file's own counts: " in text
    gate_run = next(f for f in folders if f.endswith("-gate-g3"))
    sha = hashlib.sha256((tmp_path / "handed.json").read_bytes()).hexdigest()
    handed = [line for line in text.splitlines() if "BENCHMARK FILE HANDED OVER" in line]
    assert handed == [f"- BENCHMARK FILE HANDED OVER: {Path(gate_run).name}: raw/baseline/handed.json (SHA-256 {sha}): "
                      "no fxprobe benchmark run wrote it (run the benchmark through `fxprobe benchmark`); a buyer who "
                      "watched it being made admits it by its SHA-256 in gates.toml [provenance] admitted_files"], handed
    # the twin: the buyer admits that file by its SHA-256; the line becomes information with the buyer's reason
    admits = tmp_path / "admits.toml"
    admits.write_text(f'[provenance]\nadmitted_files = [{{ sha256 = "{sha}", why = "run while we watched" }}]\n')
    fxprobe(tmp_path, "gate", "g3", "--config", str(admits), "--candidate", str(run), "--baseline",
            str(tmp_path / "handed.json"))
    again = sorted(str(p) for p in (tmp_path / "runs").glob("*-gate-g3"))[-1]
    fxprobe(tmp_path, "report", str(run), again, "--out", str(tmp_path / "admitted"))
    text = (tmp_path / "admitted" / "report.md").read_text()
    assert "BENCHMARK FILE HANDED OVER" not in text
    assert f"HANDED-OVER FILE ADMITTED (gates file [provenance]): {Path(again).name}: raw/baseline/handed.json " \
           f"(SHA-256 {sha}): run while we watched" in text


def test_a_handed_over_benchmark_file_keeps_a_passing_decision_from_accepted_and_an_admitted_one_does_not():
    passing = tuple(Verdict(f"{g} gate", (Criterion.compare("x", 1, ">=", 1),)) for g in ("G1", "G2", "G3", "G4"))
    recorded = {"thresholds": parse_config("", "gates.toml").to_dict(), "evidence_runs": []}
    assert headline("g", recorded, passing).decision is Decision.ACCEPTED
    handed = headline("g", recorded, passing, traced=Provenance(handed=("g: raw/baseline/b.json (SHA-256 ab): why",)))
    assert handed.decision is Decision.INCOMPLETE
    assert handed.lines()[0].endswith("; 1 benchmark files handed over")
    assert "  BENCHMARK FILE HANDED OVER: g: raw/baseline/b.json (SHA-256 ab): why" in handed.lines()


def test_a_file_claiming_a_longer_benchmark_than_the_command_ran_fails(tmp_path):
    done, run = witnessed(tmp_path, "c8.json", "--seconds", "0.2", "--claim-duration", "600")
    assert done.returncode == 1, done.stdout + done.stderr
    outcome, measured = criteria(run)["file duration within the command's lifetime"]
    assert outcome == "fail" and measured == 600
    assert "FAIL    file duration within the command's lifetime: 600" in done.stdout


def test_every_rate_raised_after_the_summary_was_printed_fails_the_summary_check(tmp_path):
    done, run = witnessed(tmp_path, "c8.json", "--seconds", "0.2", "--edit-after", "rates=1.1")
    assert done.returncode == 1, done.stdout + done.stderr
    outcome, measured = criteria(run)["printed figures unlike the saved file"]
    assert outcome == "fail" and measured == 4        # duration and the three rates
    assert "output_throughput: printed " in done.stdout


def test_one_figure_edited_after_the_summary_is_refused_by_the_file_s_own_counts(tmp_path):
    done, _ = witnessed(tmp_path, "c8.json", "--seconds", "0.2", "--edit-after", "output_throughput=1.05")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "field 'output_throughput'" in done.stderr and "total_output_tokens / duration" in done.stderr


def test_a_failing_command_is_an_error_and_its_file_is_handed_over(tmp_path):
    done, run = witnessed(tmp_path, "c8.json", "--seconds", "0.1", "--exit", "3")
    assert done.returncode not in (0, 1), done.stdout
    assert criteria(run)["benchmark command exit code"] == ("error", 3)
    gate = fxprobe(tmp_path, "gate", "g3", "--candidate", str(run / "raw" / "c8.json"),
                   "--baseline", str(run / "raw" / "c8.json"))
    assert f"handed over: the benchmark run {run.name} that wrote it ended error, not pass" in gate.stdout


def test_a_file_changed_in_the_run_folder_afterwards_is_handed_over_naming_both_hashes(tmp_path):
    _, run = witnessed(tmp_path, "c8.json", "--seconds", "0.2")
    kept = run / "raw" / "c8.json"
    kept.write_text(kept.read_text().replace('"backend": "vllm"', '"backend": "vllm "'))
    gate = fxprobe(tmp_path, "gate", "g3", "--candidate", str(run), "--baseline", str(kept))
    assert gate.stdout.count(f"handed over: {run.name} witnessed a file with SHA-256 ") == 2, gate.stdout
    assert "(changed after the run)" in gate.stdout


def test_a_result_file_left_from_before_is_refused_before_a_run_begins(tmp_path):
    (tmp_path / "c8.json").write_text("{}")
    done, _ = witnessed(tmp_path, "c8.json")
    assert done.returncode == 2 and "c8.json: exists before the run; a witnessed run must write it anew" in done.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("*-benchmark"))


@pytest.mark.parametrize("noise", ["", "100%|██████████| 48/48 [00:01<00:00, 33.2it/s]\n"])
def test_the_summary_parser_reads_vllm_s_format_and_nothing_without_it(noise):
    text = (noise + "============ Serving Benchmark Result ============\n"
            "Successful requests:                     48        \nBenchmark duration (s):                  1.00      \n"
            "Output token throughput (tok/s):         13385.97  \nP90 TTFT (ms):                           8100.25   \n"
            "P99.9 TTFT (ms):                         8900.00   \n==================================================\n")
    assert vllm_bench.parse_summary(text) == {"completed": "48", "duration": "1.00", "output_throughput": "13385.97",
                                              "p90_ttft_ms": "8100.25", "p99.9_ttft_ms": "8900.00"}
    assert vllm_bench.parse_summary("Successful requests: 48\n") == {}
    wrong, agree = vllm_bench.summary_differences({"completed": "48", "duration": "1.00"},
                                                  {"completed": 48, "duration": 1.004})
    assert wrong == [] and agree == ["completed", "duration"]
    wrong, _ = vllm_bench.summary_differences({"duration": "1.00"}, {"duration": 1.006})
    assert wrong == ["duration: printed 1.00, the file holds 1.006 (1.01 as printed)"]
