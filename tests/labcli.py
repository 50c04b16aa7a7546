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
