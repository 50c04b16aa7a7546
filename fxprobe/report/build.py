"""``fxprobe report``: copy run directories into a report folder, render, hash and sign."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from fxprobe.core.errors import BadInput
from fxprobe.report import plots
from fxprobe.report.bundle import write_manifest
from fxprobe.report.collect import RunView, read_run, soak_series
from fxprobe.report.junit import junit_xml
from fxprobe.report.render import gate_verdicts, html_page, markdown
from fxprobe.core.rundir import utc_stamp
from fxprobe.core.verdict import Verdict


@dataclass(frozen=True)
class BuiltReport:
    folder: Path
    runs: tuple[str, ...]
    files: int
    signer: str | None
    outcome_rows: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict:
        return {"folder": str(self.folder), "runs": list(self.runs), "files": self.files, "signer": self.signer,
                "gates": [{"gate": g, "outcome": o} for g, o in self.outcome_rows]}


def summary_rows(runs: list[RunView]) -> list[tuple[str, Verdict]]:
    """The gates' criteria when a gate run is among the evidence; else every run's, labelled by run."""
    gates = gate_verdicts(runs)
    if gates:
        return [(v.name.split()[0], v) for v in gates]
    return [(f"{run.name}:", v) for run in runs for v in run.verdicts]


def make_plots(runs: list[RunView]) -> dict[str, bytes]:
    figures: dict[str, bytes | None] = {
        "gate-summary": plots.gate_summary(summary_rows(runs), "Gate criteria" if any(run.gates for run in runs)
                                           else "Criteria of the runs")}
    for run in runs:
        g3 = run.results.get("g3") or {}
        thresholds = (run.results.get("thresholds") or {}).get("thresholds", {}).get("g3", {})
        band = None
        if "throughput_gain_min_pct" in thresholds:
            band = (thresholds["throughput_gain_min_pct"], thresholds["throughput_gain_max_pct"])
        figures[f"g3-{run.name}"] = plots.g3_changes(g3.get("comparisons") or [],
                                                     thresholds.get("ttft_reduction_min_pct"), band)
        figures[f"timeline-{run.name}"] = plots.time_series(run.results.get("timeseries"), run.results.get("events"))
        series, events = soak_series(run)
        figures[f"soak-{run.name}"] = plots.time_series(series, events)
        for png in sorted(run.path.rglob("*.png")):
            figures[f"{run.name}-{png.stem}"] = png.read_bytes()
        figures[f"latency-cdf-{run.name}"] = plots.latency_cdfs(run.results.get("latency_cdf"))
    return {name: png for name, png in figures.items() if png}


def build_report(run_paths: list[Path], out: Path, private_key: Path | None = None,
                 title: str = "fxprobe acceptance report") -> BuiltReport:
    if not run_paths:
        raise BadInput("report: no run directories given", hint="fxprobe report RUNDIR... --out DIR")
    runs = [read_run(Path(p)) for p in run_paths]
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise BadInput(f"{out}: exists and is not empty; refusing to mix reports", hint="choose a new --out folder")
    (out / "evidence").mkdir(parents=True, exist_ok=True)
    names = set()
    for run in runs:
        if run.name in names:
            raise BadInput(f"{run.path}: given twice")
        names.add(run.name)
        shutil.copytree(run.path, out / "evidence" / run.name)
    created = utc_stamp()
    figures = make_plots(runs)
    if figures:
        (out / "plots").mkdir()
        for name, png in figures.items():
            (out / "plots" / f"{name}.png").write_bytes(png)
    (out / "report.md").write_text(markdown(title, runs, figures, created))
    (out / "report.html").write_text(html_page(title, runs, figures, created))
    (out / "junit.xml").write_text(junit_xml(runs))
    manifest = write_manifest(out, private_key)
    rows = tuple((v.name, v.outcome.value) for v in gate_verdicts(runs))
    return BuiltReport(out, tuple(r.name for r in runs), len(manifest["files"]), manifest["signer"], rows)
