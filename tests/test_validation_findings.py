"""Issue 13's validation findings, one test per class, through the real CLI: each failed on the code before
the validation layer ("Impossible inputs are judged", "Claims apply rules silently", "Dry run hides a
refusal", "Internal errors")."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from fxprobe.cli.main import main
from fxprobe.core.rundir import RunDir

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tests/fixtures/bench"
R2 = ROOT / "examples/claims/reference-r2.toml"


def cli(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(["--runs", str(tmp_path / "runs"), *args])
    return code, out.getvalue(), err.getvalue()


def one_line_exit_2(tmp_path: Path, *args: str) -> str:
    code, out, err = cli(tmp_path, *args)
    assert code == 2, (code, out, err)
    assert "internal error" not in err and "Traceback" not in err + out
    assert err.strip().count("\n") == 0, err
    return err


# --------------------------------------------------------------------------- impossible inputs are judged
def vllm(path: Path, **fields) -> str:
    path.write_text(json.dumps({"max_concurrency": 8, "completed": 64, "failed": 0, "median_ttft_ms": 7530.0,
                                "output_throughput": 56.6, **fields}))
    return str(path)


@pytest.mark.parametrize("ttft", [-7530.0, 0.0])
def test_a_negative_ttft_is_refused_not_a_200_percent_reduction(tmp_path, ttft):
    """It was "TTFT reduction 200 % PASS"."""
    bad = vllm(tmp_path / "array.json", median_ttft_ms=ttft)
    err = one_line_exit_2(tmp_path, "gate", "g3", "--candidate", bad, "--baseline", str(BENCH / "r2-local-nvme-c8.json"))
    assert f"{bad}: field 'median_ttft_ms': must be > 0" in err


@pytest.mark.parametrize("value, words", [("0", "must be >= 1 (got 0)"), ("-3", "must be >= 1 (got -3)"),
                                          ("23.5", "expected a whole number (got 23.5)")])
def test_drives_expected_that_no_array_has_is_refused(tmp_path, value, words):
    """drives_expected = 0 (or -3, or 23.5) made G1 PASS."""
    config = tmp_path / "gates.toml"
    config.write_text(f"[g1]\ndrives_expected = {value}\n")
    err = one_line_exit_2(tmp_path, "gate", "g1", "--config", str(config))
    assert f"{config}: field 'g1.drives_expected': {words}" in err


def test_a_gate_need_of_nan_is_refused(tmp_path):
    config = tmp_path / "gates.toml"
    config.write_text("[g3]\nttft_reduction_min_pct = nan\n")
    assert "field 'g3.ttft_reduction_min_pct': must be a finite number" in \
        one_line_exit_2(tmp_path, "gate", "g3", "--config", str(config))


def test_a_job_file_with_runtime_nan_is_never_written(tmp_path):
    profile = tmp_path / "p.toml"
    profile.write_text('kind = "kv-read"\n[model]\nname = "Llama-3.1-8B"\n[run]\nruntime = nan\n')
    err = one_line_exit_2(tmp_path, "profile", "gen", str(profile))
    assert f"{profile}: field 'run.runtime': must be a finite number (got nan)" in err


def test_a_scenario_with_nan_is_refused(tmp_path):
    scenario = tmp_path / "s.toml"
    scenario.write_text('[fault]\nkind = "drive-pull"\nslot = 0\n[timing]\n[criteria]\nmax_stall_s = nan\n')
    assert "field 'criteria.max_stall_s': must be a finite number" in \
        one_line_exit_2(tmp_path, "fault", "run", str(scenario), "--dry-run")


@pytest.mark.parametrize("args, words", [
    (["--set", "iodepth=abc"], "--set iodepth=abc: field 'iodepth': expected a whole number (got 'abc')"),
    (["--set", "threads=-1"], "--set threads=-1: field 'threads': must be >= 1"),
    (["--ceiling", "-5"], "'--ceiling': must be > 0 (got '-5')"),
    (["--ceiling", "nan"], "'--ceiling': must be a finite number (got 'nan')"),
    (["--runtime", "inf"], "'--runtime': must be a finite number (got 'inf')"),
])
def test_impossible_options_are_refused(tmp_path, args, words):
    """--set iodepth=abc silently became 1; --ceiling -5 was taken."""
    err = one_line_exit_2(tmp_path, "run", "qwen25-32b-cold-restore", "--target", str(tmp_path), "--dry-run", *args)
    assert words in err


# --------------------------------------------------------------------------- claims apply rules silently
def test_claims_print_their_rule_and_every_row(tmp_path):
    claims = tmp_path / "c.toml"
    claims.write_text(R2.read_text().split("[[claims]]")[0] + '[[claims]]\nid = "gain"\n'
                      'text = "+29 % at every concurrency"\nkind = "at_least"\nclaimed = 29\neach = true\n'
                      'exprs = ["(array_tok_s / local_tok_s - 1) * 100"]\nunit = "%"\n')
    code, out, _ = cli(tmp_path, "claims", "check", str(claims))
    assert code == 0
    assert "HOLDS ONLY WITH ROUNDING: gain" in out             # was: HOLDS, with a tolerance never printed
    assert "rounding allowed +-0.5 (half a unit of the last digit of 29 as written" in out
    for row in ("concurrency 8: 28.9 % - holds only with rounding", "concurrency 16: 39.7 % - holds",
                "concurrency 32: 32.8 % - holds"):
        assert row in out


def test_an_unbounded_power_is_refused_at_once(tmp_path):
    claims = tmp_path / "c.toml"
    claims.write_text('[figures]\nx = 1\n[[claims]]\nid = "a"\ntext = "t"\nkind = "value"\nclaimed = 1\n'
                      'expr = "9 ** 9 ** 9"\n')
    assert "exponent 387420489 is beyond +-64" in one_line_exit_2(tmp_path, "claims", "check", str(claims))


def test_unknown_keys_in_a_claims_file_are_refused(tmp_path):
    claims = tmp_path / "c.toml"
    claims.write_text('[figures]\nx = 1\n[[claims]]\nid = "a"\ntext = "t"\nkind = "value"\nclaimed = 1\n'
                      'expr = "x"\ntolerence = 0.5\n')
    assert "field 'claims[0].tolerence': unknown key" in one_line_exit_2(tmp_path, "claims", "check", str(claims))


# --------------------------------------------------------------------------- dry run hides a refusal
@pytest.mark.parametrize("target", ["/", "/etc", "/usr/share"])
def test_a_system_folder_is_refused_as_a_write_target_also_in_a_dry_run(tmp_path, target):
    code, out, err = cli(tmp_path, "run", "checkpoint-write", "--target", target, "--dry-run", "--size", "64M")
    assert code == 2 and "internal error" not in err
    assert "REFUSED system folder" in out                        # the plan shows why
    assert f"refusing to write to {target}: system folder" in err


def _root_device() -> str | None:
    source = Path("/proc/self/mounts").read_text().split("\n")
    for line in source:
        fields = line.split()
        if len(fields) > 1 and fields[1] == "/" and fields[0].startswith("/dev/"):
            return fields[0]
    return None


@pytest.mark.parametrize("target", ["root device", "/", "/etc"])
def test_a_fault_dry_run_shows_the_refusal_of_a_writing_load(tmp_path, target):
    """`fault run --dry-run` of a randwrite load on the root device (or a system folder) showed a clean plan;
    only the real run refused. Now the plan shows the one load check and exits 2 with its refusal."""
    target = _root_device() if target == "root device" else target
    if target is None:
        pytest.skip("the root filesystem is not on a /dev block device here")
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'[fault]\nkind = "link-down"\nvia = "netlink"\ninterface = "lo"\n[timing]\n[criteria]\n'
                        f'[load]\ntarget = "{target}"\nrw = "randwrite"\n')
    code, out, err = cli(tmp_path, "fault", "run", str(scenario), "--dry-run")
    assert code == 2 and "internal error" not in err, (code, out, err)
    assert f"target {target} (" in out and "REFUSED for writing" in out     # the plan shows why
    assert f"refusing to write to {target}: " in err and err.strip().count("\n") == 0
    results = json.loads(next((tmp_path / "runs").glob("*/results.json")).read_text())
    assert results["outcome"] == "error" and "refusing to write" in results["reason"]
    scenario.write_text(scenario.read_text().replace("randwrite", "randread"))   # a verified read load writes
    assert cli(tmp_path, "fault", "run", str(scenario), "--dry-run")[0] == 2       # its layout: refused too
    scenario.write_text(scenario.read_text() + 'verify = "off"\nno_verify_reason = "read only"\n')
    code, out, _ = cli(tmp_path, "fault", "run", str(scenario), "--dry-run")
    assert code == 3 and "data NOT verified: read only" in out                  # unverified: not refused, said so


# --------------------------------------------------------------------------- internal errors (exit 4)
def _evidence(tmp_path: Path, name: str, data: bytes) -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "results.json").write_bytes(data)
    return str(folder)


def _bundle(tmp_path: Path, manifest: bytes) -> str:
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "report.md").write_text("# report\n")
    (folder / "manifest.json").write_bytes(manifest)
    return str(folder)


INTERNAL_ERRORS = {
    # each of these ended in "internal error: ...Error" and exit 4
    "claims report = 'x'": lambda t: ["claims", "check", _file(t, "c.toml", 'report = "x"\n[[claims]]\nid = "a"\n'
                                                             'text = "t"\nkind = "value"\nclaimed = 1\nexpr = "1"\n')],
    "run --set threads=-1": lambda t: ["run", "qwen25-32b-cold-restore", "--target", str(t), "--dry-run",
                                       "--set", "threads=-1"],
    "gate all, results.json not UTF-8": lambda t: ["gate", "all", "--evidence", _evidence(t, "e", b"\xff\xfe{}")],
    "gate all, results.json a list": lambda t: ["gate", "all", "--evidence", _evidence(t, "e", b"[]")],
    "gate all, results.json a string": lambda t: ["gate", "all", "--evidence", _evidence(t, "e", b'"x"')],
    "gate all, commands.jsonl not JSON": lambda t: ["gate", "all", "--evidence", _commands(t, b"not json\n")],
    "report build, commands.jsonl not JSON": lambda t: ["report", "build", _commands(t, b"not json\n"), "--out",
                                                        str(t / "out")],
    "profile gen --out a folder": lambda t: ["profile", "gen", "qwen25-32b-cold-restore", "--out", str(t)],
    "profile gen --out in a missing folder": lambda t: ["profile", "gen", "qwen25-32b-cold-restore", "--out",
                                                     str(t / "nowhere/x.fio")],
    "--run-dir a file": lambda t: ["--run-dir", _file(t, "f", "x"), "claims", "check", str(R2)],
    "--runs a file": lambda t: ["--runs", _file(t, "f", "x"), "claims", "check", str(R2)],
    "gate g2 --reference rows = 5": lambda t: ["gate", "g2", "--measured", str(BENCH / "r2-array-c8.json"),
                                               "--reference", _file(t, "r.toml", "rows = 5\n")],
    "run --ceiling-from results.json a list": lambda t: ["run", "qwen25-32b-cold-restore", "--target", str(t),
                                                         "--dry-run", "--ceiling-from", _evidence(t, "n", b"[]")],
    "run --ceiling-from results.json not UTF-8": lambda t: ["run", "qwen25-32b-cold-restore", "--target", str(t),
                                                            "--dry-run", "--ceiling-from", _evidence(t, "n", b"\xff")],
    "report build --out an existing file": lambda t: ["report", "build", _finished_run(t), "--out",
                                                      _file(t, "out", "x")],
    "report build --out under /proc": lambda t: ["report", "build", _finished_run(t), "--out", "/proc/fxprobe-x"],
    "report verify, manifest files a list": lambda t: ["report", "verify", _bundle(t, b'{"files": ["report.md"]}')],
}


def _file(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _commands(tmp_path: Path, data: bytes) -> str:
    folder = Path(_evidence(tmp_path, "c", json.dumps({"command": "model-switch", "outcome": "pass"}).encode()))
    (folder / "commands.jsonl").write_bytes(data)
    RunDir(folder).finalize()               # a finished run's manifest: the gates read it as intact evidence
    return str(folder)


def _finished_run(tmp_path: Path) -> str:
    folder = tmp_path / "done"
    assert main(["--run-dir", str(folder), "-q", "model-switch", "--switches", "20", "--load-time", "90"]) == 0
    return str(folder)


@pytest.mark.parametrize("name", sorted(INTERNAL_ERRORS))
def test_bad_input_that_ended_in_an_internal_error(tmp_path, name):
    code, out, err = cli(tmp_path, *INTERNAL_ERRORS[name](tmp_path))
    assert "internal error" not in err and "Traceback" not in out + err, err
    assert code != 4, (code, err)
    if code == 2:
        assert err.strip().count("\n") == 0, err


def test_prices_and_counts_that_overflow_are_refused(tmp_path):
    """1e300 x 1e22 nodes was inf, judged "nan %" (ERROR, exit 4)."""
    err = one_line_exit_2(tmp_path, "cost", "--nodes", "99999999999999999999999", "--node-price", "1e300",
                          "--array-price", "1")
    assert "'--nodes': must be <= 1000000" in err
    assert "'--node-price': must be <= 1e+15" in one_line_exit_2(
        tmp_path, "cost", "--nodes", "8", "--node-price", "1e300", "--array-price", "1")
