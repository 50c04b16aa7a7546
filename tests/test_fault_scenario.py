"""Fault scenarios: shipped files load; bad keys and values are one clear line naming file and key."""

import subprocess
import sys

import pytest

from fxprobe.core.errors import BadInput
from fxprobe.faults.scenario import SCENARIO_DIR, load_scenario, parse_scenario, scenario_names

MINIMAL = '[fault]\nkind = "drive-pull"\nslot = 0\n'


def with_tables(text: str) -> str:
    """The scenario with the tables every scenario must have ([timing], [criteria]) added empty where missing."""
    return text + "".join(f"\n[{t}]\n" for t in ("timing", "criteria") if f"[{t}]" not in text)


def test_shipped_scenarios_load_and_include_the_required_names():
    names = scenario_names()
    for required in ("drive-pull", "link-down", "link-flap", "drive-pull-raid0", "link-down-single-path"):
        assert required in names
    for name in names:
        scenario = load_scenario(name)
        assert scenario.description, name
        assert scenario.timing["settle_s"] < scenario.timing["steady_s"]


def test_defaults_are_filled_in():
    scenario = parse_scenario(with_tables(MINIMAL), "x.toml")
    assert scenario.criteria == {"max_errors": 0, "max_stall_s": 2.0, "min_throughput_pct": 50.0,
                                 "max_p99_ratio": 10.0, "max_rebuild_s": None, "min_rebuild_throughput_pct": None}
    assert scenario.fault["via"] == "auto"
    assert scenario.total_s == 30.0
    # a drive pull's load runs on while md rebuilds, up to the bound after the restore
    assert scenario.rebuild_bound_s == 300.0 and scenario.planned_s == 320.0
    cut = parse_scenario(with_tables('[fault]\nkind = "link-down"\n'), "y.toml")
    assert cut.rebuild_bound_s == 0.0 and cut.planned_s == cut.total_s


@pytest.mark.parametrize("text, key, words", [
    (MINIMAL + "[criteria]\nmax_stal_s = 3\n", "criteria.max_stal_s", "allowed here: max_errors"),
    (MINIMAL + "colour = 1\n", "fault.colour", "unknown key"),
    ('[fault]\nkind = "drive-yank"\n', "fault.kind", "'drive-pull', 'link-down'"),
    ('[fault]\nkind = "link-down"\nvia = "sysfs"\n', "fault.via", "qmp, netlink"),
    (MINIMAL + "[timing]\nsteady_s = \"ten\"\n", "timing.steady_s", "expected a number (got 'ten')"),
    # impossible inputs (issue 13): NaN/inf, negatives, zero counts
    (MINIMAL + "[timing]\nfault_s = nan\n", "timing.fault_s", "must be a finite number"),
    (MINIMAL + "[timing]\nrecover_s = inf\n", "timing.recover_s", "must be a finite number"),
    (MINIMAL + "[timing]\nfault_s = -1\n", "timing.fault_s", "must be > 0"),
    (MINIMAL + "[timing]\nfault_s = 0\n", "timing.fault_s", "must be > 0 (got 0)"),      # injected, restored at once
    (MINIMAL + "[timing]\nrecover_s = -1\n", "timing.recover_s", "must be >= 0"),
    (MINIMAL + "[criteria]\nmax_stall_s = nan\n", "criteria.max_stall_s", "must be a finite number"),
    (MINIMAL + "[criteria]\nmin_throughput_pct = 150\n", "criteria.min_throughput_pct", "must be <= 100"),
    (MINIMAL + "[criteria]\nmax_errors = 0.5\n", "criteria.max_errors", "expected a whole number"),
    (MINIMAL + "[load]\niodepth = 0\n", "load.iodepth", "must be >= 1"),
    (MINIMAL + "[load]\nbs = \"-4k\"\n", "load.bs", "not a size"),
    ('[fault]\nkind = "link-flap"\nperiod_s = nan\n', "fault.period_s", "must be a finite number"),
    ('[fault]\nkind = "drive-pull"\nslot = -1\n', "fault.slot", "must be >= 0"),
    (MINIMAL + "[load]\nrw = \"trim\"\n", "load.rw", "randread"),
    (MINIMAL + "[lab]\ntwin_drives = 0\n", "lab.twin_drives", ">= 1"),
    (MINIMAL + "[timing]\nsteady_s = 2\nsettle_s = 3\n", "timing.settle_s", "shorter"),
    (MINIMAL + "[timing]\nsteady_s = 1\n", "timing.settle_s", "shorter"),       # against the default settle_s
    ("[extra]\nx = 1\n" + MINIMAL, "extra", "unknown key"),
    ("[fault]\nslot = 1\n", "fault.kind", "missing"),
])
def test_bad_keys_name_file_key_and_allowed_values(text, key, words):
    with pytest.raises(BadInput) as caught:
        parse_scenario(with_tables(text), "faults/bad.toml")
    message = str(caught.value)
    assert message.startswith("faults/bad.toml: field ")
    assert f"field '{key}'" in message and words in message
    assert "\n" not in message


def test_unknown_scenario_name_lists_known_ones():
    with pytest.raises(BadInput) as caught:
        load_scenario("no-such-fault")
    assert "drive-pull" in str(caught.value)


def test_cli_unknown_key_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(MINIMAL + "[timing]\n[criteria]\nmax_stal_s = 3\n")
    done = subprocess.run([sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp_path / "runs"),
                           "fault", "run", str(bad), "--lab"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "max_stal_s" in lines[0] and str(bad) in lines[0]
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("commands.jsonl"))


def test_scenario_folder_is_the_repository_faults_folder():
    assert SCENARIO_DIR.name == "faults" and (SCENARIO_DIR / "drive-pull.toml").exists()


def test_readme_documents_every_key_and_its_default():
    from fxprobe.faults.scenario import SCHEMA
    text = (SCENARIO_DIR / "README.md").read_text()
    for section, keys in SCHEMA.items():
        for key in keys:
            assert f"`{section + '.' if section else ''}{key}`" in text, key


@pytest.mark.parametrize("missing", ["timing", "criteria"])
def test_a_truncated_scenario_is_refused_naming_the_file_and_the_missing_table(tmp_path, missing):
    """A file cut after [fault] ran on the default timing and criteria: now one line, exit 2, nothing run."""
    scenario = tmp_path / "truncated.toml"
    scenario.write_text(MINIMAL + "".join(f"[{t}]\n" for t in ("timing", "criteria") if t != missing))
    with pytest.raises(BadInput, match=rf"^{scenario}: field '{missing}': missing: no \[{missing}\] table"):
        load_scenario(str(scenario))
    done = subprocess.run([sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp_path / "runs"), "fault", "run",
                           str(scenario), "--dry-run"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert f"{scenario}: field '{missing}': missing: no [{missing}] table" in done.stderr
    assert "Traceback" not in done.stderr
