"""Read run directories into what a report shows: verdicts, claims, and plottable series.

What a report reads from each run's ``results.json`` (all optional):
``verdict`` (one Verdict.to_dict()), ``gates`` (a list of them), ``claims`` (claim results),
``g3.comparisons`` (the G3 bar chart), ``timeseries`` ({name: {"t": [s], "v": [..], "unit"}}),
``latency_cdf`` ({name: {"x": [..], "p": [0..1], "unit"}}), ``events`` ([{"t": s, "label"}]:
fault timeline marks on the time series).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fxprobe.rundir import RunDir
from fxprobe.verdict import Criterion, Outcome, Verdict


@dataclass(frozen=True)
class RunView:
    path: Path
    results: dict
    verdicts: tuple[Verdict, ...]

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def command(self) -> str:
        return str(self.results.get("command", "?"))

    @property
    def outcome(self) -> str:
        return str(self.results.get("outcome", "?"))


def verdict_from_dict(data: dict) -> Verdict:
    criteria = []
    for c in data.get("criteria", []):
        criteria.append(Criterion(c.get("name", "?"), Outcome(c.get("outcome", "error")), c.get("measured"),
                                  c.get("threshold"), c.get("comparator", ""), c.get("unit", ""),
                                  c.get("detail", ""), c.get("evidence", "")))
    return Verdict(data.get("name", "?"), tuple(criteria), data.get("reason", ""))


def read_run(path: Path) -> RunView:
    run = RunDir.open(path)
    results = run.results()
    verdicts = []
    if isinstance(results.get("verdict"), dict):
        verdicts.append(verdict_from_dict(results["verdict"]))
    for item in results.get("gates", []) or []:
        if isinstance(item, dict):
            verdicts.append(verdict_from_dict(item))
    return RunView(run.path, results, tuple(verdicts))
