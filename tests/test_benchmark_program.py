"""``fxprobe benchmark`` traces the program that computes the figures before it runs it: a pip distribution by its
RECORD (every file), else a Debian package. The distribution here is tests/vllm_standin.py built into a wheel and
installed by the real pip (vLLM itself needs torch and a model server). The twins: one file of the installed
distribution edited (CHANGED, naming the file; a report over it is not ACCEPTED and names the program), and a
script no package installed (NOT INSTALLED BY A PACKAGE)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fxprobe.core.errors import ParseError
from fxprobe.tools import dpkg, pip_record
from fxprobe.workload import witness

STANDIN = Path(__file__).with_name("vllm_standin.py")
DIST, VERSION = "vllm_standin", "0.0.1"


def _row(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(folder: Path) -> Path:
    """A pure-Python wheel of the stand-in with a console script ``vllm-standin`` (the format pip installs)."""
    info = f"{DIST}-{VERSION}.dist-info"
    files = {f"{DIST}.py": STANDIN.read_bytes(),
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: vllm-standin\nVersion: {VERSION}\n\n".encode(),
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: fxprobe-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             f"{info}/entry_points.txt": f"[console_scripts]\nvllm-standin = {DIST}:main\n".encode()}
    record = "\n".join([_row(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]) + "\n"
    wheel = folder / f"{DIST}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name, data in {**files, f"{info}/RECORD": record.encode()}.items():
            zf.writestr(name, data)
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the console script, the site-packages folder) of the stand-in installed by pip under a prefix of its own."""
    tmp = tmp_path_factory.mktemp("pip")
    prefix = tmp / "prefix"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           "--disable-pip-version-check", "--prefix", str(prefix), str(build_wheel(tmp))],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    site = next(prefix.glob("lib/python3*/site-packages"))
    return prefix / "bin" / "vllm-standin", site


def with_site(site: Path) -> dict:
    """The environment with ``site`` first on Python's path (the console script's interpreter imports from it)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p)}


def benchmark(tmp: Path, site: Path, name: str, *command: str) -> dict:
    env = with_site(site)
    done = subprocess.run([sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp / "runs"), "benchmark",
                           "--result", name, "--", *command, "--result-filename", name, "--seconds", "0.2"],
                          capture_output=True, text=True, timeout=120, cwd=tmp, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    run = sorted((tmp / "runs").glob("*-benchmark"), key=lambda p: p.stat().st_mtime)[-1]
    return {"run": run, "stdout": done.stdout, **json.loads((run / "results.json").read_text())}


def test_a_console_script_pip_installed_is_traced_to_its_distribution_and_an_edited_file_is_named(installed, tmp_path):
    script, site = installed
    done = benchmark(tmp_path, site, "a.json", str(script))
    program = done["witness"]["program"]
    assert (program["state"], program["package"], program["version"]) == (dpkg.PACKAGED, "vllm-standin (pip)", VERSION)
    assert program["name"] == "vllm-standin" and program["path"] == str(script.resolve())
    lines = sorted(f"{row.path} {row.algorithm}={row.digest}" for row in
                   pip_record.parse_record((site / f"{DIST}-{VERSION}.dist-info" / "RECORD").read_text(), "RECORD")
                   if row.algorithm)
    assert program["sha256"] == hashlib.sha256("\n".join(lines).encode()).hexdigest()   # what trusted_builds names
    # the module, the console script pip wrote, and six files of the .dist-info (RECORD and the .pyc keep no digest)
    assert program["detail"].startswith("8 files as ") and program["detail"].endswith("RECORD")
    assert f"program: vllm-standin: {script.resolve()}: {dpkg.PACKAGED} (vllm-standin (pip) {VERSION})" in done["stdout"]
    # the twin: one file of the distribution edited after pip installed it
    module = site / f"{DIST}.py"
    original = module.read_bytes()
    module.write_bytes(original + b"# edited\n")
    try:
        edited = benchmark(tmp_path, site, "b.json", str(script))
    finally:
        module.write_bytes(original)
    changed = edited["witness"]["program"]
    assert changed["state"] == dpkg.CHANGED and changed["sha256"] != program["sha256"]
    program = changed
    assert program["detail"] == f"1 of 8 files unlike {DIST}-{VERSION}.dist-info/RECORD: {DIST}.py changed"
    # a gate over both runs, and a report over all: the edited program keeps the decision from ACCEPTED
    env = with_site(site)
    cli = [sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp_path / "runs")]
    gate = subprocess.run([*cli, "gate", "g3", "--candidate", str(edited["run"]), "--baseline", str(done["run"])],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert f"in run {edited['run'].name}; vllm-standin: {script.resolve()}: {dpkg.CHANGED}" in gate.stdout
    assert f"in run {done['run'].name}; vllm-standin: {script.resolve()}: {dpkg.PACKAGED}" in gate.stdout
    folders = [str(p) for p in sorted((tmp_path / "runs").iterdir()) if p.is_dir()]
    subprocess.run([*cli, "report", *folders, "--out", str(tmp_path / "report")], capture_output=True, text=True,
                   timeout=120, cwd=tmp_path, env=env)
    text = (tmp_path / "report" / "report.md").read_text()
    gate_run = next(Path(f).name for f in folders if f.endswith("-gate-g3"))
    untraced = [line for line in text.splitlines() if "TOOL NOT TRACEABLE" in line]
    assert untraced == [f"- TOOL NOT TRACEABLE: {gate_run}: raw/candidate/b.json: benchmark program vllm-standin "
                        f"{script.resolve()} {dpkg.CHANGED} (1 of 8 files unlike {DIST}-{VERSION}.dist-info/RECORD: "
                        f"{DIST}.py changed)"], untraced
    # (an untraced program makes what would be ACCEPTED INCOMPLETE, as any untraced tool; this report is NOT ACCEPTED)
    # the twin: the buyer trusts exactly the edited files by the distribution's digest
    trusts = tmp_path / "trusts.toml"
    trusts.write_text(f'[provenance]\ntrusted_builds = [{{ sha256 = "{changed["sha256"]}", why = "our patch" }}]\n')
    subprocess.run([*cli, "gate", "g3", "--config", str(trusts), "--candidate", str(edited["run"]), "--baseline",
                    str(done["run"])], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    again = sorted((tmp_path / "runs").glob("*-gate-g3"))[-1]
    subprocess.run([*cli, "report", str(again), "--out", str(tmp_path / "trusted")], capture_output=True, text=True,
                   timeout=120, cwd=tmp_path, env=env)
    text = (tmp_path / "trusted" / "report.md").read_text()
    assert "TOOL NOT TRACEABLE" not in text
    assert f"TRUSTED BUILD (gates file [provenance]): {again.name}: raw/candidate/b.json: benchmark program " \
           f"vllm-standin {script.resolve()} sha256 {changed['sha256']}: our patch" in text


def test_a_script_no_package_installed_is_untraced_and_a_module_run_is_not_checked(tmp_path):
    done = benchmark(tmp_path, tmp_path, "c.json", sys.executable, str(STANDIN))
    program = done["witness"]["program"]
    assert (program["name"], program["path"]) == ("vllm_standin.py", str(STANDIN))
    assert program["state"] == dpkg.UNPACKAGED and program["detail"] == f"no package in /var/lib/dpkg lists {STANDIN}"
    assert program["sha256"] == hashlib.sha256(STANDIN.read_bytes()).hexdigest()
    assert witness.program_file([sys.executable, "-m", "vllm.entrypoints.cli.main"])[1:] == (
        None, "a module run by python -m is not traced (run its console script instead)")


def test_a_real_console_script_of_this_machine_matches_its_record_and_a_bad_record_is_one_clear_error():
    origin = pip_record.origin(Path(shutil.which("pytest")))
    assert origin is not None and origin.state == dpkg.PACKAGED and origin.package == "pytest (pip)"
    assert pip_record.origin(Path(shutil.which("sh"))) is None           # no RECORD lists it: dpkg's question
    rows = pip_record.parse_record("a.py,sha256=AAAA,4\nb.dist-info/RECORD,,\n", "RECORD")
    assert [(r.path, r.algorithm, r.size) for r in rows] == [("a.py", "sha256", 4), ("b.dist-info/RECORD", "", None)]
    for bad in ("a.py,sha256=AAAA\n", "a.py,crc=AAAA,4\n", "a.py,sha256=AAAA,four\n"):
        with pytest.raises(ParseError, match="RECORD: field 'row 1'"):
            pip_record.parse_record(bad, "RECORD")
