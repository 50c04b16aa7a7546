"""`fxprobe profile` / `run` / `sweep` through the real entry point: derivations, real runs,
and bad input as one clear line with the right exit code."""

from __future__ import annotations

import json
from dataclasses import dataclass
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fxprobe.cli.main import main


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def fxprobe(capsys, monkeypatch):
    """The real entry point, in this process (fast); PATH changes go through monkeypatch."""
    def call(tmp_path, *args, env=None):
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        capsys.readouterr()
        code = main(["--runs", str(tmp_path / "runs"), *args])
        out, err = capsys.readouterr()
        assert "Traceback" not in out + err
        return Done(code, out, err)
    return call


def one_error_line(done) -> str:
    lines = [l for l in done.stderr.splitlines() if l.startswith("fxprobe:")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_profile_show_qwen25_32b_is_64_mib(fxprobe, tmp_path):
    done = fxprobe(tmp_path, "profile", "show", "qwen25-32b-cold-restore")
    assert done.returncode == 0 and "67,108,864 B (64 MiB)" in done.stdout
    data = json.loads(fxprobe(tmp_path, "--json", "profile", "show", "qwen25-32b-cold-restore").stdout)
    assert data["chunk_bytes"] == 64 << 20 and data["jobs"] == 16


def test_profile_show_qwen3_coder_tp8_rank_chunk(fxprobe, tmp_path):
    data = json.loads(fxprobe(tmp_path, "--json", "profile", "show", "qwen3-coder-480b-tp8-readback").stdout)
    assert data["chunk_bytes"] == 8_126_464 and data["block_size"] == 8_126_464


def test_profile_gen_writes_a_job_file_fio_accepts(fxprobe, tmp_path):
    job = tmp_path / "kv.fio"
    done = fxprobe(tmp_path, "profile", "gen", "qwen25-32b-cold-restore", "--target", str(tmp_path),
                   "--size", "32M", "-o", str(job))
    assert done.returncode == 0 and job.exists()
    check = subprocess.run(["fio", "--parse-only", str(job)], capture_output=True, text=True, timeout=30)
    assert check.returncode == 0, check.stderr


def test_profile_list_names_every_shipped_profile(fxprobe, tmp_path):
    done = fxprobe(tmp_path, "profile", "list")
    assert done.returncode == 0 and "small-file-dataset" in done.stdout and "checkpoint-write" in done.stdout


def write_profile(tmp_path, body: str) -> str:
    path = tmp_path / "custom.toml"
    path.write_text(body)
    return str(path)


@pytest.mark.parametrize("body, text", [
    ('kind = "kv-read"\n[model]\nname = "GPT-9"\n', "unknown model 'GPT-9'"),
    ('kind = "kv-read"\n[model]\nname = "Llama-3.1-8B"\n[kv]\nchunk_tokens = 0\n', "field 'kv.chunk_tokens': must be >= 1"),
    ('kind = "kv-read"\n[model]\nname = "Llama-3.1-8B"\n[kv]\nthreads = 64\ncontext_tokens = 1024\n',
     "64 jobs do not fit in 4 files"),
])
def test_bad_profiles_are_one_line_exit_2(fxprobe, tmp_path, body, text):
    done = fxprobe(tmp_path, "profile", "show", write_profile(tmp_path, body))
    assert done.returncode == 2 and text in one_error_line(done)
    assert "custom.toml" in one_error_line(done)


def test_bad_targets_are_one_line_exit_2_and_nothing_runs(fxprobe, tmp_path):
    done = fxprobe(tmp_path, "run", "small-file-dataset", "--target", str(tmp_path / "missing"))
    assert done.returncode == 2 and "does not exist" in one_error_line(done)
    done = fxprobe(tmp_path, "run", "small-file-dataset", "--target", str(tmp_path), "--set", "jobs=5000")
    assert done.returncode == 2 and "5000 jobs do not fit" in one_error_line(done)
    runs = list((tmp_path / "runs").glob("*/commands.jsonl"))
    assert runs == []   # no subprocess was started


def root_device() -> str | None:
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/" and "-" in fields:
            source = fields[fields.index("-") + 2]
            return source if source.startswith("/dev/") and os.path.exists(source) else None
    return None


@pytest.mark.skipif(root_device() is None, reason="root filesystem not on a /dev block device")
def test_mounted_root_device_refused_in_dry_run(fxprobe, tmp_path):
    done = fxprobe(tmp_path, "run", "checkpoint-write", "--target", root_device(), "--dry-run")
    assert done.returncode == 2
    line = one_error_line(done)
    assert "refusing to write to" in line and ("root filesystem" in line or "mounted" in line)
    assert "REFUSED root filesystem" in done.stdout and "rw=write" in done.stdout   # the checks and the job


def test_dry_run_prints_job_and_checks(fxprobe, tmp_path):
    done = fxprobe(tmp_path, "run", "small-file-dataset", "--target", str(tmp_path), "--size", "8M", "--dry-run")
    assert done.returncode == 0
    assert "target " + str(tmp_path) + " (directory): OK" in done.stdout
    assert "rw=randread" in done.stdout and "dry run: nothing was written or run" in done.stdout
    assert not any(p.name.startswith("kv.") for p in tmp_path.iterdir())


def test_real_run_json(fxprobe, tmp_path):
    target = tmp_path / "t"
    target.mkdir()
    done = fxprobe(tmp_path, "--json", "run", "small-file-dataset", "--target", str(target), "--size", "16M",
                   "--set", "jobs=2", "--runtime", "1", "--ramp", "0", "--repeats", "3")
    assert done.returncode in (0, 1), done.stderr
    data = json.loads(done.stdout)
    wl = data["workload"]
    assert len(wl["repeats"]) == 3 and wl["percentiles_ns"]["p99"] > 0
    assert "cv_pct" in wl["bandwidth_bytes"] and data["verdict"]["criteria"]
    assert (Path(data["run_dir"]) / "manifest.json").exists()


def test_truncated_fio_json_is_exit_4(fxprobe, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    real = shutil.which("fio")
    wrapper = bindir / "fio"
    wrapper.write_text(f"#!/bin/sh\ncase \"$*\" in *--version*) exec {real} \"$@\";; esac\n"
                       f"{real} \"$@\" > {tmp_path}/full.json; rc=$?\nhead -c 1500 {tmp_path}/full.json\nexit $rc\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    target = tmp_path / "t"
    target.mkdir()
    done = fxprobe(tmp_path, "run", "small-file-dataset", "--target", str(target), "--size", "4M",
                   "--set", "jobs=2", "--runtime", "0.5", "--ramp", "0", "--repeats", "1",
                   env={"PATH": f"{bindir}:{os.environ['PATH']}"})
    assert done.returncode == 4 and "invalid JSON" in one_error_line(done)


def test_sweep_finds_a_knee(fxprobe, tmp_path):
    target = tmp_path / "t"
    target.mkdir()
    done = fxprobe(tmp_path, "--json", "sweep", "small-file-dataset", "--target", str(target), "--size", "16M",
                   "--vary", "jobs=1,2", "--p99-limit", "10000", "--runtime", "1", "--ramp", "0", "--repeats", "1")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)["sweep"]
    assert [p["value"] for p in data["points"]] == [1, 2] and data["knee"] == 2
    done = fxprobe(tmp_path, "sweep", "small-file-dataset", "--target", str(target), "--vary", "depth=1",
                   "--p99-limit", "5")
    assert done.returncode == 2 and "--vary" in one_error_line(done)


def test_nodes_option_builds_local_and_ssh_nodes():
    from fxprobe.cli.run import parse_nodes
    from fxprobe.core.errors import BadInput
    from fxprobe.core.hosts import LocalHost, SshHost
    nodes = parse_nodes("local,local:127.0.0.2,admin@10.0.0.5", 8765, "/k", 2222, "root")
    assert [n.address for n in nodes] == ["127.0.0.1", "127.0.0.2", "10.0.0.5"]
    assert isinstance(nodes[0].host, LocalHost) and isinstance(nodes[2].host, SshHost)
    assert nodes[2].host.user == "admin" and nodes[2].host.port == 2222 and str(nodes[2].host.identity) == "/k"
    with pytest.raises(BadInput, match="listed twice"):
        parse_nodes("local,local:127.0.0.1", 8765, None, 22, "root")


def test_ceiling_from_a_netcheck_run_folder(tmp_path):
    from fxprobe.cli.run import ceiling_bps
    from fxprobe.core.errors import BadInput
    from fxprobe.core.rundir import RunDir
    run = RunDir.create(tmp_path, "netcheck")
    run.write_results({"interfaces": [{"name": "ens1f0", "speed_mbps": 100000}, {"name": "lo", "speed_mbps": None}]})
    assert ceiling_bps(None, run.path, None) == 100e9
    assert ceiling_bps(None, run.path, "ens1f0") == 100e9 and ceiling_bps(25, None, None) == 25e9
    with pytest.raises(BadInput, match="lo reported no speed"):
        ceiling_bps(None, run.path, "lo")
    with pytest.raises(BadInput, match="not both"):
        ceiling_bps(100, run.path, None)


def test_cold_run_whose_cache_drop_the_kernel_refuses_is_an_error_not_a_pass(tmp_path):
    """The planted-fail twin of the dropped cache (tests/test_workload.py): the same cold profile, run by the
    real CLI in a mount namespace whose /proc/sys is read-only (as in a container): sysctl is refused by the
    kernel, the repeats read through a cache that was not dropped, and the run's verdict is ERROR (exit 4)
    naming the node, the repeats and what sysctl said - not a PASS with a note beside it."""
    if shutil.which("unshare") is None or shutil.which("fio") is None:
        pytest.skip("needs unshare (util-linux) and fio")
    assert os.geteuid() == 0, "this twin needs root: it makes /proc/sys read-only in a mount namespace of its own"
    target = tmp_path / "target"
    target.mkdir()
    cli = [sys.executable, "-c", "import sys; from fxprobe.cli.main import main; sys.exit(main(sys.argv[1:]))",
           "--json", "--runs", str(tmp_path / "runs"), "run", "small-file-dataset", "--target", str(target),
           "--size", "48M", "--runtime", "1", "--ramp", "0.5", "--repeats", "2", "--set", "jobs=4"]
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           'mount --bind -o ro /proc/sys /proc/sys && exec "$@"', "sh", *cli],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 4, done.stderr[-2000:]
    results = json.loads(next((tmp_path / "runs").glob("*-run/results.json")).read_text())
    assert results["outcome"] == "error"
    dropped = [c for c in results["verdict"]["criteria"] if c["name"].startswith("page cache dropped")]
    assert [(c["outcome"], c["measured"], c["threshold"]) for c in dropped] == [("error", 0, 2)]
    assert "not dropped on local in repeats 1, 2: sysctl -q -w vm.drop_caches=3: sysctl: " in dropped[0]["detail"]
    repeats = results["workload"]["repeats"]
    assert [r["cache_drops"][0]["dropped"] for r in repeats] == [False, False]
    assert results["workload"]["reads_through_cache"] is True
