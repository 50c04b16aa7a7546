"""``fxprobe gate g1|g2|g3|g4|all``: judge acceptance gates from run directories."""

from __future__ import annotations

from pathlib import Path

import click

from fxprobe.cli.app import finish, pass_app
from fxprobe.cli.options import SeveralValues
from fxprobe.core.errors import BadInput
from fxprobe.gates import GATES, Evidence, load_config, verdict_lines
from fxprobe.gates.catalog import aside_lines, asides, judge_all
from fxprobe.gates import g2 as g2_lib
from fxprobe.gates.g3 import evaluate_g3, load_pair, load_side, one_per_level
from fxprobe.core.verdict import Verdict

_paths = click.Path(path_type=Path)
evidence_option = click.option("--evidence", "evidence_paths", cls=SeveralValues, type=_paths, metavar="RUNDIR...",
                               help="Run directories to read: several after one --evidence (runs/*), or repeat it.")
config_option = click.option("--config", "config_path", type=_paths, default=None,
                             help="Thresholds TOML (default ./gates.toml if present, else built-in defaults).")


@click.group()
def gate():
    """Judge gates G1-G4 from run directories (pass, fail, not run + reason, error)."""


def _single(app, name: str, evidence_paths, config_path, arrays: str | None = None) -> int:
    config = load_config(config_path)
    if arrays is not None:
        names = [a.strip() for a in arrays.split(",") if a.strip()]
        if not names:
            raise BadInput("--arrays: name at least one array (comma separated)")
        config = config.with_arrays(names)
    evidence = Evidence.from_paths(evidence_paths)
    verdict = GATES[name].evaluate(evidence, config)
    run = app.new_run(f"gate {name}")
    results = _results(verdict, config, evidence_paths)
    return finish(app, run, f"gate {name}", results, heading(config) + verdict_lines(verdict) +
                  aside_lines(results), verdict.outcome)


def heading(config) -> list[str]:
    """Above a gate's lines: every value of a custom thresholds file that departs from the buyer's defaults."""
    return config.scale_lines() if config.custom else []


def _results(verdict: Verdict, config, evidence_paths) -> dict:
    return {"verdict": verdict.to_dict(), "thresholds": config.to_dict(),
            "evidence": [str(p) for p in evidence_paths], "evidence_runs": Evidence.record(evidence_paths),
            **asides(evidence_paths, config)}


def _make_single(name: str, title: str):
    @gate.command(name=name, help=f"{name.upper()} {title}, from --evidence run directories.")
    @evidence_option
    @config_option
    @pass_app
    def command(app, evidence_paths, config_path):
        return _single(app, name, evidence_paths, config_path)
    return command


@gate.command(name="g1")
@evidence_option
@config_option
@click.option("--arrays", default=None, metavar="NAME,...",
              help="Every array that must have a self-test among the evidence (its --nodes name, or the host "
                   "name a selftest recorded); default: gates.toml g1.arrays.")
@pass_app
def g1(app, evidence_paths, config_path, arrays):
    """G1 delivery acceptance, from --evidence run directories: every array's self-test sees all its drives,
    live and healthy; a fleet run (selftest --nodes) counts as one self-test per node."""
    return _single(app, "g1", evidence_paths, config_path, arrays)
g4 = _make_single("g4", "stability and sign-off")


@gate.command(name="g2")
@click.option("--measured", "measured", cls=SeveralValues, type=_paths, metavar="PATH...",
              help="Single-node benchmark files or folders to compare with the reference (one per concurrency).")
@click.option("--reference", type=_paths, default=None,
              help="Reference table TOML ([[rows]] per concurrency), e.g. examples/claims/reference-r2.toml.")
@click.option("--ttft-column", default="array_ttft_s", show_default=True,
              help="Reference TTFT p50 column (s): one of the array's own (array_*); printed beside every criterion.")
@click.option("--throughput-column", default="array_tok_s", show_default=True,
              help="Reference throughput column: one of the array's own (array_*), in the unit measured.")
@evidence_option
@config_option
@pass_app
def g2(app, measured, reference, ttft_column, throughput_column, evidence_paths, config_path):
    """G2 single-node baseline (each metric within +-10 % of the reference) and line efficiency: goodput
    >= 83 % of the gate's line rate (gates.toml g2.line_rate_gbps, 100 Gb/s), on a port at least that fast.

    With --measured and --reference this run compares the benchmarks itself (copies kept in raw/);
    otherwise it reads earlier comparisons and line-efficiency runs from --evidence.
    """
    if bool(measured) != bool(reference):
        raise BadInput("gate g2: --measured and --reference go together")
    config = load_config(config_path)
    evidence = Evidence.from_paths(evidence_paths)
    ref = g2_lib.load_reference(reference, ttft_column, throughput_column) if reference else None
    loaded = load_side(list(measured)) if measured else []
    one_per_level([r for _, r in loaded], "measured", "gate g2")     # a second result would replace the first
    run = app.new_run("gate g2")
    verdict, extra = g2_lib.evaluate_g2(run, loaded, ref, evidence, config)
    results = {**_results(verdict, config, evidence_paths), **extra}
    return finish(app, run, "gate g2", results, heading(config) + verdict_lines(verdict) +
                  aside_lines(results), verdict.outcome)


@gate.command(name="g3")
@click.option("--candidate", "candidates", cls=SeveralValues, type=_paths, metavar="PATH...",
              help="Benchmark files or folders with KV tiering on the array (one per concurrency).")
@click.option("--baseline", "baselines", cls=SeveralValues, type=_paths, metavar="PATH...",
              help="Benchmark files or folders for the local NVMe baseline (one per concurrency).")
@evidence_option
@config_option
@pass_app
def g3(app, candidates, baselines, evidence_paths, config_path):
    """G3 main joint test: TTFT reduction and throughput gain vs local NVMe, and the multi-node run.

    Accepts vllm bench serve --save-result JSON, LMCache long_doc_qa JSON/CSV and multi_round_qa
    CSV; pairs candidate and baseline by concurrency; copies them into this run's raw/.
    """
    config = load_config(config_path)
    evidence = Evidence.from_paths(evidence_paths)
    cand_loaded, base_loaded = load_pair(list(candidates), list(baselines))
    run = app.new_run("gate g3")
    verdict, results = evaluate_g3(run, cand_loaded, base_loaded, evidence, config)
    results = {**_results(verdict, config, evidence_paths), **results}
    return finish(app, run, "gate g3", results, heading(config) + verdict_lines(verdict) +
                  aside_lines(results), verdict.outcome)


@gate.command(name="all")
@evidence_option
@config_option
@pass_app
def all_gates(app, evidence_paths, config_path):
    """Every gate from the same evidence; prints a gate table, then each gate's criteria."""
    config = load_config(config_path)
    outcome, results, human = judge_all(list(evidence_paths), config)
    run = app.new_run("gate all")
    return finish(app, run, "gate all", results, human, outcome)
