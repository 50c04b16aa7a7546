"""Where each wrapped tool came from (tools/dpkg.py): the real dpkg of this machine judges the real fio; a copy of fio
first on PATH (NOT INSTALLED BY A PACKAGE) and a package record that no longer matches the file (CHANGED) are the
planted fail twins, and both reach environment.json as a warning that names the file. The copy prints the same
version: the version alone cannot tell."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fxprobe.core.errors import ParseError
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.host import doctor, preflight
from fxprobe.tools import dpkg

FIO = shutil.which("fio")
REHEARSAL_LINE = Path(__file__).parent / "fixtures/report/rehearsal/02-line-efficiency-emulated-20-Mb-s-link"


def installed(package: str) -> str:
    return subprocess.run(["dpkg-query", "--show", "--showformat", "${Version}", package], capture_output=True,
                          text=True, check=True).stdout


def fio_probe() -> doctor.ToolProbe:
    return next(p for p in doctor.TOOL_PROBES if p.name == "fio")


def test_parse_search_as_dpkg_query_prints_it():
    # real lines of this machine's dpkg-query --search (Debian 12): a plain owner, a merged-/usr name, a diversion
    assert dpkg.parse_search("fio: /usr/bin/fio\n", "/usr/bin/fio") == "fio"
    assert dpkg.parse_search("iproute2: /bin/ip\n", "/bin/ip") == "iproute2"
    assert dpkg.parse_search("iproute2: /bin/ip\n", "/usr/bin/ip") is None
    text = "diversion by dash from: /bin/sh\ndiversion by dash to: /bin/sh.distrib\ndash: /bin/sh\n"
    assert dpkg.parse_search(text, "/bin/sh") == "dash"
    assert dpkg.parse_search("libc6:amd64, libc6:i386: /usr/share/doc/libc6\n", "/usr/share/doc/libc6") == "libc6:amd64"
    assert dpkg.merged_names("/usr/sbin/mdadm") == ["/usr/sbin/mdadm", "/sbin/mdadm"]
    assert dpkg.merged_names("/bin/ip") == ["/bin/ip", "/usr/bin/ip"]
    assert dpkg.merged_names("/usr/local/bin/fio") == ["/usr/local/bin/fio"]


def test_parse_md5sums_of_the_real_fio_package_and_a_bad_line():
    sums = dpkg.parse_md5sums(Path("/var/lib/dpkg/info/fio.md5sums").read_text(), "fio.md5sums")
    assert "/usr/bin/fio" in sums and len(sums["/usr/bin/fio"]) == 32
    with pytest.raises(ParseError) as info:
        dpkg.parse_md5sums("32ef7ee84907b831e340420a6fde77b2  usr/bin/fio\nnot a line\n", "fio.md5sums")
    assert info.value.field == "line 2"


def test_the_installed_fio_is_packaged_and_unchanged_without_searching_every_package(tmp_path):
    run = RunDir.create(tmp_path, "origin")
    runner = Runner(run)
    origin = dpkg.tool_origins(runner, {"fio": FIO}, {"fio": "fio"})["fio"]
    assert (origin.state, origin.package, origin.version) == (dpkg.PACKAGED, "fio", installed("fio"))
    assert origin.trusted and origin.path == str(Path(FIO).resolve()) and len(origin.sha256) == 64
    commands = (run.path / "commands.jsonl").read_text()
    assert "dpkg-version" in commands and "dpkg-search" not in commands   # fio's own md5sums named it: no search
    searched = dpkg.tool_origins(runner, {"fio": FIO})["fio"]      # no expected package: one search finds it
    assert searched.state == dpkg.PACKAGED and searched.package == "fio"


def test_a_copy_of_fio_first_on_path_prints_the_same_version_and_is_named_not_packaged(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy2(FIO, bin_dir / "fio")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    cap, = doctor.with_origins(Runner(None), [doctor.probe_tool(Runner(None), fio_probe())])
    assert cap.version == "3.33" or cap.version.startswith("3.")          # the version cannot tell
    assert cap.origin.state == dpkg.UNPACKAGED and cap.origin.path == str(bin_dir / "fio")
    assert f"{bin_dir / 'fio'}: NOT INSTALLED BY A PACKAGE" in "\n".join(doctor.table([cap]))
    pf = preflight.collect(Runner(None))
    assert pf.items["tool_origins"]["fio"]["state"] == dpkg.UNPACKAGED
    warning, = [w for w in pf.warnings if w.knob == "tool_origin"]
    assert warning.observed.startswith(f"fio: {bin_dir / 'fio'}: NOT INSTALLED BY A PACKAGE")
    assert "remove" in warning.fix and str(bin_dir / "fio") in warning.fix


def planted_admindir(root: Path, md5: str | None = None) -> Path:
    """A dpkg database that knows only fio: its file list, its status stanza and its md5sums (``md5`` replaces the
    recorded sum of usr/bin/fio)."""
    info = root / "info"
    info.mkdir(parents=True)
    shutil.copy2("/var/lib/dpkg/info/fio.list", info / "fio.list")
    sums = Path("/var/lib/dpkg/info/fio.md5sums").read_text()
    if md5:
        sums = "".join(f"{md5}  usr/bin/fio\n" if line.endswith("  usr/bin/fio") else line + "\n"
                       for line in sums.splitlines())
    (info / "fio.md5sums").write_text(sums)
    stanzas = Path("/var/lib/dpkg/status").read_text().split("\n\n")
    (root / "status").write_text(next(s for s in stanzas if s.startswith("Package: fio\n")) + "\n\n")
    for name in ("diversions", "available"):
        (root / name).write_text("")
    (root / "updates").mkdir()
    return root


def test_a_package_record_that_no_longer_matches_the_file_is_changed_and_its_unchanged_twin_passes(tmp_path):
    intact = dpkg.tool_origins(Runner(None), {"fio": FIO}, {}, planted_admindir(tmp_path / "intact"))["fio"]
    assert intact.state == dpkg.PACKAGED and intact.version == installed("fio")
    changed = dpkg.tool_origins(Runner(None), {"fio": FIO}, {}, planted_admindir(tmp_path / "changed", "0" * 32))["fio"]
    assert changed.state == dpkg.CHANGED and not changed.trusted
    assert changed.detail.endswith(f"the package's record says {'0' * 32}") and changed.package == "fio"
    assert f"{changed.path}: {dpkg.CHANGED} (fio {installed('fio')}); md5 " in changed.text()


def test_without_dpkg_query_the_origin_is_not_checked_and_says_so(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy2(FIO, bin_dir / "fio")
    monkeypatch.setenv("PATH", str(bin_dir))
    origin = dpkg.tool_origins(Runner(None), {"fio": str(bin_dir / "fio")}, {"fio": "fio"}, tmp_path / "none")["fio"]
    assert origin.state == dpkg.UNCHECKED and "no dpkg-query on this host" in origin.detail


def test_the_report_names_a_tool_no_package_installed(tmp_path):
    """The whole path: a command run with a copy of fio first on PATH, its environment.json, the report over it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy2(FIO, bin_dir / "fio")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    cli = [sys.executable, "-m", "fxprobe.cli.main", "-q"]
    subprocess.run([*cli, "--run-dir", str(tmp_path / "run"), "doctor"], env=env, capture_output=True, check=True)
    subprocess.run([*cli, "report", str(tmp_path / "run"), "--out", str(tmp_path / "report")], capture_output=True,
                   check=True)
    text = (tmp_path / "report" / "report.md").read_text()
    assert f"fio: {bin_dir / 'fio'} NOT INSTALLED BY A PACKAGE" in text
    assert f"- WARNING tool_origin: fio: {bin_dir / 'fio'}: NOT INSTALLED BY A PACKAGE" in text


def gate_report_over(tmp_path: Path, ib_read_bw: str):
    """Lab-scaled evidence whose line-efficiency run started ``ib_read_bw`` (the real program: here it only says
    its version) and recorded its origin as the environment log does; `gate all` over it, then the report."""
    from gate_helpers import fxprobe, rewritten, runs_of
    from test_lab_scaled import lab_scaled_evidence
    from fxprobe.report.build import build_report
    paths, lab_file = lab_scaled_evidence(tmp_path / "ev")
    line = next(p for p in paths if p.name.endswith("-line-efficiency"))
    Runner(RunDir(line)).run([ib_read_bw, "--version"], timeout=30, label="ib_read_bw")
    origin = dpkg.tool_origins(Runner(None), {"perftest": ib_read_bw}, {"perftest": "perftest"})["perftest"]
    (line / "environment.json").write_text(json.dumps({"items": {"tool_origins": {"perftest": origin.to_dict()}},
                                                       "missing": [], "warnings": []}))
    rewritten(line)
    assert fxprobe(tmp_path, "gate", "all", *[a for p in paths for a in ("--evidence", str(p))],
                   "--config", str(lab_file)) == 0
    return build_report([*paths, runs_of(tmp_path, "gate all")[-1]], tmp_path / "report"), line


def test_a_gate_run_whose_evidence_ran_a_tool_no_package_installed_is_never_a_pass(tmp_path):
    from fxprobe.report.headline import Decision
    honest, _ = gate_report_over(tmp_path / "honest", shutil.which("ib_read_bw"))
    (head,) = honest.headlines
    assert head.decision is Decision.LAB_PASS and head.untraced == (), head.lines()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy2(shutil.which("ib_read_bw"), bin_dir / "ib_read_bw")
    built, line = gate_report_over(tmp_path / "copy", str(bin_dir / "ib_read_bw"))
    (head,) = built.headlines
    assert head.decision is Decision.INCOMPLETE, head.lines()
    assert head.untraced == (f"{line.name}: perftest {bin_dir / 'ib_read_bw'} NOT INSTALLED BY A PACKAGE "
                             f"(no package in /var/lib/dpkg lists {bin_dir / 'ib_read_bw'})",)
    md = (tmp_path / "copy" / "report" / "report.md").read_text()
    assert f"- TOOL NOT TRACEABLE: {line.name}: perftest {bin_dir / 'ib_read_bw'} NOT INSTALLED BY A PACKAGE" in md
    assert "1 measuring tools not traceable to a package" in "\n".join(head.lines())


# -- a measuring program on another node: origin.sh fed to that node's sh (here: this machine's, the same code path)
def test_origin_sh_judges_the_installed_fio_as_packaged_with_its_sha256():
    import hashlib
    origin = dpkg.remote_origin(Runner(None), dpkg.LocalHost(), "fio")
    assert origin.state == dpkg.PACKAGED and origin.package == "fio" and origin.version == installed("fio")
    assert origin.sha256 == hashlib.sha256(Path(FIO).resolve().read_bytes()).hexdigest(), origin


def test_origin_sh_names_a_copy_first_on_path_and_a_changed_record_and_a_missing_program(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy2(FIO, bin_dir / "fio")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    copy = dpkg.remote_origin(Runner(None), dpkg.LocalHost(), "fio")
    assert copy.state == dpkg.UNPACKAGED and copy.path == str(bin_dir / "fio"), copy
    assert copy.detail == f"no package on local lists {bin_dir / 'fio'}"
    monkeypatch.setenv("PATH", os.environ["PATH"].split(os.pathsep, 1)[1])
    monkeypatch.setattr(dpkg, "ADMINDIR", planted_admindir(tmp_path / "changed", "0" * 32))
    changed = dpkg.remote_origin(Runner(None), dpkg.LocalHost(), "fio")
    assert changed.state == dpkg.CHANGED and changed.detail.endswith(f"the package's record says {'0' * 32}")
    missing = dpkg.remote_origin(Runner(None), dpkg.LocalHost(), "no-such-fio")
    assert missing.state == dpkg.UNCHECKED and "no-such-fio is not on PATH" in missing.detail


def test_parse_origin_facts_reads_what_origin_sh_prints_and_names_a_short_answer():
    out = subprocess.run(["sh", "-s", "--", "/var/lib/dpkg", "fio", "fio"], input=dpkg.ORIGIN_SCRIPT.read_text(),
                         capture_output=True, text=True, check=True).stdout
    facts = dpkg.parse_origin_facts(out, "origin.sh")
    assert facts["path"] == FIO and facts["version"] == installed("fio") and "/usr/bin/fio" in facts["sums"]
    with pytest.raises(ParseError, match="origin.sh: field 'sha256'|sha256"):
        dpkg.parse_origin_facts("path /usr/bin/fio\nreal /usr/bin/fio\nmd5 " + "0" * 32 + "\n", "origin.sh")


def test_a_run_records_a_remote_origin_once_and_none_for_this_machine(tmp_path):
    from fxprobe.core.hosts import SshHost
    run = RunDir.start("line-efficiency", ["line-efficiency"], base=tmp_path)
    dpkg.witness(Runner(run), dpkg.LocalHost(), "fio")
    assert run.origins() == []            # this machine's tools: environment.json
    run.record_origin({"host": "host1", "program": "fio", **dpkg.remote_origin(Runner(None), dpkg.LocalHost(),
                                                                               "fio").to_dict()})
    dpkg.witness(Runner(run), SshHost("host1", "192.0.2.1"), "fio")     # recorded already: no ssh at all
    (record,) = run.origins()
    assert record["state"] == dpkg.PACKAGED and record["host"] == "host1"
    (run.path / "origins.jsonl").write_text('{"host": "host1"}\n')
    from fxprobe.core.errors import BadInput
    with pytest.raises(BadInput, match="origins.jsonl: line 1"):
        run.origins()


def remote_report_over(tmp_path: Path, origin: dpkg.ToolOrigin, trusted: list[dict] | None = None):
    """The lab-scaled evidence, its line-efficiency run's ib_read_bw on host1 recorded with ``origin``; `gate all`
    (with ``trusted`` as the lab file's [provenance] trusted_builds), then the report."""
    from gate_helpers import fxprobe, rewritten, runs_of
    from test_lab_scaled import lab_scaled_evidence
    from fxprobe.report.build import build_report
    paths, lab_file = lab_scaled_evidence(tmp_path / "ev")
    line = next(p for p in paths if p.name.endswith("-line-efficiency"))
    with open(line / "commands.jsonl", "a") as out:      # the client on host1 and the server on the array, as run
        out.writelines(record for record in (REHEARSAL_LINE / "commands.jsonl").open() if "stdbuf" in record
                       or '"ib_read_bw -F' in record)
    RunDir(line).record_origin({"host": "host1", "program": "ib_read_bw", **origin.to_dict()})
    rewritten(line)
    if trusted is not None:
        entries = ", ".join(f'{{ sha256 = "{t["sha256"]}", why = "{t["why"]}" }}' for t in trusted)
        lab_file.write_text(lab_file.read_text() + f"\n[provenance]\ntrusted_builds = [{entries}]\n")
    assert fxprobe(tmp_path, "gate", "all", *[a for p in paths for a in ("--evidence", str(p))],
                   "--config", str(lab_file)) == 0
    return build_report([*paths, runs_of(tmp_path, "gate all")[-1]], tmp_path / "report"), line


def test_a_copy_on_a_node_blocks_the_decision_unless_the_buyer_trusts_its_sha256(tmp_path, monkeypatch):
    from fxprobe.report.headline import Decision
    honest, line = remote_report_over(tmp_path / "honest", dpkg.remote_origin(Runner(None), dpkg.LocalHost(),
                                                                              "ib_read_bw"))
    (head,) = honest.headlines
    assert head.decision is Decision.LAB_PASS and head.untraced == (), head.lines()
    # the array's ib_read_bw (the server) has no record in this fixture: printed, not judged
    assert f"ORIGIN NOT RECORDED: {line.name}: ib_read_bw on array" in "\n".join(head.origin_notes)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy2(shutil.which("ib_read_bw"), bin_dir / "ib_read_bw")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    copy = dpkg.remote_origin(Runner(None), dpkg.LocalHost(), "ib_read_bw")
    built, line = remote_report_over(tmp_path / "copy", copy)
    (head,) = built.headlines
    assert head.decision is Decision.INCOMPLETE, head.lines()
    assert head.untraced == (f"{line.name}: ib_read_bw on host1 {bin_dir / 'ib_read_bw'} NOT INSTALLED BY A PACKAGE "
                             f"(no package on local lists {bin_dir / 'ib_read_bw'})",)
    # the gate run said so already, under its verdicts (information: the gates judge figures, the report decides)
    from gate_helpers import runs_of
    gate_run = json.loads((runs_of(tmp_path / "copy", "gate all")[-1] / "results.json").read_text())
    assert gate_run["provenance"]["untraced"] == list(head.untraced)
    why = "perftest 6.06 built by the buyer's lab"
    trusted, line = remote_report_over(tmp_path / "trusted", copy, [{"sha256": copy.sha256, "why": why}])
    (head,) = trusted.headlines
    assert head.decision is Decision.LAB_PASS and head.untraced == (), head.lines()
    note = (f"TRUSTED BUILD (gates file [provenance]): {line.name}: ib_read_bw on host1 {bin_dir / 'ib_read_bw'} "
            f"sha256 {copy.sha256}: {why}")
    assert note in head.origin_notes
    assert note in (tmp_path / "trusted" / "report" / "report.md").read_text()


def test_trusted_builds_name_a_sha256_and_a_reason_and_are_no_departure(tmp_path):
    from fxprobe.core.errors import BadInput
    from fxprobe.gates.config import parse_config
    config = parse_config(f'[provenance]\ntrusted_builds = [{{ sha256 = "{"a" * 64}", why = "built here" }}]\n', "g")
    assert not config.custom and config.to_dict()["provenance"]["trusted_builds"][0]["why"] == "built here"
    for bad in (f'{{ sha256 = "{"A" * 64}", why = "x" }}', f'{{ sha256 = "{"a" * 64}", why = "" }}',
                f'{{ sha256 = "{"a" * 63}", why = "x" }}'):
        with pytest.raises(BadInput, match="g: field 'provenance.trusted_builds.0"):
            parse_config(f"[provenance]\ntrusted_builds = [{bad}]\n", "g")
