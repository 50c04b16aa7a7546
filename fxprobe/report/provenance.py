"""The measuring programs of a gate run's evidence that cannot be traced to a package (:mod:`fxprobe.tools.dpkg`).

A figure is only as good as the program that printed it. Each run's environment.json says where every wrapped tool
came from; a run that ran a copy no package installed, or a file changed since its package installed it, gave
figures nobody can tie to a release: a gate run that read it is never ACCEPTED (the headline says INCOMPLETE and
names the run, the tool and the file). Only the tools a run ran on its own machine count (its commands.jsonl); a
tool it never started is a warning of the machine, not of its figures.
"""

from __future__ import annotations

import os

from fxprobe.report.collect import RunView, recorded_evidence
from fxprobe.report.machines import read_environment
from fxprobe.tools.dpkg import NOT_TRACEABLE


def untraced_tools(run: RunView) -> list[str]:
    """One line per tool ``run`` started on its own machine whose origin is CHANGED or NOT INSTALLED BY A PACKAGE."""
    env = read_environment(run) or {}
    origins = (env.get("items") or {}).get("tool_origins")
    if not isinstance(origins, dict):
        return []
    ran = {os.path.basename(c.words[0]) for c in run.command_records if c.host == "local" and c.words}
    return [f"{run.name}: {name} {o.get('path')} {o.get('state')} ({o.get('detail')})"
            for name, o in origins.items() if isinstance(o, dict) and o.get("state") in NOT_TRACEABLE
            and os.path.basename(str(o.get("path"))) in ran]


def untraced(gate_run: RunView, runs: list[RunView]) -> tuple[str, ...]:
    """The untraced tools of every folder the gate run read that is in the report, intact."""
    return tuple(line for run in recorded_evidence(gate_run, runs) or [] if run for line in untraced_tools(run))
