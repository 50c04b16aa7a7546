"""``fxprobe report``: copy run directories into a report folder, draw, render, hash and sign.

The bundle::

    report.md, report.html   the report (templates in fxprobe/report/templates/), headline first
    junit.xml                the criteria for CI
    plots/                   PNGs at 150 dpi (the HTML embeds them too)
    evidence/<run>/          each run folder, copied unchanged
    manifest.json, manifest.sig, signer.pub
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from fxprobe.core.errors import BadInput
from fxprobe.core.rundir import utc_stamp
from fxprobe.core.verdict import Criterion, Outcome, Verdict
from fxprobe.report import plots
from fxprobe.report.bundle import write_manifest
from fxprobe.report.collect import RunView, read_run
from fxprobe.report.headline import Headline, headline
from fxprobe.report.junit import junit_xml
from fxprobe.report.model import Figure, build_model
from fxprobe.report.render import gate_verdicts, html_page, markdown
from fxprobe.report.soakview import soak_of


@dataclass(frozen=True)
class BuiltReport:
    folder: Path
    runs: tuple[str, ...]
    files: int
    signer: str | None
    outcome_rows: tuple[tuple[str, str], ...]
    headlines: tuple[Headline, ...] = ()
    altered: tuple[str, ...] = ()       # "<run>: <file>: changed ...": evidence unlike its manifest (feeds nothing)

    def to_dict(self) -> dict:
        return {"folder": str(self.folder), "runs": list(self.runs), "files": self.files, "signer": self.signer,
                "gates": [{"gate": g, "outcome": o} for g, o in self.outcome_rows],
                "decisions": [{"decision": h.decision.value, "thresholds": h.thresholds, "source": h.source,
                               "gate_run": h.run, "gates": [g.line() for g in h.gates], "untied": list(h.untied),
                               "differs": list(h.differs), "untraced": list(h.untraced), "handed": list(h.handed),
                               "origin_notes": list(h.origin_notes), "not_given": list(h.not_given),
                               "array": h.array}
                              for h in self.headlines],
                "altered": list(self.altered)}

    def lines(self) -> list[str]:
        """What the terminal shows: the decision first, then where the report is."""
        out = [line for h in self.headlines for line in h.lines()] or \
            ["INCOMPLETE - no gate run among the evidence: nothing was judged against the gates"]
        signed = f"signed by {self.signer}" if self.signer else "UNSIGNED: pass --key to sign"
        out += [f"EVIDENCE NOT INTACT (unlike its manifest: ERROR, feeds nothing): {line}" for line in self.altered]
        return out + [f"report: {self.folder}/report.html ({self.files} files, {signed})"]


def summary_rows(runs: list[RunView]) -> list[tuple[str, Verdict]]:
    """The gates' criteria when a gate run is among the evidence; else every run's, labelled by run."""
    gates = gate_verdicts(runs)
    if gates:
        return [(v.name.split()[0], v) for v in gates]
    return [(f"{run.name}:", v) for run in runs for v in run.verdicts]


def _grids(runs: list[RunView]) -> dict[str, tuple[bytes | None, str, list[str]]]:
    """name -> (PNG, caption, runs it stands for): one grid per gate run, or one over every run's criteria."""
    gate_runs = [run for run in runs if run.gates]
    if not gate_runs:
        rows = [plots.GridRow(label, c) for label, v in summary_rows(runs) for c in v.criteria]
        return {"criteria-grid": (plots.gate_grid(rows, "Criteria of the runs (no gate run among the evidence)"),
                                  "every criterion of the runs: outcome and margin", [])}
    out = {}
    for run in gate_runs:
        label = headline(run.name, run.results, ()).thresholds
        rows = [row for v in run.gates for row in [plots.GridRow(v.name.split()[0], c) for c in v.criteria] + [
            plots.GridRow(v.name.split()[0], Criterion(n.name, Outcome.NOT_RUN), left_out=True) for n in v.not_judged]]
        name = "gate-grid" if len(gate_runs) == 1 else f"gate-grid-{run.name}"
        title = f"Every gate criterion ({label}): outcome, figures, margin as a fraction of its own threshold"
        out[name] = (plots.gate_grid(rows, title), f"gate criteria, {label} (gate run {run.name})", [run.name])
    return out


def _run_plots(run: RunView) -> dict[str, tuple[bytes | None, str]]:
    out: dict[str, tuple[bytes | None, str]] = {}
    view = soak_of(run.path, run.results)
    if view is not None:
        duration = run.results.get("duration_s")
        title = (f"Soak {view.profile}: load for {duration / 3600:.4g} h ({duration / 60:.3g} min), "
                 f"{len(view.interruptions)} interruption(s)") if isinstance(duration, (int, float)) else ""
        out[f"soak-{run.name}"] = (plots.soak(view, title), f"soak {run.name}: bandwidth over hours")
    g3 = run.results.get("g3") or {}
    limits = ((run.results.get("thresholds") or {}).get("thresholds") or {}).get("g3", {})
    band = (limits["throughput_gain_min_pct"], limits["throughput_gain_max_pct"]) \
        if "throughput_gain_min_pct" in limits else None
    out[f"g3-{run.name}"] = (plots.g3_changes(g3.get("comparisons") or [], limits.get("ttft_reduction_min_pct"), band),
                             f"G3 comparisons of {run.name}")
    for png in sorted(run.path.rglob("*.png")):
        out[f"{run.name}-{png.stem}"] = (png.read_bytes(), f"{run.name}: {png.stem} (drawn by the run)")
    return {name: item for name, item in out.items() if item[0]}


def _figures(runs: list[RunView]):
    """(PNG by name, figures per run, the plot each run's criteria link, the figures under the headline)."""
    data, per_run, link, top = {}, {}, {}, []
    for name, (png, caption, members) in _grids(runs).items():
        if png:
            data[name] = png
            top.append(Figure(name, caption))
            link.update({member: top[-1].href for member in members})
    for run in runs:
        for name, (png, caption) in _run_plots(run).items():
            data[name] = png
            per_run.setdefault(run.name, []).append(Figure(name, caption))
            link.setdefault(run.name, per_run[run.name][0].href)
    return data, per_run, link, top


def _copy_runs(runs: list[RunView], out: Path) -> None:
    if out.exists() and any(out.iterdir()):
        raise BadInput(f"{out}: exists and is not empty; refusing to mix reports", hint="choose a new --out folder")
    names = set()
    for run in runs:
        if run.name in names:
            raise BadInput(f"{run.path}: given twice")
        names.add(run.name)
    (out / "evidence").mkdir(parents=True, exist_ok=True)
    for run in runs:
        shutil.copytree(run.path, out / "evidence" / run.name)


def build_report(run_paths: list[Path], out: Path, private_key: Path | None = None,
                 title: str = "fxprobe acceptance report", junit_not_run: str = "failure") -> BuiltReport:
    if not run_paths:
        raise BadInput("report: no run directories given", hint="fxprobe report RUNDIR... --out DIR")
    runs = [read_run(Path(p)) for p in run_paths]
    out = Path(out)
    _copy_runs(runs, out)
    data, per_run, link, top = _figures(runs)
    if data:
        (out / "plots").mkdir()
        for name, png in data.items():
            (out / "plots" / f"{name}.png").write_bytes(png)
    bundled = [read_run(out / "evidence" / run.name) for run in runs]
    bundled = [replace(b, origins=(str(r.path), str(r.path.resolve()))) for b, r in zip(bundled, runs)]
    model = build_model(title, utc_stamp(), bundled, per_run, link, top, data)
    (out / "report.md").write_text(markdown(model))
    (out / "report.html").write_text(html_page(model))
    (out / "junit.xml").write_text(junit_xml(runs, junit_not_run))
    manifest = write_manifest(out, private_key)
    rows = tuple((v.name, v.outcome.value) for v in gate_verdicts(runs))
    altered = tuple(f"{r.name}: {problem}" for r in runs for problem in r.problems)
    return BuiltReport(out, tuple(r.name for r in runs), len(manifest["files"]), manifest["signer"], rows,
                       model.headlines, altered)
