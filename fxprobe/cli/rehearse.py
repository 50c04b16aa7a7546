"""``fxprobe rehearse``: the main job — quick G1-G4 in the QEMU lab and a signed report."""

from __future__ import annotations

from pathlib import Path

import click

from fxprobe.cli.app import App, finish_verdict, pass_app
from fxprobe.core.errors import BadInput
from fxprobe.faults.scenario import LINK_KINDS, load_scenario
from fxprobe.lab.rehearse import FAULT_SCENARIOS, Rehearse
from fxprobe.report.headline import bundle_headlines
from fxprobe.cli.options import duration, number
from fxprobe.cli.statusline import status_for


@click.command()
@click.option("--lab", "lab_name", default=None, metavar="NAME", help="Use this running lab instead of booting one.")
@click.option("--soak", "soak_seconds", type=duration(kind=int, ge=1), default=60, show_default=True,
              help="Length of the short soak (whole seconds).")
@click.option("--key", type=click.Path(path_type=Path), default=None, envvar="FXPROBE_SIGNING_KEY",
              help="Ed25519 private key that signs the report (default: a new one in the run folder).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="The buyer's thresholds (default ./gates.toml if present, else the built-in defaults); the "
                   "same evidence is also judged with the shipped lab-scaled gates-lab.toml.")
@click.option("--hosts", type=number(int, ge=1, le=8, name="1-8"), default=None,
              help="Host guests of the lab it boots (G3's nodes sharing the array; default 8); not with --lab.")
@click.option("--fault", "faults", multiple=True, metavar="SCENARIO",
              help="G4's fault runs: a scenario name or .toml path, repeat (default: drive-pull and link-down-tuned); "
                   "a drive pull and a link cut among them.")
@pass_app
def rehearse(app: App, lab_name, soak_seconds, key, config_path, hosts, faults) -> int:
    """Boot the lab, run quick G1 (selftest), G2 (line efficiency), G3 (multi-node read-back) and G4
    (soak, drive pull, link cut), judge the gates and write a signed report."""
    if hosts and lab_name:
        raise BadInput("--hosts sizes the lab the rehearsal boots: leave it out with --lab (that lab has its hosts)")
    faults = check_faults(faults) if faults else FAULT_SCENARIOS
    run = app.new_run("rehearse")
    status = status_for(app, "rehearse", 10.0)
    try:
        result = Rehearse(app.runner(run), run.path, app.progress, key, soak_seconds, lab_name, config_path,
                          status=status, hosts=hosts, runs_base=app.runs_base, faults=faults).run()
    finally:
        status.close()
    human = [line for h in bundle_headlines(result.report) for line in h.lines()] if result.report else []
    human += ["gate tables of the same evidence: the buyer's thresholds (an emulated lab falls short of 100 GbE, "
              "72 h and 8 nodes) beside the lab-scaled ones (gates-lab.toml: every scaled value and every criterion "
              "it does not judge printed below, with its reason):"]
    human += ["  " + line for line in result.side_by_side()] if result.gate_table else ["  (no gate table)"]
    human += ["  " + line for line in result.lab_scale]      # every SCALED value and NOT JUDGED criterion, and why
    human.append(f"report: {result.report / 'report.html' if result.report else '-'}")
    return finish_verdict(app, run, "rehearse", result.verdict(), result.to_dict(), human)


def check_faults(faults: tuple[str, ...]) -> tuple[str, ...]:
    """The scenarios read before the lab boots; G4 judges a drive pull and a link cut, so both must be there."""
    kinds = {name: load_scenario(name).kind for name in faults}
    missing = [what for what, ok in (("a drive pull (kind drive-pull)", "drive-pull" in kinds.values()),
                                     (f"a link cut (kind {', '.join(LINK_KINDS)})",
                                      any(k in LINK_KINDS for k in kinds.values()))) if not ok]
    if missing:
        raise BadInput(f"--fault: G4 needs {' and '.join(missing)} among the faults (given: "
                       f"{', '.join(f'{n} ({k})' for n, k in kinds.items())})",
                       hint="add one, e.g. --fault drive-pull --fault link-down-tuned")
    return faults
