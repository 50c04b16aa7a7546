"""Every program under scripts/ and every scripts/bench measurement still imports what it uses from fxprobe:
`--help` answers (exit 0; capture-nvme-sysfs has no options and only reads this machine's sysfs). The long measurements run only in scripts/bench and one lab test each, so an import
they lost after a refactor would otherwise show only there (it did: bench's drop_caches, moved to
workload.cache)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent.parent / "scripts"
PROGRAMS = sorted(p.name for p in SCRIPTS.iterdir() if p.is_file() and p.read_text().startswith("#!/usr/bin/env python"))


@pytest.mark.parametrize("argv", [[name] for name in PROGRAMS] +
                         [["bench", sub] for sub in ("logs", "tune", "verdicts", "hosts")])
def test_the_script_answers_help(argv):
    done = subprocess.run([sys.executable, str(SCRIPTS / argv[0]), *argv[1:], "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-1500:]   # capture-nvme-sysfs takes
                                                                                          # no options: it reads


def test_the_programs_are_the_ones_expected():
    assert {"bench", "capture-fixtures", "capture-nvme-sysfs", "export-schemas"} <= set(PROGRAMS)
