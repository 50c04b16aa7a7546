"""Run fxprobe inside a lab guest, as a user would with `fxprobe lab exec GUEST -- fxprobe ...`."""

from __future__ import annotations

import json


def fx(lab, guest: str, *args: str, timeout: float = 300, input: str | None = None):
    """(exit code, parsed --json result or None, stderr) of `fxprobe --json ARGS` in GUEST."""
    result = lab.exec(guest, lab.python("fxprobe.cli.main", "--runs", "/tmp/fxprobe-runs", "--json", *args),
                      timeout=timeout, input=input, label="fxprobe-" + args[0])
    out = result.stdout.strip()
    data = json.loads(out) if out.startswith("{") else None
    assert "Traceback" not in result.stderr, result.stderr
    return result.returncode, data, result.stderr


def criteria(data: dict) -> dict:
    return {c["name"]: c for c in data["verdict"]["criteria"]}


def fx_here(tmp_path, *args: str) -> tuple[int, dict | None, str]:
    """(exit code, parsed --json result or None, stderr) of `fxprobe --json ARGS` run in this process."""
    import contextlib
    import io
    from fxprobe.cli.main import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--runs", str(tmp_path / "runs"), "--json", *args])
    text = out.getvalue().strip()
    return code, json.loads(text) if text.startswith("{") else None, err.getvalue()


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return json.dumps(v)


def write_scenario(path, data: dict):
    """A scenario file from ``data`` (top-level keys, then one table per dict); returns ``path``."""
    lines = [f"{k} = {toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for section, table in data.items():
        if isinstance(table, dict):
            lines += [f"[{section}]"] + [f"{k} = {toml_value(v)}" for k, v in table.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def shipped(name: str, **sections: dict) -> dict:
    """A shipped scenario (faults/NAME.toml) with some of its tables' keys replaced."""
    import tomllib
    from fxprobe.faults.scenario import SCENARIO_DIR
    data = tomllib.loads((SCENARIO_DIR / f"{name}.toml").read_text())
    for section, table in sections.items():
        data.setdefault(section, {}).update(table)
    return data


def scenario_file(tmp_path, name: str, **sections: dict):
    """tmp_path/NAME.toml: the shipped scenario NAME with ``sections`` merged in (e.g. timing={...})."""
    return write_scenario(tmp_path / f"{name}.toml", shipped(name, **sections))


def fxprobe_argv(tmp_path, *args: str) -> list[str]:
    """argv of `fxprobe --runs TMP/runs --json ARGS` in a process of its own (as a user runs it)."""
    import sys
    return [sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp_path / "runs"), "--json", *args]


def fault_env(tmp_path) -> dict:
    """The environment with a restore journal of the test's own."""
    import os
    return {**os.environ, "FXPROBE_FAULT_JOURNAL": str(tmp_path / "fault-journal.json")}


def fault_run(lab, tmp_path, scenario, *extra: str, timeout: float = 600):
    """`fxprobe fault run SCENARIO --lab LAB EXTRA` in its own process; the lab's state is read again after it
    (the run changed it from another process) and no traceback may appear."""
    import subprocess
    done = subprocess.run(fxprobe_argv(tmp_path, "fault", "run", str(scenario), "--lab", lab.name, *extra),
                          capture_output=True, text=True, timeout=timeout, env=fault_env(tmp_path))
    lab.reload()
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    return done
