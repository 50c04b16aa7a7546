"""The CLI's shared habits (issue 16, Build 3-5 without the lab): --json/-o json after the command, units on every
duration and rate option, one spelling per concept with the old ones still accepted, --evidence with several
paths, -V, examples in every help that parse, shell completion of names."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path

import click
import pytest
from click.shell_completion import ShellComplete

from fxprobe.cli import conventions
from fxprobe.cli.examples import EXAMPLES
from fxprobe.cli.main import cli, main
from fxprobe.cli.options import Quantity
from fxprobe.core import units
from fxprobe.faults.scenario import scenario_names
from fxprobe.workload.profiles import available

REPO = Path(__file__).resolve().parent.parent


def commands(group: click.Group = cli, path: str = ""):
    """(path, command) of every command and group under fxprobe, as loaded by the CLI (conventions applied)."""
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        sub = f"{path} {name}".strip()
        yield sub, command
        if isinstance(command, click.Group):
            yield from commands(command, sub)


def parse(argv: list[str]) -> click.Context:
    """The innermost context that fxprobe's own parser builds for ``argv`` (types converted, nothing run)."""
    ctx = cli.make_context("fxprobe", list(argv))
    while isinstance(ctx.command, click.Group):
        rest = [*ctx._protected_args, *ctx.args]
        if not rest:
            break
        name, command, rest = ctx.command.resolve_command(ctx, rest)
        ctx = command.make_context(name, rest, parent=ctx)
    return ctx


def _doctor(tmp_path: Path, capsys, *args: str) -> dict:
    assert main(["--runs", str(tmp_path), *args]) == 0
    data = json.loads(capsys.readouterr().out)
    return {k: v for k, v in data.items() if k not in ("argv", "started", "finished", "run_dir", "ledger_place")}


def test_json_after_the_command_prints_the_same_json_as_before_it(tmp_path, capsys):
    spellings = [("doctor", "--json"), ("doctor", "-o", "json"), ("--json", "doctor"), ("-o", "json", "doctor")]
    outputs = [_doctor(tmp_path / "-".join(args), capsys, *args) for args in spellings]
    assert outputs[0]["command"] == "doctor" and outputs[0]["capabilities"]
    assert all(out == outputs[0] for out in outputs[1:])
    assert parse(["--json", "doctor", "-o", "normal"]).find_root().params["json_output"] is True  # parsed only


# option names (or help words) that say a parameter is a duration or a rate; such a parameter must take units
DURATION_WORDS = re.compile(r"duration|runtime|ramp|timeout|tmo|delay|interval|seconds|stall|sample|health|soak|"
                            r"load.time|overhead|p99.limit|\bs\b", re.I)
RATE_WORDS = re.compile(r"speed|\brate\b|ceiling|gbps|mbps|bandwidth|Gb/s|Mb/s|GB/s", re.I)
NOT_A_QUANTITY = {("fault run", "allow_visible"), ("line-efficiency", "threshold"), ("selftest", "min_spare"),
                  ("model-switch", "switches_per_hour"), ("model-switch", "target_pct"), ("soak", "verify"),
                  ("soak", "no_verify"), ("run", "ceiling_from"), ("run", "ceiling_iface"),
                  ("sweep", "ceiling_from"), ("sweep", "ceiling_iface"), ("model-switch", "model_gb")}
SAMPLES = {"duration": {"30s": Decimal(30), "5m": Decimal(300), "72h": Decimal(259200), "1h30m": Decimal(5400)},
           "rate": {"100G": Decimal(10) ** 11, "25Gb/s": Decimal(25) * 10 ** 9, "20M": Decimal(20) * 10 ** 6}}


def _words(param: click.Parameter) -> str:
    return " ".join([param.name or "", *param.opts, getattr(param, "help", "") or ""])


def test_every_duration_and_rate_option_takes_units():
    checked = []
    for path, command in commands():
        for param in command.params:
            words = _words(param)
            if not isinstance(param.type, Quantity):
                hit = DURATION_WORDS.search(param.name or "") or RATE_WORDS.search(words)
                assert (path, param.name) in NOT_A_QUANTITY or not hit, \
                    f"fxprobe {path} {param.opts}: a duration or rate without units; use cli.options.duration()/rate()"
                continue
            kind = param.type
            assert isinstance(param, click.Argument) or kind.help_suffix in (param.help or ""), (path, param.opts)
            for text, base in SAMPLES[kind.dimension].items():
                expected = units.in_unit(base, kind.to)
                try:
                    value = kind.convert(text, param, None)
                except click.BadParameter as exc:     # out of this option's range: the message says so in units
                    assert kind.to in str(exc) and "must be" in str(exc), (path, param.opts, text, exc)
                    continue
                if isinstance(value, str):             # tc's spelling (lab fault throttle)
                    assert value == f"{int(expected / 1000)}mbit", (path, text, value)
                else:
                    assert Decimal(str(value)) == expected, (path, param.opts, text, value)
                checked.append((path, param.name, text))
    names = {(p, n) for p, n, _ in checked}
    for must in [("soak", "duration"), ("soak", "stall"), ("run", "runtime"), ("line-efficiency", "duration"),
                 ("rehearse", "soak_seconds"), ("lab up", "link_speed"), ("netcheck", "min_speed"),
                 ("line-efficiency", "line_rate"), ("run", "ceiling"), ("connect", "ctrl_loss_tmo"),
                 ("lab fault throttle", "rate"), ("sweep", "p99_limit_ms")]:
        assert must in names, must


def test_bare_numbers_are_the_documented_unit_and_bad_units_are_one_usage_line(capsys):
    assert parse(["soak", "p", "--duration", "72", "--target", "/x"]).params["duration"] == 72.0
    assert parse(["sweep", "p", "--target", "/x", "--vary", "jobs=1", "--p99-limit", "2"]).params["p99_limit_ms"] == 2
    assert parse(["sweep", "p", "--target", "/x", "--vary", "jobs=1", "--p99-limit", "500us"]).params["p99_limit_ms"] == 0.5
    assert parse(["lab", "up", "--link-speed", "0.02"]).params["link_speed"] == 20          # Gb/s -> Mb/s
    assert parse(["lab", "up"]).params["link_speed"] == 100000
    assert parse(["model-switch", "--switches", "1", "--read-rate", "8GB/s"]).params["read_gbps"] == (8.0,)
    for args, words in [(["lab", "up", "--link-speed", "100000"], "(a bare number is Gb/s) is 100000000 Mb/s: "
                                                                   "must be >= 10 Mb/s and <= 800000 Mb/s"),
                        (["line-efficiency", "--peer", "x", "--duration", "1.5s"], "a whole number of seconds"),
                        (["run", "p", "--target", "/x", "--runtime", "10x"], "expected a duration such as 30s"),
                        (["run", "p", "--target", "/x", "--ceiling", "nan"], "must be a finite number (got 'nan')")]:
        assert main(["--runs", "/nonexistent/runs", *args]) == 2
        err = capsys.readouterr().err
        assert words in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("text, seconds", [("90", "90"), ("250ms", "0.25"), ("1h30m", "5400"), ("2d", "172800"),
                                           ("-1", "-1"), ("1.5h", "5400")])
def test_durations(text, seconds):
    assert units.parse_duration(text) == Decimal(seconds)


@pytest.mark.parametrize("text", ["", "10x", "h", "1h-2m", "-1h30m", "10 m", "nan", "inf", "1e3s"])
def test_not_durations(text):
    with pytest.raises(units.UnitError):
        units.parse_duration(text)


@pytest.mark.parametrize("text, mbps", [("100G", "100000"), ("25Gb/s", "25000"), ("20M", "20"), ("200mbit", "200"),
                                        ("8GB/s", "64000"), ("0.02G", "20"), ("1.5", "1500"), ("100Gbps", "100000")])
def test_rates(text, mbps):
    assert units.in_unit(units.parse_rate(text), "Mb/s") == Decimal(mbps)


def test_old_spellings_still_work_with_one_deprecation_line(capsys):
    cases = [(["lab", "status", "--name", "x"], "name", "x", "--name is deprecated, use --lab"),
             (["lab", "fault", "link-down", "--name", "x", "1"], "name", "x", "--name is deprecated, use --lab"),
             (["fault", "run", "link-down", "--allow", "S1", "--allow-visible"], "allow", ("S1",),
              "--allow is deprecated, use --allow-serial"),
             (["fault", "run", "link-down", "--lab-name=big"], "lab", "big", "--lab-name is deprecated, use --lab"),
             (["profile", "gen", "p", "-o", "job.fio"], "output", Path("job.fio"), "-o FILE is deprecated, use --out"),
             (["profile", "gen", "p", "--output", "job.fio"], "output", Path("job.fio"), "--output is deprecated"),
             (["model-switch", "--switches", "1", "--read-gbps", "8"], "read_gbps", (8.0,), "use --read-rate"),
             (["model-switch", "--switches", "1", "--overhead-s", "5"], "overhead_s", 5.0, "use --overhead")]
    for args, name, value, warning in cases:
        ctx = parse(args)
        err = capsys.readouterr().err
        assert ctx.params[name] == value and warning in err and len(err.strip().splitlines()) == 1, (args, err)
        assert not any(o in ("--name", "--allow", "--lab-name", "--output", "--read-gbps", "--overhead-s")
                       for p in ctx.command.params for o in p.opts), args     # hidden: not in the help
    ctx = parse(["lab", "exec", "host1", "nvme", "list", "--name", "x", "-o", "json"])   # the guest's options
    assert ctx.params["argv"] == ("nvme", "list", "--name", "x", "-o", "json") and not capsys.readouterr().err


def test_evidence_takes_several_paths_after_one_flag(tmp_path, capsys):
    for n in (1, 2):
        assert main(["--run-dir", str(tmp_path / f"r{n}"), "-q", "model-switch", "--switches", "4",
                     "--load-time", "1m"]) == 0
    assert parse(["gate", "all", "--evidence", "a", "b", "c", "--config", "g.toml"]).params["evidence_paths"] == \
        (Path("a"), Path("b"), Path("c"))
    assert parse(["gate", "g3", "--candidate", "a", "b", "--baseline", "c"]).params["candidates"] == (Path("a"), Path("b"))
    assert parse(["report", "build", "--evidence", "a", "b", "--out", "o"]).params["evidence"] == (Path("a"), Path("b"))
    capsys.readouterr()
    assert main(["--runs", str(tmp_path / "runs"), "--json", "gate", "all", "--evidence", str(tmp_path / "r1"),
                 str(tmp_path / "r2")]) in (0, 1, 3)
    assert [str(p) for p in json.loads(capsys.readouterr().out)["evidence"]] == [str(tmp_path / "r1"),
                                                                               str(tmp_path / "r2")]


def test_version_short_and_long(capsys):
    for flag in ("-V", "--version"):
        assert main([flag]) == 0
        assert re.fullmatch(r"fxprobe, version \d+\.\d+\.\d+\S*", capsys.readouterr().out.strip())


def test_every_command_help_ends_with_examples_that_parse(capsys):
    profiles, scenarios = set(available()), set(scenario_names())
    for path, command in commands():
        examples = EXAMPLES.get(path, [])
        assert 2 <= len(examples) <= 3, f"fxprobe {path}: {len(examples)} examples (2 or 3 in cli/examples.py)"
        help_text = command.get_help(click.Context(command, info_name=path))
        assert help_text.rstrip().endswith(examples[-1]), path
        for line in examples:
            argv = shlex.split(line.split(" | ")[0])
            assert argv[0] == "fxprobe" and argv[1:1 + len(path.split())] == path.split(), (path, line)
            ctx = parse(argv[1:])
            assert ctx.command is command or path in ("", "lab", "lab fault", "profile", "pattern", "fault", "gate",
                                                      "report", "claims"), (path, line)
            where = ctx.command_path.removeprefix("fxprobe ")
            for key, known, paths in (("name", profiles, PROFILE_COMMANDS), ("profile", profiles, {"soak"}),
                                      ("scenario", scenarios, {"fault run"})):
                value = ctx.params.get(key)
                assert where not in paths or not value or value in known, (path, line, value)
            for text in argv:
                if text.startswith("examples/"):
                    assert (REPO / text).is_file(), (path, line)
    capsys.readouterr()


PROFILE_COMMANDS = {"run", "sweep", "profile show", "profile gen"}


def _completions(args: list[str], incomplete: str) -> list[str]:
    complete = ShellComplete(cli, {}, "fxprobe", "_FXPROBE_COMPLETE")
    return [item.value for item in complete.get_completions(args, incomplete)]


def test_completion_of_profiles_scenarios_and_labs(tmp_path, monkeypatch):
    monkeypatch.setenv("FXPROBE_LAB_HOME", str(tmp_path))
    for name in ("default", "big"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "state.json").write_text("{}")
    assert set(_completions(["run"], "")) >= set(available()) and _completions(["soak"], "qwen3") == \
        sorted(n for n in available() if n.startswith("qwen3"))
    assert _completions(["fault", "run"], "link-") == [n for n in scenario_names() if n.startswith("link-")]
    assert _completions(["run", "x", "--lab"], "") == ["big", "default"]
    assert _completions(["lab", "status", "--lab"], "b") == ["big"]
    assert "--output-format" in _completions(["doctor"], "--")
    source = subprocess.run([sys.executable, "-m", "fxprobe.cli.main"], capture_output=True, text=True,
                            env={**os.environ, "_FXPROBE_COMPLETE": "bash_source"}, timeout=60)
    assert "_fxprobe_completion" in source.stdout and source.returncode == 0
